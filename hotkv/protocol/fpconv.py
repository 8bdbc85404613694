"""Doubles as Valkey writes them: fpconv_dtoa (Grisu2) and d2string.

Owns the text of a double in every reply and value where Valkey prints one
(ZSCORE and WITHSCORES, RESP3 doubles, zset scores in listpacks, Lua
numbers passed as arguments, DEBUG DIGEST): ``dtoa`` is fpconv_dtoa,
``d2string`` is d2string (an integral value within +-2**62 in full, else
dtoa).  Grisu2's digits are not always the shortest round trip -- 5e22 is
written 49999999999999996000000, and about one double in a thousand, at any
magnitude, differs from Python's repr -- so the digits come from Grisu2
itself, over Python ints (each C uint64_t operation masked to 64 bits).

Invariants: no hotkv imports (resp, the lowest layer, uses it); ``dtoa``
round-trips (float(dtoa(x)) == x for every finite x).
"""

from __future__ import annotations

import math
import struct

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


def dtoa(value: float) -> bytes:
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


def d2string(value: float) -> bytes:
    """Valkey's d2string: nan/inf/-inf, "0"/"-0", an integral value within
    +-2**62 in full, else ``dtoa``."""
    if value != value:
        return b"nan"
    if value == _INF or value == -_INF:
        return b"inf" if value > 0 else b"-inf"
    if value == 0:
        return b"-0" if math.copysign(1.0, value) < 0 else b"0"
    if -4611686018427387904.0 <= value <= 4611686018427387904.0 and value == int(value):
        return b"%d" % int(value)
    return _dtoa_cached(value)


_INF = float("inf")
_cache: dict = {}


def _dtoa_cached(value: float) -> bytes:
    """dtoa through a bounded cache: a sorted set's scores are printed again
    at every read, and Grisu2 in Python costs ~10 us a value."""
    text = _cache.get(value)
    if text is None:
        if len(_cache) >= 65536:
            _cache.clear()
        text = _cache[value] = dtoa(value)
    return text
