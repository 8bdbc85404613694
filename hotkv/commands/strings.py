"""String commands (Redis's t_string.c; the bit commands are in bits.py).

Owns GET/SET and their variants, the counters (INCR... INCRBYFLOAT),
APPEND/SETRANGE/GETRANGE and LCS, and the two ways to reach a string value
(``read_string_raw``, ``string_for_write``) the bitmap commands share.

A string value is ``bytes`` or ``bytearray`` (hotkv/types/strings.py):
* SET, the counters and APPEND to a missing key store ``bytes`` (encoded
  by contents again, as Valkey's tryObjectEncoding; ``db.set(...,
  keep_ttl=True)`` keeps the key's TTL as Redis's dbReplaceValue does);
* APPEND to an existing key, SETRANGE and the bit writers go through
  ``string_for_write``: the value becomes a ``bytearray`` once (Valkey's
  dbUnshareStringValue: the encoding is then "raw") and is changed in place
  afterwards, so a chain of APPENDs costs what is appended, not the string;
* a stored ``bytearray`` belongs to its key alone: every reply that carries
  a value (GET, GETRANGE, GETSET, MGET...) is a ``bytes`` copy, made by
  ``read_string`` -- a reply kept past the command (MULTI, Lua, a client's
  output buffer) must not change when the key does.

Invariants and rules, all Redis's:
* every change calls ``server.written`` with Redis's event name ("set",
  "incrby", "incrbyfloat", "append", "setrange", "del",
  "expire", "persist"), exactly once per changed key;
* a relative expiry is propagated in absolute form (SET ... PXAT ms,
  PEXPIREAT key ms), INCRBYFLOAT as ``SET key <result> KEEPTTL``, GETDEL as
  DEL, GETSET as SET, SET ... GET without the GET; an expiry already in the
  past deletes the key and is propagated as DEL (UNLINK with
  lazyfree-lazy-expire), event "expired" (what Valkey 8.1 emits);
* INCRBYFLOAT computes in x87 80-bit long double, as Redis does: operands
  are parsed exactly and rounded to a 64-bit significand (``hotkv.protocol.longdouble``,
  integer significand/exponent pairs, no floats), the sum is rounded the
  same way, and the result printed as C's "%.17Lf"
  with trailing zeros removed -- so 0.1 + 0.2 gives "0.3", not Python's
  0.30000000000000004.
"""

from __future__ import annotations

from ..core.registry import command, spec
from ..protocol import errors
from ..protocol.errors import CommandError, WrongType
from ..protocol.longdouble import (
    INF,
    LD_ZERO,
    add as _ld_add,
    format_long_double,
    parse_long_double,
)
from ..protocol.resp import OK
from ..protocol.util import LLONG_MAX, LLONG_MIN, string2ll

# SET/GETEX option flags (as Redis's OBJ_* bits).
NX, XX, EX, PX, KEEPTTL, GET, EXAT, PXAT, PERSIST = (1 << i for i in range(9))
_ANY_EXPIRE = EX | PX | EXAT | PXAT

STRING_TOO_LONG = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"


def check_string_length(c, size: int, append: int):
    """Refuse a string that would exceed proto-max-bulk-len (the AOF
    loader, which must obey, is exempt)."""
    if size + append > c.server.config.values["proto-max-bulk-len"] and not c.is_fake:
        raise CommandError(STRING_TOO_LONG)


