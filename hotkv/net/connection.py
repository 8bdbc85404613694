"""The network layer: one ``asyncio.Protocol`` per connection, and listeners.

This is the only module that touches transports.  ``Connection`` feeds what
it reads to the RESP parser, runs every complete command through the
dispatcher, and queues the replies; the server's before-sleep pass (after
the AOF is written) hands each client's replies of the loop turn to its
transport in a single ``transport.write``.

Flow control, as Redis and uvicorn do it:
* when the transport holds 64 KB not yet sent, further replies wait in
  one buffer of the connection's (a write to a stalled transport costs
  uvloop ~40 bytes beyond the data: a paused replica fed a write a command
  grew the memory twice as fast as its output buffer showed); past 64 MB
  there we stop reading the client's input until it drains (a client that
  does not read its replies cannot make us buffer without bound).  Valkey
  has no such mark: client-output-buffer-limit and maxmemory-clients
  (hotkv.clients.limits, hotkv.clients.client_eviction) are its guards, and they act first;
* a blocked client's later commands are held (``pending``) and reading is
  paused until it is unblocked;
* a query buffer over ``client-query-buffer-limit`` closes the connection;
* a long request (a multibulk of many arguments, a run of inline commands)
  is parsed ``PARSE_BUDGET`` arguments per loop turn, the connection's
  reading paused meanwhile (``Connection._parse``): other clients are served
  between the shares, as Valkey parses a read's worth per turn.

``Listener`` starts TCP / unix-socket servers (and, through ``hotkv.net.tls``,
TLS ones) for a ``Server`` and the periodic cron, and tells the server of
every connection's life (``Server.refusal``, ``Server.client_gone``) and of
its own (``Server.load_data``, ``Server.shutdown``).  ``new_event_loop`` and
``close_loop`` are the loop's birth and end for ``hotkv serve`` and the
embedded server alike.  ``ServeWhileBlocked`` serves the clients -- new connections
included -- while a busy script holds the event loop.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
import sys
import time

from ..clients import clientbufs
from ..clients.client import Client
from ..clients.limits import REPLY_BUF_BYTES, output_limit_reached
from ..core.config import ConfigError, bind_addresses
from ..core.dispatch import process_commands, serve_ready_keys
from ..protocol.resp import RequestParser, encode_error
from .tls import HANDSHAKE_TIMEOUT, start_listeners as start_tls_listeners

log = logging.getLogger("hotkv")


class Connection(Client, asyncio.Protocol):
    __slots__ = ("transport", "parser", "_pause_reasons", "_held", "_more_soon",
                 "qb_alloc", "qb_peak", "rb_size", "rb_peak", "rb_reset")   # clients.clientbufs

    def __init__(self, server):
        Client.__init__(self, server)
        self.transport = None
        self.parser = RequestParser(server.config.values["proto-max-bulk-len"])
        self._pause_reasons = 0   # bit 1: blocked, bit 2: output backlog, bit 4: parsing
        self._more_soon = False   # _parse_more is scheduled
        self._held = None         # replies held while the transport is paused (flush)
        clientbufs.init_client(self)

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
        transport.set_write_buffer_limits(high=_WRITE_HIGH, low=_WRITE_HIGH // 4)
        if getattr(server, "refuse_all", False):
            # hotkv.testing.faults.refuse_connections: as a server that went away
            transport.abort()
            self.closed = True
            return
        server.stat_numconnections += 1
        maxclients = server.config.values["maxclients"]
        if len(server.clients) >= maxclients:
            server.stat_rejected_conn += 1
            transport.write(encode_error("ERR max number of clients reached"))
            transport.close()
            self.closed = True
            return
        refusal = server.refusal(self)
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
        # As Redis: the buffer as read is judged before anything in it runs.
        if self.parser.held + n > _QBUF_LIMIT_MIN and self._check_query_buffer(n):
            return
        self._parse(data, n)

    def _parse(self, data, n):
        """Parse what came (or, with data empty, what the parser still holds)
        and run the commands.  The parser stops at PARSE_BUDGET arguments:
        then this connection's reading is paused and the rest is parsed on
        the next loop turn (``_parse_more``), after the other clients had
        theirs -- a request of 200,000 arguments never holds the loop for
        long, as Valkey parses a read's worth per turn."""
        parser = self.parser
        try:
            commands, error = parser.feed(data, PARSE_BUDGET)
        except Exception:  # the parser must never take the server down
            log.exception("parser failure")
            commands, error = [], "Protocol error: internal parser failure"
        if parser.held or self.qb_alloc:   # Valkey's query buffer, as CLIENT LIST shows it
            clientbufs.on_read(self, n)
        if self.blocked is not None or self.pending:
            self.pending.extend(commands)
            if error:
                self.pending_error = error
            if len(self.pending) > PENDING_PAUSE:
                self._pause(1)
        else:
            server = self.server
            server.input_bytes, server.input_total = n, len(commands)
            raw = server.raw_stream   # a replica attached: the read may be the stream
            if raw is not None and parser.whole is data:
                raw.begin(self, data, commands)
            try:
                self._run(commands, error)
            finally:
                server.input_bytes = 0
                if raw is not None:
                    raw.end()
        if parser.held > _BIG_ARG or self.server.gated:
            # (gated: maxmemory-clients weighs the replies just queued too)
            self._check_query_buffer()
        if parser.more and not self.closed and not self.closing:
            self._pause(4)
            if not self._more_soon:
                self._more_soon = True
                self.server.loop.call_soon(self._parse_more)
        elif self._pause_reasons & 4:
            self._unpause(4)

    def _parse_more(self):
        """The next loop turn's share of a request the parser stopped in."""
        self._more_soon = False
        if self.closed or self.closing or not self.parser.more:
            self._unpause(4)    # (parsed meanwhile: ServeWhileBlocked)
            return
        self._parse(b"", 0)

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
            # The command time just used (hotkv.core.clock's; the cron refreshes it too),
            # as Valkey stamps server.unixtime: no clock read per read.
            self.last_interaction = self.server.cmd_time_ms / 1000
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
            serve_ready_keys(self.server)

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        ended = self.server.ended_while_held
        if ended and self in ended:
            ended.discard(self)   # freed by ServeWhileBlocked already
            return
        self.closed = True
        server = self.server
        server.clients.pop(self.id, None)
        server.client_gone(self)
        self.out.clear()
        self.pending.clear()
        self._held = None
        self.parser.drop()

    def pause_writing(self):
        # The transport holds _WRITE_HIGH: replies wait in one buffer of ours
        # until it drains (each write to a stalled transport costs uvloop
        # ~40 bytes beyond the data, which no output-buffer figure shows).
        if self._held is None:
            self._held = bytearray()

    def hold_sooner(self):
        """A replica's link: replies wait in our buffer past 2 KB in the
        transport, not 64 KB.  Its stream comes in one small write per
        command, and what uvloop holds for each beyond the data (~40 bytes,
        and the bytes object's own) is memory no output-buffer figure shows:
        at 64 KB of 150-byte commands ~30 KB, which made a primary within
        32 KB of maxmemory evict keys for its stalled replica's buffer (the
        Tcl maxmemory unit's replica-buffer tests).  Our buffer's allocation
        is counted whole (``_backlog``)."""
        if self.transport is not None and not self.closed:
            self.transport.set_write_buffer_limits(high=_REPLICA_HIGH, low=_REPLICA_HIGH // 4)

    def resume_writing(self):
        held, self._held = self._held, None
        if held and not self.closed:
            self.transport.write(held)     # may pause it again (a new _held)
        held = self._held
        if held is None or len(held) <= _OUTPUT_PAUSE:
            self._unpause(2)

    # -- Client overrides ---------------------------------------------------
    def flush(self):
        out = self.out
        if out:
            data = b"".join(out) if len(out) > 1 else out[0]
            out.clear()
            if not self.closed:
                hard = self.server.obuf_hard_normal   # hotkv.clients.limits; pub/sub has its own
                if hard and len(data) + self._backlog() - \
                        (REPLY_BUF_BYTES if data[:1] != b"*" else 0) >= hard \
                        and self.kind == "normal" and not self.subscribed:
                    output_limit_reached(self.server, self, len(data))
                    return
                n = len(data)
                self.server.stat_net_output_bytes += n
                self.net_out += n
                if n > self.rb_peak:    # a turn's replies: the reply buffer's peak (clientbufs)
                    self.rb_peak = n
                held = self._held
                if held is None:
                    self.transport.write(data)
                else:
                    held += data
                    if len(held) > _OUTPUT_PAUSE:
                        self._pause(2)
        if self.closing and not self.closed:
            self.closed = True
            if self._held:
                self.transport.write(self._held)
                self._held = None
            self.transport.close()

    def _backlog(self) -> int:
        """Reply bytes handed over but not yet sent: the transport's, and our
        buffer's allocation (a growing bytearray holds up to 1/8 more than
        its length: memory the output buffer must show, as Valkey's counts
        its reply blocks whole)."""
        held = self._held
        return self.transport.get_write_buffer_size() + (_sizeof(held) if held else 0)

    def output_size(self) -> int:
        size = sum(map(len, self.out))
        if self.transport is not None and not self.closed:
            size += self._backlog()
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
        self._held = None
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
        server = self.server
        if size > _QBUF_LIMIT_MIN:   # below it, no config lookup
            limit = server.config.values["client-query-buffer-limit"]
            if size > limit:
                server.stat_client_qbuf_limit_disconnections += 1
                log.warning("closing client that reached max query buffer length (qbuf=%d)",
                            size)
                self.kill()
                return True
        if not incoming and server.gated and server.clients_limit:
            # After a read: a big argument arriving, or the replies of the
            # commands it ran (hotkv.clients.client_eviction).
            return server.client_evictor.after_read(self)
        return False


# The smallest client-query-buffer-limit hotkv.core.config accepts (Redis's 1mb).
_QBUF_LIMIT_MIN = 1024 * 1024
# A read leaving more than this pending is checked against maxmemory-clients
# (Valkey's PROTO_MBULK_BIG_ARG: smaller ones are not worth measuring).
_BIG_ARG = 32 * 1024
# The output backlog at which a client's input is paused (see the docstring).
_OUTPUT_PAUSE = 64 * 1024 * 1024
_sizeof = sys.getsizeof
# The transport's backlog past which replies wait in the connection's own
# buffer (Connection.pause_writing); it takes them again below a quarter.
_WRITE_HIGH = 64 * 1024
_REPLICA_HIGH = 2 * 1024       # ... for a replica's link (Connection.hold_sooner)
# Commands held for a blocked client before we stop reading its socket.
PENDING_PAUSE = 1024
# Arguments of a long request (or inline commands) parsed per loop turn
# (Connection._parse).
PARSE_BUDGET = 1024


def _fmt_addr(addr, unix_path):
    """Redis's peer id: ip:port, [ipv6]:port, or <unixsocket>:0."""
    if isinstance(addr, tuple):
        host, port = addr[0], addr[1]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{addr or unix_path}:0"


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
            if not getattr(self.server, "cron_paused", False):   # DEBUG PAUSE-CRON
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


# ----------------------------------------------------------------------
# Serving while the event loop is blocked (a busy script)
# ----------------------------------------------------------------------

class ServeWhileBlocked:
    """Serves every client while one command holds the event loop -- a Lua
    script past busy-reply-threshold -- as Valkey's processEventsWhileBlocked
    does.  The loop cannot be re-entered, so ``pump`` (called from the
    script's interrupt hook) makes one pass of what the loop would do,
    without ever waiting:

    * accept on every listening socket (TCP, unix, TLS), through duplicates
      of their descriptors made by ``__init__``; each new connection gets a
      ``_HeldTransport`` and, once connected (TLS: handshake done), an
      ordinary ``Connection`` -- counted, limited and listed as any other;
    * read the connections the loop owns straight from their sockets (a TLS
      one through the loop's own TLS protocol object, fed by hand);
    * dispatch what arrived (the busy gate answers BUSY or lets SCRIPT KILL,
      SHUTDOWN NOSAVE, AUTH... run) and write the replies (the server's
      before-sleep pass: AOF first, then replies).

    ``stop`` (when the script ends) closes the duplicates and hands each held
    connection to the event loop: a plain one becomes a loop transport's own
    protocol (nothing of this class stays in its path); a TLS one keeps its
    ``SSLObject`` -- an established TLS session cannot move into the loop's
    TLS layer -- over a plain loop transport, ``_HeldTransport`` relaying.

    Invariants: none of this runs unless a script is busy (the loop's paths
    are untouched); every socket here is non-blocking; a held connection's
    bytes leave in order (what it queued before its hand-over is written
    before anything else); the caller of the blocking command is never read.
    """

    ACCEPT_PER_PASS = 64   # a connection storm cannot starve the other work of a pass

    def __init__(self, server):
        self.server = server
        self.held: list = []
        self.listening: list = []    # (duplicate listening socket, SSLContext or None)
        listener = getattr(server, "listener", None)   # set by Listener.start
        for srv in (listener.servers if listener is not None else ()):
            ctx = listener.tls_contexts.get(id(srv))
            for lsock in srv.sockets:
                try:
                    dup = socket.socket(fileno=os.dup(lsock.fileno()))
                    dup.setblocking(False)
                except OSError:
                    continue
                self.listening.append((dup, ctx))

    def pump(self, skip=None):
        """One pass: accept, read, dispatch, write.  ``skip``: the client
        whose command holds the loop."""
        server = self.server
        for lsock, ctx in self.listening:
            for _ in range(self.ACCEPT_PER_PASS):
                try:
                    sock, _addr = lsock.accept()
                except OSError:   # EAGAIN: none waiting; EMFILE...: try next pass
                    break
                sock.setblocking(False)
                held = _HeldTransport(self, sock, ctx)
                self.held.append(held)
                if ctx is None:
                    held.connect()
        for client in list(server.clients.values()):
            if client is skip or client.closed or client.closing or client.fd < 0:
                continue
            parser = getattr(client, "parser", None)
            if parser is not None and parser.more:
                client._parse(b"", 0)   # a long request's next share: the loop is not turning
            transport = getattr(client, "transport", None)
            if type(transport) is _HeldTransport:
                if transport.state is _LOOP:   # TLS accepted in an earlier busy spell
                    transport.read_lower()
            elif transport is not None:
                _read_loop_owned(client, transport)
        if self.held:
            for held in list(self.held):
                held.pump()
            self.held = [h for h in self.held if h.state is _HELD]
        if server.pending_flush:
            server.before_sleep()

    def stop(self):
        """The loop is free again: close the duplicates, hand the held
        connections over to it."""
        for lsock, _ctx in self.listening:
            lsock.close()
        self.listening = []
        loop = self.server.loop
        for held in self.held:
            held.finish()
            if held.state is not _HELD:
                continue
            if loop is None or loop.is_closed():
                held.lost(None)
            else:
                held.state = _ADOPTING
                loop.create_task(held.handover(loop))
        self.held = []


def _ended_while_held(client, transport):
    """EOF on a loop-owned connection while the loop is held: the client is
    freed now, as Valkey's processEventsWhileBlocked frees it -- a replica
    that left is out of INFO's connected_slaves before the script ends."""
    if client.closed:
        return
    client.connection_lost(None)
    # Its end is handled: the connection_lost the loop calls later for it
    # (after the abort) is then a no-op (the set is the server's).
    ended = client.server.ended_while_held
    ended.add(client)
    try:
        transport.abort()
    except Exception:
        ended.discard(client)


def _read_loop_owned(client, transport):
    """Read a loop-owned connection's socket and feed what came to its
    protocol (EOF and errors are left for the loop to notice)."""
    fd = client.fd
    try:
        if transport.get_extra_info("ssl_object") is None:
            data = os.read(fd, 65536)
            if data:
                client.data_received(data)
            else:
                _ended_while_held(client, transport)
            return
        # uvloop names its TLS protocol; asyncio's transport keeps it.
        proto = transport.get_extra_info("uvloop.sslproto") or \
            getattr(transport, "_ssl_protocol", None)
        if hasattr(proto, "buffer_updated"):
            buf = proto.get_buffer(65536)
            n = os.readv(fd, [buf])
            if n:
                proto.buffer_updated(n)
        elif proto is not None:   # Python 3.10's asyncio: a plain protocol
            data = os.read(fd, 65536)
            if data:
                proto.data_received(data)
    except OSError:
        pass


_HELD, _ADOPTING, _LOOP, _CLOSED = "held", "adopting", "loop", "closed"


class _HeldTransport(asyncio.Protocol):
    """The transport of a connection accepted while the loop was blocked.

    While ``state`` is held, ``ServeWhileBlocked.pump`` drives it: reads the
    socket, writes what could not be sent at once (``out``), and finishes a
    close or abort the connection asked for (never from inside the call
    that asked, as asyncio defers ``connection_lost``).  TLS: an
    ``SSLObject`` over memory BIOs does the handshake (bounded by
    hotkv.net.tls.HANDSHAKE_TIMEOUT) and the records.  Adopting: ``stop`` has
    scheduled the hand-over; writes still go straight to the socket, close
    and abort wait for it.  Loop: a plain connection's protocol now talks
    to the loop transport directly and this object is done; a TLS one's
    loop transport carries the records, this object being its protocol."""

    def __init__(self, serving, sock, ctx):
        self.serving = serving
        self.sock = sock
        self.state = _HELD
        self.conn = None
        self.out = bytearray()          # raw bytes the socket did not take yet
        self.lower = None               # the loop's transport (TLS after hand-over)
        self.closing = self.aborting = False
        self.read_paused = self.write_paused = False
        self.high, self.low = 64 * 1024, 16 * 1024
        try:
            peer, local = sock.getpeername(), sock.getsockname()
        except OSError:
            peer = local = None
        self.extra = {"socket": sock, "peername": peer, "sockname": local}
        self.tls = None
        if ctx is not None:
            self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)
            self.handshaken = False
            self.deadline = time.monotonic() + HANDSHAKE_TIMEOUT

    def connect(self):
        self.conn = Connection(self.serving.server)
        self.conn.connection_made(self)

    # -- the transport interface Connection uses ----------------------------
    def get_extra_info(self, name, default=None):
        if self.tls is not None and self.handshaken:
            if name == "ssl_object":
                return self.tls
            if name == "peercert":
                return self.tls.getpeercert()
            if name == "cipher":
                return self.tls.cipher()
        return self.extra.get(name, default)

    def set_write_buffer_limits(self, high=None, low=None):
        self.high = high if high is not None else self.high
        self.low = low if low is not None else self.high // 4
        if self.lower is not None:
            self.lower.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        lower = self.lower
        return len(self.out) + (lower.get_write_buffer_size() if lower is not None else 0)

    def is_closing(self) -> bool:
        return self.closing or self.aborting or self.state is _CLOSED

    def pause_reading(self):
        self.read_paused = True
        if self.lower is not None:
            self.lower.pause_reading()

    def resume_reading(self):
        self.read_paused = False
        if self.lower is not None:
            self.lower.resume_reading()

    def write(self, data):
        if self.closing or self.aborting or self.state is _CLOSED:
            return
        if self.tls is not None:
            try:
                self.tls.write(data)
            except ssl.SSLError as e:
                log.warning("TLS write failed on a connection accepted while busy: %s", e)
                self.abort()
                return
            data = self.outgoing.read()
        self._send(data)

    def close(self):
        if self.closing or self.state is _CLOSED:
            return
        if self.tls is not None and self.handshaken:
            try:
                self.tls.unwrap()   # queues close_notify; the peer's never comes here
            except (ssl.SSLError, ValueError):
                pass
            self._send(self.outgoing.read())
        self.closing = True
        if self.lower is not None:
            self.lower.close()

    def abort(self):
        if self.state is _CLOSED:
            return
        self.aborting = True
        self.out.clear()
        if self.lower is not None:
            self.lower.abort()

    # -- driven by ServeWhileBlocked ------------------------------------------
    def pump(self):
        if self.state is not _HELD:
            return
        if self.out:
            self._send(b"")
        if self.tls is not None and not self.handshaken and time.monotonic() > self.deadline:
            self.aborting = True
        if not (self.read_paused or self.closing or self.aborting or self.state is _CLOSED):
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError as e:
                self.lost(e)
                return
            if data == b"":      # the peer closed: as the loop does at EOF
                self.lost(None)
                return
            if data:
                self._received(data)
        self.finish()

    def finish(self):
        """Complete a requested close (once the output is out) or abort."""
        if self.state is _CLOSED or self.state is _LOOP:
            return
        if self.aborting or (self.closing and not self.out):
            self.lost(None)

    def lost(self, exc):
        if self.state is _CLOSED:
            return
        self.state = _CLOSED
        try:
            self.sock.close()
        except OSError:
            pass
        if self.conn is not None:
            self.conn.connection_lost(exc)

    async def handover(self, loop):
        if self.state is not _ADOPTING:
            return
        if self.aborting or (self.closing and not self.out):
            self.lost(None)
            return
        try:
            await loop.connect_accepted_socket(lambda: self, self.sock)
        except Exception as e:   # pragma: no cover - the loop refused the socket
            log.warning("could not hand a connection over to the event loop: %s", e)
            self.lost(e)

    def read_lower(self):
        """A later busy spell: read the loop transport's socket by hand."""
        try:
            data = os.read(self.sock.fileno(), 65536)
        except OSError:
            return
        if data:
            self._received(data)

    # -- the protocol of the loop transport after the hand-over ---------------
    def connection_made(self, transport):
        conn = self.conn
        self.state = _LOOP
        transport.set_write_buffer_limits(high=self.high, low=self.low)
        if conn is not None and self.write_paused:
            self.write_paused = False
            conn.resume_writing()
        if self.tls is None:
            # A plain connection: its protocol talks to the loop's transport
            # from now on.
            transport.set_protocol(conn)
            conn.transport = transport
        else:
            self.lower = transport
            if not self.handshaken:
                loop = asyncio.get_running_loop()
                loop.call_later(max(0.0, self.deadline - time.monotonic()),
                                self._handshake_expired)
        if self.read_paused:
            transport.pause_reading()
        out, self.out = bytes(self.out), bytearray()
        if self.aborting:
            transport.abort()
            return
        if out:
            transport.write(out)
        if self.closing:
            transport.close()

    def data_received(self, data):
        self._received(data)

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.state = _CLOSED
        if self.conn is not None:
            self.conn.connection_lost(exc)

    def pause_writing(self):
        if self.conn is not None:
            self.conn.pause_writing()

    def resume_writing(self):
        if self.conn is not None:
            self.conn.resume_writing()

    # -- helpers ------------------------------------------------------------
    def _handshake_expired(self):
        if not self.handshaken and self.lower is not None:
            self.lower.abort()

    def _send(self, data):
        """Raw bytes to the peer: through the loop's transport once there is
        one, else straight to the socket, the rest kept in ``out``."""
        if self.lower is not None:
            if data:
                self.lower.write(data)
            return
        out = self.out
        if data:
            out += data
        if not out or self.state is _CLOSED:
            return
        try:
            n = self.sock.send(out)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            self.aborting = True
            out.clear()
            return
        del out[:n]
        conn = self.conn
        if conn is None:
            return
        if not self.write_paused and len(out) > self.high:
            self.write_paused = True
            conn.pause_writing()
        elif self.write_paused and len(out) <= self.low:
            self.write_paused = False
            conn.resume_writing()

    def _received(self, data):
        if self.tls is None:
            self.conn.data_received(data)
            return
        tls = self.tls
        self.incoming.write(data)
        if not self.handshaken:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                self._send(self.outgoing.read())
                return
            except (ssl.SSLError, OSError) as e:
                log.debug("TLS handshake failed on a connection accepted while busy: %s", e)
                self._send(self.outgoing.read())
                self.aborting = self.lower is None
                if self.lower is not None:
                    self.lower.close()
                return
            self.handshaken = True
            self._send(self.outgoing.read())
            self.connect()
        chunks = []
        eof = False
        while True:
            try:
                chunk = tls.read(65536)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                eof = True
                break
            except ssl.SSLError as e:
                log.debug("TLS error on a connection accepted while busy: %s", e)
                self.abort()
                return
            if not chunk:
                eof = True
                break
            chunks.append(chunk)
        self._send(self.outgoing.read())
        if chunks:
            self.conn.data_received(b"".join(chunks))
        if eof:
            self.close()
