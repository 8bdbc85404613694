"""The byte formats every type's persistence shares (no values, no keys).

Owns the building blocks of Valkey's RDB encoding that more than one type
uses -- RDB lengths and strings (``put_len``, ``put_string``, ``Reader``
with LZF-compressed and integer-encoded strings), listpacks (writing,
parsing, and the element sizes streams split their nodes by), the legacy
ziplist, zipmap and intset readers -- the RDB type codes, and the AOF
rewrite's batching (``batches``, ``ITEMS_PER_CMD``).  Each type's own
layout lives with the type (hotkv/types/<type>.py); hotkv/persistence/rdb.py frames a
payload (version, CRC64) and dispatches through hotkv/types/table.py.

Invariants:
* readers validate everything they read and raise ``RDBError`` (never a
  half-built value, never an IndexError to the caller of a ``*_elements``);
* writers produce exactly the bytes Valkey 8.1 writes for the same element
  (integers in listpack integer encoding when the string is a canonical
  int64); strings > 20 bytes LZF-compressed as Valkey's rdbSaveRawString
  does only while ``lzf_compression`` is on (an RDB file save with
  ``rdbcompression yes``) -- DUMP payloads stay uncompressed.

LZF: python-lzf (liblzf, the library Valkey bundles) when it is installed
(the optional ``hotkv[fast]``: it ships only as source and needs a C
compiler); else ``_lzf_compress_py`` and ``_lzf_decompress_py``, liblzf's
algorithm in Python (HLOG 16, VERY_FAST, its unrolled match loop: the same
bytes as liblzf and as valkey-server; ~1 MB/s, ~30,000 60-byte values a
second, against liblzf's ~250-400 MB/s, so a large ``rdbcompression yes``
save is slow without the extra).  tests/test_install.py drives both
implementations over the same random data and compares with Valkey's DUMP.
The switch is per thread: a file save runs in a forked child or on its
server's loop thread, so no DUMP of that server runs while it is on, and
another server's thread in the same process (two embedded servers, one
saving with ``rdbcompression yes`` while the other answers DUMP) never
sees it.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from contextlib import contextmanager

from ..protocol.util import string2ll

try:
    import lzf as _lzf
except ImportError:  # python-lzf is the optional hotkv[fast]
    _lzf = None

MASK64 = (1 << 64) - 1

# RDB value type codes (Valkey's rdb.h).
T_STRING, T_LIST, T_SET, T_ZSET, T_HASH, T_ZSET_2 = 0, 1, 2, 3, 4, 5
T_MODULE_PRE_GA, T_MODULE_2 = 6, 7
T_HASH_ZIPMAP, T_LIST_ZIPLIST, T_SET_INTSET, T_ZSET_ZIPLIST, T_HASH_ZIPLIST = 9, 10, 11, 12, 13
T_LIST_QUICKLIST, T_STREAM_1, T_HASH_LISTPACK, T_ZSET_LISTPACK = 14, 15, 16, 17
T_LIST_QUICKLIST_2, T_STREAM_2, T_SET_LISTPACK, T_STREAM_3 = 18, 19, 20, 21

ITEMS_PER_CMD = 64            # Redis's AOF_REWRITE_ITEMS_PER_CMD


class RDBError(ValueError):
    """A malformed or unsupported RDB payload."""


class RDBLimits:
    """The settings a value's RDB form depends on: ``list_fill``
    (list-max-listpack-size, how a list is split into nodes when saved) and
    the zset listpack limits (whether a loaded zset starts small)."""
    __slots__ = ("list_fill", "zset_entries", "zset_value")

    def __init__(self, list_fill: int = -2, zset_entries: int = 128, zset_value: int = 64):
        self.list_fill = list_fill
        self.zset_entries = zset_entries
        self.zset_value = zset_value


DEFAULT_LIMITS = RDBLimits()


# ----------------------------------------------------------------------
# AOF rewrite
# ----------------------------------------------------------------------

def batches(cmd: bytes, key: bytes, items, per: int):
    """argv lists ``[cmd, key, *chunk]`` carrying items, per at a time."""
    it = iter(items)
    while True:
        chunk = []
        for x in it:
            chunk.append(x)
            if len(chunk) == per:
                break
        if not chunk:
            return
        yield [cmd, key, *chunk]


# ----------------------------------------------------------------------
# Listpack element sizes (streams split their nodes by them)
# ----------------------------------------------------------------------

def lp_int_size(v: int) -> int:
    """Bytes of an integer listpack element, encoding + back-length."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -8388608 <= v <= 8388607:
        return 5
    if -2147483648 <= v <= 2147483647:
        return 6
    return 10