def parse_string_options(argv, start: int, for_set: bool):
    """Redis's parseExtendedStringArgumentsOrReply: (flags, expire arg).
    Conflicting or repeated-conflicting options are a syntax error."""
    flags = 0
    expire = None
    n = len(argv)
    j = start
    while j < n:
        opt = argv[j].upper()
        has_next = j + 1 < n
        if opt == b"NX" and for_set and not flags & XX:
            flags |= NX
        elif opt == b"XX" and for_set and not flags & NX:
            flags |= XX
        elif opt == b"GET" and for_set:
            flags |= GET
        elif opt == b"KEEPTTL" and for_set and not flags & (PERSIST | _ANY_EXPIRE):
            flags |= KEEPTTL
        elif opt == b"PERSIST" and not for_set and not flags & (_ANY_EXPIRE | KEEPTTL):
            flags |= PERSIST
        elif opt == b"EX" and has_next and not flags & (KEEPTTL | PERSIST | EXAT | PX | PXAT):
            flags |= EX
            expire = argv[j + 1]
            j += 1
        elif opt == b"PX" and has_next and not flags & (KEEPTTL | PERSIST | EX | EXAT | PXAT):
            flags |= PX
            expire = argv[j + 1]
            j += 1
        elif opt == b"EXAT" and has_next and not flags & (KEEPTTL | PERSIST | EX | PX | PXAT):
            flags |= EXAT
            expire = argv[j + 1]
            j += 1
        elif opt == b"PXAT" and has_next and not flags & (KEEPTTL | PERSIST | EX | EXAT | PX):
            flags |= PXAT
            expire = argv[j + 1]
            j += 1
        else:
            raise CommandError(errors.SYNTAX)
        j += 1
    return flags, expire


