"""Sorted-set commands (Redis's t_zset.c).

Owns the Z* commands of one sorted set -- add, remove, score, rank, count,
range, pop -- and the blocking pops (BZPOPMIN/BZPOPMAX/BZMPOP through
``hotkv.core.blocking``); the commands over whole sets (the ZUNION / ZINTER /
ZDIFF family, ZRANDMEMBER, ZSCAN) are hotkv/commands/zset_whole.py's, which
uses ``get_zset``, ``pairs_reply`` and ``store_result`` from here.  The value,
``ZSetValue`` (a dict member -> score plus a ``SortedList`` of
``(score, member)`` in Redis's order, so rank, range and pop are
O(log n + k)), is hotkv/types/zsets.py's; parsing range bounds and finding
what a range selects is hotkv/commands/zset_ranges.py's.

Invariants:
* a sorted set is never empty in the keyspace: the command that removes its
  last member deletes the key (and emits ``del``), a *STORE whose result is
  empty deletes the destination;
* scores are parsed as Redis's string2d (strict) for values and strtod
  (lenient) for range bounds, and replied as doubles (RESP3 ``,``; RESP2 a
  bulk string in Redis's shortest form);
* popping commands that choose what they pop (BZPOP*, ZMPOP, BZMPOP) are
  logged as ZPOPMIN/ZPOPMAX of the served key, as Redis does.
"""

from __future__ import annotations

from sortedcontainers import SortedList

from ..core import blocking
from ..core.registry import command, spec
from ..protocol import errors
from ..protocol.errors import CommandError, WrongType
from ..protocol.resp import NULL_ARRAY
from ..protocol.util import string2ll
from ..types.zsets import ZSetValue
from .hashes import (
    cfg,
)
from .zset_ranges import (
    LEX,
    RANK,
    SCORE,
    _lex_bound,
    _lex_span,
    _long,
    _range_bound,
    _range_items,
    _score_span,
    parse_score,
)

# ----------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------

def get_zset(c, key):
    return c.db.lookup_typed(key, ZSetValue)


def _emptied(c, db, key, z):
    if not z.d:
        db.delete(key)
        c.server.event(db, key, "g", "del")


def pairs_reply(c, items, withscores):
    """(score, member) items -> reply list."""
    if not withscores:
        return [m for _, m in items]
    if c.resp3:
        return [[m, s] for s, m in items]
    out = []
    for s, m in items:
        out.append(m)
        out.append(s)
    return out


def store_result(c, dst, items, event, sequential=False, hint=0):
    """Store (score, member) items (already unique) at dst.  ``sequential``:
    Redis adds them one by one to a zset created for ``hint`` elements (a
    skiplist past the entries limit, else a listpack that converts when it
    overflows: ZRANGESTORE, whose hint is the length of a rank range);
    otherwise it builds a skiplist and converts the result to a listpack if
    it is small (Z*STORE)."""
    db = c.db
    if items:
        entries = cfg(c, "zset-max-listpack-entries", 128)
        vmax = cfg(c, "zset-max-listpack-value", 64)
        z = ZSetValue()
        d = z.d
        if sequential:
            big = hint > entries
            for s, m in items:
                if not big and (len(d) + 1 > entries or len(m) > vmax):
                    big = True
                d[m] = 0.0 if (s == 0 and not big) else s
        else:
            big = len(items) > entries or any(len(m) > vmax for _, m in items)
            for s, m in items:
                d[m] = 0.0 if (s == 0 and not big) else s
        z.big = big
        z.sl = SortedList((s, m) for m, s in d.items())
        db.set(dst, z)
        c.server.written(db, dst, "z", event)
        return len(d)
    if db.lookup(dst) is not None:
        db.delete(dst)
        c.server.written(db, dst, "g", "del")
    return 0


# ----------------------------------------------------------------------
# ZADD / ZINCRBY / ZREM
# ----------------------------------------------------------------------

