"""The set type: ``SetValue``, a Python set of ``bytes`` members that also
keeps the encoding Valkey would have given it, and that encoding's order.

Owns the value class (the set commands are in hotkv/commands/sets.py), the
encoding rules of Valkey's t_set.c and its persistence:
* ``SetValue.enc`` is ``INTSET``, ``LISTPACK`` or ``HASHTABLE``, moved as
  Valkey moves it (``create``, ``to_hashtable``, ``add``,
  ``maybe_to_intset``; ``limits`` is ``(set-max-intset-entries,
  set-max-listpack-entries, set-max-listpack-value)``): an intset grows into
  a listpack (in ascending order, the new member last) when a non-integer
  comes and both fit, else into a hashtable; a listpack past its limits
  becomes a hashtable; nothing shrinks back except where Valkey converts
  (a SINTERSTORE result of integers);
* ``ordered(s)``: the members in the encoding's order -- an intset's
  ascending integers (sorted when first asked, kept in ``asc`` until the
  set changes), a listpack's insertion order (``SetValue.lp``, a dict
  kept only while listpack: a removal leaves the others in place), a
  hashtable's Python order (Valkey's is its hash order: no test can match it);
* ``rewrite``: SADD batches of ``ITEMS_PER_CMD`` members, in that order;
* ``rdb_save``: by OBJECT ENCODING, type 11 (intset: members sorted, the
  narrowest width holding them all), 20 (listpack, in its order) or 2 (plain);
* ``rdb_load``: types 2, 11 and 20, into the encoding Valkey's loader
  gives (with the default limits: the RDB limits carry no set settings).

Invariants: a set in the keyspace is never empty; ``copy`` (and
``SetValue(a_set_value)``) keeps the class, the encoding and the order;
``lp`` is a dict holding exactly the members while ``enc`` is ``LISTPACK``
and None otherwise; an intset's members are
all canonical integers; ``rdb_load`` refuses an empty set or a repeated
member.  The set commands change a set only through ``add`` / ``remove``
(or ``discard_many``) so the order stays right; SISMEMBER and a hashtable's
SADD cost what a plain set's do.
"""

from __future__ import annotations

from ..protocol.util import string2ll
from .codec import (
    DEFAULT_LIMITS,
    ITEMS_PER_CMD,
    T_SET,
    T_SET_INTSET,
    T_SET_LISTPACK,
    RDBError,
    Reader,
    batches,
    intset_elements,
    listpack_elements,
    lp_build,
    put_len,
    put_string,
)

RDB_TYPES = (T_SET, T_SET_INTSET, T_SET_LISTPACK)


INTSET, LISTPACK, HASHTABLE = b"intset", b"listpack", b"hashtable"
DEFAULT_SET_LIMITS = (512, 128, 64)
_INTSET_CAP = 1 << 30       # Valkey's intsetMaxEntries cap


class SetValue(set):
    __slots__ = ("enc", "lp", "asc")

    def __init__(self, members=(), enc=None):
        """``SetValue(other_set_value)`` copies the encoding and order too
        (hotkv.types.copying makes copies so); a set from anything else is a
        hashtable unless ``enc`` says otherwise."""
        set.__init__(self, members)
        self.asc = None
        if enc is None:
            if type(members) is SetValue:
                self.enc = members.enc
                self.lp = None if members.lp is None else members.lp.copy()
                return
            enc = HASHTABLE
        self.enc = enc
        self.lp = dict.fromkeys(members) if enc is LISTPACK else None

    @property
    def encoding(self) -> bytes:
        """What OBJECT ENCODING reports (hotkv.types.encodings reads it)."""
        return self.enc

    def copy(self):
        # set.copy would return a plain set; members are immutable bytes
        return SetValue(self)


def _is_int(m: bytes) -> bool:
    """Whether m is a canonical 64-bit integer (Valkey's string2ll); the
    short ones checked without a parse (SADD to an intset is hot)."""
    n = len(m)
    if 0 < n < 19:
        if m.isdigit():
            return m[0] != 48 or n == 1          # no leading zero
        return n > 1 and m[0] == 45 and m[1] != 48 and m[1:].isdigit()   # "-N", not "-0"
    return 0 < n <= 20 and string2ll(m) is not None


def ordered(s: SetValue) -> list:
    """The members in the order Valkey's encoding keeps them (a new list,
    or an intset's cached ascending one: do not change it)."""
    enc = s.enc
    if enc is INTSET:
        asc = s.asc
        if asc is None:
            asc = s.asc = sorted(s, key=int)
        return asc
    if enc is LISTPACK:
        return list(s.lp)
    return list(s)


def create(first: bytes, hint: int, limits=DEFAULT_SET_LIMITS) -> SetValue:
    """An empty set in the encoding Valkey's setTypeCreate picks for a first
    member and a count of members to come."""
    if hint <= limits[0] and _is_int(first):
        return SetValue(enc=INTSET)
    if hint <= limits[1]:
        return SetValue(enc=LISTPACK)
    return SetValue()


def to_hashtable(s: SetValue):
    s.enc = HASHTABLE
    s.lp = s.asc = None


def maybe_to_intset(s: SetValue, limits=DEFAULT_SET_LIMITS):
    """Valkey's maybeConvertToIntset, for a set known to hold integers only."""
    if s.enc is not INTSET and len(s) <= min(limits[0], _INTSET_CAP):
        s.enc = INTSET
        s.lp = s.asc = None


def _digits(v: int) -> int:
    return len(str(v))     # Valkey's sdigits10: the sign counts


