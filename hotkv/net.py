"""The network layer: one ``asyncio.Protocol`` per connection, and listeners.

This is the only module that touches transports.  ``Connection`` feeds what
it reads to the RESP parser, runs every complete command through the
dispatcher, and queues the replies; the server's before-sleep pass (after
the AOF is written) hands each client's replies of the loop turn to its
transport in a single ``transport.write``.

Flow control, as Redis and uvicorn do it:
* when the transport's write buffer passes its high-water mark we stop
  reading the client's input until it drains (a client that does not read
  its replies cannot make us buffer without bound);
* a blocked client's later commands are held (``pending``) and reading is
  paused until it is unblocked;
* a query buffer over ``client-query-buffer-limit`` closes the connection.

``Listener`` starts TCP / unix-socket servers for a ``Server`` and the
periodic cron; ``run_server`` is what ``hotkv serve`` and the embedded
server call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time

from .client import Client
from .dispatch import process_commands
from .resp import RequestParser, encode_error
from . import blocking

log = logging.getLogger("hotkv")


class Connection(Client, asyncio.Protocol):
    __slots__ = ("transport", "parser", "reading_paused", "writing_paused",
                 "_pause_reasons")

    def __init__(self, server):
        Client.__init__(self, server)
        self.transport = None
        self.parser = RequestParser(server.config.values["proto-max-bulk-len"])
        self.reading_paused = False
        self.writing_paused = False
        self._pause_reasons = 0   # bit 1: blocked, bit 2: output backlog

    # -- asyncio callbacks ------------------------------------------------
    def connection_made(self, transport):
        self.transport = transport
        server = self.server
        sock = transport.get_extra_info("socket")
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        unix = server.config.values.get("unixsocket") or "/unix"
        self.addr = _fmt_addr(peer, unix)
        self.laddr = _fmt_addr(local, unix)
        if sock is not None:
            self.fd = sock.fileno()
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass
        transport.set_write_buffer_limits(high=1024 * 1024, low=256 * 1024)
        server.stat_numconnections += 1
        maxclients = server.config.values["maxclients"]
        if len(server.clients) >= maxclients:
            server.stat_rejected_conn += 1
            transport.write(encode_error("ERR max number of clients reached"))
            transport.close()
            self.closed = True
            return
        refusal = CONNECT_HOOKS and _run_connect_hooks(self)
        if refusal:
            transport.write(encode_error(refusal))
            transport.close()
            self.closed = True
            return
        server.clients[self.id] = self
        self.parser.auth_required = not self.authenticated

    def data_received(self, data):
        if self.closed or self.closing:
            return
        n = len(data)
        self.server.stat_net_input_bytes += n
        self.net_in += n
        parser = self.parser
        # As Redis: the buffer as read is judged before anything in it runs.
        if parser.held + n > _QBUF_LIMIT_MIN and self._check_query_buffer(n):
            return
        try:
            commands, error = parser.feed(data)
        except Exception:  # the parser must never take the server down
            log.exception("parser failure")
            commands, error = [], "Protocol error: internal parser failure"
        if self.blocked is not None or self.pending:
            self.pending.extend(commands)
            if error:
                self.pending_error = error
            if len(self.pending) > PENDING_PAUSE:
                self._pause(1)
        else:
            self._run(commands, error)
        if parser.held > _QBUF_LIMIT_MIN:
            self._check_query_buffer()

    def _run(self, commands, error):
        done = process_commands(self, commands)
        if self.blocked is not None:
            rest = commands[done:]
            if rest:
                self.pending.extend(rest)
            if error:
                self.pending_error = error
                error = None
            # Keep reading while blocked (as Redis does) so a client that
            # disconnects is noticed and leaves no waiter behind;
            # data_received pauses only if input piles up.
            if len(self.pending) > PENDING_PAUSE:
                self._pause(1)
        elif self.closing:
            error = None
        else:
            self.last_interaction = _now()
        if error:
            self.server.count_error("ERR " + error)
            self.out.append(encode_error("ERR " + error))
            self.closing = True
        self.parser.auth_required = not self.authenticated
        if self.out:
            # Replies leave at the end of the loop turn, after every client
            # that was readable has run (Redis's beforeSleep): the load
            # generator or worker on the other end is woken once per turn,
            # not once per client, and the AOF is written before any reply
            # to what it holds.
            self.schedule_flush()
        elif self.closing:
            self.flush()

    def last_interaction_now(self):
        self.last_interaction = _now()

    def resume(self):
        """Called (soon) after this client was unblocked."""
        if self.closed or self.blocked is not None:
            return
        self._unpause(1)
        pending = self.pending
        if not pending and self.pending_error is None:
            return
        commands = list(pending)
        pending.clear()
        error, self.pending_error = self.pending_error, None
        self._run(commands, error)
        if self.server.ready_keys:  # pragma: no cover - process_commands serves them
            blocking.serve_ready_keys(self.server)

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.closed = True
        server = self.server
        server.clients.pop(self.id, None)
        blocking.drop(self)
        for hook in DISCONNECT_HOOKS:
            hook(self)
        self.out.clear()
        self.pending.clear()

    def pause_writing(self):
        self.writing_paused = True
        self._pause(2)

    def resume_writing(self):
        self.writing_paused = False
        self._unpause(2)

    # -- Client overrides ---------------------------------------------------
    def flush(self):
        out = self.out
        if out:
            data = b"".join(out) if len(out) > 1 else out[0]
            out.clear()
            if not self.closed:
                hard = self.server.obuf_hard_normal   # hotkv.limits; pub/sub has its own
                if hard and len(data) + self.transport.get_write_buffer_size() >= hard \
                        and self.kind == "normal" and not self.subscribed:
                    from .limits import output_limit_reached
                    output_limit_reached(self.server, self, len(data))
                    return
                self.server.stat_net_output_bytes += len(data)
                self.net_out += len(data)
                self.transport.write(data)
        if self.closing and not self.closed:
            self.closed = True
            self.transport.close()

    def output_size(self) -> int:
        size = sum(map(len, self.out))
        if self.transport is not None and not self.closed:
            size += self.transport.get_write_buffer_size()
        return size

    def close(self):
        """Close after what is queued has been written (CLIENT KILL, QUIT)."""
        if self.closed:
            return
        self.closing = True
        self.schedule_flush()

    def kill(self):
        """Close at once, dropping queued output."""
        if self.closed:
            return
        self.closed = True
        self.out.clear()
        self.transport.abort()

    # -- helpers ------------------------------------------------------------
    def _pause(self, reason: int):
        if not self._pause_reasons and not self.closed:
            try:
                self.transport.pause_reading()
            except Exception:
                pass
        self._pause_reasons |= reason

    def _unpause(self, reason: int):
        if not self._pause_reasons & reason:
            return
        self._pause_reasons &= ~reason
        if not self._pause_reasons and not self.closed:
            try:
                self.transport.resume_reading()
            except Exception:
                pass

    def _check_query_buffer(self, incoming: int = 0) -> bool:
        size = self.parser.pending + incoming
        if size <= _QBUF_LIMIT_MIN:   # twice per read: skip the config lookup
            return False
        limit = self.server.config.values["client-query-buffer-limit"]
        if size > limit:
            self.server.stat_client_qbuf_limit_disconnections += 1
            log.warning("closing client that reached max query buffer length (qbuf=%d)", size)
            self.kill()
            return True
        return False


_now = time.time
# The smallest client-query-buffer-limit hotkv.config accepts (Redis's 1mb).
_QBUF_LIMIT_MIN = 1024 * 1024
# Commands held for a blocked client before we stop reading its socket.
PENDING_PAUSE = 1024


def _fmt_addr(addr, unix_path):
    """Redis's peer id: ip:port, [ipv6]:port, or <unixsocket>:0."""
    if isinstance(addr, tuple):
        host, port = addr[0], addr[1]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{addr or unix_path}:0"