def _zadd(c, argv, key, pairs_start, incr, nx, xx, gt, lt, ch):
    elements = len(argv) - pairs_start
    if elements % 2 or not elements:
        raise CommandError(errors.SYNTAX)
    elements //= 2
    if nx and xx:
        raise CommandError("ERR XX and NX options at the same time are not compatible")
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise CommandError("ERR GT, LT, and/or NX options at the same time are not compatible")
    if incr and elements > 1:
        raise CommandError("ERR INCR option supports a single increment-element pair")
    scores = [parse_score(argv[pairs_start + 2 * j]) for j in range(elements)]
    db = c.db
    z = get_zset(c, key)
    added = updated = processed = 0
    score = None
    error = None
    entries = cfg(c, "zset-max-listpack-entries", 128)
    vmax = cfg(c, "zset-max-listpack-value", 64)
    maxlen = max(len(argv[pairs_start + 1 + 2 * j]) for j in range(elements))
    if z is None:
        if xx:
            return None if incr else 0
        z = ZSetValue()
        z.big = elements > entries or maxlen > vmax
        db.add(key, z)
    elif not z.big and (elements > entries or maxlen > vmax):
        z.big = True
    d = z.d
    for j in range(elements):
        member = argv[pairs_start + 1 + 2 * j]
        score = scores[j]
        cur = d.get(member)
        if cur is not None:
            if nx:
                continue
            if incr:
                score = cur + score
                if score != score:
                    error = "ERR resulting score is not a number (NaN)"
                    break
            if (lt and score >= cur) or (gt and score <= cur):
                continue
            processed += 1
            if score != cur:
                if score == 0 and not z.big:
                    score = 0.0     # a listpack keeps "-0" as text: reads back 0
                z.set(member, score)
                updated += 1
        else:
            if xx:
                continue
            processed += 1
            if not z.big and (len(d) + 1 > entries or len(member) > vmax):
                z.big = True
            if score == 0 and not z.big:
                score = 0.0
            z.set(member, score)
            added += 1
    if added or updated:
        c.server.written(db, key, "z", "zincr" if incr else "zadd", added + updated)
    elif not z.d:
        db.delete(key)       # created for nothing (cannot normally happen)
    if error:
        raise CommandError(error)
    if incr:
        return score if processed else None
    return added + updated if ch else added


@command("zadd", -4, "write denyoom fast", (1, 1, 1), group="sorted_set", since="1.2.0",
         key_flags="RW update",
         args="key:k condition[NX | XX]@3.0.2 comparison[GT | LT]@6.2.0 [change=CH]@3.0.2 "
              "[increment=INCR]@3.0.2 data(score:d member)...",
         summary="Adds one or more members to a sorted set, or updates their scores. Creates the "
                 "key if it doesn't exist.",
         complexity="O(log(N)) for each item added, where N is the number of elements in the "
                    "sorted set.",
         history=(("2.4.0", "Accepts multiple elements."),
                  ("3.0.2", "Added the `XX`, `NX`, `CH` and `INCR` options."),
                  ("6.2.0", "Added the `GT` and `LT` options.")))
def zadd(c, argv):
    """Adds one or more members to a sorted set, or updates their scores."""
    return _zadd_options(c, argv, False)


def _zadd_options(c, argv, incr):
    # ZINCRBY is ZADD INCR in Redis, option words included: "ZINCRBY k NX 1"
    # is a syntax error, not a bad float.
    i = 2
    nx = xx = gt = lt = ch = False
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        if opt == b"nx":
            nx = True
        elif opt == b"xx":
            xx = True
        elif opt == b"ch":
            ch = True
        elif opt == b"incr":
            incr = True
        elif opt == b"gt":
            gt = True
        elif opt == b"lt":
            lt = True
        else:
            break
        i += 1
    return _zadd(c, argv, argv[1], i, incr, nx, xx, gt, lt, ch)


@command("zincrby", 4, "write denyoom fast", (1, 1, 1), group="sorted_set", since="1.2.0",
         args="key:k increment:i member",
         complexity="O(log(N)) where N is the number of elements in the sorted set.")
def zincrby(c, argv):
    """Increments the score of a member in a sorted set."""
    return _zadd_options(c, argv, True)


@command("zrem", -3, "write fast", (1, 1, 1), group="sorted_set", since="1.2.0",
         key_flags="RW delete", args="key:k member...",
         summary="Removes one or more members from a sorted set. Deletes the sorted set if all "
                 "members were removed.",
         complexity="O(M*log(N)) with N being the number of elements in the sorted set and M the "
                    "number of elements to be removed.",
         history=(("2.4.0", "Accepts multiple elements."),))
