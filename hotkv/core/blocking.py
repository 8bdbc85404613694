"""Blocking commands, the way Redis does it (src/blocked.c).

A blocking command first tries to serve itself.  Only when it cannot does it
call ``block()``, which registers a ``Waiter`` at the tail of every key's
queue (``Database.blocking``).  A write to a key someone waits on marks it
ready (``Server.signal_ready``: once per key, and only if a waiter exists).
After each command -- after the whole EXEC for a transaction -- the
dispatcher serves the ready keys (``hotkv.core.dispatch.serve_ready_keys``, there
because it re-runs commands: this module runs none, so it sits below the
dispatcher): for each ready key, in the order the keys became ready, the
waiters are taken first come, first served and their command is executed
again.  Serving may make more keys ready (BLMOVE pushes
into a list others wait on), so the pass repeats until nothing is ready.

A waiter whose ``data`` has ``still_waiting(waiter)`` is asked first: if
it says a re-run would only block again (XREADGROUP woken by an entry
another consumer took), it keeps its place without being re-run.

Never wakes a client whose key did not change; never leaves a waiter
behind: a client that disconnects, is killed or is CLIENT UNBLOCKed is
removed from every queue at once.

Invariants:
* ``client.blocked is waiter`` exactly while the waiter is in its queues;
* a waiter's deadline (absolute unix ms as a float, 0 = forever) survives
  re-execution;
* a timeout never ends before the time asked: the deadline is the clock's
  reading when the command parses its timeout plus the timeout, and a waiter
  is released only once a reading reaches it, both taken to the microsecond
  (not cut to whole ms: a 100 ms XREAD BLOCK ended after 99.87 ms when the
  deadline counted from the command's whole ms).  Valkey stores ``mstime() +
  timeout`` and releases when the ms clock is strictly past it; hotkv's
  finer readings also let a frozen test clock advanced by exactly the
  timeout release the waiter, and one advanced by less never does (whole
  microseconds absorb the float error of a sum of advances);
* a command that blocks is counted in commandstats once: by ``call`` when
  it is finally served, or by ``unblock`` on timeout / CLIENT UNBLOCK;
* a queue's ``nokey`` is the number of its waiters with unblock_on_nokey,
  and ``server.blocking_keys_nokey`` the number of queues where it is > 0;
* inside MULTI/EXEC (or while loading the AOF) nothing blocks: ``block``
  returns the command's timeout reply at once, as in Redis.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import NULL_ARRAY
from ..protocol.util import parse_int
from .stats import count_call

BLOCKED = object()   # a handler's return value: "no reply yet"


class _Queue(deque):
    """The waiters of one key, first come first served; ``nokey`` counts
    those that must also wake when the key disappears (XREADGROUP)."""
    __slots__ = ("nokey",)

    def __init__(self):
        super().__init__()
        self.nokey = 0


class Waiter:
    __slots__ = ("client", "db", "keys", "deadline", "cmd", "argv", "btype",
                 "timeout_reply", "unblock_on_nokey", "seq", "data", "duration")

    def __init__(self, client, db, keys, deadline, cmd, argv, btype, timeout_reply,
                 unblock_on_nokey, data):
        self.client = client
        self.db = db
        self.keys = keys
        self.deadline = deadline
        self.cmd = cmd
        self.argv = argv
        self.btype = btype
        self.timeout_reply = timeout_reply
        self.unblock_on_nokey = unblock_on_nokey
        self.seq = next(client.server.waiter_seq)   # the order waiters blocked in
        self.data = data
        # Seconds its command ran so far (dispatch.call adds each run's while
        # it blocks): commandstats get them when it completes, as Valkey's.
        self.duration = 0.0


def parse_timeout(server, arg: bytes, seconds: bool = True) -> float:
    """A blocking timeout argument -> absolute deadline in unix ms, a float
    from the clock's reading to the microsecond (0 = forever; see the
    invariants).

    ``seconds``: BLPOP-style float seconds; otherwise XREAD-style integer ms.
    """
    if arg == b"0":
        return 0          # the job-queue worker's usual "wait forever"
    if seconds:
        try:
            text = arg.decode("ascii")
            if text.strip() != text or not text or "_" in text:
                raise ValueError
            try:
                value = float(text)
            except ValueError:
                # strtold also reads C99 hex floats ("0x10", "0x1p-2").
                if "x" not in text and "X" not in text:
                    raise
                value = float.fromhex(text)
        except (ValueError, UnicodeDecodeError, OverflowError):
            raise CommandError(errors.TIMEOUT_NOT_FLOAT) from None
        if math.isnan(value):
            raise CommandError(errors.TIMEOUT_NOT_FLOAT)
        ms = value * 1000.0
        if ms > 9223372036854775807:
            raise CommandError(errors.TIMEOUT_OUT_OF_RANGE)
        # Redis rounds up before the sign test: -0.0001 is 0 (forever).
        ms = math.ceil(ms) if ms > -9223372036854775807 else -1
        if ms < 0:
            raise CommandError(errors.TIMEOUT_NEGATIVE)
    else:
        ms = parse_int(arg, "ERR timeout is not an integer or out of range")
        if ms < 0:
            raise CommandError(errors.TIMEOUT_NEGATIVE)
    if ms > 0:
        if ms + server.cmd_time_ms > 9223372036854775807:   # Valkey's range check
            raise CommandError(errors.TIMEOUT_OUT_OF_RANGE)
        # Not cmd_time_ms + ms: the command's whole ms began up to 1 ms
        # before the command did (see the invariants).
        return round(server.clock.time() * 1_000_000) / 1000 + ms
    return 0


def block(client, keys, deadline: int, btype, timeout_reply=NULL_ARRAY, *,
          unblock_on_nokey: bool = False, data=None):
    """Block ``client`` on ``keys`` and return BLOCKED, or -- inside a
    transaction or while loading -- return ``timeout_reply`` at once."""
    if client.in_exec or client.is_fake:
        return timeout_reply
    server = client.server
    if client.reprocessing:
        # Re-executed and still cannot be served: keep the original deadline.
        deadline = client.reprocessing.deadline
    db = client.db
    waiter = Waiter(client, db, list(dict.fromkeys(keys)), deadline, server.current_cmd,
                    server.current_argv, btype, timeout_reply, unblock_on_nokey, data)
    for key in waiter.keys:
        q = db.blocking.get(key)
        if q is None:
            q = db.blocking[key] = _Queue()
        if unblock_on_nokey:
            if not q.nokey:
                server.blocking_keys_nokey += 1
            q.nokey += 1
        q.append(waiter)
    client.blocked = waiter
    server.blocked_clients += 1
    if deadline:
        heap = server.block_timeouts
        if len(heap) > 64 and len(heap) > 4 * server.blocked_clients:
            # Served waiters leave their entries behind (removed lazily);
            # busy workers with long timeouts would pile them up.
            heap[:] = [e for e in heap if e[2].client.blocked is e[2]]
            heapq.heapify(heap)
        heapq.heappush(heap, (deadline, waiter.seq, waiter))
        server.arm_block_timer(deadline)
    return BLOCKED


def block_postponed(client, cmd, argv, data) -> Waiter:
    """Mark ``client`` blocked on no key (Valkey's blockPostponeClient,
    blockClient with BLOCKED_POSTPONE): CLIENT PAUSE's postponed command
    (hotkv.core.pause) and a held reply or command (hotkv.testing.faults).
    No queue, no deadline: the caller keeps the waiter and ends it with
    ``unblock_postponed``; meanwhile CLIENT LIST shows the client blocked,
    blocked_clients counts it and its later commands wait behind it.
    ``data`` names the holder (CLIENT UNBLOCK leaves pause.PAUSED alone)."""
    waiter = Waiter(client, client.db, [], 0, cmd, argv, None, None, False, data)
    client.blocked = waiter
    client.server.blocked_clients += 1
    return waiter


def unblock_postponed(waiter) -> bool:
    """End a ``block_postponed`` wait (Valkey's unblockClient of a
    BLOCKED_POSTPONE client): True when its client was still held by it
    (not since dropped, killed or held again); the caller then resumes the
    client (``Server.resume_client``), after any reply it hands it."""
    if waiter.client.blocked is not waiter:
        return False
    detach(waiter)
    return True


def detach(waiter):
    """Remove waiter from all its key queues."""
    db = waiter.db
    server = waiter.client.server
    for key in waiter.keys:
        q = db.blocking.get(key)
        if q is None:
            continue
        try:
            q.remove(waiter)
        except ValueError:
            continue
        if waiter.unblock_on_nokey:
            q.nokey -= 1
            if not q.nokey:
                server.blocking_keys_nokey -= 1
        if not q:
            del db.blocking[key]
    waiter.client.blocked = None
    server.blocked_clients -= 1


def unblock(client, reply=None, error: str | None = None):
    """Unblock client with a reply (timeout, CLIENT UNBLOCK) and let it run
    its pending commands."""
    waiter = client.blocked
    if waiter is None:
        return
    detach(waiter)
    # The command ends here without being executed again: count it now
    # (a blocked command is counted once, when it completes).
    cmd = waiter.cmd
    if cmd is not None:
        count_call(client.server, cmd, waiter.duration, client,   # its runs' time
                   error is not None)
    if error is not None:
        client.add_error(error)
        client.server.count_error(error)
    else:
        client.add_reply(waiter.timeout_reply if reply is None else reply)
    client.last_interaction = client.server.clock.time()   # hotkv.core.clock
    client.schedule_flush()
    client.server.resume_client(client)


def drop(client):
    """A client is going away: leave no waiter behind."""
    if client.blocked is not None:
        detach(client.blocked)


def expire_timeouts(server, now_ms=None):
    """Unblock every waiter whose deadline the clock has reached; return
    the next deadline (0: none).  ``now_ms`` is the caller's reading in whole
    ms; the microsecond one is taken here, as the invariants ask (the
    whole-ms one would also hold a waiter up to 1 ms past its deadline, its
    timer re-armed meanwhile for no delay at all)."""
    heap = server.block_timeouts
    now_us = round(server.clock.time() * 1_000_000)
    while heap:
        deadline, _, waiter = heap[0]
        if waiter.client.blocked is not waiter:
            heapq.heappop(heap)       # served or dropped already
            continue
        if round(deadline * 1000) > now_us:
            return deadline
        heapq.heappop(heap)
        unblock(waiter.client)
    return 0


__all__ = ["BLOCKED", "block", "unblock", "drop", "detach", "parse_timeout",
           "expire_timeouts", "Waiter", "block_postponed", "unblock_postponed"]
