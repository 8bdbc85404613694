"""Waiting for the server instead of sleeping: ``wait_until`` and ``wait_idle``.

``wait_until(embedded, predicate, timeout=5.0)`` returns once ``predicate(embedded)``
is true.  The predicate is checked once at once, then at the end of every
loop turn (``Server.before_sleep``: after each batch of commands, each reply
flush, each cron tick), never by sleeping and polling: the loop, at the end
of its turn, hands the check to the waiting thread, which runs the predicate
while the loop waits for its answer (``_Handoff``) -- so it reads the
server's state as no command is half-done, and for that while the waiting
thread counts as the loop's (``server.turn_thread``: ``on_loop`` and the
clock run there at once).  It must only read state (the embedded server's
inspection helpers, ``embedded.server``); a call to the same server through
a client waits for a reply only the loop can give:

* an in-process client (hotkv.inprocess) raises ``LoopThreadCallError`` at
  once (it asks ``server.turn_thread``), which wait_until raises;
* a TCP client's request waits in the server's socket: the waiting loop
  looks at the check's stack every ``SLICE`` (20 ms) and, on finding there a
  socket connected to this server, stops waiting and serves it; the call
  gets its reply, the check ends, and wait_until raises
  ``LoopThreadCallError`` (the server was held for about ``SLICE``, not until
  the client's own timeout);
* a check that blocks on anything else: the loop stops waiting for it at
  the wait's deadline (or half the timeout after it began, if later) and
  serves again; wait_until raises TimeoutError once the check returns.

``wait_idle(embedded, timeout=5.0)`` returns once nothing is in flight: no
client has a command waiting to run (held behind a pause or a delay fault),
a partial command in its query buffer, or unread bytes in its socket; no
reply is waiting to be written (the client's buffer, the transport's, the
server's flush list); and no blocked client could be served (no ready keys).
A client blocked on an empty list or stream is idle: it waits for data.  It
must hold on two loop turns in a row (a pipeline larger than the socket
buffer arrives in pieces).  A pipeline larger than the receive window also
waits in the *sender's* socket until the server's kernel acknowledges what
was read -- on loopback that ACK may be a delayed one, 40 ms and more, while
the server has read everything it was given and looks idle (a CI run under
load: 3,911 of 10,000 pipelined commands run when wait_idle returned).  So
for a client on this machine (a loopback peer) the sender's queue is read
too, from the kernel's socket table (``/proc/net/tcp``, ``tcp6``; Linux):
its bytes still on their way count as input in flight.  It cannot know of
bytes a client has not sent yet: call it after the client's send returned.

``wait_until_async`` / ``wait_idle_async`` are the same for a coroutine on
the server's own loop (``AsyncEmbeddedServer.wait_until`` / ``wait_idle``);
there the predicate runs on the loop thread itself (no other thread to hand
it to): an in-process client raises ``LoopThreadCallError``, a synchronous
TCP client to this server holds the loop until its own timeout.  wait_idle's
check (``busy``, this module's own) runs on the loop thread too.

All raise ``TimeoutError`` naming what was still busy (``busy(server)`` gives
that list; empty when idle); an exception in the predicate is raised in the
caller.  Invariant: a condition registered with ``server.sleep_hooks`` is
removed when it is met, raises or times out, so no check outlives its wait.
"""

from __future__ import annotations

import asyncio
import fcntl
import socket
import struct
import sys
import termios
import threading
import time

from ..core.pause import PAUSED
from . import LOOP_THREAD_CALL, LoopThreadCallError, on_loop

_INT = struct.Struct("i")


