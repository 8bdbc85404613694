"""How the server describes a client: the CLIENT LIST / CLIENT INFO line.

Owns ``client_info_line`` (Valkey 8's line, field for field, so tools that
split it on spaces and ``=`` keep working), the flags, type and user name
it shows, and ``validate_client_name`` (the rule CLIENT SETNAME and HELLO
SETNAME share).  It lives below ``commands/`` because the core uses it too:
the ACL LOG records the line of the client it denied.

tot-mem is hotkv.clients.client_eviction's figure, the one maxmemory-clients
weighs (as Valkey's line shows getClientMemoryUsage).

Invariants: reads a client, never changes one; a client whose transport is
gone is described with omem 0 rather than raising.
"""

from __future__ import annotations

from ..protocol.errors import CommandError
from . import clientbufs
from .client_eviction import argv_memory, client_memory


def validate_client_name(name: bytes):
    """A client name is printable ASCII without spaces (CLIENT SETNAME, HELLO SETNAME)."""
    for ch in name:
        if ch < 33 or ch > 126:
            raise CommandError("ERR Client names cannot contain spaces, newlines or special "
                               "characters.")


def as_str(b) -> str:
    """bytes as a str, undecodable bytes kept (surrogateescape)."""
    return b.decode("utf-8", "surrogateescape") if isinstance(b, (bytes, bytearray)) else str(b)


def client_type(cl) -> str:
    if cl.channels or cl.patterns or cl.shard_channels:
        return "pubsub"
    return "normal" if cl.kind in ("normal", "", None) else cl.kind


def user_name(cl) -> str:
    user = cl.user
    if user is None:
        return "default"
    name = getattr(user, "name", user)
    return as_str(name)


def client_flags(cl) -> str:
    f = "O" if cl in cl.server.monitors else ""
    if cl.kind == "replica":      # Valkey lists a replica's S first
        f = "S" + f
    elif cl.kind == "primary":    # the primary's stream (hotkv.replication.replica)
        f = "M" + f
    if cl.channels or cl.patterns or cl.shard_channels:
        f += "P"
    if cl.multi:
        f += "x"
    if cl.blocked is not None:
        f += "b"
    tracking = cl.tracking
    if tracking:   # hotkv.clients.tracking.TrackingState
        f += "t"
        if tracking.broken:
            f += "R"
        if tracking.bcast:
            f += "B"
    if cl.dirty_cas:
        f += "d"
    if cl.closing:
        f += "c"
    if cl.addr == cl.laddr and cl.addr:   # a unix socket: both are <path>:0
        f += "U"
    if cl.no_evict:
        f += "e"
    if cl.no_touch:
        f += "T"
    return f or "N"


def client_info_line(cl, now: float | None = None) -> str:
    """One CLIENT LIST line (without the trailing newline)."""
    if now is None:
        now = cl.server.clock.time()
    cmd = cl.last_cmd
    current = cl.server.current_cmd
    if current is not None and cl.server.current_client is cl:
        cmd = current.name
    qbuf, qbuf_free = clientbufs.query_fields(cl)     # Valkey's buffers (hotkv.clients.clientbufs)
    rbs, rbp = clientbufs.reply_fields(cl)
    try:
        omem = cl.output_size()
    except Exception:  # a transport already gone
        omem = 0
    events = "r" if cl.on_transport() and not cl.closed else ""
    if events and omem:
        events += "w"
    multi_mem = sum(len(a) for _, argv in cl.multi_queue for a in argv) if cl.multi else 0
    return (
        "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s capa= db=%d "
        "sub=%d psub=%d ssub=%d multi=%d watch=%d qbuf=%d qbuf-free=%d argv-mem=%d "
        "multi-mem=%d rbs=%d rbp=%d obl=0 oll=0 omem=%d tot-mem=%d events=%s cmd=%s "
        "user=%s redir=%d resp=%d lib-name=%s lib-ver=%s tot-net-in=%d tot-net-out=%d "
        "tot-cmds=%d" % (
            cl.id, cl.addr, cl.laddr, cl.fd, as_str(cl.name), int(now - cl.created),
            int(now - cl.last_interaction), client_flags(cl), cl.db.index,
            len(cl.channels), len(cl.patterns), len(cl.shard_channels),
            len(cl.multi_queue) if cl.multi else -1, len(cl.watched), qbuf,
            qbuf_free, argv_memory(cl), multi_mem, rbs, rbp, omem, client_memory(cl), events, cmd,
            user_name(cl), cl.tracking.redirect if cl.tracking else -1,
            3 if cl.resp3 else 2, as_str(cl.lib_name), as_str(cl.lib_ver),
            cl.net_in, cl.net_out, cl.ncmds))
