"""The hash type: ``HashValue``, a dict of ``bytes`` field -> ``bytes`` value.

Owns the value class (the hash commands are in hotkv/commands/hashes.py)
and its persistence:
* ``rewrite``: HSET batches of ``ITEMS_PER_CMD`` field/value pairs;
* ``rdb_save``: RDB type 16 (listpack) when OBJECT ENCODING says
  listpack, else type 4 (plain), fields in the dict's order;
* ``rdb_load``: types 4, 9 (zipmap), 13 (ziplist) and 16 (listpack).

Invariants: a hash in the keyspace is never empty; ``copy`` keeps the
class (fields and values are immutable bytes, so it is a deep copy);
``rdb_load`` refuses an empty hash or a repeated field.
"""

from __future__ import annotations

from .codec import (
    DEFAULT_LIMITS,
    ITEMS_PER_CMD,
    T_HASH,
    T_HASH_LISTPACK,
    T_HASH_ZIPLIST,
    T_HASH_ZIPMAP,
    RDBError,
    Reader,
    batches,
    listpack_elements,
    lp_build,
    pairs,
    put_len,
    put_string,
    ziplist_elements,
    zipmap_elements,
)

RDB_TYPES = (T_HASH, T_HASH_ZIPMAP, T_HASH_ZIPLIST, T_HASH_LISTPACK)


class HashValue(dict):
    __slots__ = ()

    def copy(self):
        # dict.copy would return a plain dict; values are immutable bytes
        return HashValue(self)


def _flat(d):
    for k, v in d.items():
        yield k
        yield v


def rewrite(key: bytes, value: HashValue):
    return batches(b"HSET", key, _flat(value), 2 * ITEMS_PER_CMD)


def rdb_save(value: HashValue, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    out = bytearray()
    if encoding == b"listpack":
        flat = []
        for f, v in value.items():
            flat.append(f)
            flat.append(v)
        lp = lp_build(flat)
        put_len(len(lp), out)
        out += lp
        return T_HASH_LISTPACK, bytes(out)
    put_len(len(value), out)
    for f, v in value.items():
        put_string(f, out)
        put_string(v, out)
    return T_HASH, bytes(out)


def _new_hash(items):
    h = HashValue()
    for f, v in items:
        if f in h:
            raise RDBError("duplicate hash field")
        h[f] = v
    if not h:
        raise RDBError("empty hash")
    return h


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    r = Reader(buf, pos)
    if rdb_type == T_HASH:
        n = r.num()
        return _new_hash([(bytes(r.string()), bytes(r.string())) for _ in range(n)]), r.pos
    blob = bytes(r.string())
    if rdb_type == T_HASH_ZIPMAP:
        flat = zipmap_elements(blob)
    elif rdb_type == T_HASH_ZIPLIST:
        flat = ziplist_elements(blob)
    else:
        flat = listpack_elements(blob)
    return _new_hash(pairs(flat)), r.pos
