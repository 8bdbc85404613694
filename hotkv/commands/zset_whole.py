"""Sorted-set commands over whole sets (Redis's t_zset.c, second half).

Owns the set algebra -- ZUNION, ZINTER, ZDIFF, ZINTERCARD and the STORE forms
ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE -- and ZRANDMEMBER and ZSCAN, the
commands that read a whole sorted set (or several, a plain set counting as
members of score 1) rather than a range of one.  The single-set commands are
hotkv/commands/zsets.py's, which this module uses for the typed lookup and
the (member, score) reply shape; it is listed right after zsets in
hotkv/commands/__init__.py's MODULES, so the command table keeps the order
it had when both were one module.

Invariants:
* a *STORE whose result is empty deletes the destination (and emits ``del``);
  a non-empty result replaces it whatever its type, as Redis's dbAdd/setKey;
* the result's encoding is chosen as Redis does: built as a skiplist and
  converted when small (Z*STORE), or grown one member at a time from the
  size hint (ZRANGESTORE; ``store_result`` is zsets' and serves both);
* a SUM that comes out NaN (inf + -inf) is 0, as Redis's zunionInterAggregate.
"""

from __future__ import annotations

import random

from ..core.registry import command, spec
from ..protocol import errors
from ..protocol.errors import CommandError, WrongType
from ..protocol.resp import format_double
from ..protocol.util import LLONG_MAX, string2ll
from ..types.sets import SetValue
from ..types.zsets import ZSetValue
from .hashes import RANDOM_REPLY_LIMIT, parse_cursor, random_member, scan_args, scan_container
from .zset_ranges import _long, parse_score
from .zsets import get_zset, pairs_reply, store_result

# ----------------------------------------------------------------------
# Set operations
# ----------------------------------------------------------------------

def _src_items(v):
    """member -> score of a zset or set (score 1) or None."""
    if v is None:
        return {}
    if type(v) is SetValue:
        return dict.fromkeys(v, 1.0)
    return v.d


def _aggregate(a, b, how):
    if how == 0:
        r = a + b
        return 0.0 if r != r else r
    if how == 1:
        return b if b < a else a
    return b if b > a else a


# AGGREGATE's argument -> _aggregate's ``how``.
_AGGREGATES = {b"sum": 0, b"min": 1, b"max": 2}


def _inter(srcs, weights, order, how, cardinality_only, limit, result) -> int:
    """ZINTER's members and scores into ``result`` (sources taken in
    ``order``); with ``cardinality_only`` only counts them, up to a non-zero
    ``limit``.  Returns the count (0 unless cardinality_only)."""
    maps = [_src_items(srcs[i]) for i in order]
    ws = [weights[i] for i in order]
    first = maps[0]
    count = 0
    for m, s0 in first.items():
        score = ws[0] * s0
        if score != score:
            score = 0.0
        for k in range(1, len(maps)):
            if maps[k] is first:
                v = s0 * ws[k]
            else:
                v = maps[k].get(m)
                if v is None:
                    break
                v *= ws[k]
            score = _aggregate(score, v, how)
        else:
            if cardinality_only:
                count += 1
                if limit and count >= limit:
                    break
            else:
                result[m] = score
    return count


def _zsetop(c, argv, numkeys_idx, op, dst, cardinality_only, name):
    """op: 'union', 'inter', 'diff'.  Returns the reply."""
    setnum = _long(argv[numkeys_idx])
    if setnum < 1:
        raise CommandError("ERR at least 1 input key is needed for '%s' command" % name)
    if setnum > len(argv) - (numkeys_idx + 1):
        raise CommandError(errors.SYNTAX)
    db = c.db
    srcs = []
    j = numkeys_idx + 1
    for i in range(setnum):
        v = db.lookup(argv[j])
        if v is not None and type(v) is not ZSetValue and type(v) is not SetValue:
            raise WrongType()
        srcs.append(v)
        j += 1
    weights = [1.0] * setnum
    how = 0
    withscores = False
    limit = 0
    n = len(argv)
    while j < n:
        remaining = n - j
        opt = argv[j].lower()
        if op != "diff" and not cardinality_only and remaining >= setnum + 1 and opt == b"weights":
            j += 1
            for i in range(setnum):
                weights[i] = parse_score(argv[j], "ERR weight value is not a float")
                j += 1
        elif op != "diff" and not cardinality_only and remaining >= 2 and opt == b"aggregate":
            how = _AGGREGATES.get(argv[j + 1].lower())
            if how is None:
                raise CommandError(errors.SYNTAX)
            j += 2
        elif remaining >= 1 and dst is None and not cardinality_only and opt == b"withscores":
            withscores = True
            j += 1
        elif cardinality_only and remaining >= 2 and opt == b"limit":
            limit = string2ll(argv[j + 1])
            if limit is None or limit < 0:
                raise CommandError("ERR LIMIT can't be negative")
            j += 2
        else:
            raise CommandError(errors.SYNTAX)
    result: dict = {}
    # Redis works through the sources smallest first (a stable sort), which
    # decides ties such as MIN(-0, 0) and the order sums are taken in.
    order = sorted(range(setnum), key=lambda i: 0 if srcs[i] is None else len(srcs[i]))
    if op == "inter":
        count = _inter(srcs, weights, order, how, cardinality_only, limit, result)
        if cardinality_only:
            return count
    elif op == "union":
        for i in order:
            w = weights[i]
            for m, s0 in _src_items(srcs[i]).items():
                score = w * s0
                if score != score:
                    score = 0.0
                old = result.get(m)
                result[m] = score if old is None else _aggregate(old, score, how)
    else:
        first = _src_items(srcs[0])
        others = [_src_items(s) for s in srcs[1:]]
        for m, s0 in first.items():
            for o in others:
                if m in o:
                    break
            else:
                result[m] = s0
    items = sorted((s, m) for m, s in result.items())
    if dst is not None:
        return store_result(c, dst, items, {"union": "zunionstore", "inter": "zinterstore",
                                      "diff": "zdiffstore"}[op])
    return pairs_reply(c, items, withscores)


