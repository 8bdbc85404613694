"""The set type: ``SetValue``, a Python set of ``bytes`` members.

Owns the value class (the set commands are in hotkv/commands/sets.py) and
its persistence:
* ``rewrite``: SADD batches of ``ITEMS_PER_CMD`` members;
* ``rdb_save``: by OBJECT ENCODING, type 11 (intset: members sorted, the
  narrowest width holding them all), 20 (listpack) or 2 (plain);
* ``rdb_load``: types 2, 11 and 20.

Invariants: a set in the keyspace is never empty; ``copy`` keeps the class;
``rdb_load`` refuses an empty set or a repeated member.
"""

from __future__ import annotations

from ..util import string2ll
from .codec import (
    DEFAULT_LIMITS,
    ITEMS_PER_CMD,
    T_SET,
    T_SET_INTSET,
    T_SET_LISTPACK,
    RDBError,
    Reader,
    batches,
    intset_elements,
    listpack_elements,
    lp_build,
    put_len,
    put_string,
)

RDB_TYPES = (T_SET, T_SET_INTSET, T_SET_LISTPACK)


class SetValue(set):
    __slots__ = ()

    def copy(self):
        # set.copy would return a plain set; members are immutable bytes
        return SetValue(self)


def rewrite(key: bytes, value: SetValue):
    return batches(b"SADD", key, value, ITEMS_PER_CMD)


def rdb_save(value: SetValue, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    out = bytearray()
    if encoding == b"intset":
        ints = sorted(string2ll(m) for m in value)
        lo, hi = ints[0], ints[-1]
        width = 2 if -32768 <= lo and hi <= 32767 else \
            4 if -2147483648 <= lo and hi <= 2147483647 else 8
        blob = bytearray(width.to_bytes(4, "little") + len(ints).to_bytes(4, "little"))
        for v in ints:
            blob += v.to_bytes(width, "little", signed=True)
        put_len(len(blob), out)
        out += blob
        return T_SET_INTSET, bytes(out)
    if encoding == b"listpack":
        lp = lp_build(list(value))
        put_len(len(lp), out)
        out += lp
        return T_SET_LISTPACK, bytes(out)
    put_len(len(value), out)
    for m in value:
        put_string(m, out)
    return T_SET, bytes(out)


def _new_set(members):
    s = SetValue(members)
    if len(s) != len(members):
        raise RDBError("duplicate set member")
    if not s:
        raise RDBError("empty set")
    return s


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    r = Reader(buf, pos)
    if rdb_type == T_SET:
        n = r.num()
        return _new_set([bytes(r.string()) for _ in range(n)]), r.pos
    blob = bytes(r.string())
    if rdb_type == T_SET_INTSET:
        return _new_set(intset_elements(blob)), r.pos
    return _new_set(listpack_elements(blob)), r.pos
