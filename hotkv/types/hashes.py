"""The hash type: ``HashValue``, a dict of ``bytes`` field -> ``bytes`` value
that also keeps the encoding Valkey would have given it.

Owns the value class (the hash commands are in hotkv/commands/hashes.py),
the encoding rules of Valkey's t_hash.c and its persistence:
* ``HashValue.big`` mirrors the encoding: False while Valkey would keep a
  listpack, True once it has become a hashtable (it never turns back: a
  HDEL leaves a hashtable a hashtable), None when not known yet (a hash
  loaded from an RDB payload: the RDB limits carry no hash settings, so the
  first command that asks derives it from the contents and the current
  limits, as Valkey's loader does, and keeps it: ``resolve``).  The
  commands move it through ``before_write`` (hashTypeTryConversion: too
  many pairs given, an argument past the value limit) and, after writing,
  past the entries limit (hashTypeSet); ``encoding`` is what OBJECT
  ENCODING reports (None: not known, the contents then decide);
* the order: a listpack's is insertion order, an update staying in place, a
  removal closing up, a re-added field going to the end -- exactly the
  dict's order, so the fields are kept in the dict alone; a hashtable's is
  Valkey's hash order (no test can match it), listed in the dict's;
* ``rewrite``: HSET batches of ``ITEMS_PER_CMD`` field/value pairs;
* ``rdb_save``: RDB type 16 (listpack) when OBJECT ENCODING says
  listpack, else type 4 (plain), fields in the dict's order;
* ``rdb_load``: types 4, 9 (zipmap), 13 (ziplist) and 16 (listpack).

Invariants: a hash in the keyspace is never empty; ``copy`` (and
``HashValue(a_hash_value)``) keeps the class and the encoding (fields and
values are immutable bytes, so it is a deep copy); ``big`` is False, True
or None and never goes from True back to False;
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
    __slots__ = ("big",)

    def __init__(self, items=(), big=False):
        """``HashValue(other_hash_value)`` copies the encoding too
        (hotkv.types.copying makes copies so)."""
        dict.__init__(self, items)
        self.big = items.big if type(items) is HashValue else big

    def copy(self):
        # dict.copy would return a plain dict; values are immutable bytes
        return HashValue(self)

    @property
    def encoding(self):
        big = self.big
        return None if big is None else b"hashtable" if big else b"listpack"


def resolve(h: HashValue, entries: int, vmax: int) -> bool:
    """``h.big`` for a hash whose encoding is not known yet (None): what
    Valkey's RDB loader gives for these contents and limits; kept."""
    big = len(h) > entries
    if not big:
        for f, v in h.items():
            if len(f) > vmax or len(v) > vmax:
                big = True
                break
    h.big = big
    return big


def before_write(h: HashValue, args, start: int, entries: int, vmax: int):
    """hashTypeTryConversion before HSET / HMSET / HSETNX writes the
    field/value pairs ``args[start:]`` to a listpack: more pairs than the
    entries limit (duplicates counted), or any of them longer than the value
    limit, make it a hashtable first."""
    if (len(args) - start) >> 1 > entries:
        h.big = True
        return
    for i in range(start, len(args)):
        if len(args[i]) > vmax:
            h.big = True
            return


def _flat(d):
    for k, v in d.items():
        yield k
        yield v


# ----------------------------------------------------------------------
# What the type table asks of a type (hotkv/types/table.py)
# ----------------------------------------------------------------------

OBJ_TYPE = 4            # OBJ_HASH


def object_encoding(value: HashValue, key: bytes, expires: bool, settings) -> bytes:
    """The encoding the hash keeps (``big``); when not known yet, what its
    contents and the hash-max-listpack-* limits give."""
    enc = value.encoding
    if enc is not None:
        return enc
    if len(value) > settings.get("hash-max-listpack-entries", 128):
        return b"hashtable"
    vmax = settings.get("hash-max-listpack-value", 64)
    for f, v in value.items():
        if len(f) > vmax or (type(v) is bytes and len(v) > vmax):
            return b"hashtable"
    return b"listpack"


DIGEST = "pairs"


def digest_parts(value: HashValue):
    """(field, value) pairs, in no particular order."""
    return value.items()


def free_effort(value: HashValue, settings) -> int:
    """Valkey 8.1's hashes ('hashtable' too) are one allocation to its lazy
    free rule."""
    return 1


def copy(value: HashValue) -> HashValue:
    return HashValue(value)


# ----------------------------------------------------------------------
# Persistence
# ----------------------------------------------------------------------

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
    h = HashValue(big=None)
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
