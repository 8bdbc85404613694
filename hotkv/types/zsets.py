"""The sorted-set type: ``ZSetValue``, members ordered by score.

Owns the value class -- a dict member -> score for O(1) ZSCORE, plus a
``SortedList`` of ``(score, member)`` tuples in Redis's order (score, then
member bytewise), so rank, range and pop are O(log n + k) -- and its
persistence (the Z* commands are in hotkv/commands/zsets.py):
* ``rewrite``: ZADD batches of ``ITEMS_PER_CMD`` score/member pairs, in
  the dict's (insertion) order, scores as Python's shortest repr;
* ``rdb_save``: by OBJECT ENCODING, type 17 (listpack, ascending, scores as
  integers when integral) or 5 (binary doubles, greatest first);
* ``rdb_load``: types 3, 5, 12 (ziplist) and 17; a loaded set is ``big``
  (skiplist) when it exceeds the zset-max-listpack limits.

Invariants:
* ``d`` and ``sl`` hold exactly the same pairs; no score is NaN;
* a sorted set in the keyspace is never empty; ``rdb_load`` refuses an
  empty one or a repeated member;
* ``big`` never turns back to False once True (Redis never converts a
  skiplist back to a listpack).
"""

from __future__ import annotations

import math
import struct

from sortedcontainers import SortedList

from ..protocol.fpconv import dtoa as fpconv_dtoa
from ..protocol.resp import format_double
from .codec import (
    DEFAULT_LIMITS,
    ITEMS_PER_CMD,
    T_ZSET,
    T_ZSET_2,
    T_ZSET_LISTPACK,
    T_ZSET_ZIPLIST,
    RDBError,
    Reader,
    batches,
    listpack_elements,
    lp_encode_int,
    lp_encode_str,
    lp_entry,
    lp_from_entries,
    pairs,
    put_len,
    put_string,
    ziplist_elements,
)

RDB_TYPES = (T_ZSET, T_ZSET_2, T_ZSET_ZIPLIST, T_ZSET_LISTPACK)

_DOUBLE = struct.Struct("<d")


class ZSetValue:
    """A Redis sorted set.

    ``big`` mirrors Redis's encoding, which shows in replies: it turns True
    (skiplist) when the set outgrows zset-max-listpack-entries/-value and,
    as in Redis, never turns back.  A small (listpack) set stores scores as
    text, so a -0 score reads back as 0 there and as -0 in a big one; an
    out-of-range negative LIMIT offset also behaves per encoding."""
    __slots__ = ("d", "sl", "big")

    def __init__(self):
        self.d = {}
        self.sl = SortedList()
        self.big = False

    def encoding(self):
        return b"skiplist" if self.big else b"listpack"

    def __len__(self):
        return len(self.d)

    def __bool__(self):
        return bool(self.d)

    def __contains__(self, member):
        return member in self.d

    def __iter__(self):
        return iter(self.d)

    def copy(self):
        new = ZSetValue()
        new.d = dict(self.d)
        new.sl = SortedList(self.sl)
        new.big = self.big
        return new

    def score(self, member):
        return self.d.get(member)

    def set(self, member, score):
        """Insert or update; returns the old score or None."""
        d = self.d
        old = d.get(member)
        if old is not None:
            if old == score:
                return old
            self.sl.remove((old, member))
        d[member] = score
        self.sl.add((score, member))
        return old

    def remove(self, member) -> bool:
        old = self.d.pop(member, None)
        if old is None:
            return False
        self.sl.remove((old, member))
        return True

    def rank(self, member):
        s = self.d.get(member)
        if s is None:
            return None
        return self.sl.bisect_left((s, member))

    def del_range(self, start: int, stop: int) -> int:
        """Remove positions [start, stop)."""
        if stop <= start:
            return 0
        sl = self.sl
        d = self.d
        items = list(sl.islice(start, stop))
        if len(items) == len(sl):
            sl.clear()
            d.clear()
        else:
            del sl[start:stop]
            for _, m in items:
                del d[m]
        return len(items)


# ----------------------------------------------------------------------
# Persistence
# ----------------------------------------------------------------------