def lp_backlen_size(n: int) -> int:
    if n <= 127:
        return 1
    if n < 16383:
        return 2
    if n < 2097151:
        return 3
    if n < 268435455:
        return 4
    return 5


INTISH = frozenset(b"-0123456789")


def lp_str_size(s: bytes) -> int:
    """Bytes of a string listpack element (strings that are canonical
    int64s are stored as integers, as listpack does)."""
    n = len(s)
    if n <= 20 and n and s[0] in INTISH:
        if n < 19 and s.isdigit():
            # a canonical non-negative int: string2ll's answer, without its regex
            if s[0] != 48 or n == 1:
                return lp_int_size(int(s))
        else:
            v = string2ll(s)
            if v is not None:
                return lp_int_size(v)
    if n < 64:
        return n + 2                      # 1-byte header, 1-byte back-length
    if n < 4096:
        return n + 2 + lp_backlen_size(n + 2)
    return n + 5 + lp_backlen_size(n + 5)

# ----------------------------------------------------------------------
# Listpacks
# ----------------------------------------------------------------------

def lp_encode_int(v: int, out: bytearray):
    if 0 <= v <= 127:
        enc = bytes((v,))
    elif -4096 <= v <= 4095:
        u = v & 0x1FFF
        enc = bytes((0xC0 | (u >> 8), u & 0xFF))
    elif -32768 <= v <= 32767:
        enc = b"\xf1" + (v & 0xFFFF).to_bytes(2, "little")
    elif -8388608 <= v <= 8388607:
        enc = b"\xf2" + (v & 0xFFFFFF).to_bytes(3, "little")
    elif -2147483648 <= v <= 2147483647:
        enc = b"\xf3" + (v & 0xFFFFFFFF).to_bytes(4, "little")
    else:
        enc = b"\xf4" + (v & MASK64).to_bytes(8, "little")
    out += enc
    _lp_backlen(len(enc), out)


def _lp_backlen(n: int, out: bytearray):
    if n <= 127:
        out.append(n)
    elif n < 16383:
        out += bytes((n >> 7, (n & 127) | 128))
    elif n < 2097151:
        out += bytes((n >> 14, ((n >> 7) & 127) | 128, (n & 127) | 128))
    elif n < 268435455:
        out += bytes((n >> 21, ((n >> 14) & 127) | 128, ((n >> 7) & 127) | 128, (n & 127) | 128))
    else:
        out += bytes((n >> 28, ((n >> 21) & 127) | 128, ((n >> 14) & 127) | 128,
                      ((n >> 7) & 127) | 128, (n & 127) | 128))


def lp_encode_str(s: bytes, out: bytearray):
    if 0 < len(s) <= 20 and s[0] in INTISH:
        v = string2ll(s)
        if v is not None:
            return lp_encode_int(v, out)
    n = len(s)
    if n < 64:
        head = bytes((0x80 | n,))
    elif n < 4096:
        head = bytes((0xE0 | (n >> 8), n & 0xFF))
    else:
        head = b"\xf0" + n.to_bytes(4, "little")
    out += head
    out += s
    _lp_backlen(len(head) + n, out)


def _small_int_entries() -> list:
    out = []
    for v in range(-4096, 4096):
        b = bytearray()
        lp_encode_int(v, b)
        out.append(bytes(b))
    return out


# The encoded element (with back-length) of every 13-bit int, by v + 4096:
# a stream node's flags, ID deltas and counts are nearly all small.
_LP_SMALL_INTS = _small_int_entries()


def lp_elements(elements) -> bytes:
    """The encoded elements, without the listpack's header and end byte."""
    return lp_build(elements)[6:-1]


