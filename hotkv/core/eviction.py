"""maxmemory: evicting keys by ``maxmemory-policy``, Valkey's evict.c.

Owns ``Evictor`` (``server.eviction``, made by ``Server._make_subsystems``):
``before_command`` is Valkey's performEvictions, run by the dispatcher's
gate before every command while ``maxmemory`` is set (the gate refuses a
command that may grow memory when it answers True: -OOM); ``cron`` and the
time proc (``_proc``, Valkey's evictionTimeProc, started when an eviction
runs out of time or CONFIG SET maxmemory lowers the limit) keep evicting
between commands; INFO reads ``info_fields``.

Memory is ``used_memory`` here: the allocators' in-use bytes (hotkv.core.stats,
which drop as soon as a value is freed) allocated since the server started,
plus ``STARTUP_USED`` (1 MiB, about what valkey-server reports empty).  The
interpreter's own 15-25 MB are not counted, so ``maxmemory 11mb`` leaves
about 10 MB for the data and the clients' buffers, as on Valkey; INFO's
used_memory_rss is still the process's RSS.  Reading it costs a few
microseconds (up to a few hundred on a fragmented heap), so a command does
not pay it while a cheap bound says the limit is far: each reading computes
``check_at``, the count of bytes read from clients (``_GROWTH`` bytes of
memory each at most: key, value, table entry) that would bring the memory
within ``_SLACK`` (or 1/64 of the limit) of it, and a command compares the
count with it (0.14 us).  The cron re-reads every tick, for growth
that no input explains (output buffers, a script's writes).

Choosing the key, as Valkey does: the LRU / LFU / TTL policies sample
``maxmemory-samples`` keys per database (all keys, or those with a TTL for
volatile-*) into an eviction pool of 16 kept in ascending order of "idle"
(LRU: seconds since the last access, hotkv.core.access's 24-bit clock; LFU: 255
minus the decayed counter; TTL: the later the expiry, the lower), and evict
the pool's best entry that still exists; the random policies take a random
key from the next database in turn.  Each eviction subtracts an estimate of
the key's size (``estimate``) from what is left to free; once the estimates
say enough, the allocators are read again, and the loop goes on if the
estimates were optimistic.  After 16 keys the time spent is checked against
``maxmemory-eviction-tenacity``'s budget (``time_limit_us``); past it the
rest is left to the time proc and the command runs (EVICT_RUNNING).

An evicted key is deleted as Valkey's dbGenericDelete with KEY_EVICTED:
WATCHers fail, client-side caches are invalidated, ``evicted`` (class e) is
published, the deletion is propagated (UNLINK with ``lazyfree-lazy-eviction``,
Valkey's default yes, else DEL) to the AOF and replicas, one unit per key,
``evicted_keys`` counts it.  The value is freed at once either way: what an
eviction frees must show in the next reading.

Invariants: no eviction while loading or while CLIENT PAUSE holds writes
(Valkey's PAUSE_ACTION_EVICT); ``oom`` is the last performEvictions' answer
(EVICT_FAIL), which scripts read as Valkey's pre_command_oom_state; at most
one time proc is scheduled; the pool holds at most ``POOL_SIZE`` entries.
Client eviction (``maxmemory-clients``) is hotkv.clients.client_eviction's.
"""

from __future__ import annotations

import sys
import time
from random import getrandbits as _getrandbits

from ..clients.client_eviction import client_memory
from . import access, config as _config, stats

POOL_SIZE = 16              # EVPOOL_SIZE
STARTUP_USED = 1 << 20      # the used_memory a server reports at start (Valkey's: ~1 MB)
EVICT_OK, EVICT_RUNNING, EVICT_FAIL = 0, 1, 2
_GROWTH = 8                 # bytes of memory a byte read from a client may cost at most
# Within this of the limit (or 1/64 of it) every command reads the memory:
# a table that doubles (a dict's resize) grows it with no input to show.
_SLACK = 64 * 1024
_EST_GROWTH = 2             # ... and about what it costs with values of 100 bytes and more
# An estimate never takes input as costing less than itself.  Overwrites in
# place (SETRANGE, a SET of the same size, a queue's push and pop) cost
# nothing, but a floor of half made a workload that turned from TOUCH to
# new 1 KB keys pass its limit between two readings (under load, readings
# far apart): evicting a little early is the side to err on.
_EST_MIN = 1.0
_LEARN_MIN = 16 * 1024      # input between two readings that says what input costs
_DEAR = 100e-6              # seconds: a reading dearer than this is not taken every command
_SPACING = 50

