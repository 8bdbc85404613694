"""One ``asyncio.Protocol`` per client connection: bytes in, replies out.

Owns ``Connection`` -- the only object that reads from or writes to a
client's transport (the listeners of ``hotkv.net.listeners`` make them, the
busy-script server of ``hotkv.net.busy`` reads their sockets by hand while
the loop is held, the replication primary sends a replica its RDB payload
through ``Connection.send_raw``).  ``Connection`` feeds what it reads to the
RESP parser, runs every complete command through the dispatcher, and queues
the replies; the server's before-sleep pass (after the AOF is written) hands
each client's replies of the loop turn to its transport in a single
``transport.write``.

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

Fast path: ``flush`` hands a turn's reply chunks to the transport's
``writelines`` (uvloop: one writev, the unsent rest kept by reference)
when a chunk next to the ends is a big value, instead of joining them
into one copy first; the bytes sent and counted are the same
(tests/test_bigvalues.py::test_flush_writelines_equals_the_joined_write).

Invariants: reading is paused while any reason in ``_pause_reasons`` holds
(1 blocked, 2 output backlog, 4 parsing) and resumed when the last one
goes; reply bytes reach the transport in the order they were queued
(``_held`` keeps their order while the transport is paused); a closed
connection writes nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys

from ..clients import clientbufs
from ..clients.client import Client
from ..clients.limits import REPLY_BUF_BYTES, output_limit_reached
from ..core.dispatch import process_commands, serve_ready_keys
from ..protocol.resp import RequestParser, encode_error

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
        if server.refuse_all:
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
            chunks = None
            if len(out) == 1:
                data = out[0]
            elif len(out) > 2 and self._held is None and \
                    (len(out[1]) >= _WRITEV_MIN or len(out[-2]) >= _WRITEV_MIN):
                # A big value (GET's, at index 1, or a pipeline's last, at
                # -2): the chunks go to the transport as they are (writev),
                # not copied into one joined reply first.
                chunks = out.copy()
                data = None
            else:
                data = b"".join(out)
            out.clear()
            if not self.closed:
                n = len(data) if chunks is None else sum(map(len, chunks))
                hard = self.server.obuf_hard_normal   # hotkv.clients.limits; pub/sub has its own
                if hard and n + self._backlog() - \
                        (REPLY_BUF_BYTES if _first_byte(data, chunks) != b"*" else 0) >= hard \
                        and self.kind == "normal" and not self.subscribed:
                    output_limit_reached(self.server, self, n)
                    return
                self.server.stat_net_output_bytes += n
                self.net_out += n
                if n > self.rb_peak:    # a turn's replies: the reply buffer's peak (clientbufs)
                    self.rb_peak = n
                held = self._held
                if chunks is not None:
                    writelines = getattr(self.transport, "writelines", None)
                    if writelines is not None:
                        writelines(chunks)
                    else:
                        self.transport.write(b"".join(chunks))
                elif held is None:
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

    def send_raw(self, data):
        """Bytes straight to the transport, outside the reply queue and its
        output-buffer limit, counted as output (the replication primary's
        +FULLRESYNC line and RDB payload to a replica being synced)."""
        if self.closed:
            return
        n = len(data)
        self.server.stat_net_output_bytes += n
        self.net_out += n
        self.transport.write(data)

    def transport_backlog(self) -> int:
        """Bytes the transport holds not yet sent (our own held buffer aside)."""
        return self.transport.get_write_buffer_size()

    def _backlog(self) -> int:
        """Reply bytes handed over but not yet sent: the transport's, and our
        buffer's allocation (a growing bytearray holds up to 1/8 more than
        its length: memory the output buffer must show, as Valkey's counts
        its reply blocks whole)."""
        held = self._held
        return self.transport.get_write_buffer_size() + (_sizeof(held) if held else 0)

    def on_transport(self) -> bool:
        return self.transport is not None

    def peer(self):
        transport = self.transport
        return transport.get_extra_info("peername") if transport is not None else None

    def local(self):
        transport = self.transport
        return transport.get_extra_info("sockname") if transport is not None else None

    def tls(self) -> bool:
        transport = self.transport
        return transport is not None and transport.get_extra_info("ssl_object") is not None

    def unsent(self) -> int:
        transport = self.transport
        if transport is None or transport.is_closing():
            return 0
        try:
            return transport.get_write_buffer_size()
        except Exception:   # a transport already gone
            return 0

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
def _first_byte(data, chunks) -> bytes:
    """The first byte of a turn's replies, joined or in chunks (only asked when
    an output-buffer hard limit is set: no slice per flush otherwise)."""
    if chunks is None:
        return data[:1]
    for chunk in chunks:
        if chunk:
            return chunk[:1]
    return b""


# A reply chunk this big (a value) makes flush hand the turn's chunks to the
# transport's writelines instead of joining them (a copy of the value).
_WRITEV_MIN = 16 * 1024
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
