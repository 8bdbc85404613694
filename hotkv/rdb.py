"""Valkey's RDB value serialisation: the payload of DUMP / RESTORE.

Owns the byte format of one value (no keys, no databases, no files, no
sockets): ``dump_payload`` turns a hotkv value into what Valkey 8.1's DUMP
would reply for it, ``load_payload`` turns what any Redis >= 2.6 / Valkey
DUMP replied into a hotkv value, and ``crc64`` is Redis's crc64.c checksum
(Jones polynomial, reflected, initial value 0).

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
* streams: ``hotkv.streams.rdb_save`` (type 21).
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

The listpack, length and LZF primitives are shared with hotkv.streams,
which owns the stream layout.
"""

from __future__ import annotations

import math
import struct

from .db import HashValue, ListValue, SetValue, TYPE_NAMES
from .streams import (RDBError, Stream, _lp_build, _lp_encode_int, _lp_encode_str,
                      _lp_parse, _rdb_len, _rdb_str, _Reader)
from .streams import rdb_load as _stream_load, rdb_save as _stream_save
from .resp import format_double
from .util import string2ll

RDB_VERSION = 11

T_STRING, T_LIST, T_SET, T_ZSET, T_HASH, T_ZSET_2 = 0, 1, 2, 3, 4, 5
T_MODULE_PRE_GA, T_MODULE_2 = 6, 7
T_HASH_ZIPMAP, T_LIST_ZIPLIST, T_SET_INTSET, T_ZSET_ZIPLIST, T_HASH_ZIPLIST = 9, 10, 11, 12, 13
T_LIST_QUICKLIST, T_STREAM_1, T_HASH_LISTPACK, T_ZSET_LISTPACK = 14, 15, 16, 17
T_LIST_QUICKLIST_2, T_STREAM_2, T_SET_LISTPACK, T_STREAM_3 = 18, 19, 20, 21

_QL_PLAIN, _QL_PACKED = 1, 2
_LLONG_MIN, _LLONG_MAX = -(1 << 63), (1 << 63) - 1

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


def crc64(data, crc: int = 0) -> int:
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


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
# Writing
# ----------------------------------------------------------------------

def _lp_entry(e: bytes) -> bytes:
    out = bytearray()
    _lp_encode_str(e, out)
    return bytes(out)


def _lp_from_entries(entries, count: int) -> bytes:
    body = b"".join(entries)
    total = 7 + len(body)
    return (total.to_bytes(4, "little") + min(count, 65535).to_bytes(2, "little")
            + body + b"\xff")


def _score_entry(score: float) -> bytes:
    """A listpack score as zzlInsertAt writes it: an integer when the double
    is integral within +-2**62, else d2string's text."""
    out = bytearray()
    if -4611686018427387904.0 <= score <= 4611686018427387904.0 and score == int(score):
        _lp_encode_int(int(score), out)
    else:
        _lp_encode_str(format_double(score), out)
    return bytes(out)


def _list_nodes(lst, fill: int):
    """Split a list into listpacks the way a quicklist grown at the tail
    would be (Redis's node limits: bytes for a negative fill, entries --
    within the 8 kB safety limit -- for a positive one)."""
    if fill < 0:
        max_bytes = 4096 << min(-fill - 1, 4)
        max_count = 1 << 62
    else:
        max_bytes = 8192
        max_count = max(fill, 1)
    nodes = []
    cur, size = [], 7
    for e in lst:
        ent = _lp_entry(e)
        if cur and (len(cur) + 1 > max_count or size + len(ent) > max_bytes):
            nodes.append(_lp_from_entries(cur, len(cur)))
            cur, size = [], 7
        cur.append(ent)
        size += len(ent)
    if cur:
        nodes.append(_lp_from_entries(cur, len(cur)))
    return nodes


