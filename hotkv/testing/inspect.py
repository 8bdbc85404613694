"""Inspection: what a test sees of a running hotkv server, without a client.

Owns ``Inspector`` (``server.inspect`` on EmbeddedServer / AsyncEmbeddedServer)
and the plain-Python views it returns: the keys, their types, values and
TTLs; a list queue (``queue``: depth, both ends, processing list, blocked
consumers); a stream (``stream``: length, first/last ID, groups with lag,
pending per consumer with idle times, the oldest pending entry); and the
queues of the libraries hotkv runs, read from their key layouts under their
own names: ``rq()``, ``celery()``, ``dramatiq()``, ``taskiq()``, ``bullmq()``.
The layouts read are those of RQ 2-3, kombu 5 (Celery 5), dramatiq 1-2,
taskiq-redis 1 and BullMQ 5-6 (tests/test_inspect.py runs each library).

Invariants:
* every read runs on the server's loop thread (``run_on_loop``: scheduled
  with ``call_soon_threadsafe`` and waited for, or run in place when the
  caller already is that thread), so it sees the state between two
  commands, never half of one;
* reading changes nothing: no lazy expiry, no access-time stamp, no
  keyspace hit/miss, no notification.  A key past its expiry time is
  reported absent (as every command would see it) but left for the server
  to delete;
* the views are copies (bytes, list, dict, set, tuples, frozen dataclasses):
  nothing returned shares mutable state with the server.

Values: a string is ``bytes``; a list ``list[bytes]``; a hash ``dict``; a set
``set``; a sorted set ``list[(member, score)]`` in rank order; a stream
``list[(id, {field: value})]`` with ids as ``"ms-seq"`` text.  Times are
milliseconds; "now" is the server's clock (``server.clock`` when the virtual
clock is installed, else the wall clock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Literal, TypeVar, Union

# The views and the reads live in hotkv.observe.queues (the dashboard reads queues too).
from ..observe.queues import (  # noqa: F401 - re-exported: the inspector's public views
    ConsumerInfo,
    GroupInfo,
    Job,
    LibraryQueue,
    PendingEntry,
    QueueInfo,
    StreamInfo,
    _b,
    _bullmq,
    _celery,
    _dramatiq,
    _dump,
    _get,
    _keys,
    _pttl,
    _queue,
    _rq,
    _stream,
    _taskiq,
    _type,
    now_ms,
    sid,
    to_python,
)
from . import on_loop

if TYPE_CHECKING:
    from ..server import Server

_T = TypeVar("_T")
# A key or pattern: bytes, or text (UTF-8 encoded).
Key = Union[str, bytes]

LOOP_TIMEOUT = 30.0     # seconds a test waits for the loop thread (a wedged server)


def run_on_loop(server: Server, fn: Callable[..., _T], *args: Any) -> _T:
    """fn(*args) on ``server``'s event loop thread (a hotkv.server.Server);
    its result, or its exception re-raised here (hotkv.testing.on_loop)."""
    return on_loop(server, lambda: fn(*args), LOOP_TIMEOUT)


# ----------------------------------------------------------------------
# The inspector
# ----------------------------------------------------------------------

class Inspector:
    """``server.inspect``: read-only views of an EmbeddedServer's data."""

    def __init__(self, embedded: Any) -> None:
        """``embedded``: an EmbeddedServer or AsyncEmbeddedServer."""
        self._embedded = embedded

    @property
    def _server(self) -> Server:
        running = getattr(self._embedded, "_running", None)
        if running is not None:
            return running("inspect")      # a RuntimeError saying what to do
        server = self._embedded.server
        if server is None:
            raise RuntimeError("inspect: the server is not running")
        return server

    def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        server = self._server
        return run_on_loop(server, fn, server, *args)

    # -- generic ---------------------------------------------------------
    def keys(self, pattern: Key = "*", db: int = 0) -> list[bytes]:
        """The live keys matching a glob pattern (KEYS's), sorted."""
        return self._run(_keys, _b(pattern), db)

    def exists(self, key: Key, db: int = 0) -> bool:
        return self._run(_type, _b(key), db) is not None

    def type(self, key: Key, db: int = 0) -> str | None:
        """TYPE's answer as text, or None when the key does not exist."""
        return self._run(_type, _b(key), db)

    def get(self, key: Key, db: int = 0) -> Any:
        """The value as Python objects, or None when the key does not exist."""
        return self._run(_get, _b(key), db)

    def ttl(self, key: Key, db: int = 0) -> float | None:
        """Seconds left to live (float), or None when the key has no TTL
        or does not exist (``exists`` tells the two apart)."""
        ms = self._run(_pttl, _b(key), db)
        return None if ms is None else ms / 1000

    def dbsize(self, db: int = 0) -> int:
        return len(self.keys("*", db))

    def dump(self, db: int = 0) -> dict[bytes, Any]:
        """Every live key of db with its value as Python objects."""
        return self._run(_dump, db)

    # -- queues ----------------------------------------------------------
    def queue(self, key: Key, db: int = 0, pushed: Literal["left", "right"] = "left",
              processing: Key | None = None) -> QueueInfo | None:
        """A list queue (QueueInfo), or None when the key does not exist and
        no client is blocked on it (with consumers waiting on an empty
        queue: depth 0, ``waiting_consumers`` counted).
        ``pushed``: the end producers push to ("left" for LPUSH, "right"
        for RPUSH); ``processing``: a processing list's key to include."""
        if pushed not in ("left", "right"):
            raise ValueError("pushed is 'left' or 'right'")
        return self._run(_queue, _b(key), db, pushed,
                         None if processing is None else _b(processing))

    def stream(self, key: Key, db: int = 0) -> StreamInfo | None:
        """A stream with its consumer groups (StreamInfo), or None."""
        return self._run(_stream, _b(key), db)

    # -- queue libraries --------------------------------------------------
    def rq(self, db: int = 0) -> dict[str, LibraryQueue]:
        """RQ's queues: name -> LibraryQueue (queued from rq:queue:<name>;
        delayed = ScheduledJobRegistry; in_flight = StartedJobRegistry
        (rq:wip); failed = FailedJobRegistry; other: finished, deferred,
        canceled)."""
        return self._run(_rq, db)

    def celery(self, db: int = 0, backend_db: int | None = None) -> dict[str, LibraryQueue]:
        """Celery/kombu's queues: name -> LibraryQueue (queued: the messages
        in the queue's lists, priority lists included; delayed: those
        carrying an ETA, in the list or reserved; in_flight: kombu's
        ``unacked`` hash; failed: tasks whose result in the Redis result
        backend (``backend_db``, default db) is FAILURE)."""
        return self._run(_celery, db, db if backend_db is None else backend_db)

    def dramatiq(self, namespace: str = "dramatiq", db: int = 0) -> dict[str, LibraryQueue]:
        """dramatiq's queues: name -> LibraryQueue (queued: <ns>:<q>;
        delayed: the <q>.DQ queue, with each message's eta; in_flight: the
        workers' __acks__ sets; failed: the dead-letter <q>.XQ)."""
        return self._run(_dramatiq, namespace, db)

    def taskiq(self, queue: Key = "taskiq", db: int = 0,
               group: Key = "taskiq") -> LibraryQueue | None:
        """taskiq-redis's queue (LibraryQueue) or None: a ListQueueBroker's
        list (queued), or a RedisStreamBroker's stream (queued: entries the
        group has not delivered; in_flight: its pending entries)."""
        return self._run(_taskiq, _b(queue), db, _b(group))

    def bullmq(self, prefix: str = "bull", db: int = 0) -> dict[str, LibraryQueue]:
        """BullMQ's queues: name -> LibraryQueue (queued: wait, paused and
        prioritized; delayed: the delayed set with each job's due time;
        in_flight: active; failed: failed; other: completed,
        waiting-children)."""
        return self._run(_bullmq, prefix, db)


__all__ = ["Inspector", "QueueInfo", "StreamInfo", "GroupInfo", "ConsumerInfo",
           "PendingEntry", "LibraryQueue", "Job", "run_on_loop", "now_ms", "to_python"]
