"""The static type table: every Redis data type hotkv stores, in one list.

Owns ``TYPES`` (one ``DataType`` row per type: its TYPE name, its value
class, and what its module gives every type-generic part of hotkv) and the
lookups derived from it: ``BY_CLASS`` (value class -> row: what the AOF
rewrite, DUMP, OBJECT ENCODING, DEBUG DIGEST, lazy freeing and COPY use),
``BY_RDB_TYPE`` (RDB type code -> row: what RESTORE uses) and
``TYPE_NAMES`` (value class -> TYPE reply: TYPE, SCAN TYPE, SORT).  Nothing
registers into these at run time; adding a type is adding its module and a
row here -- nothing else switches on value classes.

What a type's module gives (the stream's persistence is a second module,
``stream_persist``, hence ``persist``):
* ``OBJ_TYPE`` -- Redis's object type code (OBJ_STRING 0 ... OBJ_STREAM 6),
  which DEBUG DIGEST mixes in (hotkv.core.digest);
* ``object_encoding(value, key, expires, settings)`` -> what OBJECT
  ENCODING reports (``expires``: whether the key has a TTL; ``settings``:
  the server's config values; hotkv.types.encodings);
* ``DIGEST`` and ``digest_parts(value)`` -- how DEBUG DIGEST reads the
  contents: ``"ordered"`` (each part mixed in order), ``"members"`` (each
  part xored in) or ``"pairs"`` (each (a, b) pair digested alone, then
  xored in);
* ``free_effort(value, settings)`` -> Valkey's lazyfreeGetFreeEffort
  (hotkv.core.lazyfree);
* ``copy(value)`` -> a deep copy sharing no mutable state (COPY and the
  test snapshots: hotkv.types.copying);
* ``rewrite(key, value)`` -> iterable of argv lists (no expiry);
* ``rdb_save(value, encoding, limits)`` -> ``(rdb type code, body bytes)``,
  ``encoding`` being what OBJECT ENCODING reports for the value;
* ``rdb_load(rdb_type, buf, pos, limits)`` -> ``(value, position after)``,
  raising ``codec.RDBError`` for anything malformed; ``RDB_TYPES``, the
  codes it loads.

Invariants: a value class appears in exactly one row; an RDB type code in
at most one row; TYPE names and object type codes are unique.
"""

from __future__ import annotations

from . import hashes, lists, sets, stream, stream_persist, strings, zsets
from .hashes import HashValue
from .lists import ListValue
from .sets import SetValue
from .stream import Stream
from .zsets import ZSetValue

DIGEST_KINDS = ("ordered", "members", "pairs")


class DataType:
    __slots__ = ("name", "cls", "obj_type", "encoding", "digest", "digest_parts",
                 "free_effort", "copy", "rewrite", "rdb_save", "rdb_load", "rdb_types")

    def __init__(self, name: bytes, cls: type, module, persist=None):
        self.name = name
        self.cls = cls
        self.obj_type = module.OBJ_TYPE
        self.encoding = module.object_encoding
        self.digest = module.DIGEST
        self.digest_parts = module.digest_parts
        self.free_effort = module.free_effort
        self.copy = module.copy
        persist = module if persist is None else persist
        self.rewrite = persist.rewrite
        self.rdb_save = persist.rdb_save
        self.rdb_load = persist.rdb_load
        self.rdb_types = persist.RDB_TYPES


TYPES = (
    DataType(b"string", bytes, strings),
    DataType(b"list", ListValue, lists),
    DataType(b"hash", HashValue, hashes),
    DataType(b"set", SetValue, sets),
    DataType(b"zset", ZSetValue, zsets),
    DataType(b"stream", Stream, stream, persist=stream_persist),
)

BY_CLASS: dict = {t.cls: t for t in TYPES}
BY_RDB_TYPE: dict = {code: t for t in TYPES for code in t.rdb_types}
TYPE_NAMES: dict = {t.cls: t.name for t in TYPES}

assert len(BY_CLASS) == len(TYPES) and len(set(TYPE_NAMES.values())) == len(TYPES)
assert len(BY_RDB_TYPE) == sum(len(t.rdb_types) for t in TYPES)
assert len({t.obj_type for t in TYPES}) == len(TYPES)
assert all(t.digest in DIGEST_KINDS for t in TYPES)

# A string changed in place is a bytearray (hotkv/types/strings.py): the
# string row's second class.
BY_CLASS[bytearray] = BY_CLASS[bytes]
TYPE_NAMES[bytearray] = b"string"