for _name in ("maxmemory-samples", "maxmemory-eviction-tenacity", "lazyfree-lazy-eviction"):
    _config.PARAMS[_name].inert = False


_SLOWER = 10   # a key evicted here costs about ten times what it costs valkey-server


def time_limit_us(tenacity: int) -> float:
    """Valkey's evictionTimeLimitUs (0..500 us linearly up to tenacity 10,
    then 15% more per step, unlimited at 100) times ``_SLOWER``: the same
    number of keys per command as Valkey before the rest is left to the
    time proc (with Valkey's 500 us a default eviction stopped after the
    first 16 keys, and the limit was exceeded between commands)."""
    if tenacity <= 10:
        return 50.0 * tenacity * _SLOWER
    if tenacity < 100:
        return 500.0 * 1.15 ** (tenacity - 10) * _SLOWER
    return float("inf")


def estimate(key, value) -> int:
    """Bytes freeing key and value is expected to release: the objects'
    sizes, a container's elements from the first few (Valkey measures
    the allocator around each delete; the exact reading follows the loop)."""
    size = sys.getsizeof(key) + 96      # the key, its dict/index/access entries
    t = type(value)
    if t is bytes or t is bytearray:
        return size + sys.getsizeof(value)
    size += sys.getsizeof(value)
    try:
        n = len(value)
    except TypeError:
        return size
    if not n:
        return size
    total = count = 0
    items = value.items() if isinstance(value, dict) else value
    try:
        for item in items:
            if type(item) is tuple:
                total += sum(sys.getsizeof(x) for x in item)
            else:
                total += sys.getsizeof(item)
            count += 1
            if count == 5:
                break
    except TypeError:
        return size
    return size + total * n // count if count else size