def _unread(fd: int) -> int:
    """Bytes in the socket's receive queue (0 when it cannot be asked)."""
    if fd < 0:
        return 0
    try:
        return _INT.unpack(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


_LOOPBACK = ("127.", "::1", "::ffff:127.")


def _hex_addr(host: str, port: int) -> tuple:
    """(the address as /proc/net/tcp{,6} spells it, which file)."""
    packed = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    words = [packed[i:i + 4] for i in range(0, len(packed), 4)]
    hexed = "".join(w[::-1].hex() for w in words).upper()   # each 32-bit word as the host (LE)
    return "%s:%04X" % (hexed, port), "/proc/net/tcp6" if len(packed) == 16 else "/proc/net/tcp"


def peer_unsent(peer, local, tables=None) -> int:
    """Bytes a loopback peer has queued to send to us and not had acknowledged
    (the tx_queue of its socket in the kernel's table); 0 for a peer on
    another machine or where the table cannot be read.  ``tables`` (a dict)
    keeps each table read once across the calls of one ``busy``: a suite
    leaves thousands of sockets in TIME_WAIT, and the scan is per file."""
    try:
        if not isinstance(peer, tuple) or not peer[0].startswith(_LOOPBACK):
            return 0
        theirs, path = _hex_addr(peer[0], peer[1])
        ours, _ = _hex_addr(local[0], local[1])
        table = None if tables is None else tables.get(path)
        if table is None:
            table = {}
            with open(path) as f:
                next(f, None)                   # the header line
                for line in f:
                    fields = line.split()
                    if len(fields) > 4 and fields[4][:8] != "00000000":
                        table[fields[1], fields[2]] = int(fields[4].split(":")[0], 16)
            if tables is not None:
                tables[path] = table
        return table.get((theirs, ours), 0)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _who(client) -> str:
    name = client.name.decode("utf-8", "replace")
    return "client %d%s" % (client.id, " (%s)" % name if name else "")


def busy(server) -> list:
    """What keeps ``server`` from being idle, one line each (loop thread)."""
    out = []
    tables: dict = {}         # the kernel's socket tables, read once here
    faults = server.faults
    held = faults._timers if faults is not None else {}
    for client in list(server.clients.values()):
        if client.closed:
            continue
        who = _who(client)
        waiter = client.blocked
        if client.id in held:
            out.append("%s: held by a delay fault" % who)
        elif waiter is not None and waiter.data is PAUSED:
            out.append("%s: %d command(s) postponed by a pause" % (who, len(client.pending)))
        elif waiter is None and client.pending:
            out.append("%s: %d command(s) waiting to run" % (who, len(client.pending)))
        parser = getattr(client, "parser", None)
        if parser is not None and parser.held:
            out.append("%s: %d bytes of a partial command" % (who, parser.held))
        unread = _unread(client.fd)
        if unread:
            out.append("%s: %d bytes not read yet" % (who, unread))
        elif client.fd >= 0:
            if client.on_transport():
                coming = peer_unsent(client.peer(), client.local(), tables)
                if coming:
                    out.append("%s: %d bytes on their way (in the sender's socket)"
                               % (who, coming))
        pending = sum(map(len, client.out))
        pending += client.unsent()
        if pending:
            out.append("%s: %d reply bytes not written" % (who, pending))
    if server.ready_keys:
        out.append("%d key(s) ready for blocked clients" % len(server.ready_keys))
    if server.pending_flush:
        out.append("%d client(s) with replies to flush" % len(server.pending_flush))
    return out


class _Wait:
    """One registered condition: checked on the loop, awaited by the caller
    (wait_idle's, and the async waits' whose caller is the loop itself)."""

    def __init__(self, server, check):
        self.server = server
        self.check = check
        self.done = threading.Event()
        self.on_done = None     # the async waits' asyncio.Event.set
        self.error = None
        self.checks = 0
        self.last = None
        self.running = False    # the check is running now (on the loop thread)
        self.began = 0.0        # time.monotonic() when the running check began

    def __call__(self):
        if self.done.is_set():
            return
        self.checks += 1
        self.began = time.monotonic()
        self.running = True
        try:
            ok = self.check()
        except BaseException as e:   # raised in the caller's thread
            self.error = e
            ok = True
        finally:
            self.running = False
        if ok:
            self.done.set()
            self._unregister()
            if self.on_done is not None:
                self.on_done()

    def _unregister(self):
        try:
            self.server.sleep_hooks.remove(self)
        except ValueError:
            pass

    async def run_async(self, timeout: float) -> bool:
        """run() for a caller on the loop's own thread (AsyncEmbeddedServer)."""
        event = asyncio.Event()
        self.on_done = event.set
        self.server.sleep_hooks.append(self)
        self()
        self.server.wake()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            self._unregister()
        if self.error is not None:
            raise self.error
        return self.done.is_set()

    def _wedged(self, timeout: float) -> bool:
        """The running check has run for half the wait or more."""
        return time.monotonic() - self.began >= timeout / 2

    def run(self, timeout: float) -> bool:
        def register():
            self.server.sleep_hooks.append(self)
            self.server.wake()    # a turn soon, even on a quiet server
        # The first check runs at the end of that turn, not inside on_loop:
        # a predicate that never returns (a client call to this server waits
        # for itself) then costs ``timeout``, not on_loop's own limit.
        on_loop(self.server, register, max(timeout, 1.0))
        met = self.done.wait(timeout)
        if not met and self.running and not self._wedged(timeout):
            # A check that began late in the wait (wait_idle checks every
            # turn, and reads the kernel's socket table): that check's answer
            # is waited for, not taken for a predicate that never returns.
            this, end = self.checks, time.monotonic() + max(timeout, 1.0)
            while self.running and self.checks == this and time.monotonic() < end:
                if self.done.wait(0.005):
                    break
            met = self.done.is_set()
        if not met and self.running and self._wedged(timeout):
            raise TimeoutError(
                "wait_idle: its check was still running after %.1f s on the server's "
                "loop thread" % timeout)
        if not met:
            on_loop(self.server, self._unregister, max(timeout, 1.0))
            met = self.done.is_set()   # met between the wait's end and now
        if self.error is not None:
            raise self.error
        return met


SLICE = 0.02     # how often a loop waiting for a check looks at the check's stack


def _server_addresses(server) -> tuple:
    """(the ports, the unix socket path) a client of ``server`` connects to."""
    values = server.config.values
    ports = {p for p in (values.get("port"), values.get("tls-port")) if p and p > 0}
    return ports, values.get("unixsocket") or None


def _peer_is(sock, server):
    """``sock``'s peer when it is ``server`` (one of its ports on this host,
    or its unix socket), else None."""
    try:
        peer = sock.getpeername()
    except (OSError, ValueError):
        return None
    ports, path = _server_addresses(server)
    if isinstance(peer, str):
        return peer if path and peer == path else None
    if isinstance(peer, tuple) and len(peer) >= 2 and peer[1] in ports:
        host = peer[0]
        bind = str(server.config.values.get("bind") or "")
        if host.startswith(_LOOPBACK) or host in bind.split():
            return "%s:%d" % (host, peer[1])
    return None


def _client_call(thread_id: int, stop_code, server):
    """A socket connected to ``server`` in the running check's stack (a
    client call in progress: locals that are sockets, or hold one as
    ``_sock`` -- redis-py's and valkey-py's connections, their socket
    buffers and parsers); its peer, else None.  Frames below the check's
    own (``stop_code``) are the waiter's, not the predicate's."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None and frame.f_code is not stop_code:
        for value in list(frame.f_locals.values()):
            if not isinstance(value, socket.socket):
                attrs = getattr(value, "__dict__", None)
                value = attrs.get("_sock") if type(attrs) is dict else None
                if not isinstance(value, socket.socket):
                    continue
            peer = _peer_is(value, server)
            if peer is not None:
                return peer
        frame = frame.f_back
    return None


class _Handoff:
    """A wait_until condition checked in the waiting thread while the loop
    waits at the end of its turn (see the module docstring).

    The loop's side is ``__call__`` (a sleep hook): it asks for a check and
    waits for the answer, ``server.turn_thread`` lent to the waiting thread
    meanwhile (``lent``).  The waiter's side is ``run``: it answers each
    question until the predicate holds, raises, or the deadline passes.
    ``cond`` guards every field; whichever side ends the loan gives
    ``turn_thread`` back (``_give_back``), so the waiter never returns still
    counted as the loop's; the loop never waits past ``bound`` for one check."""

    def __init__(self, server, check):
        self.server = server
        self.check = check
        self.cond = threading.Condition(threading.Lock())
        self.runner = 0            # the waiting thread's ident
        self.asked = False         # the loop waits for a check not begun yet
        self.lent = False          # server.turn_thread is the waiter's (``outer`` before)
        self.outer = None
        self.running = False       # the waiting thread runs the check now
        self.closed = False        # the waiter stopped waiting: ask no more
        self.met = False
        self.error = None
        self.checks = 0
        self.called = None         # a client call to this server seen in the check
        self.abandoned = 0.0       # the loop stopped waiting for a check after this long
        self.timeout = 0.0
        self.deadline = 0.0

    # -- the loop's side ---------------------------------------------------------
    def __call__(self):
        server = self.server
        with self.cond:
            if self.closed or self.met or self.error is not None or self.called \
                    or self.abandoned:
                self._unregister()
                return
            self.asked = True
            self.outer, self.lent = server.turn_thread, True
            server.turn_thread = self.runner    # the check runs as the loop's turn
            self.cond.notify_all()
            began = time.monotonic()
            bound = max(self.deadline - began, self.timeout / 2)
            try:
                while self.lent:
                    self.cond.wait(SLICE)
                    if not self.lent:
                        break
                    if self.running:
                        peer = _client_call(self.runner, _CHECK_CODE, server)
                        if peer is not None:
                            self.called = peer      # serve it: the call then returns
                            break
                    waited = time.monotonic() - began
                    if waited >= bound:
                        self.abandoned = waited
                        break
            finally:
                if self.lent:
                    self._give_back()
                self.asked = False
            if self.closed or self.met or self.error is not None or self.called \
                    or self.abandoned:
                self._unregister()

    def _give_back(self):
        """End the loan of ``server.turn_thread`` (``cond`` held)."""
        self.server.turn_thread = self.outer
        self.lent = False

    def _unregister(self):
        try:
            self.server.sleep_hooks.remove(self)
        except ValueError:
            pass

    # -- the waiting thread's side -------------------------------------------------
    def _answer(self):
        """Run the check the loop asked for (``cond`` held on entry and exit)."""
        self.asked, self.running = False, True
        self.checks += 1
        self.cond.release()
        try:
            ok, error = _run_check(self.check)
        finally:
            self.cond.acquire()
        self.running = False
        if error is not None:
            self.error = error
        elif ok:
            self.met = True
        if self.lent:
            self._give_back()
        self.cond.notify_all()

    def run(self, timeout: float) -> bool:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.runner = threading.get_ident()

        def register():
            self.server.sleep_hooks.append(self)
            self.server.wake()    # a turn soon, even on a quiet server
        on_loop(self.server, register, max(timeout, 1.0))
        try:
            with self.cond:
                while not (self.met or self.error is not None or self.called
                           or self.abandoned):
                    left = self.deadline - time.monotonic()
                    if left <= 0:
                        break
                    if self.asked:
                        self._answer()
                    else:
                        self.cond.wait(left)
        finally:
            with self.cond:
                self.closed = True
                if self.lent:
                    self._give_back()
                self.cond.notify_all()
        if not self.met:
            on_loop(self.server, self._unregister, max(timeout, 1.0))
        if self.called is not None:
            raise LoopThreadCallError(
                "wait_until: the predicate called this server through a client (a socket "
                "to %s): %s" % (self.called, LOOP_THREAD_CALL)) from self.error
        if self.error is not None:
            raise self.error
        if self.abandoned:
            raise TimeoutError(
                "wait_until: the predicate was still running after %.1f s: the server's "
                "loop stopped waiting for it and serves again. It must only read state "
                "(server.inspect..., server.server)" % self.abandoned)
        return self.met


def _run_check(check):
    """(the check's answer, None) or (None, the exception it raised)."""
    try:
        return bool(check()), None
    except BaseException as e:   # raised in the caller
        return None, e


_CHECK_CODE = _run_check.__code__


def _until(embedded, predicate, handoff=False):
    server = embedded.server if hasattr(embedded, "server") else embedded

    def check():
        return bool(predicate(embedded))
    return server, (_Handoff if handoff else _Wait)(server, check)


def _until_failed(server, predicate, timeout, wait):
    state = busy(server)
    name = getattr(predicate, "__qualname__", None) or repr(predicate)
    return TimeoutError("wait_until: %s still false after %.1f s (checked %d times)%s"
                        % (name, timeout, wait.checks,
                           "; busy: " + "; ".join(state) if state else ""))


def _idle(embedded):
    server = embedded.server if hasattr(embedded, "server") else embedded
    streak = [0]

    def check():
        state = busy(server)
        if state:
            streak[0] = 0
            wait.last = state
            return False
        streak[0] += 1
        if streak[0] >= 2:
            return True
        server.wake()     # confirm on the next loop turn
        return False
    wait = _Wait(server, check)
    return server, wait


def _idle_failed(server, timeout, wait):
    state = busy(server) or wait.last or []
    return TimeoutError("wait_idle: the server was still busy after %.1f s: %s"
                        % (timeout, "; ".join(state) or "(idle at the last check)"))


def wait_until(embedded, predicate, timeout: float = 5.0):
    """Return once predicate(embedded) is true (see the module docstring)."""
    server, wait = _until(embedded, predicate, handoff=True)
    if not wait.run(timeout):
        raise on_loop(server, lambda: _until_failed(server, predicate, timeout, wait))


def wait_idle(embedded, timeout: float = 5.0):
    """Return once the server is idle (see the module docstring)."""
    server, wait = _idle(embedded)
    if not wait.run(timeout):
        raise on_loop(server, lambda: _idle_failed(server, timeout, wait))


async def wait_until_async(embedded, predicate, timeout: float = 5.0):
    """wait_until from a coroutine on the server's loop (AsyncEmbeddedServer)."""
    server, wait = _until(embedded, predicate)
    if not await wait.run_async(timeout):
        raise _until_failed(server, predicate, timeout, wait)


async def wait_idle_async(embedded, timeout: float = 5.0):
    """wait_idle from a coroutine on the server's loop (AsyncEmbeddedServer)."""
    server, wait = _idle(embedded)
    if not await wait.run_async(timeout):
        raise _idle_failed(server, timeout, wait)
