"""Valkey's RDB value serialisation: the payload of DUMP / RESTORE.

Owns the framing of one value (no keys, no databases, no files, no
sockets): ``dump_payload`` turns a hotkv value into what Valkey 8.1's DUMP
would reply for it, ``load_payload`` turns what any Redis >= 2.6 / Valkey
DUMP replied into a hotkv value, and ``crc64`` is Redis's crc64.c checksum
(Jones polynomial, reflected, initial value 0), computed by anycrc's C
code (``CRC64-REDIS``; ~GB/s) with a pure-Python fallback (~7 MB/s) where
anycrc is missing.  Each type's body is its
own module's (hotkv/types/<type>.py: ``rdb_save`` / ``rdb_load``), reached
through the static table hotkv/types/table.py; the shared byte formats are
hotkv/types/codec.py.

Payload: ``<type byte> <value> <RDB version: 2 bytes LE> <CRC64: 8 bytes LE>``,
the CRC taken over everything before it.  A payload is accepted when its
version is <= ``RDB_VERSION`` and the CRC matches (``verify``).

What we write (Valkey's choice for the encoding ``OBJECT ENCODING`` reports):
* strings: type 0, a 32-bit-or-smaller canonical integer in RDB integer
  encoding, anything else as a length-prefixed raw string;
* lists: type 18 (quicklist 2), listpack nodes split by
  ``list-max-listpack-size`` as a list grown by RPUSH would be;
* sets: intset (11), listpack (20) or plain (2); hashes: listpack (16) or
  plain (4); sorted sets: listpack (17, scores as integers when integral)
  or type 5 (binary doubles, greatest first);
* streams: type 21 (hotkv/types/stream_persist.py).
We never LZF-compress (Valkey's compressor seeds its hash table from
uninitialised memory, so its bytes are not reproducible anyway): our
payloads are longer than Valkey's for compressible values > 20 bytes, and
every loader reads them.

What we read: every value type 0-5 and 9-21 -- plain encodings, zipmap
(9), ziplists (10, 12, 13, and quicklist 14's nodes), intset (11),
listpacks (16, 17, 18's nodes, 20) and streams (15, 19, 21), with
LZF-compressed and integer-encoded strings anywhere a string may be.
Module values (6, 7) are refused.  Every blob is validated in full (as
Valkey's ``sanitize-dump-payload yes``): a malformed, truncated, empty or
duplicate-holding value raises ``RDBError`` -- never a half-built value.
"""

from __future__ import annotations

import struct

from ..types.codec import RDBError, RDBLimits
from ..types.table import BY_CLASS, BY_RDB_TYPE

RDB_VERSION = 11

# ----------------------------------------------------------------------
# CRC64 (Jones, reflected): the table of the bit-reversed polynomial.
# ----------------------------------------------------------------------


def _crc_table():
    poly = 0x95AC9329AC4BC9B5          # 0xad93d23594c935a9 reflected
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc_table()


def crc64_py(data, crc: int = 0) -> int:
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


try:
    import anycrc as _anycrc
    _CRC_MODEL = _anycrc.Model("CRC64-REDIS")
except Exception:  # pragma: no cover - anycrc is a dependency
    _CRC_MODEL = None


def crc64(data, crc: int = 0) -> int:
    """Redis's CRC-64 of data, continuing from crc."""
    if _CRC_MODEL is None:
        return crc64_py(data, crc)
    return _CRC_MODEL.calc(data, crc) if crc else _CRC_MODEL.calc(data)


def _footer(body: bytes) -> bytes:
    body = body + RDB_VERSION.to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


def verify(payload: bytes) -> bool:
    """Version and checksum check (Valkey's verifyDumpPayload)."""
    if len(payload) < 10:
        return False
    if int.from_bytes(payload[-10:-8], "little") > RDB_VERSION:
        return False
    return crc64(payload[:-8]) == int.from_bytes(payload[-8:], "little")


# ----------------------------------------------------------------------
# Writing and reading, through the type table
# ----------------------------------------------------------------------

def serialize(value, encoding: bytes = b"", list_fill: int = -2) -> bytes:
    """The type byte and RDB body of value; ``encoding`` is what OBJECT
    ENCODING reports for it (it picks the RDB type as Valkey does)."""
    t = BY_CLASS.get(type(value))
    if t is None:
        raise RDBError("no RDB serialisation for %s" % type(value).__name__)
    rdb_type, body = t.rdb_save(value, encoding, RDBLimits(list_fill=list_fill))
    return bytes((rdb_type,)) + body


def dump_payload(value, encoding: bytes = b"", list_fill: int = -2) -> bytes:
    """The DUMP reply for value."""
    return _footer(serialize(value, encoding, list_fill))


def load_value(rdb_type: int, buf: bytes, pos: int = 0, zset_entries: int = 128,
               zset_value: int = 64):
    """Read one value of rdb_type from buf at pos: (value, position after)."""
    t = BY_RDB_TYPE.get(rdb_type)
    if t is None:
        raise RDBError("unsupported RDB type %d" % rdb_type)
    return t.rdb_load(rdb_type, buf, pos,
                      RDBLimits(zset_entries=zset_entries, zset_value=zset_value))


def load_payload(payload: bytes, zset_entries: int = 128, zset_value: int = 64):
    """The value in a DUMP payload (its footer already verified).  As in
    Valkey, the value is read from the whole payload: a value that runs into
    the footer is not refused for that."""
    if len(payload) <= 10:
        raise RDBError("empty payload")
    try:
        value, _ = load_value(payload[0], payload, 1, zset_entries, zset_value)
    except (IndexError, ValueError, OverflowError, struct.error) as e:
        if isinstance(e, RDBError):
            raise
        raise RDBError(str(e)) from None
    return value


__all__ = ["RDB_VERSION", "RDBError", "crc64", "verify", "serialize", "dump_payload",
           "load_value", "load_payload"]