def serialize(value, encoding: bytes = b"", list_fill: int = -2) -> bytes:
    """The type byte and RDB body of value; ``encoding`` is what OBJECT
    ENCODING reports for it (it picks the RDB type as Valkey does)."""
    out = bytearray()
    t = type(value)
    if t is bytes:
        out.append(T_STRING)
        _rdb_str(value, out)
    elif t is ListValue:
        out.append(T_LIST_QUICKLIST_2)
        if encoding == b"listpack":
            nodes = [_lp_from_entries([_lp_entry(e) for e in value], len(value))]
        else:
            nodes = _list_nodes(value, list_fill)
        _rdb_len(len(nodes), out)
        for lp in nodes:
            _rdb_len(_QL_PACKED, out)
            _rdb_len(len(lp), out)
            out += lp
    elif t is SetValue:
        if encoding == b"intset":
            ints = sorted(string2ll(m) for m in value)
            lo, hi = ints[0], ints[-1]
            width = 2 if -32768 <= lo and hi <= 32767 else \
                4 if -2147483648 <= lo and hi <= 2147483647 else 8
            blob = bytearray(width.to_bytes(4, "little") + len(ints).to_bytes(4, "little"))
            for v in ints:
                blob += v.to_bytes(width, "little", signed=True)
            out.append(T_SET_INTSET)
            _rdb_len(len(blob), out)
            out += blob
        elif encoding == b"listpack":
            lp = _lp_build(list(value))
            out.append(T_SET_LISTPACK)
            _rdb_len(len(lp), out)
            out += lp
        else:
            out.append(T_SET)
            _rdb_len(len(value), out)
            for m in value:
                _rdb_str(m, out)
    elif t is HashValue:
        if encoding == b"listpack":
            flat = []
            for f, v in value.items():
                flat.append(f)
                flat.append(v)
            lp = _lp_build(flat)
            out.append(T_HASH_LISTPACK)
            _rdb_len(len(lp), out)
            out += lp
        else:
            out.append(T_HASH)
            _rdb_len(len(value), out)
            for f, v in value.items():
                _rdb_str(f, out)
                _rdb_str(v, out)
    elif t is Stream:
        rdb_type, body = _stream_save(value)
        out.append(rdb_type)
        out += body
    elif TYPE_NAMES.get(t) == b"zset":
        if encoding == b"listpack":
            entries = []
            for score, member in value.sl:
                entries.append(_lp_entry(member))
                entries.append(_score_entry(score))
            lp = _lp_from_entries(entries, len(entries))
            out.append(T_ZSET_LISTPACK)
            _rdb_len(len(lp), out)
            out += lp
        else:
            out.append(T_ZSET_2)
            _rdb_len(len(value.sl), out)
            pack = struct.Struct("<d").pack
            for score, member in reversed(value.sl):
                _rdb_str(member, out)
                out += pack(score)
    else:
        raise RDBError("no RDB serialisation for %s" % t.__name__)
    return bytes(out)


def dump_payload(value, encoding: bytes = b"", list_fill: int = -2) -> bytes:
    """The DUMP reply for value."""
    return _footer(serialize(value, encoding, list_fill))


# ----------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------

def _el(e) -> bytes:
    return b"%d" % e if type(e) is int else bytes(e)


def _listpack(blob: bytes) -> list:
    """A listpack's elements as bytes, its header count checked."""
    els = _lp_parse(blob)
    count = int.from_bytes(blob[4:6], "little")
    if count != 65535 and count != len(els):
        raise RDBError("listpack count mismatch")
    return [_el(e) for e in els]


