"""Argument parsing and matching rules shared by command modules.

Redis is strict about numbers: ``string2ll`` accepts an optional '-' and
digits with no leading zeros, nothing else, within a signed 64-bit range;
``strtold``-style floats accept what C accepts, but never NaN.  Glob
matching follows ``stringmatchlen`` (``*``, ``?``, ``[...]`` with ranges and
``^`` negation, ``\\`` escapes; byte-wise, optionally case-insensitive).
Everything here is pure: no state, no I/O.
"""

from __future__ import annotations

import math
import re

from .errors import CommandError, NOT_INTEGER, NOT_FLOAT, SYNTAX

LLONG_MAX = 9223372036854775807
LLONG_MIN = -9223372036854775808

_INT_RE = re.compile(rb"-?[1-9][0-9]{0,19}\Z|0\Z")


def string2ll(data: bytes):
    """Strict integer parse; None when data is not a canonical 64-bit int."""
    if _INT_RE.match(data) is None:
        return None
    v = int(data)
    if v > LLONG_MAX or v < LLONG_MIN:
        return None
    return v


def parse_int(data: bytes, message: str = NOT_INTEGER) -> int:
    v = string2ll(data)
    if v is None:
        raise CommandError(message)
    return v


def parse_positive_int(data: bytes, message: str) -> int:
    v = string2ll(data)
    if v is None or v < 0:
        raise CommandError(message)
    return v


_FLOAT_RE = re.compile(
    rb"[ \t\n\v\f\r]*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?)\Z",
    re.IGNORECASE)


def string2d(data: bytes):
    """A float as Redis's string2d/strtod accepts it (no NaN, no trailing
    space); None when it is not one."""
    if not data or data[-1:].isspace() or _FLOAT_RE.match(data) is None:
        return None
    try:
        v = float(data)
    except ValueError:
        return None
    if math.isnan(v):
        return None
    return v


def parse_float(data: bytes, message: str = NOT_FLOAT) -> float:
    v = string2d(data)
    if v is None:
        raise CommandError(message)
    return v


def ll2bytes(v: int) -> bytes:
    return b"%d" % v


def syntax_error():
    return CommandError(SYNTAX)


def upper(arg: bytes) -> bytes:
    return arg.upper()


# ----------------------------------------------------------------------
# Glob matching (stringmatchlen)
# ----------------------------------------------------------------------

def stringmatch(pattern: bytes, string: bytes, nocase: bool = False) -> bool:
    return _match(pattern, 0, string, 0, nocase, [0]) == 1


def _match(p: bytes, pi: int, s: bytes, si: int, nocase: bool, budget) -> int:
    """1 match, 0 no match, -1 give up (Redis skips on too much nesting)."""
    plen, slen = len(p), len(s)
    budget[0] += 1
    if budget[0] > 1000:
        return 0
    while pi < plen and si <= slen:
        c = p[pi]
        if c == 42:  # '*'
            while pi + 1 < plen and p[pi + 1] == 42:
                pi += 1
            if pi + 1 == plen:
                return 1
            while si < slen:
                r = _match(p, pi + 1, s, si, nocase, budget)
                if r == 1:
                    return 1
                si += 1
            return 0
        if si >= slen:
            break
        if c == 63:  # '?'
            si += 1
        elif c == 91:  # '['
            pi += 1
            neg = pi < plen and p[pi] == 94
            if neg:
                pi += 1
            matched = False
            while True:
                if pi >= plen:
                    pi -= 1
                    break
                pc = p[pi]
                if pc == 92 and pi + 2 <= plen - 1 + 1 and pi + 1 < plen:
                    pi += 1
                    if p[pi] == s[si]:
                        matched = True
                elif pc == 93:
                    break
                elif pi + 2 < plen and p[pi + 1] == 45:  # range a-z
                    start, end = pc, p[pi + 2]
                    ch = s[si]
                    if start > end:
                        start, end = end, start
                    if nocase:
                        start, end, ch = _lower(start), _lower(end), _lower(ch)
                    pi += 2
                    if start <= ch <= end:
                        matched = True
                else:
                    if nocase:
                        if _lower(pc) == _lower(s[si]):
                            matched = True
                    elif pc == s[si]:
                        matched = True
                pi += 1
            if neg:
                matched = not matched
            if not matched:
                return 0
            si += 1
        elif c == 92 and pi + 1 < plen:  # '\\' escape
            pi += 1
            if not _eq(p[pi], s[si], nocase):
                return 0
            si += 1
        else:
            if not _eq(c, s[si], nocase):
                return 0
            si += 1
        pi += 1
        if si == slen:
            while pi < plen and p[pi] == 42:
                pi += 1
            break
    return 1 if pi == plen and si == slen else 0


def _lower(c: int) -> int:
    return c + 32 if 65 <= c <= 90 else c


def _eq(a: int, b: int, nocase: bool) -> bool:
    return a == b or (nocase and _lower(a) == _lower(b))


def compile_glob(pattern: bytes):
    """A callable matching bytes against pattern; fast for plain patterns."""
    if pattern == b"*":
        return lambda s: True
    if not any(c in pattern for c in b"*?[\\"):
        return lambda s: s == pattern
    return lambda s: stringmatch(pattern, s)
