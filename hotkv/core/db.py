"""The keyspace: databases, expiry, and the hooks every write goes through.

Owns ``Database`` (one numbered keyspace: a dict of values, a dict of expiry
times, the clients WATCHing and blocked on its keys).  The values are the
types' (hotkv/types/, listed in hotkv/types/table.py); this module stores
them without looking inside.  Knows nothing of sockets or asyncio.

Invariants:
* ``data`` never holds an empty container: a list, stream-less-than-a-stream
  or hash that becomes empty is deleted by the command that emptied it
  (streams are the exception, as in Redis: an empty stream is a key).
* ``expires`` keys are a subset of ``data`` keys; times are absolute unix ms.
* A key past its expiry time is never visible: every read goes through
  ``lookup`` which deletes it first (lazy expiry); ``active_expire`` removes
  the rest in bounded batches.
* ``keyindex`` / ``volatile`` (hotkv.core.keyindex) hold exactly the keys of
  ``data`` / ``expires``: keys enter and leave only through this class's
  methods (a bypassing writer is detected by a count mismatch and the index
  rebuilt).
* ``access`` keys are a subset of ``data`` keys: a key's last access
  (hotkv.core.access reads it), stamped by ``lookup`` and by creation, dropped
  with the key; ``lookup_notouch`` reads without stamping;
* Every change to a key is announced through ``Server.written`` (or
  ``Database.touch`` for changes that are not writes of data), which is what
  WATCH, blocked clients, keyspace notifications and the AOF hang on.
"""

from __future__ import annotations

import time

from ..protocol.errors import WrongType
from . import replica_keys
from .keyindex import KeyIndex
from .lazyfree import maybe_free_later


def lru_clock(server) -> int:
    """Valkey's LRU clock: unix seconds in 24 bits (hotkv.core.access reads it),
    on the server's clock (hotkv.core.clock)."""
    return int(server.clock.time()) & 0xFFFFFF


