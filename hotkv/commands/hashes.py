"""Hash commands (Redis's t_hash.c): HSET ... HSCAN.

Owns the commands on ``hotkv.types.hashes.HashValue`` (a dict field -> value, both
``bytes``).  Also owns helpers the set and sorted-set modules share:

* the *SCAN machinery (``parse_cursor``, ``scan_args``, ``scan_container``);
* ``random_member`` (amortised O(1) random pick from a set or dict) and
  ``cfg`` (a config value with its default).

Invariants:
* a hash is never empty in the keyspace: the command that removes its last
  field deletes the key (and emits ``del``);
* the dict's insertion order is the reply order, as Redis's listpack
  encoding keeps it (updating a field keeps its place);
* a write moves ``HashValue.big`` (the encoding) as t_hash.c does: HSET,
  HMSET and HSETNX (a new field only) through ``hotkv.types.hashes.
  before_write`` first; HINCRBY and HINCRBYFLOAT when the field or the new
  value is past hash-max-listpack-value; every write past
  hash-max-listpack-entries afterwards (``_grown``).  HSET / HMSET make the
  same checks inside their write loop (the encoding is only a flag, so
  converting after the writes ends the same).  A hashtable's HSET costs one
  attribute test more than a plain dict's;
* *SCAN returns every member present for the whole scan at least once: the
  cursor is a position in a fixed order (member hash), not an index that
  shifts when members are removed.  A container Redis would keep compact
  (listpack/intset) is returned whole with cursor 0, as Redis does.  Cost:
  a scan of a big container starts with one pass bucketing its members by
  hash (about 0.3 s per million members), cached for the scan; each bucket
  is sorted when the scan reaches it.
"""

from __future__ import annotations

import random
import re
from bisect import bisect_left

from ..core.registry import command
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.longdouble import INF, LD_ZERO, add as add_ld, format_long_double, parse_long_double
from ..protocol.resp import OK
from ..protocol.util import LLONG_MAX, compile_glob, string2ll
from ..types.hashes import HashValue, before_write, resolve

# --------------------------------------------------------------------------
# Long double (x87 extended precision) emulation
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# *SCAN
# --------------------------------------------------------------------------

_HASH_BIAS = 1 << 63     # hash() is signed; cursors are unsigned
_snapshots: dict = {}   # id(container) -> (container, hash buckets, sorted buckets)
_SNAPSHOT_SLOTS = 16


_ULL_RE = re.compile(rb"[ \t\n\v\f\r]*([+-]?)([0-9]+)\Z")


def parse_cursor(arg: bytes) -> int:
    """string2ull: a canonical non-negative integer, else what strtoull takes."""
    ll = string2ll(arg)
    if ll is not None:
        if ll < 0:
            raise CommandError("ERR invalid cursor")
        return ll
    m = _ULL_RE.match(arg)
    if m is None or int(m.group(2)) > 0xFFFFFFFFFFFFFFFF:
        raise CommandError("ERR invalid cursor")
    v = int(m.group(2))
    return (-v) & 0xFFFFFFFFFFFFFFFF if m.group(1) == b"-" else v


def scan_args(argv, start: int, kind: str):
    """Parse COUNT / MATCH / NOVALUES / NOSCORES; returns (count, match, only_keys)."""
    count = 10
    match = None
    only_keys = False
    i = start
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        more = n - i
        if opt == b"count" and more >= 2:
            v = string2ll(argv[i + 1])
            if v is None:
                raise CommandError(errors.NOT_INTEGER)
            if v < 1:
                raise CommandError(errors.SYNTAX)
            count = v
            i += 2
        elif opt == b"match" and more >= 2:
            pat = argv[i + 1]
            match = None if pat == b"*" else compile_glob(pat)
            i += 2
        elif opt == b"novalues":
            if kind != "hash":
                raise CommandError("ERR NOVALUES option can only be used in HSCAN")
            only_keys = True
            i += 1
        elif opt == b"noscores":
            if kind != "zset":
                raise CommandError("ERR NOSCORES option can only be used in ZSCAN")
            only_keys = True
            i += 1
        else:
            raise CommandError(errors.SYNTAX)
    return count, match, only_keys


