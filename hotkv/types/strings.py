"""The string type: a value is an immutable ``bytes`` object.

Owns the string's persistence (the string algorithms -- APPEND, SETRANGE,
bit operations, integer parsing -- are in hotkv/commands/strings.py and
hotkv/util.py, as they work on arguments as much as on values):
* ``rewrite``: one SET;
* ``rdb_save``: RDB type 0, a canonical integer of at most 32 bits in RDB
  integer encoding, anything else a length-prefixed raw string (never LZF);
* ``rdb_load``: type 0, any string encoding (integer, LZF, raw).

Invariant: a stored string is exactly ``bytes`` (never bytearray or
memoryview): ``type(value) is bytes`` is how every module recognises it.
"""

from __future__ import annotations

from .codec import DEFAULT_LIMITS, T_STRING, Reader, put_string

RDB_TYPES = (T_STRING,)


def rewrite(key: bytes, value: bytes):
    return ([b"SET", key, value],)


def rdb_save(value: bytes, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    out = bytearray()
    put_string(value, out)
    return T_STRING, bytes(out)


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    r = Reader(buf, pos)
    return bytes(r.string()), r.pos
