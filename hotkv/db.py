"""The keyspace: databases, expiry, and the hooks every write goes through.

Owns ``Database`` (one numbered keyspace: a dict of values, a dict of expiry
times, the clients WATCHing and blocked on its keys) and the value type
registry (which Python class is which Redis type).  Knows nothing of
sockets or asyncio.

Invariants:
* ``data`` never holds an empty container: a list, stream-less-than-a-stream
  or hash that becomes empty is deleted by the command that emptied it
  (streams are the exception, as in Redis: an empty stream is a key).
* ``expires`` keys are a subset of ``data`` keys; times are absolute unix ms.
* A key past its expiry time is never visible: every read goes through
  ``lookup`` which deletes it first (lazy expiry); ``active_expire`` removes
  the rest in bounded batches.
* Every change to a key is announced through ``Server.written`` (or
  ``Database.touch`` for changes that are not writes of data), which is what
  WATCH, blocked clients, keyspace notifications and the AOF hang on.
"""

from __future__ import annotations

import random
from collections import deque

from .errors import WrongType


class ListValue(deque):
    """A Redis list: O(1) pushes and pops at both ends."""
    __slots__ = ()
    type_name = b"list"


class HashValue(dict):
    __slots__ = ()
    type_name = b"hash"

    def copy(self):
        # dict.copy would return a plain dict; values are immutable bytes
        return HashValue(self)


class SetValue(set):
    __slots__ = ()
    type_name = b"set"

    def copy(self):
        # set.copy would return a plain set; members are immutable bytes
        return SetValue(self)


# type(value) -> TYPE reply.  Modules that add a type register it here.
TYPE_NAMES: dict[type, bytes] = {
    bytes: b"string",
    ListValue: b"list",
    HashValue: b"hash",
    SetValue: b"set",
}


def register_type(cls: type, name: bytes):
    TYPE_NAMES[cls] = name


def type_name(value) -> bytes:
    return TYPE_NAMES[type(value)]


class Database:
    __slots__ = ("index", "server", "data", "expires", "watched", "blocking",
                 "avg_ttl")

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

    # ------------------------------------------------------------------
    # Reads
    # ------------------------------------------------------------------
    def lookup(self, key):
        """The value at key, or None; expires the key if its time has come."""
        value = self.data.get(key)
        if value is not None and self.expires:
            when = self.expires.get(key)
            if when is not None and when <= self.server.cmd_time_ms:
                self.expire_now(key)
                return None
        return value

    def lookup_typed(self, key, cls):
        """The value at key if it is a ``cls``; None if missing; else WRONGTYPE."""
        value = self.lookup(key)
        if value is not None and type(value) is not cls:
            raise WrongType()
        return value

    def get_string(self, key):
        value = self.lookup(key)
        if value is not None and type(value) is not bytes:
            raise WrongType()
        return value

    def exists(self, key) -> bool:
        return self.lookup(key) is not None

    def ttl_ms(self, key):
        """Remaining ms, -1 for no expiry, -2 for no key."""
        if self.lookup(key) is None:
            return -2
        when = self.expires.get(key)
        if when is None:
            return -1
        return max(0, when - self.server.cmd_time_ms)

    def is_expired(self, key) -> bool:
        when = self.expires.get(key)
        return when is not None and when <= self.server.cmd_time_ms

    # ------------------------------------------------------------------
    # Writes.  Callers announce the change with Server.written afterwards.
    # ------------------------------------------------------------------
    def set(self, key, value, keep_ttl: bool = False):
        """Store value at key; an existing TTL is dropped unless keep_ttl."""
        self.data[key] = value
        if not keep_ttl and self.expires:
            self.expires.pop(key, None)

    def add(self, key, value):
        """Create a key that does not exist."""
        self.data[key] = value

    def delete(self, key) -> bool:
        """Remove key (already known to be live or not); True if it existed."""
        if self.data.pop(key, None) is None:
            return False
        if self.expires:
            self.expires.pop(key, None)
        return True

    def set_expire(self, key, when_ms: int):
        self.expires[key] = when_ms

    def persist(self, key) -> bool:
        return self.expires.pop(key, None) is not None

    def expire_now(self, key):
        """Delete an expired key as Redis does: propagated as DEL, 'expired' event."""
        self.data.pop(key, None)
        self.expires.pop(key, None)
        self.server.key_expired(self, key)

    def clear(self) -> int:
        n = len(self.data)
        self.data = {}
        self.expires = {}
        return n

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
            present = key in self.data or (other is not None and key in other.data)
            if not present:
                continue
            for client, flag in watchers.items():
                if flag[0] and (key not in self.data or self.is_expired(key)):
                    continue
                client.dirty_cas = True
        for key in list(self.blocking):
            self.server.signal_ready(self, key)

    # ------------------------------------------------------------------
    # Active expiry
    # ------------------------------------------------------------------
    def active_expire(self, budget: int) -> int:
        """Sample keys with a TTL and delete the expired; at most ``budget``
        samples.  Returns how many were deleted."""
        expires = self.expires
        if not expires:
            return 0
        now = self.server.cmd_time_ms
        deleted = 0
        n = len(expires)
        if n <= budget:
            candidates = [k for k, t in expires.items() if t <= now]
        else:
            # Random sampling, as Redis: a random window of the dict.
            keys = list(expires)
            start = random.randrange(n)
            window = keys[start:start + budget] + keys[:max(0, start + budget - n)]
            candidates = [k for k in window if expires.get(k, now + 1) <= now]
        for key in candidates:
            if key in expires and expires[key] <= now:
                self.expire_now(key)
                deleted += 1
        return deleted

    def random_key(self):
        """A random live key, or None."""
        for _ in range(100):
            if not self.data:
                return None
            key = random.choice(list(self.data)) if len(self.data) < 64 else _sample(self.data)
            if not self.is_expired(key):
                return key
            self.expire_now(key)
        return next(iter(self.data), None)


def _sample(d: dict):
    # Picking a random element of a big dict without copying its keys: walk
    # a random distance along an iterator (bounded).
    n = len(d)
    idx = random.randrange(min(n, 4096))
    for i, k in enumerate(d):
        if i == idx:
            return k
    return next(iter(d))


def check_list(value):
    if type(value) is not ListValue:
        raise WrongType()
    return value


__all__ = ["Database", "ListValue", "HashValue", "SetValue", "TYPE_NAMES",
           "register_type", "type_name", "deque"]
