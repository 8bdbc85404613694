"""The string type: a value is ``bytes``, or a ``bytearray`` once changed in
place.

Owns the string's persistence (the string algorithms -- APPEND, SETRANGE,
integer parsing -- are in hotkv/commands/strings.py and hotkv/protocol/util.py, the
bit operations in hotkv/commands/bits.py, as they work on arguments as much
as on values):
* ``rewrite``: one SET;
* ``rdb_save``: RDB type 0, a canonical integer of at most 32 bits in RDB
  integer encoding, anything else a length-prefixed raw string (LZF only
  for an RDB file with rdbcompression);
* ``rdb_load``: type 0, any string encoding (integer, LZF, raw), as bytes.

Invariants:
* a stored string is exactly ``bytes`` or exactly ``bytearray`` (never a
  subclass, never a memoryview): ``type(v) is bytes or type(v) is
  bytearray`` is how a module recognises one (``types.table`` maps both
  classes to the string row);
* a ``bytearray`` is what APPEND (to an existing key), SETRANGE, SETBIT,
  BITFIELD and BITOP leave -- Valkey's "raw" encoding, which OBJECT ENCODING
  reports whatever the contents -- and later such commands change it in
  place.  It belongs to its key alone: COPY copies it, replies copy it,
  nothing else keeps a reference.  SET, the counters, RESTORE and loading
  store ``bytes`` (encoding by contents again, as in Valkey);
* writers treat both classes alike (the bytes are the same; a bytearray is
  copied to bytes before LZF, which takes only read-only buffers).
"""

from __future__ import annotations

from .codec import DEFAULT_LIMITS, T_STRING, Reader, put_string

RDB_TYPES = (T_STRING,)


def rewrite(key: bytes, value: bytes):
    return ([b"SET", key, bytes(value) if type(value) is bytearray else value],)


def rdb_save(value: bytes, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    out = bytearray()
    put_string(bytes(value) if type(value) is bytearray else value, out)
    return T_STRING, bytes(out)


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    r = Reader(buf, pos)
    return bytes(r.string()), r.pos
