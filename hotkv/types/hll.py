"""HyperLogLog: Redis's HLL representation, byte for byte, in a plain string.

A HyperLogLog is a string value (``bytes``), as in Redis: TYPE says
string, GET returns the bytes, DUMP/RESTORE/RDB/AOF treat it as any
string.  This module owns the layout and the algorithms on it (no
clients, no commands):

* a 16-byte header: ``HYLL``, the encoding byte (0 dense, 1 sparse), three
  unused bytes (kept as found), and the cached cardinality as 8 bytes
  little endian whose top bit (byte 15, 0x80) marks the cache invalid;
* dense: 16384 registers of 6 bits, packed from the least significant bit
  (12288 bytes; a dense value is exactly 12304 bytes long);
* sparse: opcodes ZERO ``00xxxxxx`` (1..64 zero registers), XZERO
  ``01xxxxxx yyyyyyyy`` (1..16384 zero registers), VAL ``1vvvvvxx`` (1..4
  registers of value 1..32);
* the element hash is MurmurHash64A with seed 0xadc83b19; the register is
  its low 14 bits, the value 1 + the trailing zeros of the rest;
* the estimate is Ertl's improved estimator (as Valkey 8.1's hllCount),
  computed with the same double operations in the same order, so counts
  are the reference server's to the unit.

Invariants:
* a sparse value is edited as Valkey's hllSparseSet edits it (the same
  split of the opcode met, the same merge of up to 5 opcodes after it, the
  same promotion to dense when the string would exceed
  hll-sparse-max-bytes or a value exceeds 32), so every value hotkv writes
  is the byte string valkey-server 8.1.8 writes for the same commands --
  save one corrupt case: a sparse body ending in half an XZERO, where
  Valkey reads its second byte past the string's end (the NUL, or a byte
  an earlier edit left there); hotkv reads 0;
* a changed value has byte 15 |= 0x80 (the other cached bytes stay);
* nothing here trusts a stored value: a sparse string whose runs do not
  cover exactly 16384 registers is reported (``Invalid``), never indexed
  out of range;
* the two caches (``_CACHE``, ``_HIST``) hold at most 32 values each (a
  reference each, so ids stay unique) and are checked against the
  value's current bytes at every use; the register arrays they hand out
  (``to_raw``, ``raw_registers``) are read, never changed, by callers.

Speed: PFADD runs per request.  A sparse value is decoded into a
bytearray of its opcodes plus a list of each opcode's first register
(built at C speed with ``bytes.translate`` and ``itertools.accumulate``),
so finding the opcode of a register is a ``bisect`` and a split is a slice
assignment; the decoded form of the last values written is cached per
value object (``_CACHE``, with its registers once computed), and the
registers and histogram of the last dense values read (``_HIST``), both
kept current by PFADD and checked against the value's bytes before use,
so neither can go stale.  Dense registers
are changed in place in the key's bytearray.  Register-wide work (merge,
histogram, dense <-> one-byte-per-register "raw" form) works on byte
columns with ``bytes.translate``, big-int OR/max and ``bytes.count``.
"""

from __future__ import annotations

import math
import re
import struct
from bisect import bisect_right
from itertools import accumulate

HDR = 16
P = 14
REGISTERS = 1 << P          # 16384
Q = 64 - P                  # 50
DENSE_BYTES = REGISTERS * 6 // 8
DENSE_SIZE = HDR + DENSE_BYTES   # 12304
DENSE, SPARSE = 0, 1
SPARSE_VAL_MAX = 32
SEED = 0xADC83B19

INVALID_ERR = "INVALIDOBJ Corrupted HLL object detected"
WRONGTYPE_ERR = "WRONGTYPE Key is not a valid HyperLogLog string value."

_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1
_ALPHA_INF = 0.721347520444481703680   # 0.5 / ln(2)

# A fresh HLL: sparse, cache valid at 0, one XZERO of all the registers.
EMPTY = b"HYLL\x01\x00\x00\x00" + bytes(8) + b"\x7f\xff"
# hllSparseSet's answer "the value must become dense first".
PROMOTE = 2


