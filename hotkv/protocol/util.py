"""Argument parsing and matching rules shared by command modules.

Redis is strict about numbers: ``string2ll`` accepts an optional '-' and
digits with no leading zeros, nothing else, within a signed 64-bit range
(floats are parsed where their rules live: hotkv.protocol.longdouble for
(H)INCRBYFLOAT, commands/zsets for scores, commands/sort for sort keys).  Glob
matching follows ``stringmatchlen`` (``*``, ``?``, ``[...]`` with ranges and
``^`` negation, ``\\`` escapes; byte-wise, optionally case-insensitive).
Everything here is pure: no state, no I/O.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from .errors import NOT_INTEGER, CommandError

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


def upper(arg: bytes) -> bytes:
    return arg.upper()


# ----------------------------------------------------------------------
# Glob matching (stringmatchlen)
# ----------------------------------------------------------------------
#
# Redis matches globs with a recursive byte walker.  Its observable rules,
# which this implementation reproduces without the recursion:
# * every token but ``*`` consumes exactly one byte; ``*`` any run of bytes;
# * a non-empty pattern never matches the empty string ("*" included: KEYS
#   and SCAN special-case a lone "*", and so does compile_glob unless exact);
# * ``[...]``: ``^`` negates, ``a-z`` ranges (ends swapped if reversed, bytes
#   compared as *signed* chars), ``\x`` a literal; an unterminated class
#   runs to the end of the pattern; ``\`` escapes one byte, a trailing
#   ``\`` is literal;
# * nocase folds ASCII letters only; an escaped byte inside a class is
#   compared exactly even then;
# * a pattern with more than 1000 ``*`` groups that are followed by more
#   pattern matches nothing (Redis's recursion limit).
#
# A compiled glob splits the pattern at its stars into fixed-length
# segments; segments are found left to right, leftmost first, which is
# exact for globs and linear-ish where the recursive walker can be
# exponential.

_STAR = None
_ALL = frozenset(range(256))
_GLOB_CACHE: dict = {}
_GLOB_CACHE_MAX = 4096
_MAX_NESTING = 1000


def _lower(c: int) -> int:
    return c + 32 if 65 <= c <= 90 else c


def _signed(c: int) -> int:
    return c - 256 if c >= 128 else c


def _lit_set(c: int, nocase: bool) -> frozenset:
    if nocase and (65 <= c <= 90 or 97 <= c <= 122):
        return frozenset((c | 32, c & ~32))
    return frozenset((c,))


def _class_set(items, negate: bool, nocase: bool) -> frozenset:
    """The bytes one ``[...]`` accepts.  Linear in the class's length: the
    ranges are merged first, so a huge class cannot cost 256 x its size."""
    exact, plain, ranges = set(), set(), []
    for kind, x, y in items:
        if kind == 0:      # escaped byte: exact
            exact.add(x)
        elif kind == 1:    # plain byte
            plain.add(_lower(x) if nocase else x)
        else:              # range over signed chars, folded after ordering
            ranges.append((x, y))
    ranges.sort()
    merged: list = []
    for lo, hi in ranges:
        if lo > hi:
            continue       # e.g. [Z-a] folded: empty
        if merged and lo <= merged[-1][1] + 1:
            if hi > merged[-1][1]:
                merged[-1][1] = hi
        else:
            merged.append([lo, hi])
    if not merged:
        # No ranges (the common case): the set directly, no 256-byte scan.
        matched = set(exact)
        for x in plain:
            matched.add(x)
            if nocase and 97 <= x <= 122:
                matched.add(x - 32)
        return frozenset(matched if not negate else _ALL - matched)
    starts = [m[0] for m in merged]
    matched = set()
    for b in range(256):
        hit = b in exact or (_lower(b) if nocase else b) in plain
        if not hit and merged:
            v = _signed(b)
            if nocase:
                v = _lower(v)
            i = bisect_right(starts, v) - 1
            hit = i >= 0 and v <= merged[i][1]
        if hit != negate:
            matched.add(b)
    return frozenset(matched)


def glob_tokens(pattern: bytes, nocase: bool = False) -> list:
    """The pattern as a list of tokens: ``None`` for a star run, else the
    frozenset of bytes that one position accepts."""
    p = pattern
    n = len(p)
    tokens = []
    classes: dict = {}
    i = 0
    while i < n:
        c = p[i]
        if c == 42:  # '*'
            while i + 1 < n and p[i + 1] == 42:
                i += 1
            tokens.append(_STAR)
        elif c == 63:  # '?'
            tokens.append(_ALL)
        elif c == 91:  # '['
            i += 1
            negate = i < n and p[i] == 94
            if negate:
                i += 1
            items = []
            while True:
                if i < n and p[i] == 92 and n - i >= 2:
                    i += 1
                    items.append((0, p[i], 0))
                elif i < n and p[i] == 93:
                    break
                elif i >= n:
                    i -= 1   # the class ran off the end: it ends the pattern
                    break
                elif n - i >= 3 and p[i + 1] == 45:
                    lo, hi = _signed(p[i]), _signed(p[i + 2])
                    if lo > hi:
                        lo, hi = hi, lo
                    if nocase:
                        lo, hi = _lower(lo), _lower(hi)
                    items.append((2, lo, hi))
                    i += 2
                else:
                    items.append((1, p[i], 0))
                i += 1
            ckey = (tuple(items), negate)
            cset = classes.get(ckey)
            if cset is None:
                cset = classes[ckey] = _class_set(items, negate, nocase)
            tokens.append(cset)
        else:
            if c == 92 and n - i >= 2:  # '\\' escapes the next byte
                i += 1
                c = p[i]
            tokens.append(_lit_set(c, nocase))
        i += 1
    return tokens


def _token_regex(s: frozenset) -> bytes:
    if len(s) == 256:
        return b"."
    if len(s) == 1:
        return b"\\x%02x" % next(iter(s))
    if not s:
        return b"[^\\x00-\\xff]"
    ranges = []
    run_start = prev = None
    for b in sorted(s):
        if prev is not None and b == prev + 1:
            prev = b
            continue
        if run_start is not None:
            ranges.append((run_start, prev))
        run_start = prev = b
    ranges.append((run_start, prev))
    return b"[" + b"".join(
        b"\\x%02x" % a if a == b else b"\\x%02x-\\x%02x" % (a, b) for a, b in ranges) + b"]"


def _segment_regex(seg) -> bytes:
    # Runs of the same token become one counted repeat, which keeps the
    # regex (and its compile time) small for long repetitive patterns.
    parts = []
    done: dict = {}
    i, n = 0, len(seg)
    while i < n:
        j = i + 1
        while j < n and seg[j] == seg[i]:
            j += 1
        rx = done.get(seg[i])
        if rx is None:
            rx = done[seg[i]] = _token_regex(seg[i])
        parts.append(rx if j - i == 1 else rx + b"{%d}" % (j - i))
        i = j
    return b"".join(parts)


class _Segment:
    __slots__ = ("size", "literal", "regex")

    def __init__(self, seg):
        self.size = len(seg)
        if all(len(s) == 1 for s in seg):
            self.literal = bytes(next(iter(s)) for s in seg)
            self.regex = None
            return
        self.literal = None
        rx = _segment_regex(seg)
        # Python compiles a regex at tens of microseconds a token: a huge
        # pattern is matched by a plain loop instead of stalling the server.
        self.regex = re.compile(rx, re.DOTALL) if len(rx) <= 8192 else _SetsMatcher(seg)


class _Found:
    __slots__ = ("_end",)

    def __init__(self, end: int):
        self._end = end

    def end(self) -> int:
        return self._end


class _SetsMatcher:
    """The subset of a compiled regex's API that _compile uses, for one
    fixed-length segment given as its per-position byte sets."""
    __slots__ = ("sets", "size")

    def __init__(self, seg):
        self.sets = list(seg)
        self.size = len(seg)

    def _at(self, s, p: int) -> bool:
        for k, allowed in enumerate(self.sets):
            if s[p + k] not in allowed:
                return False
        return True

    def match(self, s, pos: int = 0):
        return self if len(s) - pos >= self.size and self._at(s, pos) else None

    def fullmatch(self, s):
        return self if len(s) == self.size and self._at(s, 0) else None

    def search(self, s, pos: int, end: int):
        for p in range(pos, end - self.size + 1):
            if self._at(s, p):
                return _Found(p + self.size)
        return None


def compile_glob(pattern: bytes, nocase: bool = False, exact: bool = False):
    """A callable ``f(string) -> bool`` with Redis's stringmatchlen result.

    A lone ``*`` matches everything, the empty string included, unless
    ``exact``: that is how every keyspace caller treats it in Redis (KEYS,
    SCAN MATCH, ACL ``~*``), while stringmatchlen itself -- and so
    PSUBSCRIBE and PUBSUB CHANNELS, which pass ``exact=True`` -- never
    matches "" with a non-empty pattern."""
    if pattern == b"*" and not exact:
        return _match_all
    key = (pattern, nocase)
    fn = _GLOB_CACHE.get(key)
    if fn is None:
        fn = _compile(pattern, nocase)
        if len(_GLOB_CACHE) >= _GLOB_CACHE_MAX:
            _GLOB_CACHE.clear()
        _GLOB_CACHE[key] = fn
    return fn


def _match_all(string) -> bool:
    return True


def _compile(pattern: bytes, nocase: bool):
    if not pattern:
        return lambda s: not s
    tokens = glob_tokens(pattern, nocase)
    segments = [[]]
    for t in tokens:
        if t is _STAR:
            segments.append([])
        else:
            segments[-1].append(t)
    stars = len(segments) - 1
    if stars - (1 if not segments[-1] else 0) > _MAX_NESTING:
        return lambda s: False
    if any(not t for seg in segments for t in seg):
        return lambda s: False    # an empty class: nothing can match it
    segs = [_Segment(s) for s in segments]
    if stars == 0:
        only = segs[0]
        if only.literal is not None:
            lit = only.literal
            return lambda s: s == lit
        rx = only.regex.fullmatch
        return lambda s: rx(s) is not None
    head, tail, mids = segs[0], segs[-1], segs[1:-1]
    minlen = sum(s.size for s in segs)
    if not mids and not head.size and not tail.size:
        return lambda s: len(s) > 0
    if not mids and head.literal is not None and tail.literal is not None:
        hl, tl = head.literal, tail.literal
        return lambda s: len(s) >= minlen and len(s) > 0 and s.startswith(hl) and s.endswith(tl)
    hsize, tsize = head.size, tail.size

    def match(s) -> bool:
        n = len(s)
        if n < minlen or n == 0:
            return False
        if hsize:
            if head.literal is not None:
                if not s.startswith(head.literal):
                    return False
            elif head.regex.match(s) is None:
                return False
        end = n - tsize
        if tsize:
            if tail.literal is not None:
                if not s.endswith(tail.literal):
                    return False
            elif tail.regex.match(s, end) is None:
                return False
        pos = hsize
        for seg in mids:
            if seg.literal is not None:
                k = s.find(seg.literal, pos, end)
                if k < 0:
                    return False
                pos = k + seg.size
            else:
                m = seg.regex.search(s, pos, end)
                if m is None:
                    return False
                pos = m.end()
        return True

    return match


def stringmatch(pattern: bytes, string: bytes, nocase: bool = False) -> bool:
    """Redis's stringmatchlen(pattern, string, nocase) == 1."""
    return compile_glob(pattern, nocase, exact=True)(string)