def _ziplist(zl: bytes) -> list:
    """A ziplist's elements as bytes (the pre-7.0 compact encoding)."""
    n = len(zl)
    if n < 11 or int.from_bytes(zl[:4], "little") != n or zl[-1] != 0xFF:
        raise RDBError("bad ziplist header")
    tail = int.from_bytes(zl[4:8], "little")
    count = int.from_bytes(zl[8:10], "little")
    out = []
    p, prev, last = 10, 0, 10
    end = n - 1
    try:
        while p < end:
            start = p
            b = zl[p]
            if b < 254:
                plen, p = b, p + 1
            elif b == 254:
                plen, p = int.from_bytes(zl[p + 1:p + 5], "little"), p + 5
            else:
                raise RDBError("bad ziplist prevlen")
            if plen != prev:
                raise RDBError("ziplist prevlen mismatch")
            enc = zl[p]
            kind = enc >> 6
            if kind == 0:
                ln, p = enc & 0x3F, p + 1
                v = zl[p:p + ln]
            elif kind == 1:
                ln, p = ((enc & 0x3F) << 8) | zl[p + 1], p + 2
                v = zl[p:p + ln]
            elif enc == 0x80:
                ln, p = int.from_bytes(zl[p + 1:p + 5], "big"), p + 5
                v = zl[p:p + ln]
            elif kind == 2:
                raise RDBError("bad ziplist string encoding")
            else:
                size = {0xC0: 2, 0xD0: 4, 0xE0: 8, 0xF0: 3, 0xFE: 1}.get(enc)
                p += 1
                if size is not None:
                    ln = size
                    v = b"%d" % int.from_bytes(zl[p:p + size], "little", signed=True)
                elif 0xF1 <= enc <= 0xFD:
                    ln = 0
                    v = b"%d" % ((enc & 0x0F) - 1)
                else:
                    raise RDBError("bad ziplist encoding")
            p += ln
            if p > end:
                raise RDBError("ziplist entry out of bounds")
            out.append(bytes(v))
            prev = p - start
            last = start
    except IndexError:
        raise RDBError("truncated ziplist") from None
    if p != end or (count != 65535 and count != len(out)) or tail != last:
        raise RDBError("ziplist length mismatch")
    return out


