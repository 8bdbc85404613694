"""HyperLogLog commands (Redis's hyperloglog.c command half).

Owns PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST.  The value is a
plain string holding Redis's HLL bytes (hotkv/types/hll.py owns the
layout and the algorithms), so TYPE, GET, DUMP/RESTORE, RDB and AOF
rewrite treat it as any string.

Rules, all Valkey 8.1's:
* a string that is not a HyperLogLog is refused with ``WRONGTYPE Key is
  not a valid HyperLogLog string value.``, one whose registers cannot be
  read with ``INVALIDOBJ Corrupted HLL object detected``; another type
  gets the generic WRONGTYPE;
* PFADD creates the key (a "new" event), counts one change per register
  raised (plus one for the creation) in ``dirty``, and announces "pfadd"
  (class $) when anything changed; an element that meets a corrupt value
  stops the command with INVALIDOBJ, keeping what earlier elements
  changed, unannounced and unpropagated;
* PFCOUNT of one key answers the cached cardinality, or computes it and
  stores it in the header -- a write: WATCHers are touched and the
  PFCOUNT is propagated (AOF), with no event; of several keys it counts
  their union and writes nothing;
* PFMERGE reads every key (destination included) before writing, writes
  dense if any input is dense, else edits the sparse destination register
  by register (promoting as PFADD would), and announces "pfadd";
* PFADD, PFCOUNT of one key, PFDEBUG and PFMERGE's destination make the
  value the key's own ``bytearray`` first (Valkey's dbUnshareStringValue: the
  encoding is "raw" from then on) and changes it in place where Valkey
  does (dense registers, the cached cardinality);
* PFCOUNT is may_replicate (it may write the cache): refused in read-only
  scripts, held by CLIENT PAUSE WRITE, as Valkey;
* PFDEBUG GETREG/TODENSE convert a sparse value to dense and count one
  change (propagated, WATCHers not touched), as Valkey; PFDEBUG SIMD
  keeps Valkey's flag and answers as an AVX2 machine does, including its
  double reply (error then status) to an argument other than ON/OFF.
"""

from __future__ import annotations

import random

from ..core.registry import command, spec
from ..core.stats import count_call
from ..protocol.errors import CommandError, WrongType
from ..protocol.resp import OK, Simple
from ..types import hll

_INVALID = hll.INVALID_ERR
_NOT_HLL = hll.WRONGTYPE_ERR

def _hll_value(value):
    """value (not None) as a valid-header HLL string, else the errors."""
    t = type(value)
    if t is not bytearray and t is not bytes:
        raise WrongType()
    if not hll.is_hll(value):
        raise CommandError(_NOT_HLL)
    return value


def _unshared(db, key, value) -> bytearray:
    """Valkey's dbUnshareStringValue: the key's value as its own bytearray
    (encoding "raw" from now on), replacing a ``bytes`` value once."""
    if type(value) is bytes:
        value = bytearray(value)
        db.add(key, value)          # the key exists: replaced, TTL kept
    return value


def _max_bytes(c) -> int:
    return c.server.config.values["hll-sparse-max-bytes"]


@command("pfadd", -2, "write denyoom fast", (1, 1, 1), group="hyperloglog",
         since="2.8.9", key_flags="RW insert", args="key:k [element]...",
         complexity="O(1) to add every element.")
def pfadd(c, argv):
    """Adds elements to a HyperLogLog key. Creates the key if it doesn't exist."""
    db = c.db
    key = argv[1]
    value = db.lookup(key)
    updated = 0
    if value is None:
        value = bytearray(hll.EMPTY)
        db.add(key, value)
        updated = 1
    else:
        value = _unshared(db, key, _hll_value(value))
    new, changed, corrupt = hll.add(value, argv[2:], _max_bytes(c))
    if new is not value:
        db.add(key, new)
    if corrupt:
        raise CommandError(_INVALID)
    if not changed:
        if not updated:
            return 0
        new[15] |= 0x80
    c.server.written(db, key, "$", "pfadd", updated + changed)
    return 1


@command("pfcount", -2, "readonly may_replicate", (1, -1, 1), group="hyperloglog", since="2.8.9",
         key_specs=(spec("RW access", "index 1", "range -1 1 0",
                         notes="RW because it may change the internal representation "
                               "of the key, and propagate to replicas"),), args="key:k...",
         complexity="O(1) with a very small average constant time when called with a single key. "
                    "O(N) with N being the number of keys, and much bigger constant times, when "
                    "called with multiple keys.")
