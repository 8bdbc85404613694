"""Set commands (Redis's t_set.c): SADD ... SSCAN.

Owns the commands on ``hotkv.types.sets.SetValue`` (a Python set of ``bytes``
that keeps Valkey's encoding and, while intset or listpack, its order).

Invariants:
* members are added and removed only through ``hotkv.types.sets`` (``add``,
  ``add_many``, ``remove``), which move the encoding as Valkey does; replies
  that list a set list it in the encoding's order (``ordered``): an intset
  ascending, a listpack in insertion order -- SMEMBERS, SSCAN, SINTER (the
  smallest set's order), SRANDMEMBER with a count of at least the size,
  SUNION/SDIFF (all intsets: ascending; Valkey lists any other result in
  its hash order), and the *STORE results are built member by member in
  Valkey's order (SINTERSTORE from the smallest set's encoding, SUNIONSTORE/
  SDIFFSTORE from an intset), so their encodings and orders are Valkey's;
* a set is never empty in the keyspace: the command that removes its last
  member deletes the key (and emits ``del``); a *STORE whose result is empty
  deletes the destination;
* RESP3 replies that Redis sends as sets (SMEMBERS, SINTER, SUNION, SDIFF,
  SPOP with a count) are Python ``set`` values; SRANDMEMBER with a count is
  an array, as in Redis;
* SPOP is logged as SREM of what it popped (or DEL when it took the whole
  set), so replaying the AOF cannot pick different members.
"""

from __future__ import annotations

import random
from operator import itemgetter

from ..core.registry import command, spec
from ..protocol import errors
from ..protocol.errors import CommandError, WrongType
from ..protocol.resp import SetReply
from ..protocol.util import LLONG_MAX, string2ll
from ..types import sets as st
from ..types.sets import HASHTABLE, INTSET, LISTPACK, SetValue, ordered
from .hashes import RANDOM_REPLY_LIMIT, parse_cursor, random_member, scan_args, scan_container

_SRAND_LIMIT = "ERR value is out of range, value must between -9223372036854775807 and " \
               "9223372036854775807"


def _get(c, key):
    return c.db.lookup_typed(key, SetValue)


def _emptied(c, db, key, s):
    if not s:
        db.delete(key)
        c.server.event(db, key, "g", "del")


_LIMITS = itemgetter("set-max-intset-entries", "set-max-listpack-entries",
                     "set-max-listpack-value")


def limits(c) -> tuple:
    """(set-max-intset-entries, set-max-listpack-entries, set-max-listpack-value)."""
    return _LIMITS(c.server.config.values)


def set_small(c, s) -> bool:
    """Whether Valkey keeps this set in an intset or a listpack."""
    return s.enc is not HASHTABLE


@command("sadd", -3, "write denyoom fast", (1, 1, 1), group="set", key_flags="RW insert",
         args="key:k member...",
         summary="Adds one or more members to a set. Creates the key if it doesn't exist.",
         complexity="O(1) for each element added, so O(N) to add N elements when the command is "
                    "called with multiple arguments.",
         history=(("2.4.0", "Accepts multiple `member` arguments."),))
def sadd(c, argv):
    """Adds one or more members to a set."""
    db = c.db
    key = argv[1]
    s = _get(c, key)
    members = argv[2:]
    if s is None:
        lim = limits(c)
        s = st.create(argv[2], len(members), lim)
        db.add(key, s)
        added = st.add_many(s, members, lim)
    elif s.enc is HASHTABLE:
        before = len(s)
        s.update(members)
        added = len(s) - before
    else:
        lim = limits(c)
        if len(members) > lim[1 if s.enc is LISTPACK else 0]:
            st.to_hashtable(s)     # Valkey's setTypeMaybeConvert, inline: SADD is hot
        if len(members) == 1:
            added = st.add(s, members[0], lim)
        else:
            added = st.add_many(s, members, lim)
    if added:
        c.server.written(db, key, "s", "sadd", added)
    return added


@command("srem", -3, "write fast", (1, 1, 1), group="set", key_flags="RW delete",
         args="key:k member...",
         summary="Removes one or more members from a set. Deletes the set if the last member was "
                 "removed.", complexity="O(N) where N is the number of members to be removed.",
         history=(("2.4.0", "Accepts multiple `member` arguments."),))
def srem(c, argv):
    """Removes one or more members from a set."""
    db = c.db
    key = argv[1]
    s = _get(c, key)
    if s is None:
        return 0
    removed = 0
    for m in argv[2:]:
        if m in s:
            st.remove(s, m)
            removed += 1
            if not s:
                break
    if removed:
        c.server.written(db, key, "s", "srem", removed)
        _emptied(c, db, key, s)
    return removed