def _zipmap(zm: bytes) -> list:
    """A zipmap's (Redis < 2.6 small hash) fields and values, flat."""
    out = []
    p = 1

    def length(p):
        b = zm[p]
        if b < 254:
            return b, p + 1
        if b == 254:
            return int.from_bytes(zm[p + 1:p + 5], "little"), p + 5
        raise RDBError("bad zipmap length")

    try:
        while zm[p] != 0xFF:
            klen, p = length(p)
            out.append(zm[p:p + klen])
            p += klen
            vlen, p = length(p)
            free = zm[p]
            p += 1
            out.append(zm[p:p + vlen])
            p += vlen + free
            if p >= len(zm):
                raise RDBError("zipmap entry out of bounds")
    except IndexError:
        raise RDBError("truncated zipmap") from None
    if p != len(zm) - 1 or (zm[0] < 254 and zm[0] != len(out) // 2):
        raise RDBError("zipmap length mismatch")
    return out


def _intset(blob: bytes) -> list:
    if len(blob) < 8:
        raise RDBError("intset too short")
    width = int.from_bytes(blob[:4], "little")
    count = int.from_bytes(blob[4:8], "little")
    if width not in (2, 4, 8) or len(blob) != 8 + width * count or count == 0:
        raise RDBError("bad intset")
    vals = [int.from_bytes(blob[i:i + width], "little", signed=True)
            for i in range(8, len(blob), width)]
    for a, b in zip(vals, vals[1:]):
        if a >= b:
            raise RDBError("intset not strictly ascending")
    return [b"%d" % v for v in vals]


def _pairs(flat: list):
    if len(flat) % 2:
        raise RDBError("odd number of elements in a pairs encoding")
    return zip(flat[0::2], flat[1::2])


def _score_text(s: bytes) -> float:
    try:
        v = float(s)
    except ValueError:
        raise RDBError("bad score") from None
    if v != v:
        raise RDBError("NaN score")
    return v


def _new_zset(items, small_by_len_only: bool, entries: int, maxval: int):
    from .commands.zsets import ZSetValue
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
    from sortedcontainers import SortedList
    z.sl = SortedList((s, m) for m, s in d.items())
    return z


def _new_set(members):
    s = SetValue(members)
    if len(s) != len(members):
        raise RDBError("duplicate set member")
    if not s:
        raise RDBError("empty set")
    return s


def _new_hash(pairs):
    h = HashValue()
    for f, v in pairs:
        if f in h:
            raise RDBError("duplicate hash field")
        h[f] = v
    if not h:
        raise RDBError("empty hash")
    return h


def load_value(rdb_type: int, buf: bytes, pos: int = 0, zset_entries: int = 128,
               zset_value: int = 64):
    """Read one value of rdb_type from buf at pos: (value, position after)."""
    if rdb_type in (T_STREAM_1, T_STREAM_2, T_STREAM_3):
        return _stream_load(rdb_type, buf, pos)
    r = _Reader(buf, pos)
    if rdb_type == T_STRING:
        return bytes(r.string()), r.pos
    if rdb_type == T_LIST:
        n = r.num()
        lst = ListValue(bytes(r.string()) for _ in range(n))
        if not lst:
            raise RDBError("empty list")
        return lst, r.pos
    if rdb_type in (T_LIST_QUICKLIST, T_LIST_QUICKLIST_2):
        lst = ListValue()
        for _ in range(r.num()):
            container = _QL_PACKED
            if rdb_type == T_LIST_QUICKLIST_2:
                container = r.num()
                if container not in (_QL_PACKED, _QL_PLAIN):
                    raise RDBError("bad quicklist container")
            blob = bytes(r.string())
            if not blob:
                raise RDBError("empty quicklist node")
            if container == _QL_PLAIN:
                lst.append(blob)
            elif rdb_type == T_LIST_QUICKLIST_2:
                lst.extend(_listpack(blob))
            else:
                lst.extend(_ziplist(blob))
        if not lst:
            raise RDBError("empty list")
        return lst, r.pos
    if rdb_type == T_SET:
        n = r.num()
        return _new_set([bytes(r.string()) for _ in range(n)]), r.pos
    if rdb_type in (T_ZSET, T_ZSET_2):
        items = []
        for _ in range(r.num()):
            m = bytes(r.string())
            if rdb_type == T_ZSET_2:
                s = struct.unpack("<d", r.take(8))[0]
                if s != s:
                    raise RDBError("NaN score")
            else:
                ln = r.take(1)[0]
                if ln == 253:
                    raise RDBError("NaN score")
                s = math.inf if ln == 254 else -math.inf if ln == 255 else \
                    _score_text(r.take(ln))
            items.append((m, s))
        return _new_zset(items, False, zset_entries, zset_value), r.pos
    if rdb_type == T_HASH:
        n = r.num()
        pairs = [(bytes(r.string()), bytes(r.string())) for _ in range(n)]
        return _new_hash(pairs), r.pos
    if rdb_type in (T_HASH_ZIPMAP, T_LIST_ZIPLIST, T_SET_INTSET, T_ZSET_ZIPLIST,
                    T_HASH_ZIPLIST, T_HASH_LISTPACK, T_ZSET_LISTPACK, T_SET_LISTPACK):
        blob = bytes(r.string())
        if rdb_type == T_HASH_ZIPMAP:
            value = _new_hash(_pairs(_zipmap(blob)))
        elif rdb_type == T_LIST_ZIPLIST:
            value = ListValue(_ziplist(blob))
            if not value:
                raise RDBError("empty list")
        elif rdb_type == T_SET_INTSET:
            value = _new_set(_intset(blob))
        elif rdb_type == T_SET_LISTPACK:
            value = _new_set(_listpack(blob))
        elif rdb_type in (T_HASH_ZIPLIST, T_HASH_LISTPACK):
            flat = _ziplist(blob) if rdb_type == T_HASH_ZIPLIST else _listpack(blob)
            value = _new_hash(_pairs(flat))
        else:
            flat = _ziplist(blob) if rdb_type == T_ZSET_ZIPLIST else _listpack(blob)
            items = [(m, _score_text(s)) for m, s in _pairs(flat)]
            value = _new_zset(items, True, zset_entries, zset_value)
        return value, r.pos
    raise RDBError("unsupported RDB type %d" % rdb_type)


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
