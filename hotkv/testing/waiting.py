"""Waiting for the server instead of sleeping: ``wait_until`` and ``wait_idle``.

``wait_until(embedded, predicate, timeout=5.0)`` returns once ``predicate(embedded)``
is true.  The predicate runs on the server's loop thread -- once at once, then
at the end of every loop turn (``Server.before_sleep``: after each batch of
commands, each reply flush, each cron tick), never by sleeping and polling --
so it reads the server's state as no command is half-done.  It must only read
state (the embedded server's inspection helpers, ``embedded.server``): a
client call to the same server from inside it waits for itself -- the wait
then raises TimeoutError after ``timeout`` saying so (the server stays
wedged until that client's own socket timeout).

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
the server's own loop (``AsyncEmbeddedServer.wait_until`` / ``wait_idle``).

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
import termios
import threading
import time

from ..core.pause import PAUSED
from . import on_loop

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
            transport = getattr(client, "transport", None)
            if transport is not None:
                coming = peer_unsent(transport.get_extra_info("peername"),
                                     transport.get_extra_info("sockname"), tables)
                if coming:
                    out.append("%s: %d bytes on their way (in the sender's socket)"
                               % (who, coming))
        pending = sum(map(len, client.out))
        transport = getattr(client, "transport", None)
        if transport is not None and not transport.is_closing():
            pending += transport.get_write_buffer_size()
        if pending:
            out.append("%s: %d reply bytes not written" % (who, pending))
    if server.ready_keys:
        out.append("%d key(s) ready for blocked clients" % len(server.ready_keys))
    if server.pending_flush:
        out.append("%d client(s) with replies to flush" % len(server.pending_flush))
    return out


class _Wait:
    """One registered condition: checked on the loop, awaited by the caller."""

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
                "wait_until: the predicate was still running after %.1f s on the server's "
                "loop thread: it must only read state (server.inspect..., server.server); "
                "a call to this server through a client from inside it waits for itself "
                "(the server serves nobody until that client's own timeout). Call the "
                "client in a loop of your own instead" % timeout)
        if not met:
            on_loop(self.server, self._unregister, max(timeout, 1.0))
            met = self.done.is_set()   # met between the wait's end and now
        if self.error is not None:
            raise self.error
        return met


def _until(embedded, predicate):
    server = embedded.server if hasattr(embedded, "server") else embedded

    def check():
        return bool(predicate(embedded))
    return server, _Wait(server, check)


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
    server, wait = _until(embedded, predicate)
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