def add(s: SetValue, m: bytes, limits=DEFAULT_SET_LIMITS) -> int:
    """Add one member as Valkey's setTypeAddAux does; 1 if it was new."""
    if m in s:
        return 0
    enc = s.enc
    if enc is LISTPACK:
        if len(s) < limits[1] and len(m) <= limits[2]:
            s.lp[m] = None
        else:
            to_hashtable(s)
    elif enc is INTSET:
        s.asc = None
        if _is_int(m):
            if len(s) >= limits[0] or len(s) >= _INTSET_CAP:
                to_hashtable(s)
        else:
            n = len(s)
            widest = 0
            if n:
                ints = ordered(s)
                widest = max(_digits(int(ints[0])), _digits(int(ints[-1])))
            if n < limits[1] and len(m) <= limits[2] and widest <= limits[2]:
                s.enc = LISTPACK
                s.lp = dict.fromkeys(ints) if n else {}
                s.lp[m] = None
            else:
                to_hashtable(s)
    set.add(s, m)
    return 1


def add_many(s: SetValue, members, limits=DEFAULT_SET_LIMITS) -> int:
    """Add members in order; the number that were new.  Once the set is a
    hashtable the rest go in at once."""
    before = len(s)
    if s.enc is not HASHTABLE:
        it = iter(members)
        for m in it:
            if m not in s:
                add(s, m, limits)
                if s.enc is HASHTABLE:
                    s.update(it)
                    break
        return len(s) - before
    s.update(members)
    return len(s) - before


def remove(s: SetValue, m: bytes) -> int:
    """Remove one member (a listpack's others keep their places); 1 if it was there."""
    if m not in s:
        return 0
    set.discard(s, m)
    if s.lp is not None:
        del s.lp[m]
    s.asc = None
    return 1


def discard_many(s: SetValue, members):
    """Remove members (those absent are ignored)."""
    if s.lp is None:
        s.difference_update(members)
        s.asc = None
        return
    for m in members:
        remove(s, m)


def build(members, limits=DEFAULT_SET_LIMITS) -> SetValue:
    """A set holding ``members`` (distinct) as Valkey's RDB loader builds a
    plain-encoded one: an intset, a listpack once a non-integer comes, a
    hashtable past the limits (or from the start for more than the intset
    limit)."""
    s = SetValue(enc=INTSET if len(members) <= min(limits[0], _INTSET_CAP) else HASHTABLE)
    widest = 0
    for m in members:
        if s.enc is INTSET and not _is_int(m):
            widest = max([widest, len(m)] + [len(x) for x in s])
            if len(s) < limits[1] and widest <= limits[2]:
                s.enc = LISTPACK
                s.lp = dict.fromkeys(sorted(s, key=int))
            else:
                to_hashtable(s)
        if s.enc is LISTPACK and not (len(s) < limits[1] and len(m) <= limits[2]):
            to_hashtable(s)
        set.add(s, m)
        if s.lp is not None:
            s.lp[m] = None
    return s


# ----------------------------------------------------------------------
# What the type table asks of a type (hotkv/types/table.py)
# ----------------------------------------------------------------------

OBJ_TYPE = 2            # OBJ_SET


def object_encoding(value: SetValue, key: bytes, expires: bool, settings) -> bytes:
    """The encoding the set keeps (intset, listpack or hashtable)."""
    return value.enc


DIGEST = "members"


def digest_parts(value: SetValue):
    """The members, in no particular order."""
    return value


def free_effort(value: SetValue, settings) -> int:
    """A hashtable frees each member; a listpack or intset is one allocation."""
    return len(value) if value.enc == HASHTABLE else 1


def copy(value: SetValue) -> SetValue:
    """Members are immutable bytes; the encoding and order are kept."""
    return SetValue(value)


# ----------------------------------------------------------------------
# Persistence
# ----------------------------------------------------------------------

def rewrite(key: bytes, value: SetValue):
    return batches(b"SADD", key, ordered(value), ITEMS_PER_CMD)


def rdb_save(value: SetValue, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    out = bytearray()
    if encoding == b"intset":
        ints = sorted(string2ll(m) for m in value)
        lo, hi = ints[0], ints[-1]
        width = 2 if -32768 <= lo and hi <= 32767 else \
            4 if -2147483648 <= lo and hi <= 2147483647 else 8
        blob = bytearray(width.to_bytes(4, "little") + len(ints).to_bytes(4, "little"))
        for v in ints:
            blob += v.to_bytes(width, "little", signed=True)
        put_len(len(blob), out)
        out += blob
        return T_SET_INTSET, bytes(out)
    if encoding == b"listpack":
        lp = lp_build(ordered(value))
        put_len(len(lp), out)
        out += lp
        return T_SET_LISTPACK, bytes(out)
    put_len(len(value), out)
    for m in value:
        put_string(m, out)
    return T_SET, bytes(out)


def _new_set(members, enc):
    if len(set(members)) != len(members):
        raise RDBError("duplicate set member")
    if not members:
        raise RDBError("empty set")
    lim = DEFAULT_SET_LIMITS
    if enc is None:
        return build(members, lim)
    if enc is INTSET and len(members) > min(lim[0], _INTSET_CAP):
        enc = HASHTABLE
    elif enc is LISTPACK and len(members) > lim[1]:
        enc = HASHTABLE
    s = SetValue(members, enc)
    if enc is LISTPACK:
        s.lp = dict.fromkeys(members)
    return s


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    r = Reader(buf, pos)
    if rdb_type == T_SET:
        n = r.num()
        return _new_set([bytes(r.string()) for _ in range(n)], None), r.pos
    blob = bytes(r.string())
    if rdb_type == T_SET_INTSET:
        return _new_set(intset_elements(blob), INTSET), r.pos
    return _new_set(listpack_elements(blob), LISTPACK), r.pos