def zrem(c, argv):
    """Removes one or more members from a sorted set."""
    db = c.db
    key = argv[1]
    z = get_zset(c, key)
    if z is None:
        return 0
    deleted = 0
    for m in argv[2:]:
        if z.remove(m):
            deleted += 1
            if not z.d:
                break
    if deleted:
        c.server.written(db, key, "z", "zrem", deleted)
        _emptied(c, db, key, z)
    return deleted


# ----------------------------------------------------------------------
# Reads
# ----------------------------------------------------------------------

@command("zcard", 2, "readonly fast", (1, 1, 1), group="sorted_set", since="1.2.0", key_flags="RO",
         args="key:k", complexity="O(1)")
def zcard(c, argv):
    """Returns the number of members in a sorted set."""
    z = get_zset(c, argv[1])
    return 0 if z is None else len(z.d)


@command("zscore", 3, "readonly fast", (1, 1, 1), group="sorted_set", since="1.2.0",
         args="key:k member", complexity="O(1)")
def zscore(c, argv):
    """Returns the score of a member in a sorted set."""
    z = get_zset(c, argv[1])
    if z is None:
        return None
    return z.d.get(argv[2])


@command("zmscore", -3, "readonly fast", (1, 1, 1), group="sorted_set", since="6.2.0",
         args="key:k member...",
         complexity="O(N) where N is the number of members being requested.")
def zmscore(c, argv):
    """Returns the score of one or more members in a sorted set."""
    z = get_zset(c, argv[1])
    if z is None:
        return [None] * (len(argv) - 2)
    get = z.d.get
    return [get(m) for m in argv[2:]]


def _zrank(c, argv, reverse):
    if len(argv) > 4:
        raise errors.wrong_args(c.server.current_cmd.name)
    withscore = False
    if len(argv) == 4:
        if argv[3].lower() != b"withscore":
            raise CommandError(errors.SYNTAX)
        withscore = True
    missing = NULL_ARRAY if withscore else None
    z = get_zset(c, argv[1])
    if z is None:
        return missing
    r = z.rank(argv[2])
    if r is None:
        return missing
    if reverse:
        r = len(z.d) - 1 - r
    if withscore:
        return [r, z.d[argv[2]]]
    return r


@command("zrank", -3, "readonly fast", (1, 1, 1), group="sorted_set", since="2.0.0",
         args="key:k member [WITHSCORE]", complexity="O(log(N))",
         history=(("7.2.0", "Added the optional `WITHSCORE` argument."),))
def zrank(c, argv):
    """Returns the index of a member in a sorted set ordered by ascending scores."""
    return _zrank(c, argv, False)


@command("zrevrank", -3, "readonly fast", (1, 1, 1), group="sorted_set", since="2.0.0",
         args="key:k member [WITHSCORE]", complexity="O(log(N))",
         history=(("7.2.0", "Added the optional `WITHSCORE` argument."),))
def zrevrank(c, argv):
    """Returns the index of a member in a sorted set ordered by descending scores."""
    return _zrank(c, argv, True)


@command("zcount", 4, "readonly fast", (1, 1, 1), group="sorted_set", since="2.0.0",
         args="key:k min:d max:d",
         complexity="O(log(N)) with N being the number of elements in the sorted set.")
def zcount(c, argv):
    """Returns the count of members in a sorted set that have scores within a range."""
    mn, mnex = _range_bound(argv[2])
    mx, mxex = _range_bound(argv[3])
    z = get_zset(c, argv[1])
    if z is None:
        return 0
    lo, hi = _score_span(z, mn, mnex, mx, mxex)
    return hi - lo


@command("zlexcount", 4, "readonly fast", (1, 1, 1), group="sorted_set", since="2.8.9",
         args="key:k min max",
         complexity="O(log(N)) with N being the number of elements in the sorted set.")
def zlexcount(c, argv):
    """Returns the number of members in a sorted set within a lexicographical range."""
    mn = _lex_bound(argv[2])
    mx = _lex_bound(argv[3])
    z = get_zset(c, argv[1])
    if z is None:
        return 0
    lo, hi = _lex_span(z, mn, mx)
    return hi - lo


