"""Dataset digests: the values DEBUG DIGEST and DEBUG DIGEST-VALUE report.

Owns the digest of a key's value (``value_digest``) and of every database
(``dataset_digest``), computed as valkey-server 8.1.8 computes them, so a
test can compare a whole dataset between hotkv and Valkey with one call.
A core helper: it reads the types' values (hotkv/types/) and the
databases, and imports nothing from hotkv/commands/.

The scheme (learned from Valkey's debug.c, written anew here), over 20-byte
SHA1 states:
* ``xor(d, data)``: d ^= SHA1(data) -- order-free, for members of sets,
  hash fields and zset members, and for keys within a database (each xors
  in the SHA1 of its own 20-byte digest);
* ``mix(d, data)``: d = SHA1(d ^ SHA1(data)) -- ordered, for list
  elements, stream entries and the parts of one element;
* a key's digest: mix(key), mix(type code as 4 big-endian bytes), then the
  value (below), then xor("!!expire!!") when the key has an expiry;
* strings: mix(bytes) (an integer-encoded string digests as its decimal
  text, which is the bytes hotkv holds);  lists: mix each element, head to
  tail;  sets: xor each member;  hashes: xor, per field, a fresh digest
  mixed with the field then the value;  sorted sets: xor, per member, a
  fresh digest mixed with the member then the score as fpconv_dtoa writes
  it (``fpconv_score``: shortest round-trip digits, scientific beyond 21
  integer digits);  streams: mix "ms.seq" then each field and value, per
  live entry in ID order -- consumer groups, PELs, consumers and the
  stream's counters are not part of Valkey's digest;
* a database: when it holds keys, the running dataset digest is mixed with
  its number (4 big-endian bytes), then every key's digest is xored in.
  An empty dataset digests to 20 zero bytes.

Invariants: digests never look at clocks or expire keys (Valkey digests
logically expired keys too); a listpack-encoded sorted set digests a zero
score as "0" because Valkey's listpack keeps no sign on zero, a skiplist
one keeps -0 as "-0".
"""

from __future__ import annotations

import hashlib
import math
import struct

from .types.hashes import HashValue
from .types.lists import ListValue
from .types.sets import SetValue
from .types.stream import Stream
from .types.zsets import ZSetValue

ZERO = bytes(20)
_EXPIRE_MARK = b"!!expire!!"
_sha1 = hashlib.sha1

# Redis's object type codes (OBJ_STRING ... OBJ_STREAM), as 4 BE bytes.
_TYPE_CODE = {bytes: 0, bytearray: 0, ListValue: 1, SetValue: 2, ZSetValue: 3,
              HashValue: 4, Stream: 6}
_TYPE_BYTES = {cls: struct.pack(">I", code) for cls, code in _TYPE_CODE.items()}


def _xor_into(state: int, data: bytes) -> int:
    """State (a 160-bit int) xored with SHA1(data)."""
    return state ^ int.from_bytes(_sha1(data).digest(), "big")


def _mix_into(state: int, data: bytes) -> int:
    """SHA1(state ^ SHA1(data)) as a 160-bit int."""
    x = state ^ int.from_bytes(_sha1(data).digest(), "big")
    return int.from_bytes(_sha1(x.to_bytes(20, "big")).digest(), "big")


# ---------------------------------------------------------------------------
# Scores as fpconv_dtoa writes them.  Its digits come from Grisu2, which is
# not always the shortest round trip (5e22 gives 49999999999999996e6), so
# Python's repr would not do: this is Grisu2 over Python ints, each C
# uint64_t operation masked to 64 bits.
# ---------------------------------------------------------------------------

_M64 = (1 << 64) - 1
_FIRST_POWER, _POWER_STEP, _NPOWERS = -348, 8, 87


