"""The listeners: how a ``Server`` comes to run on an event loop.

Owns ``Listener`` -- the TCP and unix-socket servers (and, through
``hotkv.net.tls``, the TLS ones) making a ``hotkv.net.connection.Connection``
for every accepted socket; their rebinding on CONFIG SET port / bind
(Valkey's changeListener); the periodic cron; the server's start
(``Server.load_data`` after the listeners are bound) and its stop
(``Server.shutdown`` after the last client's output left).  The server
hears of every connection's life through ``Server.refusal`` and
``Server.client_gone`` (from ``Connection``).  ``new_event_loop`` and
``close_loop`` are the loop's birth and end for ``hotkv serve`` and the
embedded server alike.

Invariants: ``bound`` lists exactly the TCP addresses listened on; a
failed rebind leaves the old listeners (or, if Valkey's close-first order
was needed and failed, the old addresses bound again) and raises
``ConfigError``; the cron is scheduled only once the data is loaded.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket

from ..core.config import ConfigError, bind_addresses
from .connection import Connection
from .tls import start_listeners as start_tls_listeners

log = logging.getLogger("hotkv")


class Listener:
    """Runs a Server on an event loop: sockets, cron, shutdown."""

    def __init__(self, server):
        self.server = server
        self.servers: list = []
        self._cron_handle = None
        self.closed = None
        self.bound: list = []   # (host, port) actually bound
        self.tcp_servers: list = []   # the TCP listeners (CONFIG SET port/bind replaces them)
        self.tls_contexts: dict = {}   # id(TLS asyncio server) -> SSLContext (net.tls)

    async def start(self, loop=None):
        loop = loop or asyncio.get_running_loop()
        server = self.server
        server.attach_loop(loop)
        server.listener = self   # ServeWhileBlocked accepts on its sockets
        self.closed = loop.create_future()
        values = server.config.values
        factory = lambda: Connection(server)  # noqa: E731
        port = values["port"]
        if port or not values["unixsocket"]:
            hosts = bind_addresses(values["bind"])
            for host in hosts:
                srv = await loop.create_server(factory, host, port, backlog=values["tcp-backlog"],
                                               reuse_address=True)
                self.servers.append(srv)
                self.tcp_servers.append(srv)
                for sock in srv.sockets:
                    self.bound.append(sock.getsockname()[:2])
                # An ephemeral port: every bind address must share the first one.
                if port == 0 and self.bound:
                    port = self.bound[0][1]
            values["port"] = port
        if values["unixsocket"]:
            path = values["unixsocket"]
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            srv = await loop.create_unix_server(factory, path, backlog=values["tcp-backlog"])
            if values["unixsocketperm"]:
                os.chmod(path, int(str(values["unixsocketperm"]), 8))
            self.servers.append(srv)
        # Then, in this order: the TLS listeners (a TLS setting that cannot
        # work stops the start before any data is read), the data (the AOF
        # load yields to the loop, so clients connected meanwhile are
        # answered LOADING), and only then the cron.
        await start_tls_listeners(self, loop, factory)
        self.tcp_conf = (values["port"], values["bind"])
        server.config.listeners["port"] = lambda v: self.rebind(
            v, values["bind"], factory, "Unable to listen on this port. Check server logs.")
        server.config.listeners["bind"] = lambda v: self.rebind(
            values["port"], v, factory, "Failed to bind to specified addresses.")
        await server.load_data()
        self._schedule_cron()
        server.shutdown_cb = self.request_shutdown
        return self

    def rebind(self, port: int, bind: str, factory, error: str):
        """CONFIG SET port / bind, as Valkey's changeListener: the addresses not
        listened on yet are bound first -- a failure closes them, keeps the old
        listeners and fails the CONFIG SET with ``error`` -- then served, and
        the listeners no longer wanted closed; open connections stay.

        A new address may be taken by an old listener of ours (0.0.0.0 while
        127.0.0.1 listens on the port, or the other way round): then, as
        Valkey does, every old listener is closed first and the new ones
        bound; if that fails too, the old addresses are bound again."""
        if (port, bind) == self.tcp_conf:
            return   # unchanged, or CONFIG SET's rollback to what is bound
        current = {}   # (host, port) -> the asyncio server listening there
        for srv in self.tcp_servers:
            for sock in srv.sockets or ():
                current[tuple(sock.getsockname()[:2])] = srv
        try:
            keep, socks = self._bind(port, bind, current)
        except (OSError, UnicodeError, OverflowError) as e:
            if not (isinstance(e, OSError) and e.errno == errno.EADDRINUSE and current):
                self._bind_failed(port, bind, e, error)
            # Perhaps in our own way: Valkey's order, the old listeners closed first.
            old_port, old_bind = self.tcp_conf
            self._close_tcp(())
            current = {}
            try:
                keep, socks = self._bind(port, bind, current)
            except (OSError, UnicodeError, OverflowError) as e2:
                try:
                    _, socks = self._bind(old_port, old_bind, current)
                except (OSError, UnicodeError, OverflowError) as e3:
                    log.warning("Failed to bind the old addresses again %s:%d: %s", old_bind,
                                old_port, getattr(e3, "strerror", None) or e3)
                    socks = []
                self.bound = [sock.getsockname()[:2] for sock in socks]
                self._serve(socks, factory)
                self._bind_failed(port, bind, e2, error)
        self._close_tcp(keep)
        self.bound = [addr for addr, srv in current.items() if srv in keep] + \
            [sock.getsockname()[:2] for sock in socks]
        self.tcp_conf = (port, bind)
        self._serve(socks, factory)

    def _bind(self, port: int, bind: str, current: dict) -> tuple:
        """Listening sockets for bind's addresses on port, but those in
        ``current`` (returned as the asyncio servers to keep); on a failure
        the sockets made so far are closed and the error raised."""
        keep, socks = [], []
        try:
            for host in bind_addresses(bind) if port else ():
                if (host, port) in current:   # already listening there: kept as it is
                    keep.append(current[(host, port)])
                    continue
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((host, port))
                sock.listen(self.server.config.values["tcp-backlog"])
                sock.setblocking(False)
        except BaseException:
            for sock in socks:
                sock.close()
            raise
        return keep, socks

    @staticmethod
    def _bind_failed(port: int, bind: str, e, error: str):
        log.warning("Could not create server TCP listening socket %s:%d: %s",
                    bind, port, getattr(e, "strerror", None) or e)
        raise ConfigError(error) from None

    def _close_tcp(self, keep):
        """Close the TCP listeners but those in keep."""
        for srv in self.tcp_servers:
            if srv not in keep:
                srv.close()
                self.servers.remove(srv)
        self.tcp_servers = list(keep)

    def _serve(self, socks, factory):
        loop = self.server.loop
        for sock in socks:
            loop.create_task(loop.create_server(factory, sock=sock)).add_done_callback(
                self._served)

    def _served(self, task):
        if not task.cancelled() and task.exception() is None:
            self.tcp_servers.append(task.result())
            self.servers.append(task.result())

    def _schedule_cron(self):
        loop = self.server.loop
        self._cron_handle = loop.call_later(1.0 / self.server.config.values["hz"], self._cron)

    def _cron(self):
        try:
            if not self.server.cron_paused:   # DEBUG PAUSE-CRON
                self.server.cron()
        except Exception:
            log.exception("cron failure")
        self._schedule_cron()

    def request_shutdown(self):
        if self.closed is not None and not self.closed.done():
            self.closed.set_result(None)

    async def stop(self):
        if self._cron_handle is not None:
            self._cron_handle.cancel()
            self._cron_handle = None
        for srv in self.servers:
            srv.close()
        for client in list(self.server.clients.values()):
            try:
                client.flush()
                client.transport.close()
            except Exception:
                pass
        for srv in self.servers:
            try:
                await asyncio.wait_for(srv.wait_closed(), 1.0)
            except (asyncio.TimeoutError, Exception):
                pass
        self.server.shutdown()   # after the last client's output left: the AOF's final fsync
        path = self.server.config.values["unixsocket"]
        if path:
            try:
                os.unlink(path)
            except OSError:
                pass
        self.servers = []


def new_event_loop():
    """uvloop when it is installed, else asyncio's default loop."""
    try:
        import uvloop
        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - platform without uvloop
        return asyncio.new_event_loop()


def close_loop(loop):
    """End a loop the server ran on (after ``Listener.stop``): cancel the
    tasks still pending and let them finish, finalise async generators,
    close.  The loop is closed even when a task's end raises."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
