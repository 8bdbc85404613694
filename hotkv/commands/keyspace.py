"""Keyspace commands (Redis's db.c, expire.c and OBJECT from object.c).

Owns DEL/UNLINK/EXISTS/TYPE/KEYS/SCAN/RANDOMKEY/TOUCH, RENAME/RENAMENX,
COPY, MOVE, the expiry commands (EXPIRE family with NX/XX/GT/LT, TTL family,
PERSIST) and OBJECT ENCODING/REFCOUNT/IDLETIME/FREQ/HELP.

SCAN is stateless, as Redis's: the cursor is a position in hash order over
``db.keyindex`` (see hotkv/core/keyindex.py for the proof that a key present for
the whole iteration is returned at least once however the keyspace changes
between calls).  A call visits at most 10*COUNT buckets, never the whole
keyspace; MATCH/TYPE filter after sampling, and expired keys met are
deleted, as Redis does.

Rules kept everywhere: every change goes through ``server.written`` with
Redis's event name (del, expire, persist, rename_from/rename_to,
move_from/move_to, copy_to); a relative expiry is logged as PEXPIREAT with
the absolute time; an expiry already in the past deletes the key, logged
as DEL with an "expired" event, as Valkey 8.1 does
(hotkv.commands.strings.delete_expired_overwrite).
A command's dirty count matches Redis's (one per RENAME/MOVE/COPY); read
commands count keyspace hits/misses through ``db.lookup_read``.

OBJECT reports what Valkey 8.1 would for the same contents: string
encodings by value and key length (a string grown in place by APPEND/
SETRANGE/SETBIT is "raw" in Valkey whatever its length; hotkv does not
track that), container encodings by the *-max-listpack-* limits (a type
may report its own with an ``encoding`` attribute), REFCOUNT 1 (Valkey 8
never shares keyspace values).  Access times are not tracked -- it would
cost a write on every read -- so IDLETIME is 0 and FREQ the initial LFU
counter.
"""

from __future__ import annotations

import re

from ..core import access
from ..core.lazyfree import maybe_free_later
from ..core.registry import command, container, spec
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import OK, Simple
from ..protocol.util import LLONG_MAX, LLONG_MIN, compile_glob, string2ll
from ..types.copying import copy_value
from ..types.encodings import cfg as _cfg, object_encoding
from ..types.table import TYPE_NAMES
from .strings import already_expired, delete_expired_overwrite