def _cached_power(k: int) -> tuple:
    """10**k as (f, e): f * 2**e, f a 64-bit normalised significand
    rounded to nearest (ties up) -- Grisu's table of cached powers."""
    num, den = (10 ** k, 1) if k >= 0 else (1, 10 ** -k)
    e = num.bit_length() - den.bit_length() - 64
    while True:
        n, d = (num, den << e) if e >= 0 else (num << -e, den)
        q, r = divmod(n, d)
        if q >= 1 << 64:
            e += 1
        elif q < 1 << 63:
            e -= 1
        else:
            break
    if 2 * r >= d:
        q += 1
        if q == 1 << 64:
            q, e = q >> 1, e + 1
    return q, e


_POWERS = [_cached_power(_FIRST_POWER + i * _POWER_STEP) for i in range(_NPOWERS)]


def _round_digit(digits: list, delta: int, rem: int, kappa: int, frac: int) -> None:
    # Walk the last digit down while that stays inside the interval and
    # gets closer to the exact value (uint64 arithmetic).
    while (rem < frac and ((delta - rem) & _M64) >= kappa
           and (((rem + kappa) & _M64) < frac
                or ((frac - rem) & _M64) > ((rem + kappa - frac) & _M64))):
        digits[-1] -= 1
        rem = (rem + kappa) & _M64


def _grisu2(value: float) -> tuple:
    """(digits as a list of ints, K): value ~= int(digits) * 10**K."""
    bits = struct.unpack("<Q", struct.pack("<d", value))[0] & ((1 << 63) - 1)
    frac, exp = bits & ((1 << 52) - 1), bits >> 52
    if exp:
        frac, exp = frac | (1 << 52), exp - 1075
    else:
        exp = -1074
    # The boundaries halfway to the neighbouring doubles, on one exponent.
    up, up_exp = (frac << 1) + 1, exp - 1
    while not up & (1 << 53):
        up, up_exp = up << 1, up_exp - 1
    up, up_exp = up << 10, up_exp - 10
    shift = 2 if frac == 1 << 52 else 1
    low = ((frac << shift) - 1) << ((exp - shift) - up_exp)
    w, w_exp = frac, exp
    while not w & (1 << 52):
        w, w_exp = w << 1, w_exp - 1
    w, w_exp = w << 11, w_exp - 11
    # The cached power bringing up's exponent into [-60, -32].
    idx = (int(-(up_exp + _NPOWERS) * 0.30102999566398114) - _FIRST_POWER) // _POWER_STEP
    while True:
        current = up_exp + _POWERS[idx][1] + 64
        if current < -60:
            idx += 1
        elif current > -32:
            idx -= 1
        else:
            break
    cf, ce = _POWERS[idx]
    k = _FIRST_POWER + idx * _POWER_STEP
    w = (w * cf + (1 << 63)) >> 64
    up = ((up * cf + (1 << 63)) >> 64) - 1
    low = ((low * cf + (1 << 63)) >> 64) + 1
    e = -(up_exp + ce + 64)
    return _generate_digits(w, up, low, e, -k)


def _generate_digits(w: int, up: int, low: int, e: int, big_k: int) -> tuple:
    wfrac = (up - w) & _M64
    delta = (up - low) & _M64
    one = 1 << e
    part1, part2 = up >> e, up & (one - 1)
    digits: list = []
    kappa = 10
    for power in range(9, -1, -1):
        div = 10 ** power
        digit, part1 = divmod(part1, div)
        if digit or digits:
            digits.append(digit)
        kappa -= 1
        rem = ((part1 << e) + part2) & _M64
        if rem <= delta:
            _round_digit(digits, delta, rem, (div << e) & _M64, wfrac)
            return digits, big_k + kappa
    unit = 10
    while True:
        part2 = (part2 * 10) & _M64
        delta = (delta * 10) & _M64
        kappa -= 1
        digit = part2 >> e
        if digit or digits:
            digits.append(digit)
        part2 &= one - 1
        if part2 < delta:
            _round_digit(digits, delta, part2, one, (wfrac * unit) & _M64)
            return digits, big_k + kappa
        unit *= 10


