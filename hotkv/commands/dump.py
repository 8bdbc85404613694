"""DUMP and RESTORE (Redis's cluster.c dumpCommand / restoreCommand).

Owns the two commands; the payload format is hotkv.persistence.rdb's.  A payload DUMPed
here RESTOREs into Valkey/Redis 7+ and one DUMPed there RESTOREs here
(every type and encoding, back to the zipmaps and ziplists of Redis 2.x-6.x).

RESTORE follows Valkey's order of checks: options (syntax, IDLETIME /
FREQ values), then BUSYKEY unless REPLACE, then the TTL, then the
payload's version and CRC, then its content ("Bad data format").  A TTL
is relative ms unless ABSTTL; a key restored with a relative TTL is
logged with the absolute time and ABSTTL appended, so replaying the AOF
restores the same deadline.  A TTL already in the past restores nothing
(a REPLACEd key is then deleted, logged as DEL/UNLINK with a ``del``
event).  IDLETIME / FREQ set the key's access time or LFU counter
(hotkv.core.access.restore_hint).  ``sanitize-dump-payload`` (declared in hotkv.core.config) is
inert: every payload is validated in full.  RESTORE's key flags (OW update:
it overwrites its key without reading it) are declared on its @command.
"""

from __future__ import annotations

from ..core.access import restore_hint
from ..core.registry import command
from ..persistence import rdb
from ..protocol.errors import NOT_INTEGER, SYNTAX, CommandError
from ..protocol.resp import OK
from ..protocol.util import string2ll
from ..types.encodings import object_encoding

BUSYKEY = "BUSYKEY Target key name already exists."
BAD_TTL = "ERR Invalid TTL value, must be >= 0"
BAD_PAYLOAD = "ERR DUMP payload version or checksum are wrong"
BAD_FORMAT = "ERR Bad data format"
BAD_IDLE = "ERR Invalid IDLETIME value, must be >= 0"
BAD_FREQ = "ERR Invalid FREQ value, must be >= 0 and <= 255"


def _cfg(c, name, default):
    v = c.server.config.values.get(name)
    return default if v is None else v


@command("dump", 2, "readonly", (1, 1, 1), group="generic", since="2.6.0", args="key:k",
         complexity="O(1) to access the key and additional O(N*M) to serialize it, where N is "
                    "the number of objects composing the value and M their average size. For small "
                    "string values the time complexity is thus O(1)+O(1*M) where M is small, so "
                    "simply O(1).")
def dump(c, argv):
    """Returns a serialized representation of the value stored at a key."""
    key = argv[1]
    value = c.db.lookup_read(key)
    if value is None:
        return None
    try:
        return rdb.dump_payload(value, object_encoding(c, key, value),
                                _cfg(c, "list-max-listpack-size", -2))
    except rdb.RDBError as e:     # a value type with no RDB form
        raise CommandError("ERR " + str(e)) from None


# COMMAND DOCS of RESTORE, which RESTORE-ASKING shares (hotkv.commands.replicaof).
RESTORE_DOCS = dict(
    args="key:k ttl:i serialized-value [REPLACE]@3.0.0 [ABSTTL]@5.0.0 [IDLETIME "
         "seconds:i]@5.0.0 [FREQ frequency:i]@5.0.0",
    complexity="O(1) to create the new key and additional O(N*M) to reconstruct the "
               "serialized value, where N is the number of objects composing the value and M "
               "their average size. For small string values the time complexity is thus "
               "O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values "
               "the complexity is O(N*M*log(N)) because inserting values into sorted sets is "
               "O(log(N)).",
    history=(("3.0.0", "Added the `REPLACE` modifier."),
             ("5.0.0", "Added the `ABSTTL` modifier."),
             ("5.0.0", "Added the `IDLETIME` and `FREQ` options.")))


@command("restore", -4, "write denyoom", (1, 1, 1), group="generic", since="2.6.0",
         acl=("dangerous",), key_flags="OW update",
         **RESTORE_DOCS)
def restore(c, argv):
    """Creates a key from the serialized representation of a value."""
    replace = absttl = False
    idle = freq = -1
    j, argc = 4, len(argv)
    while j < argc:
        additional = argc - j - 1
        word = argv[j].lower()
        if word == b"replace":
            replace = True
        elif word == b"absttl":
            absttl = True
        elif word == b"idletime" and additional >= 1 and freq == -1:
            idle = string2ll(argv[j + 1])
            if idle is None:
                raise CommandError(NOT_INTEGER)
            if idle < 0:
                raise CommandError(BAD_IDLE)
            j += 1
        elif word == b"freq" and additional >= 1 and idle == -1:
            freq = string2ll(argv[j + 1])
            if freq is None:
                raise CommandError(NOT_INTEGER)
            if freq < 0 or freq > 255:
                raise CommandError(BAD_FREQ)
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1

    db = c.db
    key = argv[1]
    if not replace and db.lookup(key) is not None:
        raise CommandError(BUSYKEY)
    ttl = string2ll(argv[2])
    if ttl is None:
        raise CommandError(NOT_INTEGER)
    if ttl < 0:
        raise CommandError(BAD_TTL)
    payload = argv[3]
    if not rdb.verify(payload):
        raise CommandError(BAD_PAYLOAD)
    try:
        value = rdb.load_payload(payload, _cfg(c, "zset-max-listpack-entries", 128),
                                 _cfg(c, "zset-max-listpack-value", 64))
    except rdb.RDBError:
        raise CommandError(BAD_FORMAT) from None

    server = c.server
    deleted = False
    if replace and db.lookup(key) is not None:
        deleted = db.server_delete(key)
    now = server.cmd_time_ms
    if ttl and not absttl:
        ttl += now
    if ttl and ttl <= now and not server.loading:
        if deleted:
            lazy = _cfg(c, "lazyfree-lazy-server-del", False)
            server.propagate_as([b"UNLINK" if lazy else b"DEL", key])
            server.written(db, key, "g", "del")
        return OK

    db.add(key, value)
    restore_hint(db, key, freq, idle)     # IDLETIME / FREQ (hotkv.core.access)
    if ttl:
        db.set_expire(key, ttl)
        if not absttl:
            server.propagate_as([argv[0], key, b"%d" % ttl, *argv[3:], b"ABSTTL"])
    server.written(db, key, "g", "restore")
    return OK

