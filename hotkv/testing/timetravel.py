"""One clock for the test process and its hotkv servers: time-machine and ``server.clock`` together.

``server.clock.advance(3600)`` moves the server's time only.  Libraries that
compute due times in the client (RQ's scheduler: ``enqueue_in`` /
``enqueue_at`` jobs are released when the *client's* ``datetime.now()``
passes their score; Celery's worker holds an ETA / countdown task until its
own clock reaches the ETA; BullMQ delays) do not follow it.
``travel(server)`` moves both with one call::

    from hotkv.testing.timetravel import travel

    with travel(server) as t:              # process and server frozen at the server's now
        queue.enqueue_in(timedelta(hours=1), job)
        t.advance(timedelta(hours=1))     # time.time(), datetime.now() and the server: 1 h later
        scheduler.enqueue_scheduled_jobs()  # the job is due

The process's side is time-machine's (``pip install time-machine``; it is in
hotkv's ``test`` extra): ``time.time()``, ``time.time_ns()``,
``datetime.now()``, ``date.today()``, ``time.localtime()``... return the
travelled time in every thread of the process.  The server's side is its
``Clock``: frozen at the same instant and advanced by the same amounts, so
keys expire, blocked commands time out and stream IDs, TTLs and ``TIME``
follow, and the server acts on each move at once (``Clock.advance``).

Arguments: ``travel(*servers, to=None)`` -- any number of
``EmbeddedServer``, ``AsyncEmbeddedServer``, ``hotkv.fake.FakeServer`` or
server ``Clock``; ``to`` (a datetime, unix seconds, or anything
``time_machine.travel`` takes, e.g. an ISO string) is where both start,
by default the first server's current time (so a server clock moved
earlier in the test is where the process goes too).  The ``Travel`` it
gives: ``advance(seconds | timedelta)`` (forward only), ``move_to(when)``
(forward or back; a server's monotonic view never goes back), ``time()``.

Time stands still in between (time-machine's ``tick=False``): a test is
deterministic, nothing becomes due while it runs.  Timeouts measured with
``time.monotonic()`` (redis-py's socket timeouts, asyncio, most libraries'
waits) still pass in real time; a loop that waits for ``time.time()`` to
move would wait for ever -- advance it.

What no time travel moves: deadlines a library keeps on ``time.monotonic()``.
A Celery worker converts a task's ETA into a monotonic deadline when it
*receives* the message (kombu's timer), so a worker that already holds the
task keeps waiting after ``advance``; a worker that consumes it after the
advance (started, or restarted: a stopping worker gives its unacked ETA
messages back to the broker) runs it at once.  RQ's scheduler compares
``datetime.now()`` with the job's score at each pass: it follows.

How time-machine and an embedded server interact without this helper
(undocumented before): time-machine patches ``time.time`` at the C level,
so an embedded server's clock *while it is real* follows it too (it reads
the same function), but nothing tells the server that time moved -- no
active expiry runs at once, blocked commands keep their ``monotonic``
deadlines (time-machine does not move ``time.monotonic``) -- and a server
clock frozen or advanced on its own no longer agrees with the process.

On exit the process's time is real again and every server's clock is
``reset()`` to real time (its monotonic view keeps its lead).  Travels do
not nest.
"""

from __future__ import annotations

import datetime as _dt
import numbers
import time as _time
from typing import TYPE_CHECKING, Any, Union

from ..core.clock import Clock, Seconds

if TYPE_CHECKING:
    import time_machine

    from ..embedded import AsyncEmbeddedServer, EmbeddedServer
    from ..fake import FakeServer

# What travel() moves: a server (or its clock).
Travelling = Union["EmbeddedServer", "AsyncEmbeddedServer", "FakeServer", Clock]


