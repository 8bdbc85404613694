"""The string type: a value is ``bytes``, or a ``bytearray`` once changed in
place.

Owns what the type table asks of the string (its OBJECT ENCODING, digest,
free effort and copy) and its persistence (the string algorithms -- APPEND, SETRANGE,
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

from ..protocol.util import string2ll
from .codec import DEFAULT_LIMITS, T_STRING, Reader, put_string

RDB_TYPES = (T_STRING,)

# Valkey 8.1 embeds the key (and the expiry, when set) in the string's
# allocation: a value is "embstr" while key + value (+ 8 with a TTL) fit.
_EMBSTR_BUDGET = 41


# ----------------------------------------------------------------------
# What the type table asks of a type (hotkv/types/table.py)
# ----------------------------------------------------------------------

OBJ_TYPE = 0            # OBJ_STRING


def object_encoding(value, key: bytes, expires: bool, settings) -> bytes:
    """int (a canonical integer of at most 20 characters), embstr (key and
    value fit Valkey's embedded allocation) or raw; a string changed in
    place (a bytearray) is raw whatever its contents."""
    if type(value) is bytearray:
        return b"raw"
    if len(value) <= 20 and string2ll(value) is not None:
        return b"int"
    budget = _EMBSTR_BUDGET - (8 if expires else 0)
    return b"embstr" if len(key) + len(value) <= budget else b"raw"


DIGEST = "ordered"


def digest_parts(value):
    """The bytes (an integer-encoded string digests as its decimal text,
    which is the bytes hotkv holds)."""
    return (bytes(value),)


def free_effort(value, settings) -> int:
    return 1


def copy(value):
    """bytes are immutable and shared; a bytearray is the new key's own."""
    return bytearray(value) if type(value) is bytearray else value


# ----------------------------------------------------------------------
# Persistence
# ----------------------------------------------------------------------


def rewrite(key: bytes, value: bytes):
    return ([b"SET", key, bytes(value) if type(value) is bytearray else value],)


def rdb_save(value: bytes, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    out = bytearray()
    put_string(bytes(value) if type(value) is bytearray else value, out)
    return T_STRING, bytes(out)


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    r = Reader(buf, pos)
    return bytes(r.string()), r.pos
