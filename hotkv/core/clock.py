"""The server's clock: real time by default, frozen, advanced or set by a test.

Owns ``Clock`` (one per ``Server``, ``server.clock``, made first in
``Server.__init__``).  The clock is on the ground floor: it imports nothing
of the server; when it moves it calls its owner's ``clock_moved()``
(``Server.clock_moved``: what the server does at once).

Everything in the server that asks "what time is it" for the data's sake
reads this clock: key expiry (lazy through ``cmd_time_ms``, which
the dispatcher takes from ``Clock.window``; active in the cron), TTL/PTTL/
EXPIRETIME, SET EX/PX, TIME (also ``redis.call('TIME')`` in Lua), blocking
timeouts, stream ``*`` IDs, XPENDING idle times and XCLAIM/XAUTOCLAIM
min-idle, consumers' seen/active times, OBJECT IDLETIME/FREQ (the LRU/LFU
clocks), CLIENT LIST age/idle and the idle-client ``timeout`` (one notion
of idleness), CLIENT PAUSE deadlines, slowlog, latency, ACL LOG and MONITOR
timestamps, INFO server_time_usec/lru_clock and the keyspace avg_ttl, which
keys an AOF rewrite or an RDB load leaves out as expired.

What stays on real time, on purpose: durations of real work (a command's
microseconds, slowlog durations, latency samples, the busy-script limit,
INFO uptime, fork/rewrite/load times), file events (LASTSAVE, save points,
the RDB ``ctime`` field, AOF fsync and rewrite pacing), and the network's
own machinery (output-buffer soft limits, the TLS handshake deadline,
replication acks and lag): a test that advances the clock an hour must not
see a save it did not make nor its replicas declared lagging.

API (``EmbeddedServer.clock`` / ``AsyncEmbeddedServer.clock``):
``freeze(at=None)``, ``unfreeze()``, ``advance(seconds)`` (frozen or running:
running is real time plus an offset), ``set(datetime | unix seconds)``,
``reset()`` (back to real time), ``adopt(other_clock)`` (a restarted
server's); readings ``time()`` (float seconds), ``ms()``, ``us()``,
``datetime()`` and ``monotonic()`` (for timeouts: moves with ``advance``
and with a forward ``set``, never backwards).  A naive
``datetime`` is local time, as ``datetime.timestamp()`` reads it.

Invariants:
* ``time`` is ``time.time`` itself while the clock is real (the readers pay
  nothing), a bound method otherwise;
* the clock's state changes only on the server's loop thread: a change asked
  from another thread (a test driving an ``EmbeddedServer``) is handed over
  with ``call_soon_threadsafe`` and the call returns once the server has
  acted on it (``Server.clock_moved``), so the next command sees the new time;
* a frozen clock reads whole microseconds (each change rounds it): blocking
  deadlines are counted and compared in microseconds, and a float reading
  within a hair of half a microsecond rounded one way when the deadline was
  taken and the other after advancing by exactly the timeout (1 time in 20),
  leaving the waiter blocked; moves under a microsecond are lost;
* after a move, no key whose time has come is left (active expiry ran,
  unless DEBUG SET-ACTIVE-EXPIRE 0, CLIENT PAUSE or being a replica holds
  it), no blocked client whose deadline passed is still blocked, and the
  dispatcher's cached command time is recomputed by the next command.
"""

from __future__ import annotations

import concurrent.futures
import datetime as _dt
import math
import numbers
import time as _time_mod
from typing import Any, Callable, Protocol, Union

# What set() and freeze() take: a datetime (a naive one is local time) or unix seconds.
When = Union[_dt.datetime, float]
# What advance() takes: seconds or a timedelta.
Seconds = Union[float, _dt.timedelta]

_real_time = _time_mod.time
_real_monotonic = _time_mod.monotonic
# How long a change asked from another thread waits for the server's loop
# (a busy script or DEBUG SLEEP holds it).
HANDOVER_TIMEOUT = 60.0