def _clock(thing: Travelling) -> Clock:
    """The ``Clock`` of an EmbeddedServer, AsyncEmbeddedServer, FakeServer or a Clock."""
    if hasattr(thing, "freeze") and hasattr(thing, "advance"):
        return thing
    embedded = getattr(thing, "embedded", None)      # hotkv.fake.FakeServer
    if embedded is not None and not hasattr(thing, "clock"):
        thing = embedded
    try:
        return thing.clock
    except AttributeError:
        raise TypeError("travel() takes EmbeddedServer, AsyncEmbeddedServer, FakeServer or "
                        "Clock objects, not %s" % type(thing).__name__) from None


def _seconds(seconds: Seconds) -> float:
    if isinstance(seconds, _dt.timedelta):
        return seconds.total_seconds()
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise TypeError("advance() takes seconds or a datetime.timedelta, not %s"
                        % type(seconds).__name__)
    seconds = float(seconds)
    if not seconds >= 0:
        raise ValueError("advance() moves forward only (move_to() goes back)")
    return seconds


class Travel:
    """The process's time (time-machine) and the servers' clocks, moved together."""

    def __init__(self, *servers: Travelling, to: Any = None) -> None:
        try:
            import time_machine
        except ImportError:
            raise ImportError("hotkv.testing.timetravel needs time-machine: "
                              "pip install time-machine (or hotkv[test])") from None
        if not servers:
            raise TypeError("travel() needs at least one server (or server clock)")
        self._time_machine = time_machine
        self.clocks = [_clock(s) for s in servers]
        self._to = to
        self._traveller: time_machine.travel | None = None
        self._coordinates: time_machine.Coordinates | None = None

    # -- the context ---------------------------------------------------------
    def start(self) -> Travel:
        if self._traveller is not None:
            raise RuntimeError("this travel is already under way")
        to = self._to if self._to is not None else self.clocks[0].time()
        self._traveller = self._time_machine.travel(to, tick=False)
        self._coordinates = self._traveller.start()
        try:
            now = _time.time()      # the destination, as time-machine read it
            for clock in self.clocks:
                clock.freeze(at=now)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        traveller, self._traveller, self._coordinates = self._traveller, None, None
        if traveller is not None:
            traveller.stop()
        for clock in self.clocks:
            try:
                clock.reset()
            except RuntimeError:     # that server was stopped meanwhile: nothing to put back
                pass

    def __enter__(self) -> Travel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- moving ----------------------------------------------------------------
    def _under_way(self) -> time_machine.Coordinates:
        if self._coordinates is None:
            raise RuntimeError("the travel is not under way: use it as a context manager "
                               "(with travel(server) as t: ...) or call start()")
        return self._coordinates

    def advance(self, seconds: Seconds) -> Travel:
        """Move the process and every server ``seconds`` (or a timedelta) forward;
        returns once each server has acted on it (expiry, blocked timeouts)."""
        coordinates = self._under_way()
        seconds = _seconds(seconds)
        coordinates.shift(seconds)
        for clock in self.clocks:
            clock.advance(seconds)
        return self

    def move_to(self, when: Any) -> Travel:
        """Put the process and every server at ``when`` (a datetime, unix seconds,
        or what time-machine takes), forward or back."""
        coordinates = self._under_way()
        coordinates.move_to(when)
        now = _time.time()
        for clock in self.clocks:
            clock.set(now)
        return self

    def time(self) -> float:
        """The travelled time, unix seconds (what ``time.time()`` returns now)."""
        self._under_way()
        return _time.time()

    def __repr__(self) -> str:
        state = "at %s" % _dt.datetime.fromtimestamp(_time.time(), _dt.timezone.utc).isoformat() \
            if self._coordinates is not None else "not under way"
        return "<Travel %s, %d server(s)>" % (state, len(self.clocks))


def travel(*servers: Travelling, to: Any = None) -> Travel:
    """Freeze the process's time (time-machine) and the servers' clocks at
    ``to`` (default: the first server's current time) and move them together;
    a context manager (see the module docstring)."""
    return Travel(*servers, to=to)


__all__ = ["Travel", "travel"]