def pfcount(c, argv):
    """Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s)."""
    db = c.db
    if len(argv) > 2:
        acc, _ = _merged(db, argv[1:])
        return hll.signed(hll.count_raw(acc))
    key = argv[1]
    value = db.lookup_read(key)
    if value is None:
        return 0
    value = _unshared(db, key, _hll_value(value))
    try:
        card, stored = hll.count(value)
    except hll.Invalid:
        raise CommandError(_INVALID) from None
    if stored:
        c.server.written(db, key)   # a change: WATCH, dirty (propagated), no event
    return hll.signed(card)


def _merged(db, keys):
    """The registers of the HLLs at keys merged (missing keys skipped):
    (registers, whether any source was dense), as PFCOUNT of several keys
    and PFMERGE read them."""
    values = []
    for key in keys:
        value = db.lookup_read(key)
        if value is not None:
            values.append(_hll_value(value))
    try:
        return hll.merge_raw(values)
    except hll.Invalid:
        raise CommandError(_INVALID) from None


@command("pfmerge", -2, "write denyoom", group="hyperloglog", since="2.8.9",
         key_specs=(spec("RW access insert", "index 1", "range 0 1 0"),
                    spec("RO access", "index 2", "range -1 1 0")),
         args="destkey:k [sourcekey:k1]...",
         complexity="O(N) to merge N HyperLogLogs, but with high constant times.")
def pfmerge(c, argv):
    """Merges one or more HyperLogLog values into a single key."""
    db = c.db
    acc, dense = _merged(db, argv[1:])
    key = argv[1]
    db.add(key, hll.merge_into(db.lookup(key), acc, dense, _max_bytes(c)))
    c.server.written(db, key, "$", "pfadd")
    return OK


def _c_name(arg: bytes) -> bytes:
    """A subcommand as C's strcasecmp sees it (up to a NUL)."""
    return arg.split(b"\0", 1)[0]


@command("pfdebug", 3, "write denyoom admin", (2, 2, 1), group="hyperloglog",
         since="2.8.9", key_flags="RW access", args="subcommand key:k", doc_flags="syscmd",
         complexity="N/A")
def pfdebug(c, argv):
    """Internal commands for debugging HyperLogLog values."""
    sub = _c_name(argv[1]).lower()
    if sub == b"simd":
        arg = _c_name(argv[2]).lower()
        if arg == b"on":
            c.server.hll_simd = True
        elif arg == b"off":
            c.server.hll_simd = False
        else:
            # Valkey replies the error and then the status (two replies);
            # the error counts as a failed call.
            c.add_error("ERR Argument must be ON or OFF")
            c.server.count_error("ERR Argument must be ON or OFF")
            count_call(c.server, pfdebug.command, failed=True)
        return Simple(b"enabled" if c.server.hll_simd else b"disabled")
    db = c.db
    key = argv[2]
    value = db.lookup(key)
    if value is None:
        raise CommandError("ERR The specified key does not exist")
    value = _unshared(db, key, _hll_value(value))
    if sub in (b"getreg", b"todense"):
        converted = False
        if value[4] == hll.SPARSE:
            try:
                value = hll.to_dense(value)
            except hll.Invalid:
                raise CommandError(_INVALID) from None
            db.add(key, value)
            c.server.dirty += 1     # propagated; Valkey signals no key change
            converted = True
        if sub == b"todense":
            return 1 if converted else 0
        return hll.registers(value)
    if sub == b"decode":
        if value[4] != hll.SPARSE:
            raise CommandError("ERR HLL encoding is not sparse")
        return hll.decode_text(value)
    if sub == b"encoding":
        return Simple(b"dense" if value[4] == hll.DENSE else b"sparse")
    raise CommandError("ERR Unknown PFDEBUG subcommand '%s'"
                       % _c_name(argv[1]).decode("utf-8", "surrogateescape"))


@command("pfselftest", 1, "admin", group="hyperloglog", since="2.8.9", doc_flags="syscmd",
         complexity="N/A")
def pfselftest(c, argv):
    """An internal command for testing HyperLogLog values."""
    rng = random.Random()
    failed = hll.selftest(lambda: rng.getrandbits(31), _max_bytes(c))
    if failed is not None:
        raise CommandError(failed)
    return OK