def lp_build(elements) -> bytes:
    body = bytearray()
    small = _LP_SMALL_INTS
    for e in elements:
        if type(e) is int:
            if -4096 <= e < 4096:
                body += small[e + 4096]
            else:
                lp_encode_int(e, body)
        else:
            body += lp_entry(e)
    total = 6 + len(body) + 1
    count = len(elements) if len(elements) < 65535 else 65535
    return total.to_bytes(4, "little") + count.to_bytes(2, "little") + bytes(body) + b"\xff"


def lp_parse(lp: bytes) -> list:
    """A listpack's elements: ints stay ints, strings are bytes."""
    if len(lp) < 7 or int.from_bytes(lp[:4], "little") != len(lp) or lp[-1] != 0xFF:
        raise RDBError("bad listpack header")
    out = []
    p = 6
    end = len(lp) - 1
    while p < end:
        b = lp[p]
        if b < 0x80:
            v, n = b, 1
        elif b < 0xC0:
            ln = b & 0x3F
            v, n = lp[p + 1:p + 1 + ln], 1 + ln
        elif b < 0xE0:
            u = ((b & 0x1F) << 8) | lp[p + 1]
            v, n = (u - 0x2000 if u >= 0x1000 else u), 2
        elif b < 0xF0:
            ln = ((b & 0x0F) << 8) | lp[p + 1]
            v, n = lp[p + 2:p + 2 + ln], 2 + ln
        elif b == 0xF0:
            ln = int.from_bytes(lp[p + 1:p + 5], "little")
            v, n = lp[p + 5:p + 5 + ln], 5 + ln
        elif 0xF1 <= b <= 0xF4:
            size = {0xF1: 2, 0xF2: 3, 0xF3: 4, 0xF4: 8}[b]
            v = int.from_bytes(lp[p + 1:p + 1 + size], "little", signed=True)
            n = 1 + size
        else:
            raise RDBError("bad listpack encoding")
        if p + n > end:
            raise RDBError("listpack element out of bounds")
        out.append(v)
        p += n + lp_backlen_size(n)
    if p != end:
        raise RDBError("listpack length mismatch")
    return out


# A string element of under 64 bytes: its 1-byte header and 1-byte back-length.
_LP_SMALL_HEAD = [bytes((0x80 | n,)) for n in range(64)]
_LP_SMALL_BACK = [bytes((n + 1,)) for n in range(64)]


# lp_entry's header and back-length of a string of 64..4095 bytes, by
# length (a queue payload's size): callers that encode many elements inline
# ``LP_MID_HEAD[n] + e + LP_MID_BACK[n]``.
LP_MID_HEAD = [b""] * 64 + [bytes((0xE0 | (n >> 8), n & 0xFF)) for n in range(64, 4096)]
LP_MID_BACK = [b""] * 64 + [bytes((n + 2,)) if n + 2 <= 127 else
                            bytes(((n + 2) >> 7, ((n + 2) & 127) | 128))
                            for n in range(64, 4096)]


def lp_entry(e: bytes) -> bytes:
    """One listpack element, encoded: what ``lp_encode_str`` appends.  The
    strings that cannot be integers (empty, longer than 20 bytes, or not
    starting like one) under 4 kB -- a queue's job payloads -- are built
    here directly: SAVE and the AOF rewrite call this once per list item."""
    n = len(e)
    if n > 20 or not n or e[0] not in INTISH:
        if n < 64:
            return _LP_SMALL_HEAD[n] + e + _LP_SMALL_BACK[n]
        if n < 4096:
            t = n + 2               # 66..4097: a 2-byte back-length when over 127
            back = bytes((t,)) if t <= 127 else bytes((t >> 7, (t & 127) | 128))
            return bytes((0xE0 | (n >> 8), n & 0xFF)) + e + back
    out = bytearray()
    lp_encode_str(e, out)
    return bytes(out)


def lp_from_entries(entries, count: int) -> bytes:
    body = b"".join(entries)
    total = 7 + len(body)
    return (total.to_bytes(4, "little") + min(count, 65535).to_bytes(2, "little")
            + body + b"\xff")


# ----------------------------------------------------------------------
# RDB lengths and strings
# ----------------------------------------------------------------------

