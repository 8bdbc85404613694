"""Connection commands: PING, ECHO, HELLO, AUTH, SELECT, SWAPDB, QUIT, RESET.

Owns the per-connection protocol state (RESP version, selected database,
authentication).  AUTH and HELLO AUTH check a password through
``hotkv.clients.acl.authenticate`` (the ``default`` user holds requirepass); RESET
asks the server to reset the client (``Server.reset_client``: every
subsystem, by name).
"""

from __future__ import annotations

from ..clients.acl import authenticate
from ..clients.clientinfo import validate_client_name
from ..core.registry import command
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import OK, PONG, Simple
from ..protocol.util import string2ll
from ..version import REDIS_COMPAT_VERSION, SERVER_NAME, VALKEY_COMPAT_VERSION


@command("ping", -1, "fast", group="connection", args="[message]",
         summary="Returns the server's liveliness response.", complexity="O(1)")
def ping(c, argv):
    """Ping the server."""
    if len(argv) > 2:
        raise errors.wrong_args("ping")
    if not c.resp3 and (c.channels or c.patterns or c.shard_channels):
        return [b"pong", argv[1] if len(argv) == 2 else b""]
    return PONG if len(argv) == 1 else argv[1]


@command("echo", 2, "loading stale fast", group="connection", args="message",
         summary="Returns the given string.", complexity="O(1)")
def echo(c, argv):
    """Echo the given string."""
    return argv[1]


@command("quit", -1, "allow_busy no_auth noscript loading stale fast", group="connection",
         summary="Closes the connection.", deprecated=("7.2.0", "just closing the connection"),
         complexity="O(1)")
def quit_(c, argv):
    """Close the connection."""
    c.closing = True
    return OK


# -- authentication -----------------------------------------------------------

@command("auth", -2, "noscript loading stale fast no_auth allow_busy", group="connection",
         args="[username]@6.0.0 password", summary="Authenticates the connection.",
         complexity="O(N) where N is the number of passwords defined for the user",
         history=(("6.0.0", "Added ACL style (username and password)."),))
def auth(c, argv):
    """Authenticate to the server."""
    if len(argv) > 3:
        raise CommandError(errors.SYNTAX)
    if len(argv) == 2:
        authenticate(c, None, argv[1])
    else:
        authenticate(c, argv[1], argv[2])
    return OK


@command("hello", -1, "noscript loading stale fast no_auth allow_busy", group="connection",
         since="6.0.0",
         args="arguments[protover:i auth[AUTH username password] [SETNAME clientname]]",
         summary="Handshakes with the server.", complexity="O(1)",
         history=(("8.1.0",
                   "A new `availability_zone` field is added to the response if the "
                   "`availability-zone` config is set."),
                  ("6.2.0",
                   "`protover` made optional; when called without arguments the command reports "
                   "the current connection's context.")))
def hello(c, argv):
    """Handshake with the server."""
    ver = 0
    i = 1
    if len(argv) >= 2:
        ver = string2ll(argv[1])
        if ver is None:
            raise CommandError("ERR Protocol version is not an integer or out of range")
        if ver < 2 or ver > 3:
            raise CommandError("NOPROTO unsupported protocol version")
        i = 2
    username = password = name = None
    while i < len(argv):
        opt = argv[i].lower()
        more = len(argv) - 1 - i
        if opt == b"auth" and more >= 2:
            username, password = argv[i + 1], argv[i + 2]
            i += 3
        elif opt == b"setname" and more >= 1:
            name = argv[i + 1]
            validate_client_name(name)
            i += 2
        else:
            raise CommandError("ERR Syntax error in HELLO option '%s'"
                               % argv[i].decode("utf-8", "surrogateescape"))
    if username is not None:
        authenticate(c, username, password)
    if not c.authenticated:
        raise CommandError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise "
            "the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the "
            "client and select the RESP protocol version at the same time")
    if name is not None:
        c.name = name
    if ver:
        c.resp3 = ver == 3
    # valkey-server 8.1.8's identity; "redis" 7.2.4 under
    # extended-redis-compatibility, as Valkey 8 answers
    redis_compat = c.server.config.values["extended-redis-compatibility"]
    return {
        b"server": b"redis" if redis_compat else SERVER_NAME.encode(),
        b"version": (REDIS_COMPAT_VERSION if redis_compat else VALKEY_COMPAT_VERSION).encode(),
        b"proto": 3 if c.resp3 else 2,
        b"id": c.id,
        b"mode": b"standalone" if c.server.cluster is None else b"cluster",
        b"role": b"master",
        b"modules": [],
    }


# -- databases ------------------------------------------------------------------

def db_index(c, arg: bytes) -> int:
    idx = string2ll(arg)
    if idx is None:
        raise CommandError(errors.NOT_INTEGER)
    if idx < -2**31 or idx > 2**31 - 1:   # Valkey's getIntFromObjectOrReply
        raise CommandError("ERR value is out of range, value must between -2147483648 and "
                           "2147483647")
    if idx < 0 or idx >= len(c.server.dbs):
        raise CommandError(errors.DB_INDEX)
    return idx


@command("select", 2, "loading stale fast", group="connection", args="index:i",
         summary="Changes the selected database.", complexity="O(1)")
def select(c, argv):
    """Change the selected database for the current connection."""
    if c.server.cluster is not None:    # cluster mode: database 0 only (hotkv.cluster)
        idx = string2ll(argv[1])
        if idx is not None and idx != 0 and -2**31 <= idx < 2**31:
            raise CommandError("ERR SELECT is not allowed in cluster mode")
    c.db = c.server.dbs[db_index(c, argv[1])]
    return OK


@command("swapdb", 3, "write fast", group="server", since="4.0.0", acl=("keyspace", "dangerous"),
         args="index1:i index2:i",
         complexity="O(N) where N is the count of clients watching or blocking on keys from both "
                    "databases.")
def swapdb(c, argv):
    """Swaps two databases."""
    server = c.server
    if server.cluster is not None:
        raise CommandError("ERR SWAPDB is not allowed in cluster mode")
    a = string2ll(argv[1])
    if a is None:
        raise CommandError("ERR invalid first DB index")
    b = string2ll(argv[2])
    if b is None:
        raise CommandError("ERR invalid second DB index")
    if not (0 <= a < len(server.dbs)) or not (0 <= b < len(server.dbs)):
        raise CommandError(errors.DB_INDEX)
    if a != b:
        da, db_ = server.dbs[a], server.dbs[b]
        da.touch_all(db_)
        db_.touch_all(da)
        da.swap_contents(db_)
        for d in (da, db_):
            for key in list(d.blocking):
                server.signal_ready(d, key)
    server.dirty += 1
    return OK


@command("reset", 1, "noscript loading stale fast no_auth allow_busy", group="connection",
         since="6.2.0", summary="Resets the connection.", complexity="O(1)")
def reset(c, argv):
    """Reset the connection."""
    c.server.reset_client(c)
    return Simple(b"RESET")
