"""Per-list enqueue and dequeue counters (issue 19): how many elements every
list command put into and took out of each list key, kept while the
dashboard's ``http-port`` is on.

The list commands (hotkv/commands/lists.py) call ``QueueCounts.count`` only
when ``server.queue_counts`` is not None -- one attribute test per command
when the dashboard is off.  What counts:
* enqueued: LPUSH/RPUSH/LPUSHX/RPUSHX (each element pushed), LINSERT (one
  when it inserts), the push half of LMOVE/BLMOVE/RPOPLPUSH/BRPOPLPUSH;
* dequeued: LPOP/RPOP/LMPOP/BLPOP/BRPOP/BLMPOP (each element popped, a
  blocked consumer's included: it is served by re-running its command), the
  pop half of the moves, LREM (each element removed: the acknowledge of the
  reliable-queue pattern takes the job out of its processing list) and
  LTRIM (each element trimmed away: it leaves the list unconsumed, but
  counting it keeps depth change = enqueued - dequeued for any list only
  list commands touch);
* not counted: LSET (no element comes or goes), and what is not a list
  command -- DEL/UNLINK, expiry, eviction, FLUSH*, RENAME, MOVE, SWAPDB,
  RESTORE, COPY, SORT ... STORE -- nor the commands an AOF load replays
  (at start, after the port went on, or DEBUG LOADAOF: history, not
  traffic).  A move within one list (LMOVE q q) counts one in and one out.
  A replica counts what its primary's stream does to its lists.

Invariants:
* counters are exact and never decrease while the port stays on: they are
  per (db, key), not on the list value, so a queue that empties (the usual
  state of a queue whose consumers keep up: the key is deleted) keeps its
  counts; turning the port off drops them all (a restart of every counter);
* the table is bounded: at most ``MAX_KEYS`` keys are counted; a key first
  seen while it is full is not counted (``refused`` counts those
  operations) until ``sweep`` frees room; ``sweep`` (the sampler's, once a
  sample) forgets a key that has been idle ``FORGET_AFTER`` seconds and no
  longer holds a list (its counter restarts at 0 if it comes back, which
  Prometheus's rate() reads as a counter reset);
* ``count`` does the least it can: a dict lookup and two additions.
"""

from __future__ import annotations

from ..types.lists import ListValue

MAX_KEYS = 10_000          # keys counted at once, all databases together
FORGET_AFTER = 300.0       # seconds a vanished, idle key keeps its counters

ENQ, DEQ, ENQ_SEEN, DEQ_SEEN, IDLE_SINCE = range(5)


class QueueCounts:
    """``tables[db index][key] = [enqueued, dequeued, enqueued at the last
    sweep, dequeued at the last sweep, monotonic time of the last change
    seen by a sweep]``."""

    __slots__ = ("tables", "size", "refused", "swept_at")

    def __init__(self, ndbs: int):
        self.tables = [{} for _ in range(ndbs)]
        self.size = 0
        self.refused = 0
        self.swept_at = None

    # push/pop: the common case (a key already counted, no gate on) in the
    # fewest steps; anything else goes through count.
    def push(self, db, key, n: int):
        c = self.tables[db.index].get(key)
        if c is not None and not db.server.gated:
            c[0] += n
        else:
            self.count(db, key, n, 0)

    def pop(self, db, key, n: int):
        c = self.tables[db.index].get(key)
        if c is not None and not db.server.gated:
            c[1] += n
        else:
            self.count(db, key, 0, n)

    def count(self, db, key, enq: int, deq: int):
        """``enq`` elements pushed to / ``deq`` taken from ``key`` of ``db``."""
        server = db.server
        if server.gated and server.loading:   # an AOF replay
            return
        c = self.tables[db.index].get(key)
        if c is None:
            if self.size >= MAX_KEYS:
                self.refused += enq + deq
                return
            c = self.tables[db.index][key] = [0, 0, 0, 0, None]
            self.size += 1
        c[0] += enq
        c[1] += deq

    def sweep(self, server, now: float) -> dict:
        """Once a sample: {(db, key): (enqueued, dequeued, enqueued since the
        last sweep, dequeued since it)} of every counted key, after
        forgetting the keys idle ``FORGET_AFTER`` seconds that hold no list;
        ``dt``, the seconds since the last sweep (None at the first), is
        returned under the key None."""
        out = {None: None if self.swept_at is None else now - self.swept_at}
        self.swept_at = now
        for db, table in enumerate(self.tables):
            if not table:
                continue
            data = server.dbs[db].data
            gone = []
            for key, c in table.items():
                d_enq, d_deq = c[ENQ] - c[ENQ_SEEN], c[DEQ] - c[DEQ_SEEN]
                if d_enq or d_deq or c[IDLE_SINCE] is None:
                    c[ENQ_SEEN], c[DEQ_SEEN], c[IDLE_SINCE] = c[ENQ], c[DEQ], now
                elif now - c[IDLE_SINCE] >= FORGET_AFTER \
                        and type(data.get(key)) is not ListValue:
                    gone.append(key)
                    continue
                out[(db, key)] = (c[ENQ], c[DEQ], d_enq, d_deq)
            for key in gone:
                del table[key]
            self.size -= len(gone)
        return out

    def totals(self, db: int, key) -> tuple:
        """(enqueued, dequeued) of one key; (0, 0) if not counted."""
        c = self.tables[db].get(key)
        return (0, 0) if c is None else (c[ENQ], c[DEQ])


def start(server):
    """Count from now on (http-port turned on)."""
    if server.queue_counts is None:
        server.queue_counts = QueueCounts(len(server.dbs))


def stop(server):
    """Stop counting and forget every counter (http-port turned off)."""
    server.queue_counts = None


__all__ = ["QueueCounts", "start", "stop", "MAX_KEYS", "FORGET_AFTER"]