class ClockOwner(Protocol):
    """What a clock asks of its server (``hotkv.server.Server``): named here
    rather than imported, the clock being on the ground floor."""

    loop: Any

    def on_loop_thread(self) -> bool: ...

    def clock_moved(self) -> None: ...


class Clock:
    """The time a server lives in (see the module docstring)."""

    __slots__ = ("server", "time", "offset", "frozen_at", "mono_offset", "mono_frozen")

    server: ClockOwner | None
    time: Callable[[], float]
    offset: float
    frozen_at: float | None
    mono_offset: float
    mono_frozen: float

    def __init__(self, server: ClockOwner | None = None) -> None:
        self.server = server
        self.time = _real_time       # the reading: time.time itself while real
        self.offset = 0.0            # running: virtual = real + offset
        self.frozen_at = None        # frozen: the virtual unix seconds
        self.mono_offset = 0.0       # running: monotonic view = real monotonic + this
        self.mono_frozen = 0.0       # frozen: the monotonic view

    # -- readings -----------------------------------------------------------
    def _virtual(self) -> float:
        f = self.frozen_at
        return f if f is not None else _real_time() + self.offset

    def ms(self) -> int:
        """Unix milliseconds."""
        return int(self.time() * 1000)

    def us(self) -> int:
        """Unix microseconds (exact from time.time_ns while the clock is real)."""
        if self.time is _real_time:
            return _time_mod.time_ns() // 1000
        return int(self.time() * 1_000_000)

    def datetime(self) -> _dt.datetime:
        """The clock's time as an aware UTC datetime."""
        return _dt.datetime.fromtimestamp(self.time(), _dt.timezone.utc)

    def monotonic(self) -> float:
        """A monotonic reading for timeouts: moves with advance() and a forward
        set(), never backwards."""
        if self.frozen_at is not None:
            return self.mono_frozen
        return _real_monotonic() + self.mono_offset

    @property
    def frozen(self) -> bool:
        return self.frozen_at is not None

    @property
    def real(self) -> bool:
        """True while the clock is plain real time (never frozen, advanced or set,
        or reset since)."""
        return self.time is _real_time

    def window(self, start: float) -> tuple[int, float, float]:
        """For the dispatcher, while the clock is not real: (command time in
        ms, lo, next) where [lo, next) is the range of real time.time()
        readings for which that ms holds (all of them while frozen)."""
        f = self.frozen_at
        if f is not None:
            return int(f * 1000), -math.inf, math.inf
        off = self.offset
        ms = int((start + off) * 1000)
        return ms, ms / 1000 - off, (ms + 1) / 1000 - off

    # -- changes --------------------------------------------------------------
    def freeze(self, at: When | None = None) -> Clock:
        """Stop the clock where it is, or at ``at`` (as set() takes it: a
        datetime or unix seconds).  Also a context manager: ``with
        server.clock.freeze(): ...`` resets the clock to real time on exit."""
        target = None if at is None else _unix(at)

        def change() -> None:
            if self.frozen_at is None:
                self.mono_frozen = self.monotonic()
                self.frozen_at = self._virtual()
            if target is not None:
                self.mono_frozen += max(target - self.frozen_at, 0.0)
                self.frozen_at = target
        self._apply(change)
        return self

    def unfreeze(self) -> Clock:
        """Let the clock run again from where it stands (no jump)."""
        def change() -> None:
            if self.frozen_at is not None:
                self.offset = self.frozen_at - _real_time()
                self.mono_offset = self.mono_frozen - _real_monotonic()
                self.frozen_at = None
        self._apply(change)
        return self

    def advance(self, seconds: Seconds) -> Clock:
        """Move the clock forward by ``seconds`` (a number, or a
        ``datetime.timedelta``; frozen or running); returns once the server
        has acted as if that time had passed."""
        if isinstance(seconds, _dt.timedelta):
            seconds = seconds.total_seconds()
        elif isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
            raise TypeError("advance() takes seconds or a datetime.timedelta, not %s"
                            % type(seconds).__name__)
        seconds = float(seconds)
        if not seconds >= 0 or math.isinf(seconds):
            raise ValueError("advance() takes a finite number of seconds >= 0 "
                             "(set() moves the clock backwards)")

        def change() -> None:
            if self.frozen_at is not None:
                self.frozen_at += seconds
                self.mono_frozen += seconds
            else:
                self.offset += seconds
                self.mono_offset += seconds
        self._apply(change)
        return self

    def set(self, when: When) -> Clock:
        """Put the clock at ``when`` (a datetime, or unix seconds); a frozen
        clock stays frozen there, a running one runs on from there."""
        target = _unix(when)

        def change() -> None:
            delta = target - self._virtual()
            if self.frozen_at is not None:
                self.frozen_at = target
                self.mono_frozen += max(delta, 0.0)
            else:
                self.offset = target - _real_time()
                self.mono_offset += max(delta, 0.0)
        self._apply(change)
        return self

    def reset(self) -> Clock:
        """Back to real time (the monotonic view keeps its lead: it never goes back)."""
        def change() -> None:
            mono = self.monotonic()
            self.frozen_at = None
            self.offset = 0.0
            self.mono_offset = mono - _real_monotonic()
        self._apply(change)
        return self

    def adopt(self, other: Clock) -> Clock:
        """Take ``other``'s time (frozen or running, offset included): a server
        started again in a test (restart) lives on in its predecessor's time."""
        state = (other.offset, other.frozen_at, other.mono_offset, other.mono_frozen)

        def change() -> None:
            self.offset, self.frozen_at, self.mono_offset, self.mono_frozen = state
        self._apply(change)
        return self

    def __enter__(self) -> Clock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.reset()

    def __repr__(self) -> str:
        state = "real" if self.real else "frozen" if self.frozen else "offset %+.3fs" % self.offset
        return "<Clock %s %s>" % (state, self.datetime().isoformat())

    def _apply(self, change: Callable[[], None]) -> None:
        """Run change() and the server's reaction on the loop thread; wait for both."""
        loop = self.server.loop if self.server is not None else None
        if loop is not None and loop.is_closed():
            # Checked before the change: a stopped server's clock stays put.
            raise RuntimeError("the server is stopped (its event loop is closed): start() "
                               "it again before moving its clock")
        if loop is None or not loop.is_running() or self.server.on_loop_thread():
            self._run(change)
            return
        done: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                self._run(change)
            except BaseException as e:  # handed to the waiting thread
                done.set_exception(e)
            else:
                done.set_result(None)
        loop.call_soon_threadsafe(run)
        try:
            done.result(HANDOVER_TIMEOUT)
        except concurrent.futures.TimeoutError:
            raise TimeoutError("the server's loop did not take the clock change within "
                               "%d s (a busy script or DEBUG SLEEP?)" % HANDOVER_TIMEOUT) from None

    def _run(self, change: Callable[[], None]) -> None:
        change()
        if self.frozen_at is not None:
            # Whole microseconds (see the invariants): a deadline counted from
            # this reading and the reading after an advance by its timeout
            # then round to the same microsecond.
            self.frozen_at = round(self.frozen_at * 1_000_000) / 1_000_000
        real = self.frozen_at is None and self.offset == 0.0
        self.time = _real_time if real else self._virtual
        if self.server is not None:
            self.server.clock_moved()


def _unix(when: When) -> float:
    """set()'s and freeze()'s argument as unix seconds."""
    if isinstance(when, _dt.datetime):
        target = when.timestamp()
    elif isinstance(when, (int, float)) and not isinstance(when, bool):
        target = float(when)
    else:
        raise TypeError("the clock takes a datetime or unix seconds, not %s"
                        % type(when).__name__)
    if not math.isfinite(target) or target < 0:
        raise ValueError("the clock takes a time at or after the unix epoch")
    return target


__all__ = ["Clock", "ClockOwner", "When", "Seconds"]
