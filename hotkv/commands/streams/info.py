"""XINFO: STREAM (and STREAM FULL, with the groups, consumers and PELs),
GROUPS, CONSUMERS and HELP, with Valkey 8's replies (t_stream.c's
xinfoCommand).  Registered in one piece after the group commands
(hotkv/commands/streams/__init__.py imports this module last): registration
order is COMMAND's order and the ACL bits.  Reads only: nothing here
changes a stream.
"""

from __future__ import annotations

from itertools import islice

from ...core.registry import command, container
from ...protocol import errors
from ...protocol.errors import CommandError
from ...types.stream_ids import INVALID_ENTRIES_READ, MAX_ID, id_bytes
from .args import as_text, entries_reply, help_reply, parse_ll, subcommand_error
from .changes import lookup

# ----------------------------------------------------------------------
# XINFO
# ----------------------------------------------------------------------

container("xinfo", group="stream", summary="A container for stream introspection commands.",
          since="5.0.0", complexity="Depends on subcommand.")


def _xinfo_stream_or_error(c, key):
    s = lookup(c, key)
    if s is None:
        raise CommandError(errors.NO_SUCH_KEY)
    return s


@command("xinfo|consumers", 4, "readonly", (2, 2, 1), group="stream", since="5.0.0",
         args="key:k group", complexity="O(1)",
         history=(("7.2.0", "Added the `inactive` field, and changed the meaning of `idle`."),))
def xinfo_consumers(c, argv):
    """Returns a list of the consumers in a consumer group.

    XINFO CONSUMERS key group
    """
    s = _xinfo_stream_or_error(c, argv[2])
    g = s.group(argv[3])
    if g is None:
        raise CommandError("NOGROUP No such consumer group '%s' for key name '%s'"
                           % (as_text(argv[3]), as_text(argv[2])))
    now = c.server.cmd_time_ms
    out = []
    for cons in g.sorted_consumers():
        inactive = now - cons.active_time if cons.active_time != -1 else -1
        idle = now - cons.seen_time
        if idle < 0:
            idle = 0
        out.append({b"name": cons.name, b"pending": len(cons.pel), b"idle": idle,
                    b"inactive": inactive})
    return out


@command("xinfo|groups", 3, "readonly", (2, 2, 1), group="stream", since="5.0.0", args="key:k",
         complexity="O(1)", history=(("7.0.0", "Added the `entries-read` and `lag` fields"),))
def xinfo_groups(c, argv):
    """Returns a list of the consumer groups of a stream.

    XINFO GROUPS key
    """
    s = _xinfo_stream_or_error(c, argv[2])
    out = []
    for g in s.sorted_groups():
        out.append({
            b"name": g.name,
            b"consumers": len(g.consumers),
            b"pending": len(g.pel),
            b"last-delivered-id": id_bytes(g.last_id),
            b"entries-read": g.entries_read if g.entries_read != INVALID_ENTRIES_READ else None,
            b"lag": s.group_lag(g),
        })
    return out


@command("xinfo|stream", -3, "readonly", (2, 2, 1), group="stream", since="5.0.0",
         args="key:k full-block[FULL [COUNT count:i]]", complexity="O(1)",
         history=(("6.0.0", "Added the `FULL` modifier."),
                  ("7.0.0",
                   "Added the `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`, "
                   "`entries-read` and `lag` fields"),
                  ("7.2.0",
                   "Added the `active-time` field, and changed the meaning of `seen-time`.")))
def xinfo_stream(c, argv):
    """Returns information about a stream.

    XINFO STREAM key [FULL [COUNT count]]
    """
    s = _xinfo_stream_or_error(c, argv[2])
    opts = argv[3:]
    full = True
    count = 10
    if not opts:
        full = False
    else:
        if len(opts) not in (1, 3) or opts[0].lower() != b"full":
            raise subcommand_error(argv)
        if len(opts) == 3:
            if opts[1].lower() != b"count":
                raise subcommand_error(argv)
            count = parse_ll(opts[2])
            if count < 0:
                count = 10
    out = {
        b"length": s.length,
        b"radix-tree-keys": len(s.nodes),
        b"radix-tree-nodes": s.rax_node_count(),
        b"last-generated-id": id_bytes(s.last_id),
        b"max-deleted-entry-id": id_bytes(s.max_deleted_id),
        b"entries-added": s.entries_added,
        b"recorded-first-entry-id": id_bytes(s.first_id),
    }
    if not full:
        out[b"groups"] = len(s.groups) if s.groups else 0
        first = s.range(0, MAX_ID, 1)
        last = s.revrange(0, MAX_ID, 1)
        out[b"first-entry"] = [id_bytes(first[0][0]), first[0][1]] if first else None
        out[b"last-entry"] = [id_bytes(last[0][0]), last[0][1]] if last else None
        return out
    out[b"entries"] = entries_reply(s.range(0, MAX_ID, count))
    groups = []
    for g in s.sorted_groups():
        pending = []
        for i in islice(g.pel, count or None):
            nack = g.pel[i]
            pending.append([id_bytes(i), nack.consumer.name, nack.delivery_time,
                            nack.delivery_count])
        consumers = []
        for cons in g.sorted_consumers():
            cp = []
            for i in islice(cons.pel, count or None):
                nack = cons.pel[i]
                cp.append([id_bytes(i), nack.delivery_time, nack.delivery_count])
            consumers.append({
                b"name": cons.name,
                b"seen-time": cons.seen_time,
                b"active-time": cons.active_time,
                b"pel-count": len(cons.pel),
                b"pending": cp,
            })
        groups.append({
            b"name": g.name,
            b"last-delivered-id": id_bytes(g.last_id),
            b"entries-read": g.entries_read if g.entries_read != INVALID_ENTRIES_READ else None,
            b"lag": s.group_lag(g),
            b"pel-count": len(g.pel),
            b"pending": pending,
            b"consumers": consumers,
        })
    out[b"groups"] = groups
    return out


@command("xinfo|help", 2, "loading stale", group="stream", since="5.0.0", complexity="O(1)")
def xinfo_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return help_reply(argv, [
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
    ])
