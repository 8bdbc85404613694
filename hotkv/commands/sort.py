"""SORT and SORT_RO (Redis's sort.c).

Owns the two commands.  Sorts a list, set or sorted set by its elements
(numerically, or bytewise with ALPHA) or by the values of other keys
(``BY weight_*``, ``BY hash_*->field``), optionally fetching other keys per
element (``GET pattern``, ``GET #`` for the element itself), and either
replies or stores the result as a list (``STORE dst``).

Semantics kept from Redis, rule for rule:
* BY with a ``*`` and every GET need a user who may read all keys (ACL);
* options are parsed first (a bad LIMIT number or an unknown word is the
  error even when the key is missing or of the wrong type), then the key is
  looked up: missing means empty, a non-list/set/zset is WRONGTYPE;
* ``BY`` with no ``*`` means "do not sort": a list or a sorted set comes in
  its own order (DESC walks it backwards), a set in its encoding's order
  (``hotkv.types.sets.ordered``: an intset ascending, a listpack in
  insertion order; a hashtable's is Valkey's hash order, which no client
  can rely on) -- except with STORE or from a script, where a set is sorted
  ALPHA so the stored (and propagated) result is deterministic.  A set to
  sort is read in that order too (ALPHA BY ties keep it, as far as Valkey's
  qsort does);
* a listpack sorted set is converted to a skiplist for good, as Valkey's
  SORT does (OBJECT ENCODING shows it);
* numeric weights are read with C ``strtod`` rules (leading space, hex,
  ``inf`` allowed; NaN, overflow or trailing junk are an error reported
  after the whole scan, and nothing is stored); a missing BY key weighs 0
  (or sorts first with ALPHA); ties of numeric weights are broken by
  comparing the elements bytewise;
* a pattern substitutes the element for its first ``*``; ``->field`` after
  the ``*`` reads a hash field; a missing key / field / wrong type gives a
  null (an empty string when STOREd);
* STORE replaces the destination with a list (its TTL dropped), counts one
  dirty per stored element and emits ``sortstore``; an empty result deletes
  the destination (``del``).  Either way WATCHers and list waiters see the
  change through ``server.written``.  SORT ... STORE is propagated as sent:
  with the rules above its result does not depend on internal orders.

COMMAND INFO: the categories are Valkey's explicit ones (no @keyspace); the
key specs are Valkey's three (the sorted key RO, then "unknown" specs for
BY/GET and for STORE) declared on the @command lines, with the STORE
destination's flags for GETKEYSANDFLAGS (no spec locates it) as SORT's
second ``key_flags`` role.
"""

from __future__ import annotations

import math
import re
from itertools import islice

from ..clients.acl import all_keys_readable
from ..cluster.slots import key_slot, pattern_slot
from ..core.registry import command, spec
from ..protocol.errors import CommandError, WrongType
from ..protocol.util import string2ll
from ..types.lists import ListValue
from ..types.sets import ordered
from ..types.table import TYPE_NAMES

SYNTAX = "ERR syntax error"
NOT_INTEGER = "ERR value is not an integer or out of range"
NOT_DOUBLE = "ERR One or more scores can't be converted into double"
BY_DENIED = "ERR BY option of SORT denied due to insufficient ACL permissions."
GET_DENIED = "ERR GET option of SORT denied due to insufficient ACL permissions."
BY_CLUSTER = ("ERR BY option of SORT denied in Cluster mode when keys formed by the pattern "
              "may be in different slots.")
GET_CLUSTER = ("ERR GET option of SORT denied in Cluster mode when keys formed by the pattern "
               "may be in different slots.")


def _other_slots(c, argv, pattern: bytes) -> bool:
    """Cluster mode: may the keys the pattern forms be of another slot than
    the sorted key's?  (Valkey refuses BY / GET patterns then.)"""
    if c.server.cluster is None:
        return False
    return pattern_slot(pattern) != key_slot(argv[1])


_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1