INT_MIN, INT_MAX = -2**31, 2**31 - 1
_LLONG_MIN_DIV_1000 = -(-LLONG_MIN // 1000)     # C's truncating LLONG_MIN/1000


# ----------------------------------------------------------------------
# DEL / UNLINK / EXISTS / TYPE / TOUCH
# ----------------------------------------------------------------------

def _del(c, argv, lazy):
    db = c.db
    lookup = db.lookup
    written = c.server.written
    n = 0
    for key in argv[1:]:
        # an expired key is gone by expiry (and logged so), not by this DEL
        value = lookup(key)
        if value is not None and db.delete(key):
            if lazy and type(value) is not bytes:
                maybe_free_later(c.server, value)   # freed after the reply (hotkv.core.lazyfree)
            written(db, key, "g", "del")
            n += 1
    return n


@command("del", -2, "write", (1, -1, 1), key_flags="RM delete", args="key:k...",
         summary="Deletes one or more keys.",
         complexity="O(N) where N is the number of keys that will be removed. When a key to "
                    "remove holds a value other than a string, the individual complexity for this "
                    "key is O(M) where M is the number of elements in the list, set, sorted set or "
                    "hash. Removing a single key that holds a string value is O(1).")
def del_(c, argv):
    """Delete a key."""
    return _del(c, argv, c.server.config.values["lazyfree-lazy-user-del"])


@command("unlink", -2, "write fast", (1, -1, 1), since="4.0.0", key_flags="RM delete",
         summary="Asynchronously deletes one or more keys.", args="key:k...",
         complexity="O(1) for each key removed regardless of its size. Then the command does "
                    "O(N) work in a different thread in order to reclaim memory, where N is the "
                    "number of allocations the deleted objects where composed of.")
def unlink(c, argv):
    return _del(c, argv, True)


@command("exists", -2, "readonly fast", (1, -1, 1), key_flags="RO", args="key:k...",
         summary="Determines whether one or more keys exist.",
         complexity="O(N) where N is the number of keys to check.",
         history=(("3.0.3", "Accepts multiple `key` arguments."),))
def exists(c, argv):
    """Determine if a key exists."""
    lookup = c.db.lookup_notouch     # no access: Valkey's LOOKUP_NOTOUCH
    n = 0
    for key in argv[1:]:
        if lookup(key) is not None:
            n += 1
    return n


@command("touch", -2, "readonly fast", (1, -1, 1), since="3.2.1", key_flags="RO", args="key:k...",
         summary="Returns the number of existing keys out of those specified after updating the "
                 "time they were last accessed.",
         complexity="O(N) where N is the number of keys that will be touched.")
def touch(c, argv):
    """Alters the last access time of a key(s). Returns the number of existing keys specified."""
    lookup = c.db.lookup_read        # an access (hotkv.core.access), even under CLIENT NO-TOUCH
    n = 0
    for key in argv[1:]:
        if lookup(key) is not None:
            n += 1
    return n


_TYPE_REPLIES: dict = {}


@command("type", 2, "readonly fast", (1, 1, 1), key_flags="RO", args="key:k",
         summary="Determines the type of value stored at a key.", complexity="O(1)")
def type_(c, argv):
    """Determine the type stored at key."""
    v = c.db.lookup_notouch(argv[1])
    if v is None:
        return Simple(b"none")
    name = TYPE_NAMES[type(v)]
    reply = _TYPE_REPLIES.get(name)
    if reply is None:
        reply = _TYPE_REPLIES[name] = Simple(name)
    return reply


# ----------------------------------------------------------------------
# KEYS / SCAN / RANDOMKEY
# ----------------------------------------------------------------------

@command("keys", 2, "readonly", acl=("dangerous",), args="pattern:p",
         summary="Returns all key names that match a pattern.",
         complexity="O(N) with N being the number of keys in the database, under the assumption "
                    "that the key names in the database and the given pattern have limited length.")
def keys(c, argv):
    """Find all keys matching the given pattern."""
    db = c.db
    match = compile_glob(argv[1])
    expires = db.expires
    now = c.server.cmd_time_ms
    out = []
    for key in db.data:
        if match(key):
            when = expires.get(key) if expires else None
            if when is None or when > now:
                out.append(key)
    return out


_CURSOR_RE = re.compile(rb"[ \t\n\v\f\r]*([+-]?)([0-9]+)\Z")
ULLONG_MAX = 2**64 - 1
# Types SCAN TYPE accepts even when their module is not loaded.
_SCAN_TYPES = {b"string", b"list", b"set", b"zset", b"hash", b"stream"}


def parse_cursor(arg: bytes) -> int:
    """Redis's string2ull (string2ll, else strtoull with its quirks)."""
    v = string2ll(arg)
    if v is not None:
        if v < 0:
            raise CommandError("ERR invalid cursor")
        return v
    nul = arg.find(b"\0")
    if nul >= 0:
        arg = arg[:nul]
    m = _CURSOR_RE.match(arg)
    if m is None:
        raise CommandError("ERR invalid cursor")
    v = int(m.group(2))
    if v > ULLONG_MAX:
        raise CommandError("ERR invalid cursor")
    if m.group(1) == b"-":
        v = (-v) & ULLONG_MAX
    return v


def _rev64(v: int) -> int:
    """The 64 bits of v reversed.  A keyindex position has only its top
    bits set (as many as the table has buckets), so the reversed number is
    as small as Valkey's reverse-binary cursors: clients that read a cursor
    into a C int (valkey-cli --cluster import) can follow it."""
    return int(format(v, "064b")[::-1], 2) if v else 0


@command("scan", -2, "readonly", since="2.8.0",
         args="cursor:i [MATCH pattern:p] [COUNT count:i] [TYPE type]@6.0.0",
         summary="Iterates over the key names in the database.",
         complexity="O(1) for every call. O(N) for a complete iteration, including enough "
                    "command calls for the cursor to return back to 0. N is the number of elements "
                    "inside the collection.", history=(("6.0.0", "Added the `TYPE` subcommand."),))
def scan(c, argv):
    """Incrementally iterate the keys space."""
    cursor = parse_cursor(argv[1])
    count = 10
    pattern = None
    want_type = None
    n = len(argv)
    i = 2
    while i < n:
        opt = argv[i].lower()
        more = n - i >= 2
        if opt == b"count" and more:
            count = string2ll(argv[i + 1])
            if count is None:
                raise CommandError(errors.NOT_INTEGER)
            if count < 1:
                raise CommandError(errors.SYNTAX)
            i += 2
        elif opt == b"match" and more:
            pattern = argv[i + 1]
            if pattern == b"*":
                pattern = None
            i += 2
        elif opt == b"type" and more:
            want_type = argv[i + 1].lower()
            if want_type not in _SCAN_TYPES and want_type not in TYPE_NAMES.values():
                raise CommandError("ERR unknown type name '%s'" % _cstr(argv[i + 1]))
            i += 2
        elif opt == b"novalues":
            raise CommandError("ERR NOVALUES option can only be used in HSCAN")
        elif opt == b"noscores":
            raise CommandError("ERR NOSCORES option can only be used in ZSCAN")
        else:
            raise CommandError(errors.SYNTAX)
    db = c.db
    sampled: list = []
    cursor = _rev64(db.checked_keyindex().scan(_rev64(cursor), count, sampled))
    data = db.data
    match = compile_glob(pattern) if pattern is not None else None
    out = []
    for key in sampled:
        if want_type is not None:
            v = data.get(key)
            if v is None or TYPE_NAMES.get(type(v)) != want_type:
                continue
        if match is not None and not match(key):
            continue
        out.append(key)
    if out and db.expires:
        # Expired keys are left out (and deleted) as Valkey's scan does, with
        # no access: SCAN touched every key it returned, which an LFU policy
        # counts (valkey-cli --hotkeys saw its own SCAN in the counters).
        gone = db.gone
        out = [key for key in out if key in data and not gone(key)]
    return [b"%d" % cursor, out]


def _cstr(arg: bytes) -> str:
    nul = arg.find(b"\0")
    if nul >= 0:
        arg = arg[:nul]
    return arg.decode("utf-8", "surrogateescape")


@command("randomkey", 1, "readonly", summary="Returns a random key name from the database.",
         complexity="O(1)")
def randomkey(c, argv):
    """Return a random key from the keyspace."""
    return c.db.random_key()


# ----------------------------------------------------------------------
# RENAME / MOVE / COPY
# ----------------------------------------------------------------------

def _rename(c, argv, nx: bool):
    db = c.db
    src, dst = argv[1], argv[2]
    value = db.lookup(src)
    if value is None:
        raise CommandError(errors.NO_SUCH_KEY)
    if src == dst:
        return 0 if nx else OK
    when = db.expires.get(src)
    if db.lookup(dst) is not None:
        if nx:
            return 0
        db.server_delete(dst)
    db.add(dst, value)
    if when is not None:
        db.set_expire(dst, when)
    db.delete(src)
    written = c.server.written
    written(db, src, "g", "rename_from")
    written(db, dst, "g", "rename_to", 0)
    return 1 if nx else OK


@command("rename", 3, "write", key_specs=(spec("RW access delete"), spec("OW update", "index 2")),
         args="key:k newkey:k1", summary="Renames a key and overwrites the destination.",
         complexity="O(1)")
def rename(c, argv):
    """Rename a key."""
    return _rename(c, argv, False)


@command("renamenx", 3, "write fast",
         key_specs=(spec("RW access delete"), spec("OW insert", "index 2")), args="key:k newkey:k1",
         summary="Renames a key only when the target key name doesn't exist.", complexity="O(1)",
         history=(("3.2.0",
                   "The command no longer returns an error when source and destination names are "
                   "the same."),))
def renamenx(c, argv):
    """Rename a key, only if the new key does not exist."""
    return _rename(c, argv, True)


def _db_index(c, arg: bytes):
    """getIntFromObjectOrReply + selectDb's range check."""
    v = string2ll(arg)
    if v is None:
        raise CommandError(errors.NOT_INTEGER)
    if not INT_MIN <= v <= INT_MAX:
        raise CommandError("ERR value is out of range, value must between %d and %d"
                           % (INT_MIN, INT_MAX))
    if not 0 <= v < len(c.server.dbs):
        raise CommandError(errors.DB_INDEX)
    return c.server.dbs[v]


@command("move", 3, "write fast", (1, 1, 1), args="key:k db:i",
         summary="Moves a key to another database.", complexity="O(1)")
def move(c, argv):
    """Move a key to another database."""
    if c.server.cluster is not None:
        raise CommandError("ERR MOVE is not allowed in cluster mode")
    src = c.db
    dst = _db_index(c, argv[2])
    if src is dst:
        raise CommandError(errors.SAME_OBJECT)
    key = argv[1]
    value = src.lookup(key)
    if value is None:
        return 0
    when = src.expires.get(key)
    if dst.lookup(key) is not None:
        return 0
    dst.add(key, value)
    if when is not None:
        dst.set_expire(key, when)
    src.delete(key)
    written = c.server.written
    written(src, key, "g", "move_from")
    written(dst, key, "g", "move_to", 0)
    return 1


@command("copy", -3, "write denyoom", since="6.2.0",
         key_specs=(spec("RO access"), spec("OW update", "index 2")),
         args="source:k destination:k1 [DB destination-db:i] [REPLACE]",
         summary="Copies the value of a key to a new key.",
         complexity="O(N) worst case for collections, where N is the number of nested items. "
                    "O(1) for string values.")
def copy(c, argv):
    """Copy a key."""
    src = dst = c.db
    replace = False
    n = len(argv)
    j = 3
    while j < n:
        opt = argv[j].lower()
        if opt == b"replace":
            replace = True
        elif opt == b"db" and j + 1 < n:
            dst = _db_index(c, argv[j + 1])
            j += 1
        else:
            raise CommandError(errors.SYNTAX)
        j += 1
    key, newkey = argv[1], argv[2]
    if src is dst and key == newkey:
        raise CommandError(errors.SAME_OBJECT)
    value = src.lookup_read(key)
    if value is None:
        return 0
    when = src.expires.get(key)
    delete = False
    if dst.lookup(newkey) is not None:
        if not replace:
            return 0
        delete = True
    new = copy_value(value)
    if delete:
        dst.server_delete(newkey)
    dst.add(newkey, new)
    if when is not None:
        dst.set_expire(newkey, when)
    c.server.written(dst, newkey, "g", "copy_to")
    return 1


# ----------------------------------------------------------------------
# Expiry
# ----------------------------------------------------------------------

_NX, _XX, _GT, _LT = 1, 2, 4, 8


def _expire_generic(c, argv, relative: bool, seconds: bool, name: str):
    key = argv[1]
    flags = 0
    for opt in argv[3:]:
        o = opt.upper()
        if o == b"NX":
            flags |= _NX
        elif o == b"XX":
            flags |= _XX
        elif o == b"GT":
            flags |= _GT
        elif o == b"LT":
            flags |= _LT
        else:
            raise CommandError("ERR Unsupported option %s" % _cstr(opt))
    if flags & _NX and flags & (_XX | _GT | _LT):
        raise CommandError("ERR NX and XX, GT or LT options at the same time are not compatible")
    if flags & _GT and flags & _LT:
        raise CommandError("ERR GT and LT options at the same time are not compatible")
    when = string2ll(argv[2])
    if when is None:
        raise CommandError(errors.NOT_INTEGER)
    if seconds:
        if when > LLONG_MAX // 1000 or when < _LLONG_MIN_DIV_1000:
            raise CommandError(errors.INVALID_EXPIRE % name)
        when *= 1000
    if relative:
        base = c.server.cmd_time_ms
        if when > LLONG_MAX - base:
            raise CommandError(errors.INVALID_EXPIRE % name)
        when += base
    db = c.db
    if db.lookup(key) is None:
        return 0
    if flags:
        current = db.expires.get(key, -1)
        if flags & _NX and current != -1:
            return 0
        if flags & _XX and current == -1:
            return 0
        if flags & _GT and (when <= current or current == -1):
            return 0
        if flags & _LT and current != -1 and when >= current:
            return 0
    if already_expired(c, when):
        delete_expired_overwrite(c, key)
        return 1
    db.set_expire(key, when)
    c.server.propagate_as([b"PEXPIREAT", key, b"%d" % when, *argv[3:]])
    c.server.written(db, key, "g", "expire")
    return 1


@command("expire", -3, "write fast", (1, 1, 1), key_flags="RW update",
         args="key:k seconds:i condition[NX | XX | GT | LT]@7.0.0",
         summary="Sets the expiration time of a key in seconds.", complexity="O(1)",
         history=(("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`."),))
def expire(c, argv):
    """Set a key's time to live in seconds."""
    return _expire_generic(c, argv, True, True, "expire")


@command("pexpire", -3, "write fast", (1, 1, 1), since="2.6.0", key_flags="RW update",
         args="key:k milliseconds:i condition[NX | XX | GT | LT]@7.0.0",
         summary="Sets the expiration time of a key in milliseconds.", complexity="O(1)",
         history=(("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`."),))
def pexpire(c, argv):
    """Set a key's time to live in milliseconds."""
    return _expire_generic(c, argv, True, False, "pexpire")


@command("expireat", -3, "write fast", (1, 1, 1), since="1.2.0", key_flags="RW update",
         args="key:k unix-time-seconds:t condition[NX | XX | GT | LT]@7.0.0",
         summary="Sets the expiration time of a key to a Unix timestamp.", complexity="O(1)",
         history=(("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`."),))
def expireat(c, argv):
    """Set the expiration for a key as a UNIX timestamp."""
    return _expire_generic(c, argv, False, True, "expireat")


@command("pexpireat", -3, "write fast", (1, 1, 1), since="2.6.0", key_flags="RW update",
         args="key:k unix-time-milliseconds:t condition[NX | XX | GT | LT]@7.0.0",
         summary="Sets the expiration time of a key to a Unix milliseconds timestamp.",
         complexity="O(1)", history=(("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`."),))
def pexpireat(c, argv):
    """Set the expiration for a key as a UNIX timestamp specified in milliseconds."""
    return _expire_generic(c, argv, False, False, "pexpireat")


def _ttl(c, argv, ms: bool, absolute: bool):
    db = c.db
    key = argv[1]
    if db.lookup_notouch(key) is None:
        return -2
    when = db.expires.get(key)
    if when is None:
        return -1
    ttl = when if absolute else when - c.server.cmd_time_ms
    if ttl < 0:
        ttl = 0
    return ttl if ms else (ttl + 500) // 1000


@command("ttl", 2, "readonly fast", (1, 1, 1), args="key:k",
         summary="Returns the expiration time in seconds of a key.", complexity="O(1)",
         history=(("2.8.0", "Added the -2 reply."),))
def ttl(c, argv):
    """Get the time to live for a key in seconds."""
    return _ttl(c, argv, False, False)


@command("pttl", 2, "readonly fast", (1, 1, 1), since="2.6.0", args="key:k",
         summary="Returns the expiration time in milliseconds of a key.", complexity="O(1)",
         history=(("2.8.0", "Added the -2 reply."),))
def pttl(c, argv):
    """Get the time to live for a key in milliseconds."""
    return _ttl(c, argv, True, False)


@command("expiretime", 2, "readonly fast", (1, 1, 1), since="7.0.0", args="key:k",
         summary="Returns the expiration time of a key as a Unix timestamp.", complexity="O(1)")
def expiretime(c, argv):
    """Get the expiration Unix timestamp for a key."""
    return _ttl(c, argv, False, True)


@command("pexpiretime", 2, "readonly fast", (1, 1, 1), since="7.0.0", args="key:k",
         summary="Returns the expiration time of a key as a Unix milliseconds timestamp.",
         complexity="O(1)")
def pexpiretime(c, argv):
    """Get the expiration Unix timestamp for a key in milliseconds."""
    return _ttl(c, argv, True, True)


@command("persist", 2, "write fast", (1, 1, 1), since="2.2.0", key_flags="RW update", args="key:k",
         summary="Removes the expiration time of a key.", complexity="O(1)")
def persist(c, argv):
    """Remove the expiration from a key."""
    db = c.db
    key = argv[1]
    if db.lookup(key) is None or not db.persist(key):
        return 0
    c.server.written(db, key, "g", "persist")
    return 1


# ----------------------------------------------------------------------
# OBJECT
# ----------------------------------------------------------------------

# Valkey lists the OBJECT container itself under @slow only (its
# subcommands carry @keyspace).
container("object", group="generic", summary="A container for object introspection commands.",
          since="2.2.3", complexity="Depends on subcommand.").acl_categories = frozenset({"slow"})

_OBJECT_HELP = [
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Print this help.",
]

_LFU_SELECTED = ("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note "
                 "that when switching between policies at runtime LRU and LFU data will take "
                 "some time to adjust.")
_LFU_NOT_SELECTED = ("ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
                     "Please note that when switching between policies at runtime LRU and LFU "
                     "data will take some time to adjust.")
def _lfu(c) -> bool:
    return "lfu" in str(_cfg(c, "maxmemory-policy", "noeviction"))


@command("object|encoding", 3, "readonly", (2, 2, 1), since="2.2.3", key_flags="RO", args="key:k",
         summary="Returns the internal encoding of an object.", complexity="O(1)")
def object_encoding_cmd(c, argv):
    """Inspect the internal encoding of a Redis object."""
    value = c.db.lookup_notouch(argv[2], False)
    if value is None:
        return None
    return object_encoding(c, argv[2], value)


@command("object|refcount", 3, "readonly", (2, 2, 1), since="2.2.3", key_flags="RO", args="key:k",
         summary="Returns the reference count of a value of a key.", complexity="O(1)")
def object_refcount(c, argv):
    """Get the number of references to the value of the key."""
    # Valkey 8.1 never shares a value stored in the keyspace.
    return None if c.db.lookup_notouch(argv[2], False) is None else 1


@command("object|idletime", 3, "readonly", (2, 2, 1), since="2.2.3", key_flags="RO", args="key:k",
         summary="Returns the time since the last access to an object.", complexity="O(1)")
def object_idletime(c, argv):
    """Get the time since a Redis object was last accessed."""
    if c.db.lookup_notouch(argv[2], False) is None:
        return None
    if _lfu(c):
        raise CommandError(_LFU_SELECTED)
    return access.idle_seconds(c.db, argv[2])


@command("object|freq", 3, "readonly", (2, 2, 1), since="4.0.0", key_flags="RO", args="key:k",
         summary="Returns the logarithmic access frequency counter of an object.",
         complexity="O(1)")
def object_freq(c, argv):
    """Get the logarithmic access frequency counter of a Redis object."""
    if c.db.lookup_notouch(argv[2], False) is None:
        return None
    if not _lfu(c):
        raise CommandError(_LFU_NOT_SELECTED)
    return access.freq(c.db, argv[2])


@command("object|help", 2, "loading stale", since="6.2.0",
         summary="Returns helpful text about the different subcommands.", complexity="O(1)")
def object_help(c, argv):
    """Show helpful text about the different subcommands."""
    return [Simple(line.encode()) for line in _OBJECT_HELP]