def expire_ms(c, arg: bytes, flags: int, name: str) -> int:
    """The absolute unix-ms time an EX/PX/EXAT/PXAT argument means."""
    v = string2ll(arg)
    if v is None:
        raise CommandError(errors.NOT_INTEGER)
    seconds = flags & (EX | EXAT)
    if v <= 0 or (seconds and v > LLONG_MAX // 1000):
        raise CommandError(errors.INVALID_EXPIRE % name)
    if seconds:
        v *= 1000
    if flags & (EX | PX):
        v += c.server.cmd_time_ms
    if v > LLONG_MAX:
        raise CommandError(errors.INVALID_EXPIRE % name)
    return v


def already_expired(c, when: int) -> bool:
    """An expiry in the past deletes at once -- except while loading the
    AOF, which must rebuild the key and leave its deletion to the log, and
    on a replica, whose primary sends the deletion (Valkey's checkAlreadyExpired)."""
    return when <= c.server.cmd_time_ms and not c.server.loading \
        and c.server.replica_link is None


def delete_expired_overwrite(c, key):
    """Redis's deleteExpiredKeyFromOverwriteAndPropagate: an expiry set in
    the past removes the key, logged as DEL (UNLINK when lazy), announced
    as "expired" and counted in expired_keys."""
    db = c.db
    db.delete(key)
    c.server.stat_expiredkeys += 1      # Valkey counts it in expired_keys
    lazy = c.server.config.values.get("lazyfree-lazy-expire")
    c.server.propagate_as([b"UNLINK" if lazy else b"DEL", key])
    # Valkey 8.1 announces it as an expiry ("expired", class x), not a DEL.
    c.server.written(db, key, "x", "expired")


def read_string(db, key):
    """The string at key for a reply (a ``bytes``, copied from a bytearray),
    or None; WRONGTYPE for another type.  Counts the keyspace hit/miss."""
    value = db.lookup_read(key)
    if value is not None and type(value) is not bytes:
        if type(value) is not bytearray:
            raise WrongType()
        return bytes(value)
    return value


def read_string_raw(db, key):
    """read_string without the copy: the stored bytes or bytearray itself,
    for a command that only looks at it (never return it as a reply)."""
    value = db.lookup_read(key)
    if value is not None and type(value) is not bytes and type(value) is not bytearray:
        raise WrongType()
    return value


def string_for_write(c, key, size: int):
    """Valkey's lookupStringForBitCommand: the value at key as a bytearray
    owned by the key, at least ``size`` bytes long (zero-padded); a missing
    key is created with ``size`` zero bytes, a ``bytes`` value converted
    once (its TTL kept).  Returns (buffer, created or grown).  The caller
    changes the buffer in place and calls ``server.written`` itself."""
    db = c.db
    value = db.lookup(key)
    if value is None:
        value = bytearray(size)
        db.add(key, value)
        if size > _AMPLIFIED and c.server.maxmemory:
            c.server.eviction.grew(size)
        return value, True
    t = type(value)
    if t is not bytearray:
        if t is not bytes:
            raise WrongType()
        value = bytearray(value)
        db.add(key, value)          # the key exists: replaces, keeps the TTL
    grow = size - len(value)
    if grow > 0:
        value += bytes(grow)
        if grow > _AMPLIFIED and c.server.maxmemory:
            c.server.eviction.grew(grow)
        return value, True
    return value, False


# Growth past this many bytes is more than a command's input explains (an
# offset far out): maxmemory is then checked before the next command
# (hotkv.core.eviction.Evictor.grew), as Valkey checks before every command.
_AMPLIFIED = 4096


# ----------------------------------------------------------------------
# GET / SET and friends
# ----------------------------------------------------------------------

@command("get", 2, "readonly fast", (1, 1, 1), group="string", args="key:k",
         summary="Returns the string value of a key.", complexity="O(1)")
def get(c, argv):
    """Get the value of a key."""
    return read_string(c.db, argv[1])


def set_generic(c, argv, flags, key, value, expire, name, ok_reply=OK, abort_reply=None):
    db = c.db
    server = c.server
    when = expire_ms(c, expire, flags, name) if expire is not None else 0
    old = None
    if flags & GET:
        old = read_string(db, key)
        found = old is not None
    else:
        found = db.lookup(key) is not None
    if (flags & NX and found) or (flags & XX and not found):
        return old if flags & GET else abort_reply
    if expire is not None and already_expired(c, when):
        if found:
            delete_expired_overwrite(c, key)
        return old if flags & GET else OK
    db.set(key, value, keep_ttl=bool(flags & KEEPTTL) or expire is not None)
    server.written(db, key, "$", "set")
    if expire is not None:
        db.set_expire(key, when)
        if not flags & PXAT:
            server.propagate_as([b"SET", key, value, b"PXAT", b"%d" % when])
        server.event(db, key, "g", "expire")
    elif flags & GET:
        server.propagate_as([a for j, a in enumerate(argv) if j < 3 or a.upper() != b"GET"])
    return old if flags & GET else ok_reply


@command("set", -3, "write denyoom", group="string",
         key_specs=(spec("RW access update variable_flags",
                         notes="RW and ACCESS due to the optional `GET` argument"),),
         args="key:k value condition[NX@2.6.12 | XX@2.6.12 | (IFEQ comparison-value){Sets the "
              "key's value only if the current value matches the specified comparison "
              "value.}@8.1.0] [GET]@6.2.0 expiration[EX seconds:i@2.6.12 | PX "
              "milliseconds:i@2.6.12 | EXAT unix-time-seconds:t@6.2.0 | PXAT "
              "unix-time-milliseconds:t@6.2.0 | KEEPTTL@6.0.0]",
         summary="Sets the string value of a key, ignoring its type. The key is created if it "
                 "doesn't exist.", complexity="O(1)",
         history=(("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options."),
                  ("6.0.0", "Added the `KEEPTTL` option."),
                  ("6.2.0", "Added the `GET`, `EXAT` and `PXAT` option."),
                  ("7.0.0", "Allowed the `NX` and `GET` options to be used together."),
                  ("8.1.0", "Added the `IFEQ` option.")))
def set_(c, argv):
    """Set the string value of a key, optionally with an expiry, conditionally."""
    if len(argv) == 3:      # the common case, without the option machinery
        db = c.db
        key = argv[1]
        db.lookup(key)      # an expired key is expired (and logged) first
        db.set(key, argv[2])
        c.server.written(db, key, "$", "set")
        return OK
    flags, expire = parse_string_options(argv, 3, True)
    return set_generic(c, argv, flags, argv[1], argv[2], expire, "set")


@command("setnx", 3, "write denyoom fast", (1, 1, 1), group="string", key_flags="OW insert",
         args="key:k value",
         summary="Set the string value of a key only when the key doesn't exist.",
         deprecated=("2.6.12", "`SET` with the `NX` argument"), complexity="O(1)")
def setnx(c, argv):
    """Set the value of a key only if it does not exist."""
    return set_generic(c, argv, NX, argv[1], argv[2], None, "setnx", 1, 0)


@command("setex", 4, "write denyoom", (1, 1, 1), group="string", since="2.0.0",
         key_flags="OW update", args="key:k seconds:i value",
         summary="Sets the string value and expiration time of a key. Creates the key if it "
                 "doesn't exist.", deprecated=("2.6.12", "`SET` with the `EX` argument"),
         complexity="O(1)")
def setex(c, argv):
    """Set the value and expiration (seconds) of a key."""
    return set_generic(c, argv, EX, argv[1], argv[3], argv[2], "setex")


@command("psetex", 4, "write denyoom", (1, 1, 1), group="string", since="2.6.0",
         key_flags="OW update", args="key:k milliseconds:i value",
         summary="Sets both string value and expiration time in milliseconds of a key. The key "
                 "is created if it doesn't exist.",
         deprecated=("2.6.12", "`SET` with the `PX` argument"), complexity="O(1)")
def psetex(c, argv):
    """Set the value and expiration (milliseconds) of a key."""
    return set_generic(c, argv, PX, argv[1], argv[3], argv[2], "psetex")


@command("getset", 3, "write denyoom fast", (1, 1, 1), group="string", args="key:k value",
         summary="Returns the previous string value of a key after setting it to a new value.",
         deprecated=("6.2.0", "`SET` with the `!GET` argument"), complexity="O(1)")
def getset(c, argv):
    """Set the string value of a key and return its old value."""
    db = c.db
    key = argv[1]
    old = read_string(db, key)
    db.set(key, argv[2])
    c.server.written(db, key, "$", "set")
    c.server.propagate_as([b"SET", key, argv[2]])
    return old


@command("getdel", 2, "write fast", (1, 1, 1), group="string", since="6.2.0",
         key_flags="RW access delete", args="key:k",
         summary="Returns the string value of a key after deleting the key.", complexity="O(1)")
def getdel(c, argv):
    """Get the value of a key and delete the key."""
    db = c.db
    key = argv[1]
    old = read_string(db, key)
    if old is not None:
        db.delete(key)
        c.server.propagate_as([b"DEL", key])
        c.server.written(db, key, "g", "del")
    return old


@command("getex", -2, "write fast", group="string", since="6.2.0",
         key_specs=(spec("RW access update", notes="RW and UPDATE because it changes the TTL"),),
         args="key:k expiration[EX seconds:i | PX milliseconds:i | EXAT unix-time-seconds:t | "
              "PXAT unix-time-milliseconds:t | PERSIST]",
         summary="Returns the string value of a key after setting its expiration time.",
         complexity="O(1)")
def getex(c, argv):
    """Get the value of a key and optionally set or remove its expiration."""
    flags, expire = parse_string_options(argv, 2, False)
    db = c.db
    key = argv[1]
    value = read_string(db, key)
    if value is None:
        return None
    server = c.server
    if expire is not None:
        when = expire_ms(c, expire, flags, "getex")
        if flags & (EXAT | PXAT) and already_expired(c, when):
            delete_expired_overwrite(c, key)
        else:
            db.set_expire(key, when)
            server.propagate_as([b"PEXPIREAT", key, b"%d" % when])
            server.written(db, key, "g", "expire")
    elif flags & PERSIST:
        if db.persist(key):
            server.propagate_as([b"PERSIST", key])
            server.written(db, key, "g", "persist")
    return value


@command("mget", -2, "readonly fast", (1, -1, 1), group="string", args="key:k...",
         summary="Atomically returns the string values of one or more keys.",
         complexity="O(N) where N is the number of keys to retrieve.")
def mget(c, argv):
    """Get the values of all the given keys."""
    lookup = c.db.lookup_read
    out = []
    for key in argv[1:]:
        v = lookup(key)
        t = type(v)
        out.append(v if t is bytes else bytes(v) if t is bytearray else None)
    return out


def _mset(c, argv, nx: bool):
    if len(argv) % 2 == 0:
        raise errors.wrong_args(argv[0].decode("latin-1").lower())
    db = c.db
    if nx:
        lookup = db.lookup
        for j in range(1, len(argv), 2):
            if lookup(argv[j]) is not None:
                return 0
    elif db.expires:
        # Valkey's setKey looks each key up first: an expired one is deleted,
        # its UNLINK propagated before the MSET (one MULTI unit), as for SET.
        expires = db.expires
        for j in range(1, len(argv), 2):
            if argv[j] in expires:
                db.lookup(argv[j])
    written = c.server.written
    for j in range(1, len(argv), 2):
        key = argv[j]
        db.set(key, argv[j + 1])
        written(db, key, "$", "set")
    return 1 if nx else OK


@command("mset", -3, "write denyoom", (1, -1, 2), group="string", since="1.0.1",
         key_flags="OW update", args="data(key:k value)...",
         summary="Atomically creates or modifies the string values of one or more keys.",
         complexity="O(N) where N is the number of keys to set.")
def mset(c, argv):
    """Set multiple keys to multiple values."""
    return _mset(c, argv, False)


@command("msetnx", -3, "write denyoom", (1, -1, 2), group="string", since="1.0.1",
         key_flags="OW insert", args="data(key:k value)...",
         summary="Atomically modifies the string values of one or more keys only when all keys "
                 "don't exist.", complexity="O(N) where N is the number of keys to set.")
def msetnx(c, argv):
    """Set multiple keys to multiple values, only if none of the keys exist."""
    return _mset(c, argv, True)


# ----------------------------------------------------------------------
# Counters
# ----------------------------------------------------------------------

def incr_by(c, key, incr: int) -> int:
    db = c.db
    old = db.get_string(key)
    if old is None:
        value = 0
    else:
        value = string2ll(old)
        if value is None:
            raise CommandError(errors.NOT_INTEGER)
    value += incr
    if value > LLONG_MAX or value < LLONG_MIN:
        raise CommandError(errors.OVERFLOW)
    db.set(key, b"%d" % value, keep_ttl=True)
    c.server.written(db, key, "$", "incrby")
    return value


@command("incr", 2, "write denyoom fast", (1, 1, 1), group="string", args="key:k",
         summary="Increments the integer value of a key by one. Uses 0 as initial value if the "
                 "key doesn't exist.", complexity="O(1)")
def incr(c, argv):
    """Increment the integer value of a key by one."""
    return incr_by(c, argv[1], 1)


@command("decr", 2, "write denyoom fast", (1, 1, 1), group="string", args="key:k",
         summary="Decrements the integer value of a key by one. Uses 0 as initial value if the "
                 "key doesn't exist.", complexity="O(1)")
def decr(c, argv):
    """Decrement the integer value of a key by one."""
    return incr_by(c, argv[1], -1)


@command("incrby", 3, "write denyoom fast", (1, 1, 1), group="string", args="key:k increment:i",
         summary="Increments the integer value of a key by a number. Uses 0 as initial value if "
                 "the key doesn't exist.", complexity="O(1)")
def incrby(c, argv):
    """Increment the integer value of a key by the given amount."""
    n = string2ll(argv[2])
    if n is None:
        raise CommandError(errors.NOT_INTEGER)
    return incr_by(c, argv[1], n)


@command("decrby", 3, "write denyoom fast", (1, 1, 1), group="string", args="key:k decrement:i",
         summary="Decrements a number from the integer value of a key. Uses 0 as initial value "
                 "if the key doesn't exist.", complexity="O(1)")
def decrby(c, argv):
    """Decrement the integer value of a key by the given number."""
    n = string2ll(argv[2])
    if n is None:
        raise CommandError(errors.NOT_INTEGER)
    if n == LLONG_MIN:
        raise CommandError("ERR decrement would overflow")
    return incr_by(c, argv[1], -n)


@command("incrbyfloat", 3, "write denyoom fast", (1, 1, 1), group="string", since="2.6.0",
         args="key:k increment:d",
         summary="Increment the floating point value of a key by a number. Uses 0 as initial "
                 "value if the key doesn't exist.", complexity="O(1)")
def incrbyfloat(c, argv):
    """Increment the float value of a key by the given amount."""
    db = c.db
    key = argv[1]
    old = db.get_string(key)
    value = LD_ZERO if old is None else parse_long_double(old)
    if value is None:
        raise CommandError(errors.NOT_FLOAT)
    incr = parse_long_double(argv[2])
    if incr is None:
        raise CommandError(errors.NOT_FLOAT)
    if value[0] is INF or incr[0] is INF:
        raise CommandError("ERR increment would produce NaN or Infinity")
    total = _ld_add(value, incr)
    if total is INF:
        raise CommandError("ERR increment would produce NaN or Infinity")
    new = format_long_double(total)
    db.set(key, new, keep_ttl=True)
    c.server.written(db, key, "$", "incrbyfloat")
    c.server.propagate_as([b"SET", key, new, b"KEEPTTL"])
    return new


# ----------------------------------------------------------------------
# Ranges
# ----------------------------------------------------------------------

@command("append", 3, "write denyoom fast", (1, 1, 1), group="string", since="2.0.0",
         key_flags="RW insert", args="key:k value",
         summary="Appends a string to the value of a key. Creates the key if it doesn't exist.",
         complexity="O(1). The amortized time complexity is O(1) assuming the appended value is "
                    "small and the already present value is of any size, since the dynamic string "
                    "library used by the server will double the free space available on every "
                    "reallocation.")
def append(c, argv):
    """Append a value to a key."""
    db = c.db
    key = argv[1]
    old = db.get_string(key)
    if old is None:
        db.add(key, argv[2])
        total = len(argv[2])
    else:
        check_string_length(c, len(old), len(argv[2]))
        if type(old) is not bytearray:
            old = bytearray(old)    # Valkey's dbUnshareStringValue: now "raw"
            db.add(key, old)        # the key exists: replaces, keeps the TTL
        old += argv[2]              # in place: amortised O(appended)
        total = len(old)
    c.server.written(db, key, "$", "append")
    return total


@command("strlen", 2, "readonly fast", (1, 1, 1), group="string", since="2.2.0", key_flags="RO",
         args="key:k", summary="Returns the length of a string value.", complexity="O(1)")
def strlen(c, argv):
    """Get the length of the value stored in a key."""
    v = read_string_raw(c.db, argv[1])
    return 0 if v is None else len(v)


def _getrange(c, argv):
    start = string2ll(argv[2])
    end = string2ll(argv[3])
    if start is None or end is None:
        raise CommandError(errors.NOT_INTEGER)
    v = read_string_raw(c.db, argv[1])
    if v is None:
        return b""
    n = len(v)
    if start < 0 and end < 0 and start > end:
        return b""
    if start < 0:
        start += n
    if end < 0:
        end += n
    if start < 0:
        start = 0
    if end < 0:
        end = 0
    if end >= n:
        end = n - 1
    if start > end or n == 0:
        return b""
    return bytes(v[start:end + 1])


@command("getrange", 4, "readonly", (1, 1, 1), group="string", since="2.4.0",
         args="key:k start:i end:i", summary="Returns a substring of the string stored at a key.",
         complexity="O(N) where N is the length of the returned string. The complexity is "
                    "ultimately determined by the returned length, but because creating a "
                    "substring from an existing string is very cheap, it can be considered O(1) "
                    "for small strings.")
def getrange(c, argv):
    """Get a substring of the string stored at a key."""
    return _getrange(c, argv)


@command("substr", 4, "readonly", (1, 1, 1), group="string", args="key:k start:i end:i",
         summary="Returns a substring from a string value.", deprecated=("2.0.0", "`GETRANGE`"),
         complexity="O(N) where N is the length of the returned string. The complexity is "
                    "ultimately determined by the returned length, but because creating a "
                    "substring from an existing string is very cheap, it can be considered O(1) "
                    "for small strings.")
def substr(c, argv):
    """Get a substring of the string stored at a key."""
    return _getrange(c, argv)


@command("setrange", 4, "write denyoom", (1, 1, 1), group="string", since="2.2.0",
         key_flags="RW update", args="key:k offset:i value",
         summary="Overwrites a part of a string value with another by an offset. Creates the key "
                 "if it doesn't exist.",
         complexity="O(1), not counting the time taken to copy the new string in place. Usually, "
                    "this string is very small so the amortized complexity is O(1). Otherwise, "
                    "complexity is O(M) with M being the length of the value argument.")
def setrange(c, argv):
    """Overwrite part of a string at key starting at the specified offset."""
    offset = string2ll(argv[2])
    if offset is None:
        raise CommandError(errors.NOT_INTEGER)
    if offset < 0:
        raise CommandError("ERR offset is out of range")
    db = c.db
    key = argv[1]
    value = argv[3]
    old = db.get_string(key)
    if not value:
        return 0 if old is None else len(old)
    check_string_length(c, offset, len(value))
    end = offset + len(value)
    buf, _ = string_for_write(c, key, end)
    buf[offset:end] = value         # in place: the slice has value's length
    c.server.written(db, key, "$", "setrange")
    return len(buf)


# ----------------------------------------------------------------------
# LCS
# ----------------------------------------------------------------------

def _lcs_rows(a: bytes, b: bytes):
    """Bit-parallel LCS (Allison-Dix/Hyyro): rows[i] is a bit vector over b
    whose zero bits below j count LCS(a[:i], b[:j]); O(len(a)*len(b)/64)."""
    m = len(b)
    full = (1 << m) - 1
    match = {}
    for j, ch in enumerate(b):
        match[ch] = match.get(ch, 0) | (1 << j)
    v = full
    rows = [v]
    for ch in a:
        u = v & match.get(ch, 0)
        v = ((v + u) | (v - u)) & full
        rows.append(v)
    return rows


@command("lcs", -3, "readonly", (1, 2, 1), group="string", since="7.0.0",
         args="key1:k key2:k [LEN] [IDX] [MINMATCHLEN min-match-len:i] [WITHMATCHLEN]",
         summary="Finds the longest common substring.",
         complexity="O(N*M) where N and M are the lengths of s1 and s2, respectively")
def lcs(c, argv):
    """Find the longest common substring."""
    db = c.db
    a = db.lookup_read(argv[1])
    b = db.lookup_read(argv[2])
    if (a is not None and type(a) is not bytes and type(a) is not bytearray) or (
            b is not None and type(b) is not bytes and type(b) is not bytearray):
        raise CommandError("ERR The specified keys must contain string values")
    a = a or b""
    b = b or b""
    getlen = getidx = withmatchlen = False
    minmatchlen = 0
    j = 3
    n = len(argv)
    while j < n:
        opt = argv[j].upper()
        if opt == b"IDX":
            getidx = True
        elif opt == b"LEN":
            getlen = True
        elif opt == b"WITHMATCHLEN":
            withmatchlen = True
        elif opt == b"MINMATCHLEN" and j + 1 < n:
            minmatchlen = string2ll(argv[j + 1])
            if minmatchlen is None:
                raise CommandError(errors.NOT_INTEGER)
            if minmatchlen < 0:
                minmatchlen = 0
            j += 1
        else:
            raise CommandError(errors.SYNTAX)
        j += 1
    if getlen and getidx:
        raise CommandError("ERR If you want both the length and indexes, please just use IDX.")
    alen, blen = len(a), len(b)
    if (alen + 1) * (blen + 1) * 4 > c.server.config.values["proto-max-bulk-len"]:
        raise CommandError(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    rows = _lcs_rows(a, b)
    total = blen - rows[alen].bit_count()
    if getlen:
        return total

    def L(i, j):
        return j - (rows[i] & ((1 << j) - 1)).bit_count()

    # Walk back from the end exactly as Redis does, so that ties resolve to
    # the same LCS string and the same ranges.
    result = bytearray(total)
    idx = total
    matches = []
    a_start = alen
    a_end = b_start = b_end = 0
    i, j = alen, blen
    while i > 0 and j > 0:
        emit = False
        if a[i - 1] == b[j - 1]:
            result[idx - 1] = a[i - 1]
            if a_start == alen:
                a_start = a_end = i - 1
                b_start = b_end = j - 1
            elif a_start == i and b_start == j:
                a_start -= 1
                b_start -= 1
            else:
                emit = True
            if a_start == 0 or b_start == 0:
                emit = True
            idx -= 1
            i -= 1
            j -= 1
        else:
            if L(i - 1, j) > L(i, j - 1):
                i -= 1
            else:
                j -= 1
            if a_start != alen:
                emit = True
        if emit:
            match_len = a_end - a_start + 1
            if getidx and (minmatchlen == 0 or match_len >= minmatchlen):
                item = [[a_start, a_end], [b_start, b_end]]
                if withmatchlen:
                    item.append(match_len)
                matches.append(item)
            a_start = alen
    if getidx:
        return {b"matches": matches, b"len": total}
    return bytes(result)


__all__ = ["set_generic", "read_string", "read_string_raw", "string_for_write", "incr_by",
           "parse_long_double", "format_long_double",
           "expire_ms", "already_expired", "delete_expired_overwrite",
           "check_string_length", "WrongType"]