_DEC = re.compile(rb"[+-]?(?:([0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\Z")
_HEX = re.compile(rb"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
                  rb"(?:[pP][+-]?[0-9]+)?\Z")
_INFWORD = re.compile(rb"([+-]?)(?:inf|infinity)\Z", re.IGNORECASE)


def _weight(data: bytes):
    """C strtod of a weight as SORT uses it: the float, or None when SORT
    reports a conversion error (junk left, NaN, ERANGE)."""
    nul = data.find(b"\0")
    if nul >= 0:           # C sees the string up to its first NUL
        data = data[:nul]
    if not data:
        return 0.0         # nothing converted, but the end pointer is at NUL
    s = data.lstrip(b" \t\n\v\f\r")
    m = _DEC.match(s)
    if m is not None:
        v = float(s)
        if math.isinf(v):
            return None    # overflow: ERANGE
        if v == 0.0 and m.group(1).strip(b"0.") != b"":
            return None    # underflow to zero: ERANGE
        return v
    m = _INFWORD.match(s)
    if m is not None:
        return -math.inf if m.group(1) == b"-" else math.inf
    if _HEX.match(s):
        try:
            return float.fromhex(s.decode())
        except OverflowError:
            return None
    return None


def _long(arg: bytes) -> int:
    v = string2ll(arg)
    if v is None:
        raise CommandError(NOT_INTEGER)
    return v


def _by_pattern(db, pattern: bytes, subst: bytes):
    """The string a BY/GET pattern names for element subst, or None."""
    if pattern == b"#":
        return subst
    star = pattern.find(b"*")
    if star < 0:
        return None
    arrow = pattern.find(b"->", star + 1)
    field = None
    if arrow >= 0 and arrow + 2 < len(pattern):
        field = pattern[arrow + 2:]
        key = pattern[:star] + subst + pattern[star + 1:arrow]
    else:
        key = pattern[:star] + subst + pattern[star + 1:]
    value = db.lookup_read(key)
    if value is None:
        return None
    if field is not None:
        if TYPE_NAMES.get(type(value)) != b"hash":
            return None
        return value.get(field)
    if type(value) is bytearray:    # a string changed in place
        return bytes(value)
    return value if type(value) is bytes else None


def _sort_keys(argv):
    """SORT's keys: the sorted key and the last STORE destination."""
    keys = [1]
    i, n = 2, len(argv)
    while i < n:
        word = argv[i].lower()
        if word == b"limit":
            i += 2
        elif word in (b"get", b"by"):
            i += 1
        elif word == b"store":
            if i + 1 < n:
                if len(keys) == 1:
                    keys.append(i + 1)
                else:
                    keys[1] = i + 1
            i += 1
        i += 1
    return keys


def _full_key_access(c, argv, readonly: bool) -> bool:
    """May the user read every key?  BY and GET patterns name keys no ACL
    key pattern can be checked against beforehand, so Redis allows them
    only then (GET # included)."""
    user = getattr(c, "user", None)
    if user is None or getattr(user, "unrestricted", False):
        return True
    return all_keys_readable(c, (sort_ro if readonly else sort).command, argv)


class _SortArgs:
    """SORT's options as parsed, in Valkey's defaults."""
    __slots__ = ("desc", "alpha", "dontsort", "limit_start", "limit_count", "sortby",
                 "storekey", "gets")

    def __init__(self):
        self.desc = self.alpha = self.dontsort = False
        self.limit_start, self.limit_count = 0, -1
        self.sortby = self.storekey = None
        self.gets = []


