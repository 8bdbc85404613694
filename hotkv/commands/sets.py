"""Set commands (Redis's t_set.c): SADD ... SSCAN.

Owns the commands on ``hotkv.types.sets.SetValue`` (a Python set of ``bytes``).

Invariants:
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

from .. import errors
from ..errors import CommandError, WrongType
from ..registry import command, spec
from ..types.sets import SetValue
from ..util import LLONG_MAX, string2ll
from .hashes import RANDOM_REPLY_LIMIT, cfg, parse_cursor, random_member, scan_args, scan_container

_SRAND_LIMIT = "ERR value is out of range, value must between -9223372036854775807 and " \
               "9223372036854775807"


def _get(c, key):
    return c.db.lookup_typed(key, SetValue)


def _emptied(c, db, key, s):
    if not s:
        db.delete(key)
        c.server.event(db, key, "g", "del")


def set_small(c, s) -> bool:
    """Whether Redis would keep this set in an intset or a listpack."""
    n = len(s)
    lp_entries = cfg(c, "set-max-listpack-entries", 128)
    if n > max(cfg(c, "set-max-intset-entries", 512), lp_entries):
        return False
    if n <= cfg(c, "set-max-intset-entries", 512) and all(string2ll(m) is not None for m in s):
        return True
    if n > lp_entries:
        return False
    vmax = cfg(c, "set-max-listpack-value", 64)
    return all(len(m) <= vmax for m in s)


@command("sadd", -3, "write denyoom fast", (1, 1, 1), group="set", key_flags="RW insert")
def sadd(c, argv):
    """Adds one or more members to a set."""
    db = c.db
    key = argv[1]
    s = _get(c, key)
    if s is None:
        s = SetValue()
        db.add(key, s)
    before = len(s)
    s.update(argv[2:])
    added = len(s) - before
    if added:
        c.server.written(db, key, "s", "sadd", added)
    return added


@command("srem", -3, "write fast", (1, 1, 1), group="set", key_flags="RW delete")
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
            s.discard(m)
            removed += 1
            if not s:
                break
    if removed:
        c.server.written(db, key, "s", "srem", removed)
        _emptied(c, db, key, s)
    return removed


@command("smove", 4, "write fast", group="set",
         key_specs=(spec("RW access delete"), spec("RW insert", "index 2")))
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
    src.discard(member)
    c.server.written(db, src_key, "s", "srem")
    _emptied(c, db, src_key, src)
    if dst is None:
        dst = SetValue()
        db.add(dst_key, dst)
    if member not in dst:
        dst.add(member)
        c.server.written(db, dst_key, "s", "sadd")
    return 1


@command("sismember", 3, "readonly fast", (1, 1, 1), group="set", key_flags="RO")
def sismember(c, argv):
    """Determines whether a member belongs to a set."""
    s = _get(c, argv[1])
    return 1 if s is not None and argv[2] in s else 0


@command("smismember", -3, "readonly fast", (1, 1, 1), group="set", since="6.2.0")
def smismember(c, argv):
    """Determines whether multiple members belong to a set."""
    s = _get(c, argv[1])
    if s is None:
        return [0] * (len(argv) - 2)
    return [1 if m in s else 0 for m in argv[2:]]


@command("scard", 2, "readonly fast", (1, 1, 1), group="set", key_flags="RO")
def scard(c, argv):
    """Returns the number of members in a set."""
    s = _get(c, argv[1])
    return 0 if s is None else len(s)


@command("smembers", 2, "readonly", (1, 1, 1), group="set")
def smembers(c, argv):
    """Returns all members of a set."""
    s = _get(c, argv[1])
    return set() if s is None else set(s)


def _pop_random(s, count: int) -> list:
    n = len(s)
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
    s.difference_update(picked)
    return picked


def _one(s):
    return random_member(s)


@command("spop", -2, "write fast", (1, 1, 1), group="set", key_flags="RW access delete")
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
            out = set(s)
            server.written(db, key, "s", "spop", size)
            db.delete(key)
            server.event(db, key, "g", "del")
            lazy = server.config.values.get("lazyfree-lazy-server-del")
            server.propagate_as([b"UNLINK" if lazy else b"DEL", key])
            return out
        picked = _pop_random(s, count)
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
    s.discard(m)
    server.written(db, key, "s", "spop")
    server.propagate_as([b"SREM", key, m])
    _emptied(c, db, key, s)
    return m


@command("srandmember", -2, "readonly", (1, 1, 1), group="set")
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
            return list(s)
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


def _inter(sets, limit: int = 0):
    if any(s is None for s in sets):
        return set()
    sets = sorted(sets, key=len)
    first, rest = sets[0], sets[1:]
    if not rest:
        if limit and limit < len(first):
            return set(list(first)[:limit])
        return set(first)
    result = set()
    for m in first:
        for o in rest:
            if m not in o:
                break
        else:
            result.add(m)
            if limit and len(result) >= limit:
                break
    return result


def _union(sets):
    result = set()
    for s in sets:
        if s is not None:
            result.update(s)
    return result


def _diff(sets):
    first = sets[0]
    if first is None:
        return set()
    result = set(first)
    for s in sets[1:]:
        if s is not None:
            if s is first:
                return set()
            result.difference_update(s)
            if not result:
                break
    return result


def _store(c, dst, result, event):
    db = c.db
    if result:
        value = SetValue(result)
        db.set(dst, value)
        c.server.written(db, dst, "s", event)
        return len(value)
    if db.lookup(dst) is not None:
        db.delete(dst)
        c.server.written(db, dst, "g", "del")
    return 0


@command("sinter", -2, "readonly", (1, -1, 1), group="set")
def sinter(c, argv):
    """Returns the intersect of multiple sets."""
    return _inter(_sets(c, argv[1:]))


@command("sinterstore", -3, "write denyoom", group="set",
         key_specs=(spec("OW update"), spec("RO access", "index 2", "range -1 1 0")))
def sinterstore(c, argv):
    """Stores the intersect of multiple sets in a key."""
    return _store(c, argv[1], _inter(_sets(c, argv[2:])), "sinterstore")


def _sintercard_keys(argv):
    n = string2ll(argv[1])
    if n is None or n < 1:
        return []
    return list(range(2, min(2 + n, len(argv))))


@command("sintercard", -3, "readonly", group="set", since="7.0.0",
         keys_fn=_sintercard_keys, key_specs=(spec("RO access", "index 1", "keynum 0 1 1"),))
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
    return len(_inter(_sets(c, argv[2:2 + numkeys]), limit))


@command("sunion", -2, "readonly", (1, -1, 1), group="set")
def sunion(c, argv):
    """Returns the union of multiple sets."""
    return _union(_sets(c, argv[1:]))


@command("sunionstore", -3, "write denyoom", group="set",
         key_specs=(spec("OW update"), spec("RO access", "index 2", "range -1 1 0")))
def sunionstore(c, argv):
    """Stores the union of multiple sets in a key."""
    return _store(c, argv[1], _union(_sets(c, argv[2:])), "sunionstore")


@command("sdiff", -2, "readonly", (1, -1, 1), group="set")
def sdiff(c, argv):
    """Returns the difference of multiple sets."""
    return _diff(_sets(c, argv[1:]))


@command("sdiffstore", -3, "write denyoom", group="set",
         key_specs=(spec("OW update"), spec("RO access", "index 2", "range -1 1 0")))
def sdiffstore(c, argv):
    """Stores the difference of multiple sets in a key."""
    return _store(c, argv[1], _diff(_sets(c, argv[2:])), "sdiffstore")


@command("sscan", -3, "readonly", (1, 1, 1), group="set", since="2.8.0")
def sscan(c, argv):
    """Iterates over members of a set."""
    cursor = parse_cursor(argv[2])
    s = _get(c, argv[1])
    if s is None:
        return [b"0", []]
    count, match, _ = scan_args(argv, 3, "set")
    nxt, members = scan_container(s, cursor, count, match, set_small(c, s))
    return [b"%d" % nxt, members]