# The destination, then the numkeys-counted sources (ZUNIONSTORE & co).
_STORE_SPECS = (spec("OW update"), spec("RO access", "index 2", "keynum 0 1 1"))


def _zop_keys(idx):
    def keys(argv):
        n = string2ll(argv[idx]) if len(argv) > idx else None
        if n is None or n < 1:
            return []
        first = [1] if idx == 2 else []
        return first + list(range(idx + 1, min(idx + 1 + n, len(argv))))
    return keys


@command("zunionstore", -4, "write denyoom", group="sorted_set", since="2.0.0",
         keys_fn=_zop_keys(2), key_specs=_STORE_SPECS,
         args="destination:k numkeys:i key:k1... [WEIGHTS weight:i...] [AGGREGATE (SUM | MIN | "
              "MAX)]",
         complexity="O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted "
                    "sets, and M being the number of elements in the resulting sorted set.")
def zunionstore(c, argv):
    """Stores the union of multiple sorted sets in a key."""
    return _zsetop(c, argv, 2, "union", argv[1], False, "zunionstore")


@command("zinterstore", -4, "write denyoom", group="sorted_set", since="2.0.0",
         keys_fn=_zop_keys(2), key_specs=_STORE_SPECS,
         args="destination:k numkeys:i key:k1... [WEIGHTS weight:i...] [AGGREGATE (SUM | MIN | "
              "MAX)]",
         complexity="O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K "
                    "being the number of input sorted sets and M being the number of elements in "
                    "the resulting sorted set.")
def zinterstore(c, argv):
    """Stores the intersect of multiple sorted sets in a key."""
    return _zsetop(c, argv, 2, "inter", argv[1], False, "zinterstore")


@command("zdiffstore", -4, "write denyoom", group="sorted_set", since="6.2.0",
         keys_fn=_zop_keys(2), key_specs=_STORE_SPECS, args="destination:k numkeys:i key:k1...",
         complexity="O(L + (N-K)log(N)) worst case where L is the total number of elements in "
                    "all the sets, N is the size of the first set, and K is the size of the result "
                    "set.")
def zdiffstore(c, argv):
    """Stores the difference of multiple sorted sets in a key."""
    return _zsetop(c, argv, 2, "diff", argv[1], False, "zdiffstore")


@command("zunion", -3, "readonly", group="sorted_set", since="6.2.0",
         keys_fn=_zop_keys(1), key_specs=(spec("RO access", "index 1", "keynum 0 1 1"),),
         args="numkeys:i key:k... [WEIGHTS weight:i...] [AGGREGATE (SUM | MIN | MAX)] [WITHSCORES]",
         complexity="O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted "
                    "sets, and M being the number of elements in the resulting sorted set.")
def zunion(c, argv):
    """Returns the union of multiple sorted sets."""
    return _zsetop(c, argv, 1, "union", None, False, "zunion")


@command("zinter", -3, "readonly", group="sorted_set", since="6.2.0",
         keys_fn=_zop_keys(1), key_specs=(spec("RO access", "index 1", "keynum 0 1 1"),),
         args="numkeys:i key:k... [WEIGHTS weight:i...] [AGGREGATE (SUM | MIN | MAX)] [WITHSCORES]",
         complexity="O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K "
                    "being the number of input sorted sets and M being the number of elements in "
                    "the resulting sorted set.")
