"""The static type table: every Redis data type hotkv stores, in one list.

Owns ``TYPES`` (one ``DataType`` row per type: its TYPE name, its value
class, and its module's ``rewrite`` / ``rdb_save`` / ``rdb_load``, with the
RDB type codes it loads) and the lookups derived from it: ``BY_CLASS``
(value class -> row: what the AOF rewrite and DUMP use), ``BY_RDB_TYPE``
(RDB type code -> row: what RESTORE uses) and ``TYPE_NAMES`` (value class
-> TYPE reply: TYPE, SCAN TYPE, SORT).  Nothing registers into these at
run time; adding a type is adding its module and a row here.

The per-type functions share one signature:
* ``rewrite(key, value)`` -> iterable of argv lists (no expiry);
* ``rdb_save(value, encoding, limits)`` -> ``(rdb type code, body bytes)``,
  ``encoding`` being what OBJECT ENCODING reports for the value;
* ``rdb_load(rdb_type, buf, pos, limits)`` -> ``(value, position after)``,
  raising ``codec.RDBError`` for anything malformed.

Invariants: a value class appears in exactly one row; an RDB type code in
at most one row; TYPE names are unique.
"""

from __future__ import annotations

from . import hashes, lists, sets, stream_persist, strings, zsets
from .hashes import HashValue
from .lists import ListValue
from .sets import SetValue
from .stream import Stream
from .zsets import ZSetValue


class DataType:
    __slots__ = ("name", "cls", "rewrite", "rdb_save", "rdb_load", "rdb_types")

    def __init__(self, name: bytes, cls: type, module):
        self.name = name
        self.cls = cls
        self.rewrite = module.rewrite
        self.rdb_save = module.rdb_save
        self.rdb_load = module.rdb_load
        self.rdb_types = module.RDB_TYPES


TYPES = (
    DataType(b"string", bytes, strings),
    DataType(b"list", ListValue, lists),
    DataType(b"hash", HashValue, hashes),
    DataType(b"set", SetValue, sets),
    DataType(b"zset", ZSetValue, zsets),
    DataType(b"stream", Stream, stream_persist),
)

BY_CLASS: dict = {t.cls: t for t in TYPES}
BY_RDB_TYPE: dict = {code: t for t in TYPES for code in t.rdb_types}
TYPE_NAMES: dict = {t.cls: t.name for t in TYPES}

assert len(BY_CLASS) == len(TYPES) and len(set(TYPE_NAMES.values())) == len(TYPES)
assert len(BY_RDB_TYPE) == sum(len(t.rdb_types) for t in TYPES)

# A string changed in place is a bytearray (hotkv/types/strings.py): the
# string row's second class.
BY_CLASS[bytearray] = BY_CLASS[bytes]
TYPE_NAMES[bytearray] = b"string"