class Invalid(Exception):
    """The value is a HyperLogLog string whose registers cannot be read."""


# ----------------------------------------------------------------------
# Hash
# ----------------------------------------------------------------------

_UNPACK = [struct.Struct("<%dQ" % i).unpack_from for i in range(32)]


def murmur64a(data: bytes, seed: int = SEED) -> int:
    """MurmurHash64A (endian-neutral, as Redis's), 64-bit result."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    nblocks = n >> 3
    if nblocks:
        unpack = _UNPACK[nblocks] if nblocks < 32 else struct.Struct("<%dQ" % nblocks).unpack_from
        for k in unpack(data):
            k = (k * _M) & _MASK
            k ^= k >> 47
            h = ((h ^ ((k * _M) & _MASK)) * _M) & _MASK
    rem = n & 7
    if rem:
        h = ((h ^ int.from_bytes(data[n - rem:], "little")) * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    return h ^ (h >> 47)


def pat_len(element: bytes):
    """(register index, run length + 1) of an element (hllPatLen)."""
    h = murmur64a(element)
    rest = (h >> P) | (1 << Q)
    return h & (REGISTERS - 1), (rest & -rest).bit_length()


# ----------------------------------------------------------------------
# Header
# ----------------------------------------------------------------------

def is_hll(value: bytes) -> bool:
    """Valkey's isHLLObjectOrReply on a string value."""
    n = len(value)
    if n < HDR or value[:4] != b"HYLL":
        return False
    enc = value[4]
    return enc == SPARSE or (enc == DENSE and n == DENSE_SIZE)


def cached_count(value):
    """The cached cardinality, or None when the cache is invalid."""
    if value[15] & 0x80:
        return None
    return int.from_bytes(value[8:16], "little")


# ----------------------------------------------------------------------
# Dense registers
# ----------------------------------------------------------------------

def dense_get(buf, i: int, base: int = HDR) -> int:
    """Register i of a dense array starting at buf[base]."""
    bit = i * 6
    b = base + (bit >> 3)
    fb = bit & 7
    if fb <= 2:
        return (buf[b] >> fb) & 63
    return ((buf[b] >> fb) | (buf[b + 1] << (8 - fb))) & 63


def dense_set(buf: bytearray, i: int, val: int, base: int = HDR):
    bit = i * 6
    b = base + (bit >> 3)
    fb = bit & 7
    if fb <= 2:
        buf[b] = (buf[b] & ~(63 << fb) & 0xFF) | (val << fb)
    else:
        buf[b] = (buf[b] & ((1 << fb) - 1)) | ((val << fb) & 0xFF)
        buf[b + 1] = (buf[b + 1] & (0xFF ^ ((1 << (fb - 2)) - 1))) | (val >> (8 - fb))


def _table(fn) -> bytes:
    return bytes(fn(b) & 0xFF for b in range(256))


# Byte tables for unpacking/packing 4 registers <-> 3 bytes
# (r0 = b0 & 63, r1 = b0 >> 6 | (b1 & 15) << 2, r2 = b1 >> 4 | (b2 & 3) << 4,
# r3 = b2 >> 2): each register column is a translate of one byte column,
# or the OR of two (done on ints of 4096 bytes).
_R0 = _table(lambda b: b & 63)
_R1A = _table(lambda b: b >> 6)
_R1B = _table(lambda b: (b & 15) << 2)
_R2A = _table(lambda b: b >> 4)
_R2B = _table(lambda b: (b & 3) << 4)
_R3 = _table(lambda b: b >> 2)
_B0B = _table(lambda b: (b & 3) << 6)
_B1A = _table(lambda b: (b & 63) >> 2)
_B1B = _table(lambda b: (b & 15) << 4)
_B2A = _table(lambda b: (b & 63) >> 4)
_B2B = _table(lambda b: (b & 63) << 2)
_GROUPS = REGISTERS // 4
_HI = int.from_bytes(b"\x80" * REGISTERS, "little")
_LO7 = int.from_bytes(b"\x7f" * REGISTERS, "little")