def zinter(c, argv):
    """Returns the intersect of multiple sorted sets."""
    return _zsetop(c, argv, 1, "inter", None, False, "zinter")


@command("zintercard", -3, "readonly", group="sorted_set", since="7.0.0",
         keys_fn=_zop_keys(1), key_specs=(spec("RO access", "index 1", "keynum 0 1 1"),),
         args="numkeys:i key:k... [LIMIT limit:i]",
         complexity="O(N*K) worst case with N being the smallest input sorted set, K being the "
                    "number of input sorted sets.")
def zintercard(c, argv):
    """Returns the number of members of the intersect of multiple sorted sets."""
    return _zsetop(c, argv, 1, "inter", None, True, "zintercard")


@command("zdiff", -3, "readonly", group="sorted_set", since="6.2.0",
         keys_fn=_zop_keys(1), key_specs=(spec("RO access", "index 1", "keynum 0 1 1"),),
         args="numkeys:i key:k... [WITHSCORES]",
         complexity="O(L + (N-K)log(N)) worst case where L is the total number of elements in "
                    "all the sets, N is the size of the first set, and K is the size of the result "
                    "set.")
def zdiff(c, argv):
    """Returns the difference between multiple sorted sets."""
    return _zsetop(c, argv, 1, "diff", None, False, "zdiff")


# ----------------------------------------------------------------------
# ZRANDMEMBER / ZSCAN
# ----------------------------------------------------------------------

@command("zrandmember", -2, "readonly", (1, 1, 1), group="sorted_set", since="6.2.0",
         args="key:k options[count:i [WITHSCORES]]",
         complexity="O(N) where N is the number of members returned")
def zrandmember(c, argv):
    """Returns one or more random members from a sorted set."""
    if len(argv) >= 3:
        count = _long(argv[2])
        if count < -LLONG_MAX:
            raise CommandError("ERR value is out of range, value must between "
                               "-9223372036854775807 and 9223372036854775807")
        if len(argv) > 4 or (len(argv) == 4 and argv[3].lower() != b"withscores"):
            raise CommandError(errors.SYNTAX)
        withscores = len(argv) == 4
        if withscores and (count < -LLONG_MAX // 2 or count > LLONG_MAX // 2):
            raise CommandError("ERR value is out of range")
        z = get_zset(c, argv[1])
        if z is None or count == 0:
            return []
        d = z.d
        if count < 0:
            if -count > RANDOM_REPLY_LIMIT:
                raise CommandError("ERR value is out of range")
            items = [(d[m], m) for m in random.choices(list(d), k=-count)]
        elif count >= len(d):
            # the whole set, as Redis's zset iterator walks it: from the top
            items = list(reversed(z.sl))
        elif not z.big:
            # a listpack sample comes out in listpack (ascending) order
            picked = sorted(random.sample(range(len(z.sl)), count))
            sl = z.sl
            items = [sl[i] for i in picked]
        else:
            items = [(d[m], m) for m in random.sample(list(d), count)]
        return pairs_reply(c, items, withscores)
    z = get_zset(c, argv[1])
    if z is None:
        return None
    return random_member(z.d)


@command("zscan", -3, "readonly", (1, 1, 1), group="sorted_set", since="2.8.0",
         args="key:k cursor:i [MATCH pattern:p] [COUNT count:i] [NOSCORES]",
         complexity="O(1) for every call. O(N) for a complete iteration, including enough "
                    "command calls for the cursor to return back to 0. N is the number of elements "
                    "inside the collection.", history=(("8.0.0", "Added noscores option."),))
def zscan(c, argv):
    """Iterates over members and scores of a sorted set."""
    cursor = parse_cursor(argv[2])
    z = get_zset(c, argv[1])
    if z is None:
        return [b"0", []]
    count, match, only_keys = scan_args(argv, 3, "zset")
    small = not z.big
    if small:
        members = [m for _, m in z.sl]
        nxt, members = scan_container(members, cursor, count, match, True)
    else:
        nxt, members = scan_container(z.d, cursor, count, match, False)
    if only_keys:
        return [b"%d" % nxt, members]
    out = []
    d = z.d
    # a listpack holds the score as d2string wrote it; a skiplist's SCAN
    # formats the double with "%.17Lg" (Valkey's scanCallback, ld2string)
    fmt = format_double if small else _scan_double
    for m in members:
        out.append(m)
        out.append(fmt(d[m]))
    return [b"%d" % nxt, out]


def _scan_double(score: float) -> bytes:
    """ld2string(LD_STR_AUTO) of a double: "%.17Lg", "inf" / "-inf"."""
    return b"%.17g" % score
