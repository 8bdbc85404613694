"""Serving every client while a busy script holds the event loop.

Owns ``ServeWhileBlocked`` (Valkey's processEventsWhileBlocked: the Lua
engine makes one when a script passes busy-reply-threshold and calls its
``pump`` from the script's interrupt hook) and ``_HeldTransport``, the
transport of a connection accepted while the loop was held, until it is
handed over to the loop.  See ``ServeWhileBlocked`` for what one pass does.

Invariants: none of this runs unless a script is busy (the loop's paths
are untouched); every socket here is non-blocking; a held connection's
bytes leave in order; the client whose command holds the loop is never
read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time

from .connection import Connection
from .tls import HANDSHAKE_TIMEOUT

log = logging.getLogger("hotkv")


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
        listener = server.listener   # set by Listener.start
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