def fpconv_score(value: float) -> bytes:
    """A double as fpconv_dtoa writes it: "-" for a set sign bit (so -0
    is "-0"), inf/nan, else Grisu2's digits laid out plain (an integer
    while its exponent stays under digits+7, a fraction down to 6 leading
    zeros) or as ``d.ddde+XX``."""
    neg = math.copysign(1.0, value) < 0
    sign = "-" if neg else ""
    if value == 0:
        return (sign + "0").encode()
    if math.isinf(value):
        return (sign + "inf").encode()
    if value != value:
        return (sign + "nan").encode()
    dlist, k = _grisu2(value)
    digits = "".join(map(str, dlist))
    nd = len(digits)
    e = abs(k + nd - 1)
    if k >= 0 and e < nd + 7:
        out = digits + "0" * k
    elif k < 0 and (k > -7 or e < 4):
        offset = nd + k
        if offset <= 0:
            out = "0." + "0" * (-offset) + digits
        else:
            out = digits[:offset] + "." + digits[offset:]
    else:
        nd = min(nd, 18 - neg)
        out = digits[0] + ("." + digits[1:nd] if nd > 1 else "") + "e" + \
            ("-" if k + nd - 1 < 0 else "+") + "%d" % e
    return (sign + out).encode()


def _stream_entries(stream: Stream):
    """(id, flat field/value tuple) for each live entry, in ID order."""
    for node in stream.nodes:
        ids = node.ids
        ms, seq = ids.ms, ids.seq
        for j, item in enumerate(node.items):
            if item is None:
                continue
            if type(item) is bytes:
                item = (node.fields[0], item)
            yield ms[j], seq[j], item


def _pair(first: bytes, second: bytes) -> bytes:
    """One hash field or zset member's own digest: a zero state mixed with
    its two parts (xored into the key's state through SHA1 once more)."""
    return _mix_into(_mix_into(0, first), second).to_bytes(20, "big")


def _value_state(state: int, value) -> int:
    """state with ``value`` digested into it (type code, then contents)."""
    cls = type(value)
    state = _mix_into(state, _TYPE_BYTES[cls])
    if cls is bytes or cls is bytearray:
        return _mix_into(state, bytes(value))
    if cls is ListValue:
        for element in value:
            state = _mix_into(state, element)
    elif cls is SetValue:
        for member in value:
            state = _xor_into(state, member)
    elif cls is HashValue:
        for field, val in value.items():
            state = _xor_into(state, _pair(field, val))
    elif cls is ZSetValue:
        small = not value.big
        for member, score in value.d.items():
            text = b"0" if small and score == 0 else fpconv_score(score)
            state = _xor_into(state, _pair(member, text))
    elif cls is Stream:
        for ms, seq, items in _stream_entries(value):
            state = _mix_into(state, b"%d.%d" % (ms, seq))
            for part in items:
                state = _mix_into(state, part)
    else:
        raise TypeError("no digest for %r" % cls)
    return state


def _key_state(value, expires: bool, state: int = 0) -> int:
    state = _value_state(state, value)
    if expires:
        state = _xor_into(state, _EXPIRE_MARK)
    return state


def value_digest(db, key: bytes) -> bytes:
    """DEBUG DIGEST-VALUE's 20 bytes for key in db: zeros when missing;
    the key's name is not part of it."""
    value = db.data.get(key)
    if value is None:
        return ZERO
    return _key_state(value, key in db.expires).to_bytes(20, "big")


def dataset_digest(dbs) -> bytes:
    """DEBUG DIGEST's 20 bytes over the databases ``dbs`` (in index order)."""
    final = 0
    for db in dbs:
        data = db.data
        if not data:
            continue
        final = _mix_into(final, struct.pack(">I", db.index))
        expires = db.expires
        for key, value in data.items():
            own = _key_state(value, key in expires, _mix_into(0, key))
            final = _xor_into(final, own.to_bytes(20, "big"))
    return final.to_bytes(20, "big")