def _zrange_generic(c, argv, first, store, rangetype, reverse):
    """ZRANGE-family parsing as Redis's zrangeGenericCommand.  rangetype and
    reverse None mean "from the options" (ZRANGE, ZRANGESTORE)."""
    key = argv[first]
    minidx, maxidx = first + 1, first + 2
    withscores = False
    offset, limit = 0, -1
    limit_given = False
    direction = reverse
    j = first + 3
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        left = n - j - 1
        if not store and opt == b"withscores":
            withscores = True
        elif opt == b"limit" and left >= 2:
            offset = _long(argv[j + 1])
            limit = _long(argv[j + 2])
            limit_given = True
            j += 2
        elif reverse is None and direction is None and opt == b"rev":
            direction = True
        elif rangetype is None and opt == b"bylex":
            rangetype = LEX
        elif rangetype is None and opt == b"byscore":
            rangetype = SCORE
        else:
            raise CommandError(errors.SYNTAX)
        j += 1
    if direction is None:
        direction = False
    if rangetype is None:
        rangetype = RANK
    if limit_given and rangetype == RANK:
        raise CommandError("ERR syntax error, LIMIT is only supported in combination with "
                           "either BYSCORE or BYLEX")
    if withscores and rangetype == LEX:
        raise CommandError("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    if direction and rangetype != RANK:
        minidx, maxidx = maxidx, minidx
    if rangetype == RANK:
        a, b = _long(argv[minidx]), _long(argv[maxidx])
    elif rangetype == SCORE:
        a, b = _range_bound(argv[minidx]), _range_bound(argv[maxidx])
    else:
        a, b = _lex_bound(argv[minidx]), _lex_bound(argv[maxidx])
    z = c.db.lookup(key)
    c.db.count_read(key, z)     # Valkey's lookupKeyRead, ZRANGESTORE's source too
    if z is not None and type(z) is not ZSetValue:
        raise WrongType()
    items = [] if z is None else _range_items(z, rangetype, direction, a, b, offset, limit)
    if store is not None:
        return store_result(c, store, items, "zrangestore", True,
                      len(items) if rangetype == RANK else 0)
    return pairs_reply(c, items, withscores)


@command("zrange", -4, "readonly", (1, 1, 1), group="sorted_set", since="1.2.0",
         args="key:k start stop sortby[BYSCORE | BYLEX]@6.2.0 [REV]@6.2.0 [LIMIT offset:i "
              "count:i]@6.2.0 [WITHSCORES]",
         complexity="O(log(N)+M) with N being the number of elements in the sorted set and M the "
                    "number of elements returned.",
         history=(("6.2.0", "Added the `REV`, `BYSCORE`, `BYLEX` and `LIMIT` options."),))
def zrange(c, argv):
    """Returns members in a sorted set within a range of indexes."""
    return _zrange_generic(c, argv, 1, None, None, None)


@command("zrangestore", -5, "write denyoom", group="sorted_set", since="6.2.0",
         key_specs=(spec("OW update"), spec("RO access", "index 2")),
         args="dst:k src:k1 min max sortby[BYSCORE | BYLEX] [REV] [LIMIT offset:i count:i]",
         complexity="O(log(N)+M) with N being the number of elements in the sorted set and M the "
                    "number of elements stored into the destination key.")
def zrangestore(c, argv):
    """Stores a range of members from sorted set in a key."""
    return _zrange_generic(c, argv, 2, argv[1], None, None)


@command("zrevrange", -4, "readonly", (1, 1, 1), group="sorted_set", since="1.2.0",
         args="key:k start:i stop:i [WITHSCORES]",
         deprecated=("6.2.0", "`ZRANGE` with the `REV` argument"),
         complexity="O(log(N)+M) with N being the number of elements in the sorted set and M the "
                    "number of elements returned.")
def zrevrange(c, argv):
    """Returns members in a sorted set within a range of indexes in reverse order."""
    return _zrange_generic(c, argv, 1, None, RANK, True)


# COMMAND DOCS' complexity of ZRANGEBYSCORE and ZREVRANGEBYSCORE.
_BYSCORE_COMPLEXITY = ("O(log(N)+M) with N being the number of elements in the sorted set and M "
                       "the number of elements being returned. If M is constant (e.g. always "
                       "asking for the first 10 elements with LIMIT), you can consider it "
                       "O(log(N)).")


@command("zrangebyscore", -4, "readonly", (1, 1, 1), group="sorted_set", since="1.0.5",
         args="key:k min:d max:d [WITHSCORES]@2.0.0 [LIMIT offset:i count:i]",
         deprecated=("6.2.0", "`ZRANGE` with the `BYSCORE` argument"),
         complexity=_BYSCORE_COMPLEXITY,
         history=(("2.0.0", "Added the `WITHSCORES` modifier."),))
def zrangebyscore(c, argv):
    """Returns members in a sorted set within a range of scores."""
    return _zrange_generic(c, argv, 1, None, SCORE, False)


@command("zrevrangebyscore", -4, "readonly", (1, 1, 1), group="sorted_set", since="2.2.0",
         args="key:k max:d min:d [WITHSCORES] [LIMIT offset:i count:i]",
         deprecated=("6.2.0", "`ZRANGE` with the `REV` and `BYSCORE` arguments"),
         complexity=_BYSCORE_COMPLEXITY,
         history=(("2.1.6", "`min` and `max` can be exclusive."),))
def zrevrangebyscore(c, argv):
    """Returns members in a sorted set within a range of scores in reverse order."""
    return _zrange_generic(c, argv, 1, None, SCORE, True)


@command("zrangebylex", -4, "readonly", (1, 1, 1), group="sorted_set", since="2.8.9",
         args="key:k min max [LIMIT offset:i count:i]",
         deprecated=("6.2.0", "`ZRANGE` with the `BYLEX` argument"),
         complexity="O(log(N)+M) with N being the number of elements in the sorted set and M the "
                    "number of elements being returned. If M is constant (e.g. always asking for "
                    "the first 10 elements with LIMIT), you can consider it O(log(N)).")
def zrangebylex(c, argv):
    """Returns members in a sorted set within a lexicographical range."""
    return _zrange_generic(c, argv, 1, None, LEX, False)


@command("zrevrangebylex", -4, "readonly", (1, 1, 1), group="sorted_set", since="2.8.9",
         args="key:k max min [LIMIT offset:i count:i]",
         deprecated=("6.2.0", "`ZRANGE` with the `REV` and `BYLEX` arguments"),
         complexity="O(log(N)+M) with N being the number of elements in the sorted set and M the "
                    "number of elements being returned. If M is constant (e.g. always asking for "
                    "the first 10 elements with LIMIT), you can consider it O(log(N)).")
def zrevrangebylex(c, argv):
    """Returns members in a sorted set within a lexicographical range in reverse order."""
    return _zrange_generic(c, argv, 1, None, LEX, True)


# ----------------------------------------------------------------------
# ZREMRANGEBY*
# ----------------------------------------------------------------------

def _zremrange(c, argv, rangetype, event):
    if rangetype == RANK:
        a, b = _long(argv[2]), _long(argv[3])
    elif rangetype == SCORE:
        a, b = _range_bound(argv[2]), _range_bound(argv[3])
    else:
        a, b = _lex_bound(argv[2]), _lex_bound(argv[3])
    db = c.db
    key = argv[1]
    z = get_zset(c, key)
    if z is None:
        return 0
    n = len(z.d)
    if rangetype == RANK:
        start, end = a, b
        if start < 0:
            start += n
        if end < 0:
            end += n
        if start < 0:
            start = 0
        if start > end or start >= n:
            return 0
        if end >= n:
            end = n - 1
        lo, hi = start, end + 1
    elif rangetype == SCORE:
        lo, hi = _score_span(z, a[0], a[1], b[0], b[1])
    else:
        lo, hi = _lex_span(z, a, b)
    deleted = z.del_range(lo, hi)
    if deleted:
        c.server.written(db, key, "z", event, deleted)
        _emptied(c, db, key, z)
    return deleted


@command("zremrangebyrank", 4, "write", (1, 1, 1), group="sorted_set", since="2.0.0",
         key_flags="RW delete", args="key:k start:i stop:i",
         summary="Removes members in a sorted set within a range of indexes. Deletes the sorted "
                 "set if all members were removed.",
         complexity="O(log(N)+M) with N being the number of elements in the sorted set and M the "
                    "number of elements removed by the operation.")
def zremrangebyrank(c, argv):
    """Removes members in a sorted set within a range of indexes."""
    return _zremrange(c, argv, RANK, "zremrangebyrank")


@command("zremrangebyscore", 4, "write", (1, 1, 1), group="sorted_set", since="1.2.0",
         key_flags="RW delete", args="key:k min:d max:d",
         summary="Removes members in a sorted set within a range of scores. Deletes the sorted "
                 "set if all members were removed.",
         complexity="O(log(N)+M) with N being the number of elements in the sorted set and M the "
                    "number of elements removed by the operation.")
def zremrangebyscore(c, argv):
    """Removes members in a sorted set within a range of scores."""
    return _zremrange(c, argv, SCORE, "zremrangebyscore")


@command("zremrangebylex", 4, "write", (1, 1, 1), group="sorted_set", since="2.8.9",
         key_flags="RW delete", args="key:k min max",
         summary="Removes members in a sorted set within a lexicographical range. Deletes the "
                 "sorted set if all members were removed.",
         complexity="O(log(N)+M) with N being the number of elements in the sorted set and M the "
                    "number of elements removed by the operation.")
def zremrangebylex(c, argv):
    """Removes members in a sorted set within a lexicographical range."""
    return _zremrange(c, argv, LEX, "zremrangebylex")


# ----------------------------------------------------------------------
# Pops
# ----------------------------------------------------------------------

def _pop(c, key, z, where_max, count):
    """Pop up to count items from z at key; events, deletion.  Returns the
    (score, member) items in pop order."""
    db = c.db
    sl = z.sl
    n = len(sl)
    k = min(count, n)
    if where_max:
        items = list(sl.islice(n - k, n, reverse=True))
        start, stop = n - k, n
    else:
        items = list(sl.islice(0, k))
        start, stop = 0, k
    z.del_range(start, stop)
    c.server.written(db, key, "z", "zpopmax" if where_max else "zpopmin", k)
    _emptied(c, db, key, z)
    return items


def _zpop_cmd(c, argv, where_max):
    if len(argv) > 3:
        raise CommandError(errors.SYNTAX)
    count = -1
    if len(argv) == 3:
        count = string2ll(argv[2])
        if count is None or count < 0:
            raise CommandError(errors.NOT_POSITIVE)
    z = get_zset(c, argv[1])
    if z is None or count == 0:
        return []
    items = _pop(c, argv[1], z, where_max, 1 if count == -1 else count)
    if c.resp3 and count != -1:
        return [[m, s] for s, m in items]
    out = []
    for s, m in items:
        out.append(m)
        out.append(s)
    return out


@command("zpopmin", -2, "write fast", (1, 1, 1), group="sorted_set", since="5.0.0",
         key_flags="RW access delete", args="key:k [count:i]",
         summary="Returns the lowest-scoring members from a sorted set after removing them. "
                 "Deletes the sorted set if the last member was popped.",
         complexity="O(log(N)*M) with N being the number of elements in the sorted set, and M "
                    "being the number of elements popped.")
def zpopmin(c, argv):
    """Returns the lowest-scoring members from a sorted set after removing them."""
    return _zpop_cmd(c, argv, False)


@command("zpopmax", -2, "write fast", (1, 1, 1), group="sorted_set", since="5.0.0",
         key_flags="RW access delete", args="key:k [count:i]",
         summary="Returns the highest-scoring members from a sorted set after removing them. "
                 "Deletes the sorted set if the last member was popped.",
         complexity="O(log(N)*M) with N being the number of elements in the sorted set, and M "
                    "being the number of elements popped.")
def zpopmax(c, argv):
    """Returns the highest-scoring members from a sorted set after removing them."""
    return _zpop_cmd(c, argv, True)


def _first_nonempty(c, keys):
    db = c.db
    for key in keys:
        z = db.lookup(key)
        if z is None:
            continue
        if type(z) is not ZSetValue:
            raise WrongType()
        return key, z
    return None, None


def _bzpop(c, argv, where_max):
    deadline = blocking.parse_timeout(c.server, argv[-1])
    keys = argv[1:-1]
    key, z = _first_nonempty(c, keys)
    if z is None:
        return blocking.block(c, keys, deadline, ZSetValue, NULL_ARRAY)
    s, m = _pop(c, key, z, where_max, 1)[0]
    c.server.propagate_as([b"ZPOPMAX" if where_max else b"ZPOPMIN", key])
    return [key, m, s]


@command("bzpopmin", -3, "write blocking fast", (1, -2, 1), group="sorted_set", since="5.0.0",
         key_flags="RW access delete", args="key:k... timeout:d",
         summary="Removes and returns the member with the lowest score from one or more sorted "
                 "sets. Blocks until a member is available otherwise. Deletes the sorted set if "
                 "the last element was popped.",
         complexity="O(log(N)) with N being the number of elements in the sorted set.",
         history=(("6.0.0", "`timeout` is interpreted as a double instead of an integer."),))
def bzpopmin(c, argv):
    """Removes and returns the member with the lowest score from one or more
    sorted sets, or blocks until one is available."""
    return _bzpop(c, argv, False)


@command("bzpopmax", -3, "write blocking fast", (1, -2, 1), group="sorted_set", since="5.0.0",
         key_flags="RW access delete", args="key:k... timeout:d",
         summary="Removes and returns the member with the highest score from one or more sorted "
                 "sets. Blocks until a member available otherwise.  Deletes the sorted set if the "
                 "last element was popped.",
         complexity="O(log(N)) with N being the number of elements in the sorted set.",
         history=(("6.0.0", "`timeout` is interpreted as a double instead of an integer."),))
def bzpopmax(c, argv):
    """Removes and returns the member with the highest score from one or more
    sorted sets, or blocks until one is available."""
    return _bzpop(c, argv, True)


def _zmpop(c, argv, numkeys_idx, is_block):
    numkeys = string2ll(argv[numkeys_idx])
    if numkeys is None or numkeys < 1:
        raise CommandError("ERR numkeys should be greater than 0")
    where_idx = numkeys_idx + numkeys + 1
    if where_idx >= len(argv):
        raise CommandError(errors.SYNTAX)
    where = argv[where_idx].lower()
    if where == b"min":
        where_max = False
    elif where == b"max":
        where_max = True
    else:
        raise CommandError(errors.SYNTAX)
    count = -1
    j = where_idx + 1
    while j < len(argv):
        if count == -1 and argv[j].lower() == b"count" and j + 1 < len(argv):
            count = string2ll(argv[j + 1])
            if count is None or count < 1:
                raise CommandError("ERR count should be greater than 0")
            j += 2
        else:
            raise CommandError(errors.SYNTAX)
    if count == -1:
        count = 1
    keys = argv[numkeys_idx + 1:numkeys_idx + 1 + numkeys]
    deadline = blocking.parse_timeout(c.server, argv[1]) if is_block else 0
    key, z = _first_nonempty(c, keys)
    if z is None:
        if is_block:
            return blocking.block(c, keys, deadline, ZSetValue, NULL_ARRAY)
        return NULL_ARRAY
    n = min(count, len(z.d))
    items = _pop(c, key, z, where_max, count)
    c.server.propagate_as([b"ZPOPMAX" if where_max else b"ZPOPMIN", key, b"%d" % n])
    return [key, [[m, s] for s, m in items]]


def _zmpop_keys(argv):
    n = string2ll(argv[1]) if len(argv) > 1 else None
    if n is None or n < 1:
        return []
    return list(range(2, min(2 + n, len(argv))))


def _bzmpop_keys(argv):
    n = string2ll(argv[2]) if len(argv) > 2 else None
    if n is None or n < 1:
        return []
    return list(range(3, min(3 + n, len(argv))))


@command("zmpop", -4, "write", group="sorted_set", since="7.0.0", keys_fn=_zmpop_keys,
         key_specs=(spec("RW access delete", "index 1", "keynum 0 1 1"),),
         args="numkeys:i key:k... where(MIN | MAX) [COUNT count:i]",
         summary="Returns the highest- or lowest-scoring members from one or more sorted sets "
                 "after removing them. Deletes the sorted set if the last member was popped.",
         complexity="O(K) + O(M*log(N)) where K is the number of provided keys, N being the "
                    "number of elements in the sorted set, and M being the number of elements "
                    "popped.")
def zmpop(c, argv):
    """Returns the highest- or lowest-scoring members from one or more sorted
    sets after removing them."""
    return _zmpop(c, argv, 1, False)


@command("bzmpop", -5, "write blocking", group="sorted_set", since="7.0.0", keys_fn=_bzmpop_keys,
         key_specs=(spec("RW access delete", "index 2", "keynum 0 1 1"),),
         args="timeout:d numkeys:i key:k... where(MIN | MAX) [COUNT count:i]",
         summary="Removes and returns a member by score from one or more sorted sets. Blocks "
                 "until a member is available otherwise. Deletes the sorted set if the last "
                 "element was popped.",
         complexity="O(K) + O(M*log(N)) where K is the number of provided keys, N being the "
                    "number of elements in the sorted set, and M being the number of elements "
                    "popped.")
def bzmpop(c, argv):
    """Removes and returns a member by score from one or more sorted sets, or
    blocks until one is available."""
    return _zmpop(c, argv, 2, True)