@command("smove", 4, "write fast", group="set",
         key_specs=(spec("RW access delete"), spec("RW insert", "index 2")),
         args="source:k destination:k1 member", complexity="O(1)")
def smove(c, argv):
    """Moves a member from one set to another."""
    db = c.db
    src_key, dst_key, member = argv[1], argv[2], argv[3]
    src = db.lookup(src_key)
    dst = db.lookup(dst_key)
    if src is None:
        return 0
    if type(src) is not SetValue or (dst is not None and type(dst) is not SetValue):
        raise WrongType()
    if src is dst:
        return 1 if member in src else 0
    if member not in src:
        return 0
    st.remove(src, member)
    c.server.written(db, src_key, "s", "srem")
    _emptied(c, db, src_key, src)
    if dst is None:
        dst = st.create(member, 1, limits(c))
        db.add(dst_key, dst)
    if member not in dst:
        st.add(dst, member, limits(c))
        c.server.written(db, dst_key, "s", "sadd")
    return 1


@command("sismember", 3, "readonly fast", (1, 1, 1), group="set", key_flags="RO",
         args="key:k member", complexity="O(1)")
def sismember(c, argv):
    """Determines whether a member belongs to a set."""
    s = _get(c, argv[1])
    return 1 if s is not None and argv[2] in s else 0


@command("smismember", -3, "readonly fast", (1, 1, 1), group="set", since="6.2.0",
         args="key:k member...",
         complexity="O(N) where N is the number of elements being checked for membership")
def smismember(c, argv):
    """Determines whether multiple members belong to a set."""
    s = _get(c, argv[1])
    if s is None:
        return [0] * (len(argv) - 2)
    return [1 if m in s else 0 for m in argv[2:]]


@command("scard", 2, "readonly fast", (1, 1, 1), group="set", key_flags="RO", args="key:k",
         complexity="O(1)")
def scard(c, argv):
    """Returns the number of members in a set."""
    s = _get(c, argv[1])
    return 0 if s is None else len(s)


@command("smembers", 2, "readonly", (1, 1, 1), group="set", args="key:k",
         complexity="O(N) where N is the set cardinality.")
def smembers(c, argv):
    """Returns all members of a set."""
    s = _get(c, argv[1])
    return SetReply() if s is None else SetReply(ordered(s))


def _pop_random(c, s, count: int) -> list:
    """Take count random members (count < size).  What stays keeps its
    order, except that Valkey rebuilds a hashtable left with few members
    (remaining * 5 <= count) as a listpack in random order."""
    n = len(s)
    if s.enc is HASHTABLE and (n - count) * 5 <= count:
        rest = list(s)
        random.shuffle(rest)
        rest = rest[:n - count]
        keep = set(rest)
        picked = [m for m in s if m not in keep]
        s.clear()
        s.enc, s.lp = LISTPACK, {}
        st.add_many(s, rest, limits(c))
        return picked
    if count * 8 < n and n > 2048:
        # a few members of a big set: draw without copying the whole set
        chosen = {}
        while len(chosen) < count:
            chosen[random_member(s)] = None
        picked = list(chosen)
    elif count * 2 < n:
        picked = random.sample(list(s), count) if count > 1 else [_one(s)]
    else:
        picked = list(s)
        random.shuffle(picked)
        picked = picked[:count]
    st.discard_many(s, picked)
    return picked


def _one(s):
    return random_member(s)


@command("spop", -2, "write fast", (1, 1, 1), group="set", key_flags="RW access delete",
         args="key:k [count:i]@3.2.0",
         summary="Returns one or more random members from a set after removing them. Deletes the "
                 "set if the last member was popped.",
         complexity="Without the count argument O(1), otherwise O(N) where N is the value of the "
                    "passed count.", history=(("3.2.0", "Added the `count` argument."),))
def spop(c, argv):
    """Returns one or more random members from a set after removing them."""
    db = c.db
    key = argv[1]
    server = c.server
    if len(argv) == 3:
        count = string2ll(argv[2])
        if count is None or count < 0:
            raise CommandError(errors.NOT_POSITIVE)
        s = _get(c, key)
        if s is None or count == 0:
            return set()
        size = len(s)
        if count >= size:
            out = SetReply(ordered(s))
            server.written(db, key, "s", "spop", size)
            db.delete(key)
            server.event(db, key, "g", "del")
            lazy = server.config.values.get("lazyfree-lazy-server-del")
            server.propagate_as([b"UNLINK" if lazy else b"DEL", key])
            return out
        picked = _pop_random(c, s, count)
        server.written(db, key, "s", "spop", count)
        for i in range(0, count, 1024):
            server.propagate_as([b"SREM", key] + picked[i:i + 1024])
        return set(picked)
    if len(argv) > 3:
        raise CommandError(errors.SYNTAX)
    s = _get(c, key)
    if s is None:
        return None
    m = _one(s)
    st.remove(s, m)
    server.written(db, key, "s", "spop")
    server.propagate_as([b"SREM", key, m])
    _emptied(c, db, key, s)
    return m


