"""Sorted-set ranges: parsing score and lex bounds, and finding what a
range selects in a ``ZSetValue`` (Redis's t_zset.c range helpers).

No command is registered here; hotkv/commands/zsets.py's range commands
(ZRANGE and its BYSCORE / BYLEX / REV / LIMIT forms, ZCOUNT, ZLEXCOUNT,
ZREMRANGEBY*, ZRANGESTORE) use it.  Owns ``parse_score`` (Redis's strict
string2d for values), the lenient strtod of range bounds (``(`` for an
exclusive bound, ``-inf`` / ``+inf``), lex bounds (``[`` / ``(`` / ``-`` /
``+``), and the slice of the value's ``SortedList`` a rank, score or lex
range selects, offsets and limits included.

Invariants: a span is ``(lo, hi)`` indexes into ``z.sl`` with ``lo <= hi``
(an empty range is ``lo == hi``); ``_range_items`` returns ``(score,
member)`` items in reply order, and a negative LIMIT offset behaves as the
encoding Valkey would have (a listpack: nothing; a skiplist: counted from
the far end, ``z.big``).
"""

from __future__ import annotations

import math
import re

from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.util import string2ll

_INF = math.inf
_nextafter = math.nextafter


# ----------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------

_STRTOD_DEC = re.compile(
    rb"[ \t\n\v\f\r]*([+-]?)(?:([0-9]*\.?[0-9]*)(?:[eE][+-]?[0-9]+)?|(inf(?:inity)?|nan)|"
    rb"(0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?))\Z",
    re.IGNORECASE)


def _strtod(data: bytes, strict: bool):
    """C strtod over the whole of data.  Returns the float or None.  strict
    (string2d): no leading space, no overflow/underflow to zero."""
    if strict and (not data or data[:1].isspace()):
        return None
    m = _STRTOD_DEC.match(data)
    if m is None:
        return None
    sign, dec, word, hexa = m.groups()
    if word is not None:
        if word.lower() == b"nan":
            return None
        return -_INF if sign == b"-" else _INF
    if hexa is not None:
        try:
            v = float.fromhex(data.strip().decode())
        except (ValueError, OverflowError):
            return None if strict else (-_INF if sign == b"-" else _INF)
        return v
    if not dec or dec == b".":
        if strict:
            return None
        # strtod converts nothing: value 0 and the end pointer at the start
        return 0.0 if not data else None
    v = float(data)
    if strict:
        if math.isinf(v):
            return None
        if v == 0.0 and dec.strip(b"0.") != b"":
            return None
    return v


def parse_score(data: bytes, message: str = errors.NOT_FLOAT) -> float:
    v = _strtod(data, True)
    if v is None:
        raise CommandError(message)
    return v


def _range_bound(data: bytes):
    ex = data[:1] == b"("
    v = _strtod(data[1:] if ex else data, False)
    if v is None or v != v:
        raise CommandError("ERR min or max is not a float")
    return v, ex


def _lex_bound(data: bytes):
    """(kind, value, exclusive): kind -1 is '-', 1 is '+', 0 a string."""
    c = data[:1]
    if c == b"+" and len(data) == 1:
        return (1, b"", True)
    if c == b"-" and len(data) == 1:
        return (-1, b"", True)
    if c == b"(":
        return (0, data[1:], True)
    if c == b"[":
        return (0, data[1:], False)
    raise CommandError("ERR min or max not valid string range item")


def _long(data: bytes) -> int:
    v = string2ll(data)
    if v is None:
        raise CommandError(errors.NOT_INTEGER)
    return v


# ----------------------------------------------------------------------
# Range search
# ----------------------------------------------------------------------

def _score_lo(sl, score, ex) -> int:
    """First position whose score is >= score (> if ex)."""
    if ex:
        if score == _INF:
            return len(sl)
        score = _nextafter(score, _INF)
    return sl.bisect_left((score,))


def _score_span(z, mn, mnex, mx, mxex):
    sl = z.sl
    lo = _score_lo(sl, mn, mnex)
    hi = _score_lo(sl, mx, not mxex)
    return lo, max(lo, hi)


def _lex_first(sl, pred) -> int:
    """First position whose member satisfies pred (pred monotonic)."""
    lo, hi = 0, len(sl)
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(sl[mid][1]):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _lex_span(z, mn, mx):
    sl = z.sl
    kind, v, ex = mn
    if kind == -1:
        lo = 0
    elif kind == 1:
        lo = len(sl)
    elif ex:
        lo = _lex_first(sl, lambda m: m > v)
    else:
        lo = _lex_first(sl, lambda m: m >= v)
    kind, v, ex = mx
    if kind == 1:
        hi = len(sl)
    elif kind == -1:
        hi = 0
    elif ex:
        hi = _lex_first(sl, lambda m: m >= v)
    else:
        hi = _lex_first(sl, lambda m: m > v)
    return lo, max(lo, hi)


RANK, SCORE, LEX = 0, 1, 2


def _range_items(z, rangetype, reverse, a, b, offset, limit):
    """(score, member) items in reply order."""
    sl = z.sl
    n = len(sl)
    if rangetype == RANK:
        start, end = a, b
        if start < 0:
            start += n
        if end < 0:
            end += n
        if start < 0:
            start = 0
        if start > end or start >= n:
            return []
        if end >= n:
            end = n - 1
        if reverse:
            return list(sl.islice(n - 1 - end, n - start, reverse=True))
        return list(sl.islice(start, end + 1))
    if (offset > 0 and offset >= n) or limit == 0:
        return []
    if rangetype == SCORE:
        lo, hi = _score_span(z, a[0], a[1], b[0], b[1])
    else:
        lo, hi = _lex_span(z, a, b)
    if offset < 0:
        # A listpack walks |offset| steps off the end: nothing.  A skiplist
        # counts a negative offset from the far end of the range.
        if not z.big:
            return []
        k = -offset
        take = k if limit < 0 else min(limit, k)
        if reverse:
            p = lo + k - 1
            if p >= hi:
                return []
            return list(sl.islice(p + 1 - take, p + 1, reverse=True))
        p = hi - k
        if p < lo:
            return []
        return list(sl.islice(p, p + take))
    if reverse:
        hi -= offset
        if hi <= lo:
            return []
        start = lo if limit < 0 else max(lo, hi - limit)
        return list(sl.islice(start, hi, reverse=True))
    lo += offset
    if lo >= hi:
        return []
    stop = hi if limit < 0 else min(hi, lo + limit)
    return list(sl.islice(lo, stop))