def _score(s: float) -> bytes:
    if s != s:
        raise ValueError("NaN score")
    if s == float("inf"):
        return b"+inf"
    if s == float("-inf"):
        return b"-inf"
    return repr(float(s)).encode()


# ----------------------------------------------------------------------
# What the type table asks of a type (hotkv/types/table.py)
# ----------------------------------------------------------------------

OBJ_TYPE = 3            # OBJ_ZSET


def object_encoding(value: ZSetValue, key: bytes, expires: bool, settings) -> bytes:
    """listpack until the set first outgrows the limits, skiplist after."""
    return value.encoding()


DIGEST = "pairs"


def digest_parts(value: ZSetValue):
    """(member, score as fpconv_dtoa writes it) pairs; a listpack keeps no
    sign on zero, so a small set's zero score digests as "0" (a skiplist's
    -0 as "-0")."""
    small = not value.big
    for member, score in value.d.items():
        yield member, b"0" if small and score == 0 else fpconv_dtoa(score)


def free_effort(value: ZSetValue, settings) -> int:
    """A skiplist frees each member; a listpack is one allocation."""
    return len(value) if value.big else 1


def copy(value: ZSetValue) -> ZSetValue:
    return value.copy()


# ----------------------------------------------------------------------
# Persistence
# ----------------------------------------------------------------------

def rewrite(key: bytes, z: ZSetValue):
    def flat():
        for member, score in z.d.items():
            yield _score(score)
            yield member
    return batches(b"ZADD", key, flat(), 2 * ITEMS_PER_CMD)


def _score_entry(score: float) -> bytes:
    """A listpack score as zzlInsertAt writes it: an integer when the double
    is integral within +-2**62, else d2string's text."""
    out = bytearray()
    if -4611686018427387904.0 <= score <= 4611686018427387904.0 and score == int(score):
        lp_encode_int(int(score), out)
    else:
        lp_encode_str(format_double(score), out)
    return bytes(out)


def rdb_save(value: ZSetValue, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    out = bytearray()
    if encoding == b"listpack":
        entries = []
        for score, member in value.sl:
            entries.append(lp_entry(member))
            entries.append(_score_entry(score))
        lp = lp_from_entries(entries, len(entries))
        put_len(len(lp), out)
        out += lp
        return T_ZSET_LISTPACK, bytes(out)
    put_len(len(value.sl), out)
    pack = _DOUBLE.pack
    for score, member in reversed(value.sl):
        put_string(member, out)
        out += pack(score)
    return T_ZSET_2, bytes(out)


def _score_text(s: bytes) -> float:
    try:
        v = float(s)
    except ValueError:
        raise RDBError("bad score") from None
    if v != v:
        raise RDBError("NaN score")
    return v


def _new_zset(items, small_by_len_only: bool, entries: int, maxval: int):
    z = ZSetValue()
    d = z.d
    if small_by_len_only:
        big = len(items) > entries
    else:
        big = len(items) > entries or any(len(m) > maxval for m, _ in items)
    for m, s in items:
        if m in d:
            raise RDBError("duplicate zset member")
        d[m] = 0.0 if (s == 0 and not big) else s
    if not d:
        raise RDBError("empty zset")
    z.big = big
    z.sl = SortedList((s, m) for m, s in d.items())
    return z


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    r = Reader(buf, pos)
    entries, maxval = limits.zset_entries, limits.zset_value
    if rdb_type in (T_ZSET, T_ZSET_2):
        items = []
        for _ in range(r.num()):
            m = bytes(r.string())
            if rdb_type == T_ZSET_2:
                s = _DOUBLE.unpack(r.take(8))[0]
                if s != s:
                    raise RDBError("NaN score")
            else:
                ln = r.take(1)[0]
                if ln == 253:
                    raise RDBError("NaN score")
                s = math.inf if ln == 254 else -math.inf if ln == 255 else \
                    _score_text(r.take(ln))
            items.append((m, s))
        return _new_zset(items, False, entries, maxval), r.pos
    blob = bytes(r.string())
    flat = ziplist_elements(blob) if rdb_type == T_ZSET_ZIPLIST else listpack_elements(blob)
    items = [(m, _score_text(s)) for m, s in pairs(flat)]
    return _new_zset(items, True, entries, maxval), r.pos