class Evictor:
    __slots__ = ("server", "pool", "next_db", "used", "nc_at", "check_at", "oom", "proc",
                 "read_at", "read_cost", "input_at", "freed_since",
                 "exceeded_since", "exceeded_total_us", "start", "peak", "growth")

    def __init__(self, server):
        self.server = server
        self.start = stats.mark()     # the interpreter's own memory is not counted
        self.peak = STARTUP_USED
        self.pool: list = []          # [score, dbindex, key], ascending score
        self.next_db = 0
        self.used = 0                 # the last reading of used_memory
        self.nc_at = 0                # _set_aside() at that reading
        # stat_net_input_bytes from which a command reads the memory again
        self.check_at = 0
        # When reading is dear (a heap fragmented by many freed values makes
        # mallinfo2 walk thousands of free chunks): the last reading's time,
        # what it cost, the input count then, and the estimated bytes the
        # evictions since freed -- what ``estimate_used`` goes by meanwhile.
        self.read_at = self.read_cost = 0.0
        self.input_at = 0
        self.freed_since = 0
        # Bytes of memory a byte of input cost between the last two readings
        # (averaged): what an estimate goes by.  A constant overstates big
        # values (1 KB values cost ~1.1x their input, 100-byte ones ~2x)
        # and evicting by an overstated growth evicts keys that had room.
        self.growth = _EST_GROWTH
        self.oom = False              # the last answer was EVICT_FAIL
        self.proc = None              # the scheduled time proc's handle
        self.exceeded_since = 0.0     # monotonic time the limit was first exceeded
        self.exceeded_total_us = 0

    # -- readings -------------------------------------------------------------
    def used_memory(self, max_age: float = 1.0) -> int:
        """INFO's used_memory: what was allocated since the server started
        (and is still in use), plus STARTUP_USED.  pymalloc's block size is
        re-measured when the last measurement is older than ``max_age``."""
        stats.calibrate(max_age)
        used = max(STARTUP_USED, STARTUP_USED + stats.used_since(self.start))
        if used > self.peak:
            self.peak = used
        return used

    def read(self, max_age: float = 0.1) -> int:
        server = self.server
        stats.calibrate(max_age)      # (its 5 ms a 100 MB, ten times a second, not timed)
        # What a reading costs is the CPU it takes (the thread's clock): on a
        # loaded machine the wall clock also counts the time the thread waited
        # for a core, readings looked dear, and commands went by estimates
        # (one run with two CPU burners: 168 of 1,175 keys evicted where 40%
        # more were written, the memory 25% over the limit).
        t = time.thread_time()
        used = self.used_memory(max_age)
        self.read_cost = (self.read_cost + time.thread_time() - t) / 2
        self.read_at = time.perf_counter()
        nc = self._set_aside()
        came = server.stat_net_input_bytes - self.input_at
        if came >= _LEARN_MIN and self.used:
            # (what replicas' buffers took or gave back is no input's cost)
            g = (used - nc - self.used + self.nc_at + self.freed_since) / came
            self.growth = (self.growth + min(max(g, _EST_MIN), _GROWTH)) / 2
        self.used = used
        self.nc_at = nc
        self.input_at = server.stat_net_input_bytes
        self.freed_since = 0
        # The input that may grow memory into the slack below the limit
        # before a command must read again (one comparison a command).
        limit = server.maxmemory
        room = limit - used - max(_SLACK, limit >> 6)
        self.check_at = server.stat_net_input_bytes + room // _GROWTH if room > 0 else 0
        return used

    def room_for(self, nbytes: int) -> bool:
        """Whether allocating nbytes keeps the memory within maxmemory
        (Valkey's overMaxmemoryAfterAlloc, negated): a key index asks before
        it doubles (hotkv.core.keyindex), so a table that would push the server
        over the limit does not make it evict keys for its own growth."""
        limit = self.server.maxmemory
        if not limit:
            return True
        return self.counted() + nbytes <= limit

    def grew(self, nbytes: int):
        """A command grew memory by nbytes more than its input explains (SETBIT
        or SETRANGE far out): the next command measures again, and an
        estimate counts them (Valkey's performEvictions measures before every
        command: the invalidations of what it evicts precede that reply)."""
        self.freed_since -= nbytes
        self.check_at = 0

    def _dear(self) -> bool:
        return self.read_cost > _DEAR and \
            time.perf_counter() - self.read_at < self.read_cost * _SPACING

    def _since(self) -> int:
        # What the input since the last reading is estimated to have added,
        # less what the evictions since are estimated to have freed.
        return int((self.server.stat_net_input_bytes - self.input_at) * self.growth) \
            - self.freed_since

    def reading(self) -> int:
        """A reading, or while readings are dear (over ``_DEAR`` each) and
        the last is younger than ``_SPACING`` times its cost, an estimate
        from it: ``growth`` bytes per byte clients sent since, less what
        the evictions since are estimated to have freed.  Readings then take
        at most 1/``_SPACING`` of the time; between two, the memory may pass
        the limit by what tiny values cost beyond the estimate."""
        if self._dear():
            return self.used + self._since()
        return self.read()

    def counted(self) -> int:
        """What counts against maxmemory: used_memory less ``not_counted``,
        from a reading, or while readings are dear an estimate from the last
        one less what was set aside *then* (and today's read share).  (The
        estimate less today's set-aside figure was wrong whenever a
        replica's buffer grew or went with no input to show: after CLIENT
        KILL of a stalled replica with 5.8 MB of stream held, a primary
        within 32 KB of its limit evicted 57 of its 100 keys to pay for
        memory already freed.)"""
        if self._dear():
            return self.used - self.nc_at + self._since() - self._read_share()
        return self.read() - self.nc_at - self._read_share()

    def cron(self):
        """The server's tick: re-measure (hotkv.core.stats.calibrate) and, if over
        the limit with nothing running, evict (growth no command explains)."""
        server = self.server
        if not server.maxmemory:
            return
        self.read(1.0)
        if self.used > server.maxmemory and self.proc is None:
            self.start_proc()

    def limit_changed(self):
        """CONFIG SET maxmemory (Valkey's updateMaxmemory): evict at once, in
        the time proc, if the new limit is below what is used."""
        if self.server.maxmemory:
            self.read()
            self.start_proc()

    # -- performEvictions ------------------------------------------------------
    def before_command(self) -> bool:
        """performEvictions before a command; True when nothing more could
        be freed (EVICT_FAIL: a command that may grow memory gets -OOM)."""
        if self.server.stat_net_input_bytes < self.check_at and not self.exceeded_since:
            self.oom = False
            return False
        self.oom = self.perform() == EVICT_FAIL
        return self.oom

    def _safe(self) -> bool:
        # Not while loading, nor while CLIENT PAUSE holds writes, nor on a
        # replica that leaves eviction to its primary (replica-ignore-maxmemory).
        server = self.server
        return not server.loading and server.pause_check is None and (
            server.replica_link is None
            or not server.config.values.get("replica-ignore-maxmemory", True))

    def perform(self) -> int:
        server = self.server
        if not self._safe():
            return EVICT_OK        # as if eviction were not triggered (no metrics)
        limit = server.maxmemory
        used = self.reading()
        if not limit or used <= limit:
            return self._metrics(EVICT_OK)
        used = self.counted()
        if used <= limit:
            return self._metrics(EVICT_OK)
        policy = server.config.values["maxmemory-policy"]
        if policy == "noeviction":
            return self._metrics(EVICT_FAIL)
        values = server.config.values
        budget_us = time_limit_us(values.get("maxmemory-eviction-tenacity", 10))
        start = time.perf_counter()
        lazy = values.get("lazyfree-lazy-eviction")
        tofree = used - limit
        freed = keys = 0
        result = EVICT_OK
        # What the evictions' own messages (invalidations, evicted events)
        # add to clients' output buffers is not set against what they freed:
        # Valkey measures a key's delta around its delete alone (else 10
        # tracking clients of 1 KB key names drain the database).
        messages = server.tracking_on or server.notify is not None
        out0 = self._outputs() if messages else 0
        fresh = True        # self.used is a reading taken after the last eviction
        while True:
            if freed >= tofree:
                used = self.counted()        # the estimates said enough
                fresh = True
                if messages:
                    used -= max(0, self._outputs() - out0)
                if used <= limit:
                    break
                tofree, freed = used - limit, 0
            pick = self._pick(policy)
            if pick is None:
                # Nothing (volatile) left to evict: an OOM is only answered
                # on a reading, never on an estimate.
                if self.read() - self.nc_at - self._read_share() > limit:
                    result = EVICT_FAIL
                break
            db, key = pick
            n = self._evict(db, key, lazy)
            freed += n
            self.freed_since += n
            fresh = False
            keys += 1
            if keys % 16 == 0 and (time.perf_counter() - start) * 1e6 > budget_us:
                self.start_proc()        # the rest between commands
                break
        if result != EVICT_FAIL:
            result = EVICT_RUNNING if self.proc is not None else EVICT_OK
        if keys:
            if not fresh:
                self.read()
            if messages:
                # That reading holds the evictions' own messages, which leave
                # at the loop's end: the next check reads again rather than
                # estimate from it (else it evicts again to pay for them).
                self.read_at = 0.0
            server.latency_sample("eviction-cycle", int((time.perf_counter() - start) * 1000))
        return self._metrics(result)

    def clients_memory(self) -> dict:
        """INFO's mem_clients_normal / mem_clients_slaves: each client's
        memory as CLIENT LIST's tot-mem counts it (hotkv.clients.client_eviction)."""
        out = {"normal": 0, "replica": 0}
        for cl in self.server.clients.values():
            mem = client_memory(cl)
            kind = "replica" if getattr(cl, "kind", "") == "replica" else "normal"
            out[kind] += mem
        return out

    def _outputs(self) -> int:
        n = 0
        for cl in self.server.clients.values():
            try:
                n += cl.output_size()
            except Exception:    # a transport already gone
                pass
        return n

    def not_counted(self) -> int:
        """Valkey's freeMemoryGetNotCountedMemory: what replicas' output
        buffers, the replication backlog past its size and the AOF buffer
        hold does not make keys go (evicting would grow them further, with
        the DELs to send): ``_set_aside``.

        Nor does the read whose commands run now, beyond what Valkey holds
        of it: ``_read_share``."""
        return self._set_aside() + self._read_share()

    def _set_aside(self) -> int:
        server = self.server
        n = len(getattr(server.aof_manager, "buf", b""))
        # The backlog beyond repl-backlog-size (its trim keeps whole 16 KB
        # blocks): Valkey counts the shared replication buffer up to the
        # backlog's size only.  A 10 KB backlog grew to 26 KB as a stream
        # began, enough to evict keys 32 KB under the limit.
        backlog = server.repl.backlog
        if backlog is not None and backlog.histlen > backlog.size:
            n += backlog.histlen - backlog.size
        for cl in server.clients.values():
            if getattr(cl, "kind", "") == "replica":
                try:
                    n += cl.output_size()
                except Exception:    # a transport already gone
                    pass
        return n

    def _read_share(self) -> int:
        """Valkey reads a pipeline 16 KB at a time and splits one command's
        arguments at a time, where hotkv holds the read as it came (and the
        parser's copy) and every command of it parsed.  The parser's copy
        counts (Valkey's query buffer); the read itself and the arguments of
        the commands not yet run (by their share of the commands) do not: a
        pipeline of 50 1 KB SETs at the limit evicted about 90 keys, not 50.
        It shrinks as the read's commands run (their arguments become data),
        so an estimate subtracts today's share, not the reading's."""
        server = self.server
        came = server.input_bytes
        if not came:
            return 0
        total = server.input_total
        return came + came * (total - server.input_done + 1) // total if total else came

    def _metrics(self, result: int) -> int:
        if result == EVICT_OK:
            if self.exceeded_since:
                self.exceeded_total_us += int((time.monotonic() - self.exceeded_since) * 1e6)
                self.exceeded_since = 0.0
        elif not self.exceeded_since:
            self.exceeded_since = time.monotonic()
        return result

    # -- the time proc -----------------------------------------------------------
    def start_proc(self):
        loop = self.server.loop
        if self.proc is None and loop is not None:
            self.proc = loop.call_soon(self._proc)

    def _proc(self):
        """evictionTimeProc: evict until under the limit, a budget at a time,
        yielding to the loop between budgets."""
        self.proc = None
        server = self.server
        if not server.maxmemory or server.current_client is not None:
            return
        result = self.perform()
        if server.prop_pending:
            server.flush_propagation()
        if server.pending_flush:
            # What the evictions sent (their invalidations, evicted events)
            # leaves now, as Valkey's beforeSleep writes it before the next
            # command is read.  uvloop reads sockets before call_soon
            # callbacks: left for wake()'s pass, those messages were still in
            # the output buffers when the next command measured memory, and
            # it evicted every key to pay for them (10 tracking clients).
            server.before_sleep()
        else:
            server.wake()
        if result == EVICT_RUNNING and self.proc is None:
            self.start_proc()

    # -- choosing -------------------------------------------------------------
    def _pick(self, policy: str):
        """(db, key) to evict under policy, or None when there is none."""
        server = self.server
        dbs = server.dbs
        allkeys = policy.startswith("allkeys")
        if policy.endswith("random"):
            n = len(dbs)
            for _ in range(n):
                self.next_db = (self.next_db + 1) % n
                db = dbs[self.next_db]
                if allkeys:
                    if db.data:
                        return db, db.checked_keyindex().random_key()
                elif db.expires:
                    return db, db.checked_volatile().random_key()
            return None
        kind = policy[policy.index("-") + 1:]      # lru, lfu, ttl
        samples = server.config.values.get("maxmemory-samples", 5)
        pool = self.pool
        for _ in range(100):      # each round samples anew; one is nearly always enough
            total = 0
            for db in dbs:
                keys = db.data if allkeys else db.expires
                if keys:
                    total += len(keys)
                    self._populate(db, kind, allkeys, samples)
            if not total:
                return None
            # The pool's best (highest score) that still exists; stale
            # entries (deleted since they were sampled) are dropped.
            while pool:
                _, dbindex, key = pool.pop()
                db = dbs[dbindex]
                if key in (db.data if allkeys else db.expires):
                    return db, key
        return None

    def _populate(self, db, kind: str, allkeys: bool, samples: int):
        """evictionPoolPopulate: sample keys of db into the pool.  The
        sample is Valkey's dictGetSomeKeys: the keys of consecutive buckets
        of the key index from a random one (one random draw, not one a key)."""
        index = db.checked_keyindex() if allkeys else db.checked_volatile()
        sample: list = []
        cursor = _getrandbits(64)
        for _ in range(4):      # wrapped past the end: go on from the start
            cursor = index.scan(cursor, samples, sample)
            if len(sample) >= samples or not cursor and len(sample) >= index.count:
                break
        if len(sample) > samples:
            del sample[samples:]
        pool = self.pool
        dbi = db.index
        if kind == "lru":
            now = db.clock
            acc = db.access
        elif kind == "lfu":
            server = self.server
            decay = server.config.values.get("lfu-decay-time", 1)
            acc = db.access
        else:
            expires = db.expires
        for key in sample:
            if kind == "ttl":
                score = -expires.get(key, 0)
            elif kind == "lfu":
                field = acc.get(key)
                score = 255 - (access.lfu_decr(field, decay, server) if field is not None
                               else access.LFU_INIT_VAL)
            else:
                stamp = acc.get(key)
                if stamp is None:
                    score = 0
                elif now >= stamp:
                    score = now - stamp
                else:
                    score = now + access.LRU_CLOCK_MAX - stamp
            full = len(pool) >= POOL_SIZE
            if full and score <= pool[0][0]:
                continue        # worse than everything in a full pool
            for e in pool:
                if e[2] == key and e[1] == dbi:
                    break       # already pooled
            else:
                # Insert keeping ascending order; a full pool drops its worst.
                i = len(pool)
                while i > 0 and pool[i - 1][0] > score:
                    i -= 1
                pool.insert(i, [score, dbi, key])
                if full:
                    del pool[0]

    # -- evicting ---------------------------------------------------------------
    def _evict(self, db, key, lazy) -> int:
        """Delete key as an eviction; the estimated bytes freed."""
        server = self.server
        value = db.data.get(key)
        freed = estimate(key, value) if value is not None else 0
        db.delete(key)
        del value
        server.stat_evictedkeys += 1
        if key in db.watched:
            db.touch_watched(key)
        if server.tracking_on:
            server.tracking.invalidate(key, None)
        if server.notify is not None:
            server.notify(db, key, "e", "evicted")
        server.propagate(db.index, [b"UNLINK" if lazy else b"DEL", key])
        if server.prop_pending and server.current_client is None:
            # Each eviction is its own unit (Valkey's exitExecutionUnit): no
            # MULTI around a batch of them in the replication stream.
            server.flush_propagation()
        return freed

    # -- INFO ---------------------------------------------------------------------
    def info_fields(self):
        """(total_eviction_exceeded_time, current_eviction_exceeded_time), ms."""
        current = 0
        if self.exceeded_since:
            current = int((time.monotonic() - self.exceeded_since) * 1e6)
        return (self.exceeded_total_us + current) // 1000, current // 1000

    def reset_stats(self):
        self.exceeded_total_us = 0
        if self.exceeded_since:
            self.exceeded_since = time.monotonic()