def put_len(v: int, out: bytearray):
    if v < 0:
        v &= MASK64
    if v < 64:
        out.append(v)
    elif v < 16384:
        out += bytes((0x40 | (v >> 8), v & 0xFF))
    elif v <= 0xFFFFFFFF:
        out.append(0x80)
        out += v.to_bytes(4, "big")
    else:
        out.append(0x81)
        out += v.to_bytes(8, "big")


def put_string(s: bytes, out: bytearray):
    if len(s) <= 11 and s and s[0] in INTISH:
        v = string2ll(s)
        if v is not None and b"%d" % v == s:
            if -128 <= v <= 127:
                out += b"\xc0" + (v & 0xFF).to_bytes(1, "little")
                return
            if -32768 <= v <= 32767:
                out += b"\xc1" + (v & 0xFFFF).to_bytes(2, "little")
                return
            if -2147483648 <= v <= 2147483647:
                out += b"\xc2" + (v & 0xFFFFFFFF).to_bytes(4, "little")
                return
    n = len(s)
    if n > 20 and _switch.compress:
        # Valkey keeps the compressed form only when it saves 4+ bytes.
        # Valkey's lzf_compress gets n - 4 bytes; python-lzf passes liblzf one more.
        c = _lzf.compress(s, n - 5) if _lzf is not None else _lzf_compress_py(s, n - 4)
        if c is not None and len(c) <= n - 4:
            out.append(0xC3)
            put_len(len(c), out)
            put_len(n, out)
            out += c
            return
    put_len(n, out)
    out += s


class _Switch(threading.local):
    compress = False      # (a thread's own; off in every new thread)


_switch = _Switch()


@contextmanager
def lzf_compression(on: bool):
    """put_string LZF-compresses inside this block, in this thread."""
    old = _switch.compress
    _switch.compress = bool(on)
    try:
        yield
    finally:
        _switch.compress = old


def _lzf_decompress(data: bytes, expected: int) -> bytes:
    if _lzf is not None and expected > 0:
        try:
            out = _lzf.decompress(data, expected)
        except ValueError:
            out = None
        if out is None or len(out) != expected:
            raise RDBError("LZF decompression failed")
        return out
    return _lzf_decompress_py(data, expected)


lzf_decompress = _lzf_decompress      # for the RDB file reader's inline path


def _lzf_compress_py(data: bytes, out_len: int):
    """LZF-compress ``data`` as liblzf's lzf_compress (HLOG 16, VERY_FAST):
    the same bytes, or None where it returns 0 (the output would not fit in
    ``out_len`` bytes, by liblzf's own conservative checks)."""
    n = len(data)
    if not n:
        return None
    out = bytearray(out_len + 4)
    # hash slot -> position; 0 = none (a zeroed liblzf table: position 0 is
    # never referred to).  A dict is cheaper to make for short strings.
    htab = [0] * 65536 if n > 4096 else defaultdict(int)
    op = 1                      # out[0] is the first literal run's length byte
    lit = 0
    ip = 0
    end2 = n - 2
    hval = (data[0] << 8) | data[1] if n > 1 else 0
    while ip < end2:
        hval = ((hval << 8) | data[ip + 2]) & 0xFFFFFF
        slot = ((hval >> 8) - hval * 5) & 0xFFFF
        ref = htab[slot]
        htab[slot] = ip
        off = ip - ref - 1
        if (ref > 0 and 0 <= off < 8192 and data[ref + 2] == data[ip + 2]
                and data[ref] == data[ip] and data[ref + 1] == data[ip + 1]):
            if op + 4 >= out_len and op - (not lit) + 4 >= out_len:
                return None
            out[op - lit - 1] = lit - 1 & 0xFF
            if not lit:
                op -= 1
            maxlen = n - ip - 2
            if maxlen > 264:
                maxlen = 264
            ln = 2
            if maxlen > 16:
                # liblzf's unrolled first 16 steps do not check maxlen: a match
                # may run one or two bytes past it (to the end of the input).
                while ln < 18 and data[ref + ln + 1] == data[ip + ln + 1]:
                    ln += 1
                if ln < 18:
                    ln += 1         # stopped at the first byte that differs
                    maxlen = -1     # (skip the loop below)
            if maxlen >= 0:
                while True:
                    ln += 1
                    if ln >= maxlen or data[ref + ln] != data[ip + ln]:
                        break
            ln -= 2
            ip += 1
            if ln < 7:
                out[op] = (off >> 8) + (ln << 5)
                op += 1
            else:
                out[op] = (off >> 8) + 224
                out[op + 1] = ln - 7
                op += 2
            out[op] = off & 0xFF
            op += 2                 # the offset byte, then the next run's length byte
            lit = 0
            ip += ln + 1
            if ip >= end2:
                break
            ip -= 2
            hval = (data[ip] << 8) | data[ip + 1]
            for _ in range(2):
                hval = ((hval << 8) | data[ip + 2]) & 0xFFFFFF
                htab[((hval >> 8) - hval * 5) & 0xFFFF] = ip
                ip += 1
        else:
            if op >= out_len:
                return None
            lit += 1
            out[op] = data[ip]
            op += 1
            ip += 1
            if lit == 32:
                out[op - 33] = 31
                lit = 0
                op += 1
    if op + 3 > out_len:
        return None
    while ip < n:
        lit += 1
        out[op] = data[ip]
        op += 1
        ip += 1
        if lit == 32:
            out[op - 33] = 31
            lit = 0
            op += 1
    out[op - lit - 1] = lit - 1 & 0xFF
    if not lit:
        op -= 1
    return bytes(out[:op])