class Database:
    __slots__ = ("index", "server", "data", "expires", "watched", "blocking",
                 "avg_ttl", "keyindex", "volatile", "expire_cursor", "access", "clock")

    def __init__(self, index: int, server):
        self.index = index
        self.server = server
        self.data: dict = {}
        self.expires: dict = {}
        # key -> {client: [expired-when-watched]} of clients WATCHing it
        self.watched: dict = {}
        # key -> deque of Waiters blocked on it (first come, first served)
        self.blocking: dict = {}
        self.avg_ttl = 0
        # Hash-ordered mirrors of data's and expires' keys (hotkv.core.keyindex):
        # SCAN cursors, RANDOMKEY, and active expiry's resumable sweep.
        self.keyindex = KeyIndex()
        self.volatile = KeyIndex()
        self.expire_cursor = 0
        # key -> its last access (hotkv.core.access: the LRU clock, or the LFU
        # field once an LFU policy is on); ``clock`` is the cron's LRU clock.
        self.access: dict = {}
        self.clock = lru_clock(server)

    # ------------------------------------------------------------------
    # Reads
    # ------------------------------------------------------------------
    def lookup(self, key):
        """The value at key, or None; expires the key if its time has come
        (never while the AOF loads: replayed commands must meet the keys
        they met when logged, and the log holds the deletions)."""
        value = self.data.get(key)
        if value is not None:
            if self.expires:
                # (the time test in line: every read of a key with a TTL meets
                # it; what an expired key is for this command, gone() says)
                when = self.expires.get(key)
                if when is not None and when <= self.server.cmd_time_ms and self.gone(key):
                    return None
            self.access[key] = self.clock     # an access (hotkv.core.access)
        return value

    def lookup_notouch(self, key, notify: bool = True):
        """lookup() that leaves the key's access time alone (TTL, TYPE,
        EXISTS, OBJECT: Valkey's LOOKUP_NOTOUCH); counts a hit or miss and,
        unless ``notify`` is False (OBJECT), announces a miss as lookup_read."""
        value = self.data.get(key)
        if value is not None and self.expires and self.gone(key):
            value = None
        if value is None:
            server = self.server
            server.stat_keyspace_misses += 1
            if notify and server.notify is not None:
                server.notify(self, key, "m", "keymiss")
        else:
            self.server.stat_keyspace_hits += 1
        return value

    def gone(self, key) -> bool:
        """Whether a key that is in ``data`` has expired for the command
        running, deleting it as lookup() does (Valkey's expireIfNeeded):
        no access, no hit or miss counted -- what SCAN and lookup_notouch
        check, and lookup() once its own time test found the key due."""
        when = self.expires.get(key)
        if when is None or when > self.server.cmd_time_ms or self.server.loading:
            return False
        link = self.server.replica_link
        if link is None:
            if self.server.pause_check is None:   # CLIENT PAUSE: gone, not deleted
                self.expire_now(key)
            return True
        # A replica deletes nothing: the primary's DEL will come.  Its
        # commands see the key as the primary did; the others do not.
        return self.server.current_client is not link.client

    def lookup_read(self, key):
        """lookup() on behalf of a read command: also counts the keyspace
        hit or miss INFO reports (writes' lookups do not count, as Redis)
        and publishes a miss as a "keymiss" event (class m)."""
        value = self.lookup(key)
        if value is None:
            server = self.server
            server.stat_keyspace_misses += 1
            if server.notify is not None:     # the "m" class: keymiss (hotkv.core.notify)
                server.notify(self, key, "m", "keymiss")
        else:
            self.server.stat_keyspace_hits += 1
        return value

    def lookup_typed(self, key, cls):
        """The value at key if it is a ``cls``; None if missing; else WRONGTYPE.
        For a read-only command the lookup is a read (counted, and a miss
        announced, as lookup_read): Valkey's lookupKeyRead of the types'
        read commands."""
        value = self.lookup(key)
        cmd = self.server.current_cmd     # None before the first command
        if cmd is not None and cmd.readonly:
            self.count_read(key, value)
        if value is not None and type(value) is not cls:
            raise WrongType()
        return value

    def count_read(self, key, value):
        """A read lookup's keyspace hit or miss (INFO), a miss's keymiss event."""
        server = self.server
        if value is None:
            server.stat_keyspace_misses += 1
            if server.notify is not None:
                server.notify(self, key, "m", "keymiss")
        else:
            server.stat_keyspace_hits += 1

    def get_string(self, key):
        """The string at key (bytes, or the bytearray a string becomes once
        changed in place: hotkv/types/strings.py), or None; else WRONGTYPE."""
        value = self.lookup(key)
        if value is not None and type(value) is not bytes and type(value) is not bytearray:
            raise WrongType()
        return value

    def exists(self, key) -> bool:
        return self.lookup(key) is not None

    def is_expired(self, key) -> bool:
        when = self.expires.get(key)
        return when is not None and when <= self.server.cmd_time_ms

    # ------------------------------------------------------------------
    # Writes.  Callers announce the change with Server.written afterwards.
    # ------------------------------------------------------------------
    # New keys enter ``data`` only through set/add, keys leave it only
    # through delete/expire_now/clear, and TTLs change only through
    # set/set_expire/persist: that is what keeps keyindex/volatile exact.
    def set(self, key, value, keep_ttl: bool = False):
        """Store value at key; an existing TTL is dropped unless keep_ttl."""
        self.add(key, value)
        if not keep_ttl and self.expires:
            if self.expires.pop(key, None) is not None:
                self.volatile.discard(key)

    def add(self, key, value):
        """Store value at key, creating the key if needed; its TTL is kept."""
        data = self.data
        old = data.get(key)
        if old is None:
            ki = self.keyindex
            if ki.gate is None:           # (an index made anywhere: hotkv.core.keyindex)
                ki.gate = self.server.eviction.room_for
            ki.add(key)
            self.access[key] = self.clock     # a new key's first access time
            if self.server.notify_new:
                self.server.notify(self, key, "n", "new")
        elif old.__class__ is not bytes and old is not value \
                and self.server.config.values["lazyfree-lazy-server-del"]:
            maybe_free_later(self.server, old)   # a big value overwritten: freed after the reply
        data[key] = value

    def delete(self, key) -> bool:
        """Remove key (already known to be live or not); True if it existed."""
        if self.data.pop(key, None) is None:
            return False
        self.keyindex.discard(key)
        self.access.pop(key, None)
        if self.expires:
            if self.expires.pop(key, None) is not None:
                self.volatile.discard(key)
        return True

    def server_delete(self, key) -> bool:
        """delete() for a key the server removes to put another value in its
        place (RENAME's and COPY REPLACE's destination, RESTORE REPLACE): a big
        value is freed after the reply with lazyfree-lazy-server-del (Valkey's
        dbDelete)."""
        value = self.data.get(key)
        if not self.delete(key):
            return False
        if value.__class__ is not bytes and self.server.config.values["lazyfree-lazy-server-del"]:
            maybe_free_later(self.server, value)
        return True

    def set_expire(self, key, when_ms: int):
        expires = self.expires
        if key not in expires:
            vi = self.volatile
            if vi.gate is None:
                vi.gate = self.server.eviction.room_for
            vi.add(key)
        expires[key] = when_ms
        if self.server.replica_link is not None:   # a writable replica's own TTLs
            replica_keys.remember(self.server, self, key)

    def persist(self, key) -> bool:
        if self.expires.pop(key, None) is None:
            return False
        self.volatile.discard(key)
        return True

    def expire_now(self, key):
        """Delete an expired key as Redis does: propagated as DEL, 'expired' event.
        With the latency monitor on, the deletion (freeing the value) is timed
        as Valkey's "expire-del" event."""
        timed = self.server.latency_threshold_ms
        if timed:
            start = time.time()
        value = self.data.pop(key, None)
        if value is not None:
            self.keyindex.discard(key)
            self.access.pop(key, None)
            if type(value) is not bytes and self.server.config.values["lazyfree-lazy-expire"]:
                maybe_free_later(self.server, value)   # a big one: after the reply (lazyfree)
            del value
        if timed:
            self.server.latency_sample("expire-del", int((time.time() - start) * 1000))
        if self.expires.pop(key, None) is not None:
            self.volatile.discard(key)
        self.server.key_expired(self, key)

    def clear(self) -> int:
        n = len(self.data)
        if not n and not self.expires and self.keyindex.pristine() and \
                self.volatile.pristine() and type(self.access) is dict and not self.access:
            # Already as a new database (FLUSHALL's 15 untouched databases, a
            # test's reset): nothing to build again.
            self.expire_cursor = 0
            return 0
        self.data = {}
        self.expires = {}
        # The access times go too (an LFU / no-touch tracker stays one).
        self.access = {} if type(self.access) is dict else self.access.fresh(self)
        self.keyindex = KeyIndex()
        self.volatile = KeyIndex()
        self.expire_cursor = 0
        return n

    def take(self, data: dict, expires: dict, keyindex: KeyIndex, volatile: KeyIndex,
             access: dict | None = None) -> tuple:
        """Put a whole dataset in place of this one's keys (``Server.replace_data``:
        a full sync's RDB, a test's snapshot restored).  The dicts are the
        database's from now on, the indexes made for them; ``access``, the
        keys' access times made with them (a plain dict, used only while
        this database keeps a plain dict), or each key's access time now (an
        LFU / no-touch tracker sees each key created).  Returns the old
        ``(data, expires, access)``, for the caller to free."""
        old = (self.data, self.expires, self.access)
        self.data, self.expires = data, expires
        self.keyindex, self.volatile = keyindex, volatile
        self.expire_cursor = 0
        if type(self.access) is dict:
            self.access = access if access is not None else dict.fromkeys(data, self.clock)
        else:
            tracker = self.access = self.access.fresh(self)
            for key in data:
                tracker[key] = self.clock
        return old

    def swap_contents(self, other):
        """SWAPDB: exchange keys, TTLs and their indexes with other."""
        self.data, other.data = other.data, self.data
        self.expires, other.expires = other.expires, self.expires
        self.keyindex, other.keyindex = other.keyindex, self.keyindex
        self.volatile, other.volatile = other.volatile, self.volatile
        self.access, other.access = other.access, self.access
        for db in (self, other):
            if type(db.access) is not dict:
                db.access.db = db
        self.expire_cursor = other.expire_cursor = 0

    def checked_keyindex(self) -> KeyIndex:
        """keyindex, rebuilt first if a writer bypassed set/add/delete."""
        if self.keyindex.count != len(self.data):
            self.keyindex = KeyIndex(self.data)
        return self.keyindex

    def checked_volatile(self) -> KeyIndex:
        if self.volatile.count != len(self.expires):
            self.volatile = KeyIndex(self.expires)
        return self.volatile

    # ------------------------------------------------------------------
    # Change tracking
    # ------------------------------------------------------------------
    def touch(self, key):
        """Tell WATCHers and blocked clients that key changed."""
        if key in self.watched:
            self.touch_watched(key)
        if key in self.blocking:
            self.server.signal_ready(self, key)

    def touch_watched(self, key):
        """Mark the transactions WATCHing key as failed.  A key that was
        already expired when WATCHed and is now gone has logically not
        changed (Redis's rule), so it does not fail the EXEC."""
        for client, flag in self.watched[key].items():
            if flag[0]:
                if key not in self.data:
                    flag[0] = False
                    continue
            client.dirty_cas = True

    def touch_all(self, other=None):
        """FLUSHDB/SWAPDB: fail transactions watching a key that existed here
        (or, for SWAPDB, exists in the db swapped in)."""
        for key, watchers in self.watched.items():
            here = key in self.data
            there = other is not None and key in other.data
            if not (here or there):
                continue
            for client, flag in watchers.items():
                if flag[0]:
                    if not there:
                        flag[0] = False   # a stale key now gone: no logical change
                        continue
                    if other.is_expired(key):
                        continue          # stale, replaced by stale
                elif not here and other.is_expired(key):
                    flag[0] = True        # nothing replaced by a stale key: still nothing
                    continue
                client.dirty_cas = True
        for key in list(self.blocking):
            self.server.signal_ready(self, key)

    # ------------------------------------------------------------------
    # Active expiry
    # ------------------------------------------------------------------
    def active_expire(self, budget: int) -> int:
        """Check about ``budget`` keys with a TTL and delete the expired ones.
        Like Redis, the keys are taken by resuming a scan of the volatile
        keys where the last call stopped (``expire_cursor``), so successive
        calls sweep them all and each call costs O(budget).  Returns how
        many were deleted."""
        expires = self.expires
        if not expires:
            self.expire_cursor = 0
            return 0
        now = self.server.cmd_time_ms
        if len(expires) <= budget:
            candidates = [k for k, t in expires.items() if t <= now]
        else:
            sampled: list = []
            self.expire_cursor = self.checked_volatile().scan(
                self.expire_cursor, budget, sampled)
            candidates = [k for k in sampled if expires.get(k, now + 1) <= now]
        deleted = 0
        for key in candidates:
            when = expires.get(key)
            if when is not None and when <= now:
                self.expire_now(key)
                deleted += 1
        return deleted

    def random_key(self):
        """A random live key, or None.  Expired keys met on the way are
        deleted (as Redis's dbRandomKey on a primary)."""
        for _ in range(1000):
            if not self.data:
                return None
            key = self.checked_keyindex().random_key()
            if not self.is_expired(key):
                return key
            self.expire_now(key)
        # Everything sampled was expired: fall back to a bounded walk.
        for key in self.data:
            if not self.is_expired(key):
                return key
        return None


__all__ = ["Database"]
