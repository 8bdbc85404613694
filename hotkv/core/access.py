"""Key access tracking: what OBJECT IDLETIME / FREQ report, and what the
eviction policies rank keys by.

Owns how ``Database.access`` (key -> last access) is interpreted and kept:
Valkey's 24-bit per-object ``lru`` field, held beside the value because a
hotkv value (``bytes`` for a string) has no room for it.  With an LRU (or
no) maxmemory-policy the entry is the LRU clock (unix seconds, 24 bits) of
the key's last access; with an LFU policy it is Valkey's LFU field: the
minutes of the last decrement (16 bits) << 8 | a logarithmic counter
(lfu-log-factor, lfu-decay-time, new keys start at 5).

Cost: ``Database.lookup`` stores ``access[key] = clock`` (one dict store, the
clock an int the cron refreshes, ``refresh_clocks``); creating a key stores
one and deleting one pops it.  Only when an LFU policy is on, or while a
client has CLIENT NO-TOUCH on (the cron goes back to plain stores once no
client has), is ``access`` a ``Tracker`` (a dict whose store does the LFU
arithmetic and skips a no-touch client's reads): the plain server never
pays for either.  Eviction (hotkv.core.eviction) samples keys and ranks them
by these entries: the idle seconds on the LRU clock, or 255 less the
decayed LFU counter.

Invariants: ``access`` keys are a subset of ``data`` keys; a key missing
from it (loaded, or created by a path that does not stamp it) counts as
just accessed; switching policies keeps the entries and reinterprets them,
as Valkey does ("LRU and LFU data will take some time to adjust").
"""

from __future__ import annotations

import random

LRU_CLOCK_MAX = (1 << 24) - 1
LFU_INIT_VAL = 5


def lru_clock(server) -> int:
    return int(server.clock.time()) & LRU_CLOCK_MAX     # hotkv.core.clock


def _minutes(server) -> int:
    return (int(server.clock.time()) // 60) & 65535


def is_lfu(server) -> bool:
    return "lfu" in str(server.config.values.get("maxmemory-policy", "noeviction"))


# -- LRU ----------------------------------------------------------------------

def idle_seconds(db, key) -> int:
    """OBJECT IDLETIME: seconds since the key's last access (Valkey's
    estimateObjectIdleTime, on the 24-bit clock that wraps)."""
    stamp = db.access.get(key)
    now = db.clock     # the cron's clock, as Valkey's cached LRU_CLOCK()
    if stamp is None:
        return 0
    if now >= stamp:
        return now - stamp
    return now + (LRU_CLOCK_MAX - stamp)


# -- LFU ----------------------------------------------------------------------

def lfu_decr(field: int, decay_time: int, server) -> int:
    """Valkey's LFUDecrAndReturn: the counter, less one per decay period elapsed."""
    ldt, counter = field >> 8, field & 255
    now = _minutes(server)
    elapsed = now - ldt if now >= ldt else 65535 - ldt + now
    periods = elapsed // decay_time if decay_time else 0
    if periods:
        counter = 0 if periods > counter else counter - periods
    return counter


def lfu_incr(counter: int, log_factor: int) -> int:
    """Valkey's LFULogIncr: grow the counter with probability 1 / (base * factor + 1)."""
    if counter == 255:
        return 255
    base = max(counter - LFU_INIT_VAL, 0)
    if random.random() < 1.0 / (base * log_factor + 1):
        counter += 1
    return counter


def freq(db, key) -> int:
    """OBJECT FREQ: the key's LFU counter after decay."""
    field = db.access.get(key)
    if field is None:
        return LFU_INIT_VAL
    return lfu_decr(field, db.server.config.values.get("lfu-decay-time", 1), db.server)


# -- the tracker ----------------------------------------------------------------

class Tracker(dict):
    """``Database.access`` while an LFU policy is on or a client has used
    CLIENT NO-TOUCH: a store of a present key is an access (skipped for a
    no-touch client's command other than TOUCH; an LFU update), a store of
    a missing key is its creation (LFU: the initial counter)."""

    __slots__ = ("db", "lfu", "notouch")

    def fresh(self, db) -> "Tracker":
        t = Tracker()
        t.db, t.lfu, t.notouch = db, self.lfu, self.notouch
        return t

    def __setitem__(self, key, clock):
        if key in self:
            if self.notouch:
                server = self.db.server
                client = server.current_client
                if client is not None and client.no_touch and (
                        server.current_cmd is None or server.current_cmd.name != "touch"):
                    return
            if self.lfu:
                server = self.db.server
                values = server.config.values
                counter = lfu_decr(dict.__getitem__(self, key), values.get("lfu-decay-time", 1),
                                   server)
                counter = lfu_incr(counter, values.get("lfu-log-factor", 10))
                dict.__setitem__(self, key, (_minutes(server) << 8) | counter)
                return
        elif self.lfu:
            dict.__setitem__(self, key, (_minutes(self.db.server) << 8) | LFU_INIT_VAL)
            return
        dict.__setitem__(self, key, clock)


def restore_hint(db, key, freq: int, idle: int):
    """RESTORE ... FREQ / IDLETIME (Valkey's objectSetLRUOrLFU): FREQ sets the
    LFU counter under an LFU policy, IDLETIME the last access (idle seconds
    before the LRU clock, wrapping) under any other; else nothing changes."""
    if is_lfu(db.server):
        if freq >= 0:
            dict.__setitem__(db.access, key, (_minutes(db.server) << 8) | freq)
    elif idle >= 0:
        stamp = db.clock - idle
        if stamp < 0:
            stamp += LRU_CLOCK_MAX
        dict.__setitem__(db.access, key, stamp)


def apply(server):
    """Give every database the access store the server's state needs."""
    lfu = is_lfu(server)
    notouch = server.notouch_used
    for db in server.dbs:
        if lfu or notouch:
            t = Tracker(db.access)
            t.db, t.lfu, t.notouch = db, lfu, notouch
            db.access = t
        elif type(db.access) is not dict:
            db.access = dict(db.access)


def notouch_used(server):
    """CLIENT NO-TOUCH ON: from now on stores check the running client."""
    if not server.notouch_used:
        server.notouch_used = True
        apply(server)


def refresh_clocks(server):
    """The cron's tick: the LRU clock every lookup stores (Valkey's cached
    server.lruclock, 1 s resolution)."""
    clock = lru_clock(server)
    for db in server.dbs:
        db.clock = clock
    if server.notouch_used and not any(
            cl.no_touch for cl in server.clients.values()):
        # The last no-touch client is gone or back to normal: plain stores again.
        server.notouch_used = False
        apply(server)


def init_server(server):
    prev = server.config.listeners.get("maxmemory-policy")

    def on_policy(v):
        if prev is not None:
            prev(v)
        apply(server)
    server.config.listeners["maxmemory-policy"] = on_policy
    apply(server)