def scan_container(members, cursor: int, count: int, match, small: bool):
    """One SCAN step over ``members`` (a dict or set, iterated for keys).
    Returns (next_cursor, [member...]).  A small container is returned
    whole; a big one is walked in order of member hash, the cursor being the
    next hash to visit.  The order is built once per scan (cached by
    container identity; rebuilt identically if evicted) and re-checked
    against membership, so removed members are skipped and a member present
    for the whole scan is seen."""
    if small:
        if match is None:
            return 0, list(members)
        return 0, [m for m in members if match(m)]
    key = id(members)
    snap = _snapshots.get(key)
    if cursor == 0 or snap is None or snap[0] is not members:
        # Partition by the top byte of the hash in one pass; a bucket is
        # sorted only when the scan reaches it.
        buckets = [[] for _ in range(256)]
        for m in members:
            buckets[(hash(m) + _HASH_BIAS) >> 56].append(m)
        if len(_snapshots) >= _SNAPSHOT_SLOTS:
            _snapshots.pop(next(iter(_snapshots)))
        _snapshots.pop(key, None)
        _snapshots[key] = snap = (members, buckets, [None] * 256)
    buckets, ordered = snap[1], snap[2]
    out = []
    seen = 0
    b = cursor >> 56
    low = cursor - _HASH_BIAS
    while b < 256:
        order = ordered[b]
        if order is None:
            order = ordered[b] = sorted(buckets[b], key=hash)
            buckets[b] = None
        i = bisect_left(order, low, key=hash) if order and low > hash(order[0]) else 0
        n = len(order)
        while i < n:
            m = order[i]
            # members sharing a hash go out together: the cursor cannot split them
            if seen >= count and hash(m) != hash(order[i - 1]):
                return max(1, hash(m) + _HASH_BIAS), out
            i += 1
            seen += 1
            if m in members and (match is None or match(m)):
                out.append(m)
        b += 1
        low = (b << 56) - _HASH_BIAS
        if seen >= count and b < 256:
            return b << 56, out
    _snapshots.pop(key, None)
    return 0, out


def _emptyscan():
    return [b"0", []]


# A negative count asks for that many replies: Redis would try to build a
# reply of 2**63 elements; past this bound we answer an error instead of
# exhausting memory (unless random_reply_cap says an output limit stops it).
RANDOM_REPLY_LIMIT = 1 << 24