def _parse_sort(c, argv, readonly: bool) -> _SortArgs:
    o = _SortArgs()
    j, argc = 2, len(argv)
    while j < argc:
        left = argc - j - 1
        word = argv[j].lower()
        if word == b"asc":
            o.desc = False
        elif word == b"desc":
            o.desc = True
        elif word == b"alpha":
            o.alpha = True
        elif word == b"limit" and left >= 2:
            o.limit_start = _long(argv[j + 1])
            o.limit_count = _long(argv[j + 2])
            j += 2
        elif not readonly and word == b"store" and left >= 1:
            o.storekey = argv[j + 1]
            j += 1
        elif word == b"by" and left >= 1:
            o.sortby = argv[j + 1]
            if b"*" not in o.sortby:
                o.dontsort = True
            elif _other_slots(c, argv, o.sortby):
                raise CommandError(BY_CLUSTER)
            elif not _full_key_access(c, argv, readonly):
                raise CommandError(BY_DENIED)
            j += 1
        elif word == b"get" and left >= 1:
            if argv[j + 1] != b"#" and _other_slots(c, argv, argv[j + 1]):
                raise CommandError(GET_CLUSTER)
            if not _full_key_access(c, argv, readonly):
                raise CommandError(GET_DENIED)
            o.gets.append(argv[j + 1])
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1
    return o


def _limit_range(o: _SortArgs, vlen: int) -> tuple[int, int]:
    """LIMIT -> the (start, end) indexes, inclusive, clamped as Valkey does."""
    start = min(max(o.limit_start, 0), vlen)
    limit_count = min(max(o.limit_count, -1), vlen)
    end = vlen - 1 if limit_count < 0 else start + limit_count - 1
    if start >= vlen:
        start, end = vlen - 1, vlen - 2
    if end >= vlen:
        end = vlen - 1
    return start, end


def _unsorted_slice(o: _SortArgs, kind, value, vlen: int, start: int, end: int):
    """A list or zset taken in its own order (BY a constant): only the LIMIT
    window is read; returns (elements, start, end) with the window rebased."""
    if kind == b"list":
        if end < start:
            return [], start, end
        it = reversed(value) if o.desc else iter(value)
        return list(islice(it, start, end + 1)), 0, end - start
    sl = value.sl
    n = end - start + 1
    if n <= 0:
        elements = []
    elif o.desc:
        elements = [m for _, m in sl.islice(vlen - start - n, vlen - start, reverse=True)]
    else:
        elements = [m for _, m in sl.islice(start, start + n)]
    return elements, 0, end - start


def _order(db, o: _SortArgs, elements: list) -> list:
    """elements sorted by themselves or their BY weights (ALPHA or numeric)."""
    sortby = o.sortby
    if o.alpha:
        if sortby is None:
            elements.sort(reverse=o.desc)
            return elements
        # a missing weight sorts first
        keyed = [(w is not None, w or b"", e) for e, w in
                 ((e, _by_pattern(db, sortby, e)) for e in elements)]
        keyed.sort(key=lambda t: (t[0], t[1]), reverse=o.desc)
        return [t[2] for t in keyed]
    bad = False
    keyed = []
    for e in elements:
        w = _by_pattern(db, sortby, e) if sortby is not None else e
        if w is None:
            score = 0.0
        else:
            score = _weight(w)
            if score is None:
                bad = True
                score = 0.0
        keyed.append((score, e))
    if bad:
        raise CommandError(NOT_DOUBLE)
    keyed.sort(reverse=o.desc)
    return [e for _, e in keyed]


def _store(c, db, storekey: bytes, gets: list, picked: list) -> int:
    """SORT ... STORE: the result list replaces storekey (deleted when empty)."""
    if gets:
        result = ListValue()
        for e in picked:
            for pattern in gets:
                v = _by_pattern(db, pattern, e)
                result.append(b"" if v is None else v)
    else:
        result = ListValue(picked)
    n = len(result)
    if n:
        db.set(storekey, result)
        c.server.written(db, storekey, "l", "sortstore", n=n)
    elif db.lookup(storekey) is not None:
        db.delete(storekey)
        c.server.written(db, storekey, "g", "del")
    return n