def _or(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(
        _GROUPS, "little")


def dense_to_raw(regs) -> bytearray:
    """12288 packed bytes -> 16384 bytes, one register per byte."""
    regs = bytes(regs)
    b0 = regs[0::3]
    b1 = regs[1::3]
    b2 = regs[2::3]
    raw = bytearray(REGISTERS)
    raw[0::4] = b0.translate(_R0)
    raw[1::4] = _or(b0.translate(_R1A), b1.translate(_R1B))
    raw[2::4] = _or(b1.translate(_R2A), b2.translate(_R2B))
    raw[3::4] = b2.translate(_R3)
    return raw


def raw_to_dense(raw) -> bytearray:
    """16384 registers of one byte each (< 64) -> 12288 packed bytes."""
    raw = bytes(raw)
    r0 = raw[0::4]
    r1 = raw[1::4]
    r2 = raw[2::4]
    r3 = raw[3::4]
    out = bytearray(DENSE_BYTES)
    out[0::3] = _or(r0.translate(_R0), r1.translate(_B0B))
    out[1::3] = _or(r1.translate(_B1A), r2.translate(_B1B))
    out[2::3] = _or(r2.translate(_B2A), r3.translate(_B2B))
    return out


def raw_max(a: int, b: int) -> int:
    """Per-byte max of two raw register arrays as little-endian ints
    (every byte < 128): SWAR compare, no per-register loop."""
    ge = ((a | _HI) - b) & _HI          # 0x80 where a >= b
    ge -= ge >> 7                       # 0x7f where a >= b
    return (a & ge) | (b & (ge ^ _LO7))


# ----------------------------------------------------------------------
# Sparse
# ----------------------------------------------------------------------

# Registers covered by a one-byte opcode (0 for an XZERO's first byte,
# which is fixed up from both bytes).
_SPAN = bytes(((b & 63) + 1) if b < 0x40 else 0 if b < 0x80 else (b & 3) + 1
              for b in range(256))
_ANY_XZERO = re.compile(rb"[\x40-\x7f]")
# What each one-byte opcode stands for, one byte per register.
_EXPAND = tuple(bytes(b + 1) if b < 0x40 else b"" if b < 0x80
                else bytes((((b >> 2) & 31) + 1,)) * ((b & 3) + 1) for b in range(256))


def _val(v: int, n: int) -> int:
    return 0x80 | ((v - 1) << 2) | (n - 1)


class Sparse:
    """A sparse body being edited: ``ops`` the opcode bytes, ``starts[i]``
    the first register of the opcode at byte i (for an XZERO's second byte,
    the first register after it), ``starts[len(ops)]`` the registers
    covered in all.  Valid when that total is 16384."""
    __slots__ = ("ops", "starts", "raw")

    def __init__(self, body: bytes):
        self.raw = None         # to_raw's result, kept current by set()
        self.ops = bytearray(body)
        spans = body.translate(_SPAN)
        if _ANY_XZERO.search(body) is None:
            self.starts = list(accumulate(spans, initial=0))
            return
        # Every byte starts an opcode but an XZERO's second one: a byte in
        # XZERO's range starts one unless it directly follows an XZERO start.
        spans = list(spans)
        n = len(body)
        second = -1
        for m in _ANY_XZERO.finditer(body):
            p = m.start()
            if p == second:
                continue
            nxt = body[p + 1] if p + 1 < n else 0   # C reads the NUL past the end
            spans[p] = (((body[p] & 63) << 8) | nxt) + 1
            if p + 1 < n:
                spans[p + 1] = 0
            second = p + 1
        self.starts = list(accumulate(spans, initial=0))

    def set(self, index: int, count: int, max_bytes: int) -> int:
        """hllSparseSet: 1 changed, 0 unchanged, -1 corrupt, PROMOTE when
        the value must become dense (nothing was changed then)."""
        if count > SPARSE_VAL_MAX:
            return PROMOTE
        ops = self.ops
        starts = self.starts
        n = len(ops)
        if not n or index >= starts[n]:
            return -1
        i = bisect_right(starts, index, 0, n) - 1
        op = ops[i]
        first = starts[i]
        span = starts[i + 1] - first
        xzero = False
        if op & 0x80:
            cur = ((op >> 2) & 31) + 1
            if cur >= count:
                return 0
            if span == 1:
                ops[i] = _val(count, 1)
                self._merge(i)
                if self.raw is not None:
                    self.raw[index] = count
                return 1
        elif op & 0x40:
            xzero = True
        elif span == 1:
            ops[i] = _val(count, 1)
            self._merge(i)
            if self.raw is not None:
                self.raw[index] = count
            return 1
        last = first + span - 1
        seq = bytearray()
        sst = []
        if not op & 0x80:
            if index != first:
                run = index - first
                if run > 64:
                    seq += bytes((0x40 | ((run - 1) >> 8), (run - 1) & 0xFF))
                    sst += (first, index)
                else:
                    seq.append(run - 1)
                    sst.append(first)
            seq.append(_val(count, 1))
            sst.append(index)
            if index != last:
                run = last - index
                if run > 64:
                    seq += bytes((0x40 | ((run - 1) >> 8), (run - 1) & 0xFF))
                    sst += (index + 1, last + 1)
                else:
                    seq.append(run - 1)
                    sst.append(index + 1)
        else:
            if index != first:
                seq.append(_val(cur, index - first))
                sst.append(first)
            seq.append(_val(count, 1))
            sst.append(index)
            if index != last:
                seq.append(_val(cur, last - index))
                sst.append(index + 1)
        delta = len(seq) - (2 if xzero else 1)
        if delta > 0 and HDR + n + delta > max_bytes:
            return PROMOTE
        old = 2 if xzero and i + 1 < n else 1
        ops[i:i + old] = seq
        starts[i:i + old] = sst
        self._merge(i)
        if self.raw is not None:
            self.raw[index] = count
        return 1

    def _merge(self, i: int):
        """Step 4 of hllSparseSet: merge adjacent VALs of equal value,
        scanning up to 5 opcodes from the one before the changed one."""
        ops = self.ops
        starts = self.starts
        if i == 0:
            p = 0
        elif i >= 2 and starts[i - 1] == starts[i]:
            p = i - 2           # the opcode before is an XZERO
        else:
            p = i - 1
        end = len(ops)
        scan = 5
        while p < end and scan:
            scan -= 1
            b = ops[p]
            if not b & 0x80:
                p += 2 if b & 0x40 else 1
                continue
            if p + 1 < end:
                b2 = ops[p + 1]
                if b2 & 0x80 and not (b ^ b2) & 0x7C:
                    run = (b & 3) + (b2 & 3) + 2
                    if run <= 4:
                        ops[p + 1] = (b2 & 0xFC) | (run - 1)
                        del ops[p]
                        del starts[p + 1]
                        end -= 1
                        continue
            p += 1

    def to_raw(self):
        """The registers one per byte, or None when the runs do not cover
        exactly 16384 registers (Valkey 8.1.8 refuses any overflow).
        Built by joining each opcode's expansion (C-speed ``map``), the
        few XZEROs cut out first.  The result is kept (and kept current by
        ``set``): callers must not change it."""
        if self.raw is not None:
            return self.raw
        if self.starts[-1] != REGISTERS:
            return None
        ops = bytes(self.ops)
        n = len(ops)
        parts = []
        pos = 0
        second = -1
        for m in _ANY_XZERO.finditer(ops):
            p = m.start()
            if p == second:
                continue
            parts.append(b"".join(map(_EXPAND.__getitem__, ops[pos:p])))
            nxt = ops[p + 1] if p + 1 < n else 0
            parts.append(bytes((((ops[p] & 63) << 8) | nxt) + 1))
            pos = p + 2
            second = p + 1
        parts.append(b"".join(map(_EXPAND.__getitem__, ops[pos:])))
        self.raw = bytearray(b"".join(parts))
        return self.raw

    def histogram(self):
        """The register histogram (hllSparseRegHisto), or None when a run
        overflows or the runs do not cover exactly 16384 registers."""
        raw = self.to_raw()
        return None if raw is None else raw_histogram(raw)

    def decode_text(self) -> bytes:
        """PFDEBUG DECODE's text."""
        out = []
        ops = self.ops
        n = len(ops)
        p = 0
        while p < n:
            b = ops[p]
            if b < 0x40:
                out.append(b"z:%d" % (b + 1))
                p += 1
            elif b < 0x80:
                out.append(b"Z:%d" % ((((b & 63) << 8) | (ops[p + 1] if p + 1 < n else 0)) + 1))
                p += 2
            else:
                out.append(b"v:%d,%d" % (((b >> 2) & 31) + 1, (b & 3) + 1))
                p += 1
        return b" ".join(out)


# Decoded bodies of the sparse values this module last wrote or read:
# id(value) -> (value, Sparse).  An entry is used only while it is the same
# object with the same body bytes (another command may have changed the
# bytearray in place), so it is never stale; a hot sparse key skips the
# O(length) decode.  The entry holds its value, so the id stays unique.
_CACHE: dict = {}
_CACHE_SIZE = 32


def _fresh() -> Sparse:
    sparse = Sparse.__new__(Sparse)
    sparse.ops = bytearray(b"\x7f\xff")
    sparse.starts = [0, REGISTERS, REGISTERS]
    sparse.raw = None
    return sparse


def _sparse_of(value, take: bool) -> Sparse:
    """The decoded body of a sparse value; ``take`` removes it from the
    cache (the caller edits it and remembers the result)."""
    if len(value) == HDR + 2 and value[HDR] == 0x7F and value[HDR + 1] == 0xFF:
        return _fresh()                         # a new HLL: nothing to decode
    key = id(value)
    entry = _CACHE.get(key)
    if entry is not None and entry[0] is value and entry[1].ops == memoryview(value)[HDR:]:
        if take:
            _CACHE.pop(key, None)
        return entry[1]
    sparse = Sparse(bytes(value[HDR:]))
    if not take:
        _remember(value, sparse)
    return sparse


def _remember(value, sparse: Sparse):
    if len(_CACHE) >= _CACHE_SIZE:
        # Many keys in turn (one PFADD per new key): start over, which costs
        # less than evicting one by one; hot keys come back at their next use.
        _CACHE.clear()
    _CACHE[id(value)] = (value, sparse)


# ----------------------------------------------------------------------
# Cardinality
# ----------------------------------------------------------------------

_BYTE = [bytes((v,)) for v in range(64)]


def raw_histogram(raw) -> list:
    """Histogram of one-byte registers: delete the 0s, then the 1s... and
    count what each pass removed.  Each pass is C speed and works on what
    is left, which shrinks fast (register values are about geometric)."""
    hist = [0] * 64
    rest = bytes(raw)
    n = len(rest)
    v = 0
    while n and v < 64:
        rest = rest.translate(None, _BYTE[v])
        m = len(rest)
        hist[v] = n - m
        n = m
        v += 1
    return hist


def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y = 1.0
    z = x
    while True:
        x *= x
        prev = z
        z += x * y
        y += y
        if prev == z:
            return z


def _tau(x: float) -> float:
    if x == 0.0 or x == 1.0:
        return 0.0
    y = 1.0
    z = 1 - x
    while True:
        x = math.sqrt(x)
        prev = z
        y *= 0.5
        d = 1 - x
        z -= d * d * y
        if prev == z:
            return z / 3


def estimate(hist) -> int:
    """Ertl's estimator on a register histogram, with hllCount's doubles,
    as the unsigned 64-bit value Valkey stores (``signed`` for replies)."""
    m = float(REGISTERS)
    z = m * _tau((m - hist[Q + 1]) / m)
    for j in range(Q, 0, -1):
        z += hist[j]
        z *= 0.5
    z += m * _sigma(hist[0] / m)
    if z == 0.0:
        return 1 << 63          # C: llroundl(inf) gives LLONG_MIN
    e = _ALPHA_INF * m * m / z
    if e >= 9.223372036854775807e18:
        return 1 << 63
    r = math.floor(e)
    return r + 1 if e - r >= 0.5 else r   # llroundl: halves away from zero


def signed(card: int) -> int:
    """A cardinality as Valkey replies it (a long long)."""
    return card - (1 << 64) if card >= 1 << 63 else card


# The dense values last read register-wide: id(value) -> [value, its
# registers then, the registers one per byte, their histogram or None].
# PFADD keeps an entry current as it raises registers, so PFCOUNT after
# PFADD (one key or several) skips the 16384-register passes; an entry
# whose value changed otherwise (SETRANGE...) fails the byte comparison.
_HIST: dict = {}


def _valid_entry(value):
    entry = _HIST.get(id(value))
    if entry is not None and entry[0] is value and entry[1] == value[HDR:]:
        return entry
    return None


def _dense_entry(value) -> list:
    entry = _valid_entry(value)
    if entry is None:
        entry = [value, bytes(value[HDR:]), dense_to_raw(memoryview(value)[HDR:]), None]
        if len(_HIST) >= _CACHE_SIZE:
            _HIST.clear()
        _HIST[id(value)] = entry
    return entry


def _dense_histogram(value) -> list:
    entry = _dense_entry(value)
    if entry[3] is None:
        entry[3] = raw_histogram(entry[2])
    return entry[3]


def histogram(value):
    """The histogram of a valid-header HLL value (not to be changed by the
    caller); Invalid if corrupt."""
    if value[4] == DENSE:
        return _dense_histogram(value)
    hist = _sparse_of(value, False).histogram()
    if hist is None:
        raise Invalid()
    return hist


def count(value: bytearray):
    """PFCOUNT of one key: (cardinality, whether the cache was written).
    An invalid cache is recomputed and stored in place; Invalid if
    corrupt."""
    card = cached_count(value)
    if card is not None:
        return card, False
    card = estimate(histogram(value))
    value[8:16] = card.to_bytes(8, "little")
    return card, True


def raw_registers(value):
    """One byte per register (hllMerge's view); Invalid if corrupt."""
    if value[4] == DENSE:
        return _dense_entry(value)[2]
    raw = _sparse_of(value, False).to_raw()
    if raw is None:
        raise Invalid()
    return raw


def merge_raw(values) -> tuple:
    """(max registers as a little-endian int, any dense) of valid-header
    HLL values; Invalid if one is corrupt."""
    acc = None
    dense = False
    for v in values:
        if v[4] == DENSE:
            dense = True
        regs = int.from_bytes(raw_registers(v), "little")
        acc = regs if acc is None else raw_max(acc, regs)
    return (0 if acc is None else acc), dense


def count_raw(acc: int) -> int:
    return estimate(raw_histogram(acc.to_bytes(REGISTERS, "little")))


# ----------------------------------------------------------------------
# Writers: each takes and returns a bytearray (the key's own value)
# ----------------------------------------------------------------------

def to_dense(value: bytearray):
    """The dense form of a sparse value (header kept, encoding 0), or
    None if already dense; Invalid if corrupt."""
    if value[4] == DENSE:
        return None
    raw = _sparse_of(value, False).to_raw()
    if raw is None:
        raise Invalid()
    out = value[:HDR] + raw_to_dense(raw)
    out[4] = DENSE
    return out


def add(value: bytearray, elements, max_bytes: int):
    """PFADD's element loop on a valid-header value: (value, registers
    changed, corrupt).  A dense value is changed in place and returned;
    a sparse one is rebuilt (or promoted) and the new bytearray returned.
    When corrupt the value holds the changes made before the failing
    element (Valkey edits in place and keeps them).  The cache is
    invalidated when anything changed."""
    changed = 0
    if value[4] == DENSE:
        entry = _valid_entry(value) if _HIST else None
        for e in elements:
            index, cnt = pat_len(e)
            old = dense_get(value, index)
            if cnt > old:
                dense_set(value, index, cnt)
                changed += 1
                if entry is not None:
                    entry[2][index] = cnt
                    hist = entry[3]
                    if hist is not None:
                        hist[old] -= 1
                        hist[cnt] += 1
        if changed:
            value[15] |= 0x80
            if entry is not None:
                entry[1] = bytes(value[HDR:])
        return value, changed, False
    header = value[:HDR]
    sparse = _sparse_of(value, True)
    buf = None
    for e in elements:
        index, cnt = pat_len(e)
        if buf is None:
            r = sparse.set(index, cnt, max_bytes)
            if r == 1:
                header[15] |= 0x80
                changed += 1
                continue
            if r == 0:
                continue
            if r == -1 or (raw := sparse.to_raw()) is None:
                return header + sparse.ops, changed, True
            header[4] = DENSE
            buf = header + raw_to_dense(raw)
        if cnt > dense_get(buf, index):
            dense_set(buf, index, cnt)
            changed += 1
    if buf is None:
        if changed:
            value = header + sparse.ops
        _remember(value, sparse)
        return value, changed, False
    buf[15] |= 0x80
    return buf, changed, False


def merge_into(dest, acc: int, dense: bool, max_bytes: int) -> bytearray:
    """PFMERGE's write: dest (a valid HLL value, or None for a new key)
    set to the registers ``acc``; dense when any input was."""
    header = bytearray(EMPTY[:HDR] if dest is None else dest[:HDR])
    raw = acc.to_bytes(REGISTERS, "little")
    if dense:
        header[4] = DENSE
        header[15] |= 0x80
        return header + raw_to_dense(raw)
    sparse = Sparse(EMPTY[HDR:]) if dest is None else _sparse_of(dest, True)
    buf = None
    for j, v in enumerate(raw):
        if not v:
            continue
        if buf is None:
            if sparse.set(j, v, max_bytes) != PROMOTE:
                continue
            full = sparse.to_raw()
            header[4] = DENSE
            buf = header + raw_to_dense(full if full is not None else bytes(REGISTERS))
        if v > dense_get(buf, j):
            dense_set(buf, j, v)
    if buf is None:
        buf = header + sparse.ops
        _remember(buf, sparse)
    buf[15] |= 0x80
    return buf


def registers(value) -> list:
    """Every register of a dense value, as PFDEBUG GETREG lists them."""
    return list(dense_to_raw(memoryview(value)[HDR:]))


def decode_text(value) -> bytes:
    return _sparse_of(value, False).decode_text()


# ----------------------------------------------------------------------
# PFSELFTEST
# ----------------------------------------------------------------------

def selftest(rand, max_bytes: int, cycles: int = 2, limit: int = 10000):
    """PFSELFTEST's two checks, bounded for Python (Valkey runs 1000
    register cycles and 10^7 elements): registers read back as set
    (per-register and array-wide paths), and dense and sparse built from
    the same elements agree and stay within 6 standard errors.  None on
    success, else the TESTFAILED text."""
    dense = bytearray(DENSE_SIZE)
    for _ in range(cycles):
        want = bytes(rand() & 63 for _ in range(REGISTERS))
        for i, r in enumerate(want):
            dense_set(dense, i, r)
        for i, r in enumerate(want):
            got = dense_get(dense, i)
            if got != r:
                return "TESTFAILED Register %d should be %d but is %d" % (i, r, got)
        if dense_to_raw(memoryview(dense)[HDR:]) != want or \
                raw_to_dense(want) != dense[HDR:]:
            return "TESTFAILED Register arrays disagree"
    dense = bytearray(b"HYLL" + bytes(DENSE_SIZE - 4))
    sparse = bytearray(EMPTY)
    relerr = 1.04 / math.sqrt(REGISTERS)
    seed = rand() | (rand() << 32)
    checkpoint = 1
    batch = []
    for j in range(1, limit + 1):
        batch.append(struct.pack("<Q", (j ^ seed) & _MASK))
        if j != checkpoint:
            continue
        dense = add(dense, batch, max_bytes)[0]
        sparse = add(sparse, batch, max_bytes)[0]
        batch = []
        if j < max_bytes / 2 and sparse[4] != SPARSE:
            return "TESTFAILED sparse encoding not used"
        card = estimate(histogram(dense))
        if card != estimate(histogram(sparse)):
            return "TESTFAILED dense/sparse disagree"
        maxerr = 1 if j == 10 else math.ceil(relerr * 6 * checkpoint)
        if abs(checkpoint - card) > maxerr:
            return "TESTFAILED Too big error. card:%d abserr:%d" % (
                checkpoint, abs(checkpoint - card))
        checkpoint *= 10
    return None