def random_reply_cap(c, count: int) -> int:
    """For a negative count past RANDOM_REPLY_LIMIT: how many replies to build
    so the reply passes the normal class's hard output limit, which closes the
    client before any of it is sent (hotkv.net.connection's flush) -- Valkey stops such a
    reply mid-run the same way (Tcl obuf-limits, "HRANDFIELD with huge count
    stopped mid-run").  Every reply is at least 6 bytes.  0 when no limit
    would stop it (a script's or a pub/sub client's reply): the error then."""
    hard = c.server.obuf_hard_normal
    if not hard or c.is_fake or c.kind != "normal" or c.subscribed:
        return 0
    return min(count, hard // 6 + 2)

# --------------------------------------------------------------------------
# Random members
# --------------------------------------------------------------------------

_RANDOM_DIRECT = 2048
_rand_pools: dict = {}   # id(container) -> [container, snapshot list, uses left]


def random_member(container):
    """A random member (key, for a dict) of a non-empty set or dict.

    Python's hash tables have no random access, so a big container is
    sampled from a snapshot list of its members (checked against the live
    container, so a removed member is never returned) rebuilt after n/8
    draws: O(1) amortised, and a member added since the snapshot waits at
    most that many draws before it can be picked."""
    n = len(container)
    if n <= _RANDOM_DIRECT:
        return random.choice(list(container))
    key = id(container)
    pool = _rand_pools.get(key)
    if pool is None or pool[0] is not container or pool[2] <= 0:
        pool = _new_pool(key, container)
    pool[2] -= 1
    snap = pool[1]
    for _ in range(16):
        m = snap[random.randrange(len(snap))]
        if m in container:
            return m
    pool = _new_pool(key, container)
    return random.choice(pool[1])


def _new_pool(key, container):
    if len(_rand_pools) >= 16 and key not in _rand_pools:
        _rand_pools.pop(next(iter(_rand_pools)))
    pool = _rand_pools[key] = [container, list(container), max(64, len(container) // 8)]
    return pool


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def _get(c, key):
    return c.db.lookup_typed(key, HashValue)


def _deleted_if_empty(c, db, key, h):
    if not h:
        db.delete(key)
        c.server.event(db, key, "g", "del")


def cfg(c, name: str, default: int) -> int:
    v = c.server.config.values.get(name)
    return default if v is None else v


def _limits(c):
    values = c.server.config.values
    return (values.get("hash-max-listpack-entries", 128),
            values.get("hash-max-listpack-value", 64))


def _new_hash():
    """An empty listpack hash, without HashValue.__init__'s Python frame."""
    h = _dict_new(HashValue)
    h.big = False
    return h


_dict_new = dict.__new__


def hash_small(c, h) -> bool:
    """Whether Valkey keeps this hash in a listpack (its SCAN then returns
    everything at once, a sample comes out in its order)."""
    big = h.big
    if big is None:
        big = resolve(h, *_limits(c))
    return not big


def _before_write(c, h, argv, start):
    """The hash's encoding before writing the pairs argv[start:]: the
    entries limit when it is (still) a listpack, else None."""
    big = h.big
    if big is True:
        return None
    entries, vmax = _limits(c)
    if big is None and resolve(h, entries, vmax):
        return None
    before_write(h, argv, start, entries, vmax)
    return None if h.big else entries


def _grown(h, entries):
    """hashTypeSet's check after a write to a listpack."""
    if entries is not None and len(h) > entries:
        h.big = True


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------

def _hset_common(c, argv, name):
    if len(argv) % 2 != 0:
        raise errors.wrong_args(name)
    db = c.db
    key = argv[1]
    h = _get(c, key)
    if h is None:
        h = _dict_new(HashValue)
        h.big = False
        db.add(key, h)
    added = 0
    big = h.big
    if big is True:
        for i in range(2, len(argv), 2):
            f = argv[i]
            if f not in h:
                added += 1
            h[f] = argv[i + 1]
    else:
        # _before_write folded into the loop (HSET is hot): the encoding is
        # only a flag here, so converting after the writes is the same
        values = c.server.config.values
        entries = values.get("hash-max-listpack-entries", 128)
        vmax = values.get("hash-max-listpack-value", 64)
        if big is None:
            resolve(h, entries, vmax)
        too_long = False
        for i in range(2, len(argv), 2):
            f = argv[i]
            v = argv[i + 1]
            if f not in h:
                added += 1
            h[f] = v
            if len(f) > vmax or len(v) > vmax:
                too_long = True
        if too_long or (len(argv) - 2) >> 1 > entries or len(h) > entries:
            h.big = True
    c.server.written(db, key, "h", "hset")
    return added


@command("hset", -4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0",
         key_flags="RW update", args="key:k data(field value)...",
         complexity="O(1) for each field/value pair added, so O(N) to add N field/value pairs "
                    "when the command is called with multiple field/value pairs.",
         history=(("4.0.0", "Accepts multiple `field` and `value` arguments."),))
def hset(c, argv):
    """Creates or modifies the value of a field in a hash."""
    return _hset_common(c, argv, "hset")


@command("hmset", -4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0",
         key_flags="RW update", args="key:k data(field value)...",
         deprecated=("4.0.0", "`HSET` with multiple field-value pairs"),
         complexity="O(N) where N is the number of fields being set.")
def hmset(c, argv):
    """Sets the values of multiple fields."""
    _hset_common(c, argv, "hmset")
    return OK


@command("hsetnx", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0",
         key_flags="RW insert", args="key:k field value", complexity="O(1)")
def hsetnx(c, argv):
    """Sets the value of a field in a hash only when the field doesn't exist."""
    db = c.db
    key = argv[1]
    h = _get(c, key)
    if h is None:
        h = _new_hash()
        db.add(key, h)
    elif argv[2] in h:
        return 0
    entries = _before_write(c, h, argv, 2)
    h[argv[2]] = argv[3]
    _grown(h, entries)
    c.server.written(db, key, "h", "hset")
    return 1


@command("hget", 3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0", args="key:k field",
         complexity="O(1)")
def hget(c, argv):
    """Returns the value of a field in a hash."""
    h = _get(c, argv[1])
    if h is None:
        return None
    return h.get(argv[2])


@command("hmget", -3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0",
         args="key:k field...", complexity="O(N) where N is the number of fields being requested.")
def hmget(c, argv):
    """Returns the values of all fields in a hash."""
    h = _get(c, argv[1])
    if h is None:
        return [None] * (len(argv) - 2)
    get = h.get
    return [get(f) for f in argv[2:]]


@command("hdel", -3, "write fast", (1, 1, 1), group="hash", since="2.0.0", key_flags="RW delete",
         args="key:k field...",
         summary="Deletes one or more fields and their values from a hash. Deletes the hash if "
                 "no fields remain.",
         complexity="O(N) where N is the number of fields to be removed.",
         history=(("2.4.0", "Accepts multiple `field` arguments."),))
def hdel(c, argv):
    """Deletes one or more fields and their values from a hash."""
    db = c.db
    key = argv[1]
    h = _get(c, key)
    if h is None:
        return 0
    deleted = 0
    for f in argv[2:]:
        if h.pop(f, None) is not None:
            deleted += 1
            if not h:
                break
    if deleted:
        c.server.written(db, key, "h", "hdel", deleted)
        _deleted_if_empty(c, db, key, h)
    return deleted


@command("hlen", 2, "readonly fast", (1, 1, 1), group="hash", since="2.0.0", key_flags="RO",
         args="key:k", complexity="O(1)")
def hlen(c, argv):
    """Returns the number of fields in a hash."""
    h = _get(c, argv[1])
    return 0 if h is None else len(h)


@command("hstrlen", 3, "readonly fast", (1, 1, 1), group="hash", since="3.2.0", key_flags="RO",
         args="key:k field", complexity="O(1)")
def hstrlen(c, argv):
    """Returns the length of the value of a field."""
    h = _get(c, argv[1])
    if h is None:
        return 0
    v = h.get(argv[2])
    return 0 if v is None else len(v)


@command("hexists", 3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0", key_flags="RO",
         args="key:k field", complexity="O(1)")
def hexists(c, argv):
    """Determines whether a field exists in a hash."""
    h = _get(c, argv[1])
    return 1 if h is not None and argv[2] in h else 0


@command("hkeys", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0", args="key:k",
         complexity="O(N) where N is the size of the hash.")
def hkeys(c, argv):
    """Returns all fields in a hash."""
    h = _get(c, argv[1])
    return [] if h is None else list(h)


@command("hvals", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0", args="key:k",
         complexity="O(N) where N is the size of the hash.")
def hvals(c, argv):
    """Returns all values in a hash."""
    h = _get(c, argv[1])
    return [] if h is None else list(h.values())


@command("hgetall", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0", args="key:k",
         complexity="O(N) where N is the size of the hash.")
def hgetall(c, argv):
    """Returns all fields and values in a hash."""
    h = _get(c, argv[1])
    if h is None:
        return {}
    # a dict reply is a RESP3 map and a flat RESP2 array
    return dict(h)


@command("hincrby", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0",
         args="key:k field increment:i",
         summary="Increments the integer value of a field in a hash by a number. Uses 0 as "
                 "initial value if the field doesn't exist.", complexity="O(1)")
def hincrby(c, argv):
    """Increments the integer value of a field in a hash by a number."""
    incr = string2ll(argv[3])
    if incr is None:
        raise CommandError(errors.NOT_INTEGER)
    db = c.db
    key = argv[1]
    h = _get(c, key)
    field = argv[2]
    if h is None:
        h = _new_hash()
        current = 0
        created = True
    else:
        created = False
        old = h.get(field)
        if old is None:
            current = 0
        else:
            current = string2ll(old)
            if current is None:
                raise CommandError("ERR hash value is not an integer")
    new = current + incr
    if new > LLONG_MAX or new < -LLONG_MAX - 1:
        raise CommandError(errors.OVERFLOW)
    if created:
        db.add(key, h)
    text = b"%d" % new
    entries = _before_write(c, h, (field, text), 0)
    h[field] = text
    _grown(h, entries)
    c.server.written(db, key, "h", "hincrby")
    return new


@command("hincrbyfloat", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.6.0",
         args="key:k field increment:d",
         summary="Increments the floating point value of a field by a number. Uses 0 as initial "
                 "value if the field doesn't exist.", complexity="O(1)")
def hincrbyfloat(c, argv):
    """Increments the floating point value of a field by a number."""
    incr = parse_long_double(argv[3])
    if incr is None:
        raise CommandError(errors.NOT_FLOAT)
    if incr[0] is INF:
        raise CommandError("ERR value is NaN or Infinity")
    db = c.db
    key = argv[1]
    field = argv[2]
    h = _get(c, key)
    current = LD_ZERO
    if h is not None:
        old = h.get(field)
        if old is not None:
            current = parse_long_double(old)
            if current is None:
                raise CommandError("ERR hash value is not a float")
            if current[0] is INF:
                raise CommandError("ERR increment would produce NaN or Infinity")
    value = add_ld(current, incr)
    if value is INF:
        raise CommandError("ERR increment would produce NaN or Infinity")
    text = format_long_double(value)
    if h is None:
        h = _new_hash()
        db.add(key, h)
    entries = _before_write(c, h, (field, text), 0)
    h[field] = text
    _grown(h, entries)
    c.server.written(db, key, "h", "hincrbyfloat")
    # logged as HSET with the final value, so a replay cannot drift
    c.server.propagate_as([b"HSET", key, field, text])
    return text


@command("hrandfield", -2, "readonly", (1, 1, 1), group="hash", since="6.2.0",
         args="key:k options[count:i [WITHVALUES]]",
         complexity="O(N) where N is the number of fields returned")
def hrandfield(c, argv):
    """Returns one or more random fields from a hash."""
    if len(argv) >= 3:
        count = string2ll(argv[2])
        if count is None:
            raise CommandError(errors.NOT_INTEGER)
        if count < -LLONG_MAX:
            raise CommandError("ERR value is out of range, value must between "
                               "-9223372036854775807 and 9223372036854775807")
        withvalues = False
        if len(argv) > 4 or (len(argv) == 4 and argv[3].lower() != b"withvalues"):
            raise CommandError(errors.SYNTAX)
        if len(argv) == 4:
            withvalues = True
            if count < -LLONG_MAX // 2 or count > LLONG_MAX // 2:
                raise CommandError("ERR value is out of range")
        h = _get(c, argv[1])
        if h is None or count == 0:
            return []
        if count < 0:
            count = -count
            if count > RANDOM_REPLY_LIMIT:
                count = random_reply_cap(c, count)
                if not count:
                    raise CommandError("ERR value is out of range")
            fields = random.choices(list(h), k=count)
        elif count >= len(h):
            fields = list(h)
        else:
            keys = list(h)
            if hash_small(c, h):
                # a listpack sample comes out in listpack (insertion) order
                fields = [keys[i] for i in sorted(random.sample(range(len(keys)), count))]
            else:
                fields = random.sample(keys, count)
        if not withvalues:
            return fields
        if c.resp3:
            return [[f, h[f]] for f in fields]
        out = []
        for f in fields:
            out.append(f)
            out.append(h[f])
        return out
    h = _get(c, argv[1])
    if h is None:
        return None
    return random_member(h)


@command("hscan", -3, "readonly", (1, 1, 1), group="hash", since="2.8.0",
         args="key:k cursor:i [MATCH pattern:p] [COUNT count:i] [NOVALUES]",
         complexity="O(1) for every call. O(N) for a complete iteration, including enough "
                    "command calls for the cursor to return back to 0. N is the number of elements "
                    "inside the collection.")
def hscan(c, argv):
    """Iterates over fields and values of a hash."""
    cursor = parse_cursor(argv[2])
    h = _get(c, argv[1])
    if h is None:
        return _emptyscan()
    count, match, only_keys = scan_args(argv, 3, "hash")
    nxt, fields = scan_container(h, cursor, count, match, hash_small(c, h))
    if only_keys:
        return [b"%d" % nxt, fields]
    out = []
    for f in fields:
        out.append(f)
        out.append(h[f])
    return [b"%d" % nxt, out]