@command("srandmember", -2, "readonly", (1, 1, 1), group="set", args="key:k [count:i]@2.6.0",
         summary="Get one or multiple random members from a set",
         complexity="Without the count argument O(1), otherwise O(N) where N is the absolute "
                    "value of the passed count.",
         history=(("2.6.0", "Added the optional `count` argument."),))
def srandmember(c, argv):
    """Get one or multiple random members from a set."""
    if len(argv) == 3:
        count = string2ll(argv[2])
        if count is None:
            raise CommandError(errors.NOT_INTEGER)
        if count < -LLONG_MAX:
            raise CommandError(_SRAND_LIMIT)
        s = _get(c, argv[1])
        if s is None or count == 0:
            return []
        if count < 0:
            if -count > RANDOM_REPLY_LIMIT:
                raise CommandError("ERR value is out of range")
            return random.choices(list(s), k=-count)
        if count >= len(s):
            return ordered(s)
        if count == 1:
            return [_one(s)]
        return random.sample(list(s), count)
    if len(argv) > 3:
        raise CommandError(errors.SYNTAX)
    s = _get(c, argv[1])
    if s is None:
        return None
    return _one(s)


def _sets(c, keys):
    """The sets at keys (None for a missing key); WRONGTYPE for any other type."""
    db = c.db
    out = []
    for k in keys:
        v = db.lookup(k)
        db.count_read(k, v)     # Valkey reads these with lookupKeyRead, STORE forms too
        if v is not None and type(v) is not SetValue:
            raise WrongType()
        out.append(v)
    return out


def _inter(sets, limit: int = 0, order: bool = True) -> list:
    """SINTER's members: the smallest set's (the first of equal sizes), in
    its encoding's order (``order``), those in every other set."""
    if any(s is None for s in sets):
        return []
    sets = sorted(sets, key=len)
    first = sets[0]
    rest = [o for o in sets[1:] if o is not first]
    out = []
    for m in (ordered(first) if order else first):
        for o in rest:
            if m not in o:
                break
        else:
            out.append(m)
            if limit and len(out) >= limit:
                break
    return out


def _inter_store(c, sets) -> SetValue:
    """SINTERSTORE's new set: its encoding starts as the smallest set's (a
    hashtable's result starts as a listpack), the members go in one by one,
    and a result of integers becomes an intset (Valkey's maybeConvertToIntset)."""
    members = _inter(sets)
    if not members:
        return SetValue()
    lim = limits(c)
    first = min((s for s in sets), key=len)
    dst = SetValue(enc=INTSET if first.enc is INTSET else LISTPACK)
    st.add_many(dst, members, lim)
    if dst.enc is not INTSET and all(string2ll(m) is not None for m in members):
        st.maybe_to_intset(dst, lim)
    return dst


def _union(c, sets, store: bool) -> SetValue:
    """SUNION's set, built as Valkey builds it: an intset (always for a
    STORE; else while every input is one) taking each set's members in order."""
    intset = store or all(s is None or s.enc is INTSET for s in sets)
    dst = SetValue(enc=INTSET if intset else HASHTABLE)
    lim = limits(c)
    for s in sets:
        if s is not None:
            st.add_many(dst, s if dst.enc is HASHTABLE else ordered(s), lim)
    return dst


def _diff(c, sets, store: bool) -> SetValue:
    """SDIFF's set, built as Valkey builds it (see _union), with Valkey's
    choice of algorithm: keep the first set's members found in no other,
    or take them all and remove the others' (when that is less work)."""
    intset = store or all(s is None or s.enc is INTSET for s in sets)
    dst = SetValue(enc=INTSET if intset else HASHTABLE)
    first = sets[0]
    if first is None or any(s is first for s in sets[1:]):
        return dst
    lim = limits(c)
    others = [s for s in sets[1:] if s is not None]
    one = len(first) * (1 + len(others)) // 2
    two = len(first) + sum(len(s) for s in others)
    if one <= two:
        st.add_many(dst, [m for m in ordered(first) if not any(m in o for o in others)], lim)
        return dst
    st.add_many(dst, ordered(first), lim)
    for o in others:
        st.discard_many(dst, o)
        if not dst:
            break
    return dst