def _lzf_decompress_py(data: bytes, expected: int) -> bytes:
    out = bytearray()
    i = 0
    n = len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            ln = ctrl + 1
            if i + ln > n:
                raise RDBError("LZF literal out of bounds")
            out += data[i:i + ln]
            i += ln
        else:
            ln = ctrl >> 5
            if ln == 7:
                ln += data[i]
                i += 1
            ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
            i += 1
            if ref < 0:
                raise RDBError("LZF back-reference out of bounds")
            for _ in range(ln + 2):     # may overlap what it copies
                out.append(out[ref])
                ref += 1
    if len(out) != expected:
        raise RDBError("LZF length mismatch")
    return bytes(out)


class Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0):
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RDBError("payload too short")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def length(self, encoded_ok: bool = False):
        b = self.take(1)[0]
        kind = b >> 6
        if kind == 0:
            return (b & 0x3F, False)
        if kind == 1:
            return (((b & 0x3F) << 8) | self.take(1)[0], False)
        if b == 0x80:
            return (int.from_bytes(self.take(4), "big"), False)
        if b == 0x81:
            return (int.from_bytes(self.take(8), "big"), False)
        if kind == 3 and encoded_ok:
            return (b & 0x3F, True)
        raise RDBError("bad length encoding")

    def num(self) -> int:
        return self.length()[0]

    def string(self) -> bytes:
        v, enc = self.length(True)
        if not enc:
            return self.take(v)
        if v == 0:
            return b"%d" % int.from_bytes(self.take(1), "little", signed=True)
        if v == 1:
            return b"%d" % int.from_bytes(self.take(2), "little", signed=True)
        if v == 2:
            return b"%d" % int.from_bytes(self.take(4), "little", signed=True)
        if v == 3:
            clen = self.num()
            ulen = self.num()
            return _lzf_decompress(self.take(clen), ulen)
        raise RDBError("unknown string encoding")

    def mstime(self) -> int:
        v = int.from_bytes(self.take(8), "little")
        return v - (1 << 64) if v >= 1 << 63 else v


# ----------------------------------------------------------------------
# Element readers of the compact encodings
# ----------------------------------------------------------------------

def el_bytes(e) -> bytes:
    return b"%d" % e if type(e) is int else bytes(e)


def listpack_elements(blob: bytes) -> list:
    """A listpack's elements as bytes, its header count checked."""
    els = lp_parse(blob)
    count = int.from_bytes(blob[4:6], "little")
    if count != 65535 and count != len(els):
        raise RDBError("listpack count mismatch")
    return [el_bytes(e) for e in els]


def ziplist_elements(zl: bytes) -> list:
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


def zipmap_elements(zm: bytes) -> list:
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


def intset_elements(blob: bytes) -> list:
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


def pairs(flat: list):
    if len(flat) % 2:
        raise RDBError("odd number of elements in a pairs encoding")
    return zip(flat[0::2], flat[1::2])
