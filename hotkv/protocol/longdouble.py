"""x87 80-bit long double arithmetic, exactly, for INCRBYFLOAT and HINCRBYFLOAT.

Redis computes these increments in C ``long double`` (64-bit significand)
and prints them with ``%.17Lf`` minus trailing zeros; Python floats would
differ in the last digits (0.1 + 0.2).  A finite value is a pair (m, e)
meaning m * 2**e with |m| < 2**64; plain integer arithmetic keeps every step
exact until the one rounding C would do.  Pure functions, no state.
"""

from __future__ import annotations

import re

# A finite long double is a pair (m, e) meaning m * 2**e, with |m| < 2**64
# (a 64-bit significand) and e >= -16445 (the subnormal quantum); zero is
# (0, 0).  Plain integer arithmetic keeps every step exact until the one
# rounding C would do.
LD_MANT_BITS = 64
LD_MIN_QUANTUM = -16445        # 2**-16445: the smallest subnormal
LD_MAX_EXP = 16384             # values >= 2**16384 overflow to infinity
MAX_LONG_DOUBLE_CHARS = 5 * 1024
INF = "inf"
LD_ZERO = (0, 0)
_TEN17 = 10 ** 17

_LD_RE = re.compile(
    rb"([+-]?)(?:([0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?"
    rb"|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP]([+-]?[0-9]+))?"
    rb"|([iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
    rb"|[nN][aA][nN](?:\([0-9A-Za-z_]*\))?)\Z")


def _ld_round(n: int, d: int):
    """n/d (d > 0) rounded to the nearest long double, ties to even: an
    (m, e) pair, LD_ZERO on underflow, INF on overflow."""
    if n == 0:
        return LD_ZERO
    neg = n < 0
    if neg:
        n = -n
    e = n.bit_length() - d.bit_length()
    # normalise e so that 2**e <= n/d < 2**(e+1)
    if (n << -e if e < 0 else n) < (d << e if e > 0 else d):
        e -= 1
    sh = max(e - (LD_MANT_BITS - 1), LD_MIN_QUANTUM)
    if sh >= 0:
        d <<= sh
    else:
        n <<= -sh
    q, r = divmod(n, d)
    r <<= 1
    if r > d or (r == d and q & 1):
        q += 1
    if q == 0:
        return LD_ZERO
    if q.bit_length() + sh > LD_MAX_EXP:
        return INF
    return (-q if neg else q, sh)


def _ld_add(a, b):
    (ma, ea), (mb, eb) = a, b
    e = min(ea, eb)
    n = (ma << (ea - e)) + (mb << (eb - e))
    return _ld_round(n << e, 1) if e >= 0 else _ld_round(n, 1 << -e)


def parse_long_double(data: bytes):
    """strtold as Redis's string2ld uses it: an (m, e) pair, ("inf", sign)
    for an infinity literal, or None when it is not a valid float (empty,
    too long, leading space, trailing garbage or NUL, NaN, overflow,
    underflow to 0)."""
    if not data or len(data) >= MAX_LONG_DOUBLE_CHARS:
        return None
    m = _LD_RE.match(data)     # the whole string: an embedded NUL is garbage
    if m is None:
        return None
    sign, dec, dexp, hexm, hexp, inf = m.groups()
    neg = sign == b"-"
    if inf:
        return (INF, neg)
    if dec is None and hexm is None:
        return None  # NaN
    if dec is not None:
        intpart, _, frac = dec.partition(b".")
        digits = (intpart + frac).lstrip(b"0")
        if not digits:
            return LD_ZERO
        k = (int(dexp) if dexp else 0) - len(frac)
        # Bound the magnitude before computing 10**k exactly.
        if k + len(digits) - 1 > 4933:
            return None                  # overflow: HUGE_VAL, ERANGE
        if k + len(digits) < -4952:
            return None                  # underflow to zero, ERANGE
        mant = _from_digits(digits)
        v = _ld_round(mant * 10 ** k, 1) if k >= 0 else _ld_round(mant, 10 ** -k)
    else:
        intpart, _, frac = hexm.partition(b".")
        digits = (intpart + frac).lstrip(b"0")
        if not digits:
            return LD_ZERO
        k = (int(hexp) if hexp else 0) - 4 * len(frac)
        mant = int(digits, 16)
        bits = mant.bit_length() + k
        if bits > LD_MAX_EXP + 1 or bits < LD_MIN_QUANTUM - 2:
            return None
        v = _ld_round(mant << k, 1) if k >= 0 else _ld_round(mant, 1 << -k)
    if v is INF or v is LD_ZERO:
        return None
    return (-v[0], v[1]) if neg else v


_CHUNK = 10 ** 1000


def _from_digits(d: bytes) -> int:
    """int(d) for a decimal digit string, also past Python's 4300-digit
    guard (inputs are at most 5k characters: MAX_LONG_DOUBLE_CHARS)."""
    if len(d) <= 4000:
        return int(d)
    n = 0
    for i in range(0, len(d), 1000):
        chunk = d[i:i + 1000]
        n = n * 10 ** len(chunk) + int(chunk)
    return n


def _digits(n: int) -> bytes:
    """Decimal digits of n >= 0.  Python refuses int -> str past 4300 digits
    (a process-wide guard we must not lift); a long double near its maximum
    has 4933 integer digits, so big values are printed in chunks."""
    if n < _CHUNK:
        return b"%d" % n
    parts = []
    while n >= _CHUNK:
        n, r = divmod(n, _CHUNK)
        parts.append(b"%01000d" % r)
    parts.append(b"%d" % n)
    return b"".join(reversed(parts))


def format_long_double(v) -> bytes:
    """C's printf("%.17Lf") of v, trailing zeros (and a bare '.') removed,
    "-0" printed as "0" (Redis's ld2string in human mode)."""
    m, e = v
    neg = m < 0
    if neg:
        m = -m
    if e >= 0:
        scaled = (m << e) * _TEN17
    else:
        d = 1 << -e
        scaled, r = divmod(m * _TEN17, d)
        r <<= 1
        if r > d or (r == d and scaled & 1):   # glibc: ties to even
            scaled += 1
    digits = _digits(scaled)
    if len(digits) <= 17:
        digits = b"0" * (18 - len(digits)) + digits
    s = (digits[:-17] + b"." + digits[-17:]).rstrip(b"0")
    if s.endswith(b"."):
        s = s[:-1]
    if neg and s != b"0":
        s = b"-" + s
    return s


def add(a, b):
    """a + b rounded to a long double (INF on overflow)."""
    return _ld_add(a, b)