def _store(c, dst, value: SetValue, event):
    db = c.db
    if value:
        db.set(dst, value)
        c.server.written(db, dst, "s", event)
        return len(value)
    if db.lookup(dst) is not None:
        db.delete(dst)
        c.server.written(db, dst, "g", "del")
    return 0


@command("sinter", -2, "readonly", (1, -1, 1), group="set", args="key:k...",
         complexity="O(N*M) worst case where N is the cardinality of the smallest set and M is "
                    "the number of sets.")
def sinter(c, argv):
    """Returns the intersect of multiple sets."""
    return SetReply(_inter(_sets(c, argv[1:])))


@command("sinterstore", -3, "write denyoom", group="set",
         key_specs=(spec("OW update"), spec("RO access", "index 2", "range -1 1 0")),
         args="destination:k key:k1...",
         complexity="O(N*M) worst case where N is the cardinality of the smallest set and M is "
                    "the number of sets.")
def sinterstore(c, argv):
    """Stores the intersect of multiple sets in a key."""
    return _store(c, argv[1], _inter_store(c, _sets(c, argv[2:])), "sinterstore")


def _sintercard_keys(argv):
    n = string2ll(argv[1])
    if n is None or n < 1:
        return []
    return list(range(2, min(2 + n, len(argv))))


@command("sintercard", -3, "readonly", group="set", since="7.0.0",
         keys_fn=_sintercard_keys, key_specs=(spec("RO access", "index 1", "keynum 0 1 1"),),
         args="numkeys:i key:k... [LIMIT limit:i]",
         complexity="O(N*M) worst case where N is the cardinality of the smallest set and M is "
                    "the number of sets.")
def sintercard(c, argv):
    """Returns the number of members of the intersect of multiple sets."""
    numkeys = string2ll(argv[1])
    if numkeys is None or numkeys < 1:
        raise CommandError("ERR numkeys should be greater than 0")
    if numkeys > len(argv) - 2:
        raise CommandError("ERR Number of keys can't be greater than number of args")
    limit = 0
    j = 2 + numkeys
    while j < len(argv):
        if argv[j].lower() == b"limit" and j + 1 < len(argv):
            limit = string2ll(argv[j + 1])
            if limit is None or limit < 0:
                raise CommandError("ERR LIMIT can't be negative")
            j += 2
        else:
            raise CommandError(errors.SYNTAX)
    return len(_inter(_sets(c, argv[2:2 + numkeys]), limit, order=False))


@command("sunion", -2, "readonly", (1, -1, 1), group="set", args="key:k...",
         complexity="O(N) where N is the total number of elements in all given sets.")
def sunion(c, argv):
    """Returns the union of multiple sets."""
    return SetReply(ordered(_union(c, _sets(c, argv[1:]), False)))


@command("sunionstore", -3, "write denyoom", group="set",
         key_specs=(spec("OW update"), spec("RO access", "index 2", "range -1 1 0")),
         args="destination:k key:k1...",
         complexity="O(N) where N is the total number of elements in all given sets.")
def sunionstore(c, argv):
    """Stores the union of multiple sets in a key."""
    return _store(c, argv[1], _union(c, _sets(c, argv[2:]), True), "sunionstore")


@command("sdiff", -2, "readonly", (1, -1, 1), group="set", args="key:k...",
         complexity="O(N) where N is the total number of elements in all given sets.")
def sdiff(c, argv):
    """Returns the difference of multiple sets."""
    return SetReply(ordered(_diff(c, _sets(c, argv[1:]), False)))


@command("sdiffstore", -3, "write denyoom", group="set",
         key_specs=(spec("OW update"), spec("RO access", "index 2", "range -1 1 0")),
         args="destination:k key:k1...",
         complexity="O(N) where N is the total number of elements in all given sets.")
def sdiffstore(c, argv):
    """Stores the difference of multiple sets in a key."""
    return _store(c, argv[1], _diff(c, _sets(c, argv[2:]), True), "sdiffstore")


@command("sscan", -3, "readonly", (1, 1, 1), group="set", since="2.8.0",
         args="key:k cursor:i [MATCH pattern:p] [COUNT count:i]",
         complexity="O(1) for every call. O(N) for a complete iteration, including enough "
                    "command calls for the cursor to return back to 0. N is the number of elements "
                    "inside the collection.")
def sscan(c, argv):
    """Iterates over members of a set."""
    cursor = parse_cursor(argv[2])
    s = _get(c, argv[1])
    if s is None:
        return [b"0", []]
    count, match, _ = scan_args(argv, 3, "set")
    if s.enc is not HASHTABLE:
        members = ordered(s)
        return [b"0", members if match is None else [m for m in members if match(m)]]
    nxt, members = scan_container(s, cursor, count, match, False)
    return [b"%d" % nxt, members]