def _sort(c, argv, readonly: bool):
    o = _parse_sort(c, argv, readonly)
    db = c.db
    value = db.lookup_read(argv[1])
    kind = None
    if value is not None:
        kind = TYPE_NAMES.get(type(value))
        if kind not in (b"list", b"set", b"zset"):
            raise WrongType()
    else:
        kind = b"list"
    if o.dontsort and kind == b"set" and (o.storekey is not None or c.kind == "lua"):
        # A set's order must not leak into a STORE or a script's reply (Valkey
        # sorts it then): both would differ between servers.
        o.dontsort, o.alpha, o.sortby = False, True, None

    if kind == b"zset":
        value.big = True        # Valkey converts a listpack zset for SORT, for good
    vlen = 0 if value is None else len(value)
    start, end = _limit_range(o, vlen)

    if value is None:
        elements = []
    elif o.dontsort and kind != b"set":
        elements, start, end = _unsorted_slice(o, kind, value, vlen, start, end)
    elif kind == b"set":
        # a new list: _order sorts it in place, and an intset's is cached
        elements = list(ordered(value))
    elif kind == b"zset":
        elements = list(value.d)
    else:
        elements = list(value)

    if not o.dontsort and elements:
        elements = _order(db, o, elements)

    picked = elements[start:end + 1] if end >= start else []
    if o.storekey is not None:
        return _store(c, db, o.storekey, o.gets, picked)
    if not o.gets:
        return picked
    return [_by_pattern(db, pattern, e) for e in picked for pattern in o.gets]


# Key specs beyond the sorted key, as Redis declares them: BY/GET name keys
# by pattern, and STORE may come anywhere, so neither can be located.
_SORT_BY_GET_SPEC = spec("RO access", "unknown", "unknown",
                         notes="For the optional BY/GET keyword. It is marked 'unknown' because "
                               "the key names derive from the content of the key we sort")
_SORT_STORE_SPEC = spec("OW update", "unknown", "unknown",
                        notes="For the optional STORE keyword. It is marked 'unknown' because "
                              "the keyword can appear anywhere in the argument array")


@command("sort", -2, "write denyoom", keys_fn=_sort_keys, group="generic",
         acl=("set", "sortedset", "list", "dangerous"),
         key_specs=(spec("RO access"), _SORT_BY_GET_SPEC, _SORT_STORE_SPEC),
         key_flags=("RO access", "OW update"),
         args="key:k by-pattern[BY pattern:p1] [LIMIT offset:i count:i] get-pattern[GET "
              "pattern:p1]... order[ASC | DESC] [sorting=ALPHA] destination[STORE destination:k2]",
         complexity="O(N+M*log(M)) where N is the number of elements in the list or set to sort, "
                    "and M the number of returned elements. When the elements are not sorted, "
                    "complexity is O(N).")
def sort(c, argv):
    """Sorts the elements in a list, a set, or a sorted set, optionally storing the result."""
    return _sort(c, argv, False)


@command("sort_ro", -2, "readonly", group="generic", since="7.0.0",
         acl=("set", "sortedset", "list", "dangerous"),
         key_specs=(spec("RO access"), _SORT_BY_GET_SPEC),
         args="key:k by-pattern[BY pattern:p1] [LIMIT offset:i count:i] get-pattern[GET "
              "pattern:p1]... order[ASC | DESC] [sorting=ALPHA]",
         complexity="O(N+M*log(M)) where N is the number of elements in the list or set to sort, "
                    "and M the number of returned elements. When the elements are not sorted, "
                    "complexity is O(N).")
def sort_ro(c, argv):
    """Returns the sorted elements of a list, a set, or a sorted set."""
    return _sort(c, argv, True)


def _command_metadata():
    """COMMAND INFO as Valkey shows it: SORT's categories are explicit (no
    @keyspace), SORT_RO's key may move (BY/GET name keys), and the sorted
    key is only read while a STORE destination is overwritten (the key
    flags on SORT's @command)."""
    for fn in (sort, sort_ro):
        fn.command.acl_categories = fn.command.acl_categories - {"keyspace"}


_command_metadata()