CONNECT_HOOKS: list = []      # fn(connection) -> refusal text or None
DISCONNECT_HOOKS: list = []   # fn(connection)


def _run_connect_hooks(conn):
    for hook in CONNECT_HOOKS:
        refusal = hook(conn)
        if refusal:
            return refusal
    return None


class Listener:
    """Runs a Server on an event loop: sockets, cron, shutdown."""

    def __init__(self, server):
        self.server = server
        self.servers: list = []
        self._cron_handle = None
        self.closed = None
        self.bound: list = []   # (host, port) actually bound

    async def start(self, loop=None):
        loop = loop or asyncio.get_running_loop()
        server = self.server
        server.attach_loop(loop)
        self.closed = loop.create_future()
        values = server.config.values
        factory = lambda: Connection(server)  # noqa: E731
        port = values["port"]
        if port or not values["unixsocket"]:
            hosts = values["bind"].split() or ["127.0.0.1"]
            for host in hosts:
                host = host.lstrip("-")
                srv = await loop.create_server(factory, host, port, backlog=values["tcp-backlog"],
                                               reuse_address=True)
                self.servers.append(srv)
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
        for hook in START_HOOKS:
            await hook(self, loop)
        self._schedule_cron()
        server.shutdown_cb = self.request_shutdown
        return self

    def _schedule_cron(self):
        loop = self.server.loop
        self._cron_handle = loop.call_later(1.0 / self.server.config.values["hz"], self._cron)

    def _cron(self):
        try:
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
        for hook in STOP_HOOKS:
            await hook(self)
        path = self.server.config.values["unixsocket"]
        if path:
            try:
                os.unlink(path)
            except OSError:
                pass
        self.servers = []


START_HOOKS: list = []   # async fn(listener, loop): TLS listeners, AOF load...
STOP_HOOKS: list = []    # async fn(listener)


def new_event_loop():
    """uvloop when it is installed, else asyncio's default loop."""
    try:
        import uvloop
        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - platform without uvloop
        return asyncio.new_event_loop()
