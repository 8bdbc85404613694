"""Consumer-group commands: XREADGROUP, XGROUP, XACK, XPENDING, XCLAIM and
XAUTOCLAIM, with Valkey 8's replies, errors and propagation (Valkey's
t_stream.c is the spec).

The groups, consumers and PELs live in hotkv/types/stream_groups.py; the
XREAD / XREADGROUP engine and the AOF forms of PEL changes are ``read``'s;
XINFO, registered right after these, is ``info``'s.

Propagation: XREADGROUP, XCLAIM and XAUTOCLAIM are never logged as
themselves (see ``read``); XGROUP, XACK and the rest are logged as sent.

Fast path (twin; test): ``_xreadgroup_one`` (``read.read_streams``, and
an AOF server's per-entry ``serve_group``; tests/test_fastpaths_server.py::
test_xreadgroup_fast_general_aof_and_valkey_agree); it hands anything else
to ``read_streams`` before changing anything.

Which writes wake whom follows Valkey: XGROUP CREATE MKSTREAM touches
WATCHers; XGROUP DESTROY wakes XREADGROUP waiters; group bookkeeping
(XACK, XCLAIM, SETID, consumers) only counts as a change for the AOF.
"""

from __future__ import annotations

from itertools import islice

from ...core.blocking import block, parse_timeout
from ...core.registry import command, container, spec
from ...protocol import errors
from ...protocol.errors import CommandError
from ...protocol.resp import NULL_ARRAY, OK
from ...protocol.util import string2ll
from ...types.stream import Stream
from ...types.stream_groups import NACK
from ...types.stream_ids import INVALID_ENTRIES_READ, MAX_ID, id_bytes
from .args import (
    ERR_BUSYGROUP,
    ERR_ENTRIESREAD,
    ERR_START_INTERVAL,
    ERR_XGROUP_NOKEY,
    as_text,
    help_reply,
    nogroup_error,
    parse_id,
    parse_ids,
    parse_interval,
    parse_ll,
    parse_range,
    subcommand_error,
)
from .changes import changed, lookup, seen_consumer
from .read import BlockedRead, read_streams, serve_group, setid_prop, xclaim_prop, xread_keys

# ----------------------------------------------------------------------
# XREADGROUP
# ----------------------------------------------------------------------

@command("xreadgroup", -7, "write blocking", keys_fn=xread_keys(4), group="stream",
         since="5.0.0", key_specs=(spec("RO access", "keyword STREAMS 4", "range -1 1 2"),),
         args="group-block(GROUP group consumer) [COUNT count:i] [BLOCK milliseconds:i] [NOACK] "
              "(STREAMS key:k... id...)",
         summary="Returns new or historical messages from a stream for a consumer in a group. "
                 "Blocks until a message is available otherwise.",
         complexity="For each stream mentioned: O(M) with M being the number of elements "
                    "returned. If M is constant (e.g. always asking for the first 10 elements with "
                    "COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, "
                    "XADD will pay the O(N) time in order to serve the N clients blocked on the "
                    "stream getting new data.")
def xreadgroup(c, argv):
    """Returns new or historical messages from a stream for a consumer in a group.

    XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK]
        STREAMS key [key ...] id|> [id ...]
    """
    n = len(argv)
    # A woken worker's re-run takes the fast path too: it serves exactly as a
    # fresh read would, or blocks again with its first deadline.
    if (n == 7 or n == 9 or n == 11) and argv[n - 1] == b">" and \
            argv[1].lower() == b"group" and argv[n - 3].lower() == b"streams":
        reply = _xreadgroup_one(c, argv, n)
        if reply is not None:
            return reply
    return read_streams(c, argv, True)


def _xreadgroup_one(c, argv, n):
    """The worker's read, ``GROUP g c [COUNT n] [BLOCK ms] STREAMS key >``,
    as read_streams would do it, blocking included; None (having changed nothing)
    when read_streams must decide: other options."""
    server = c.server
    count = 0
    deadline = None
    i = 4
    while i < n - 3:
        opt = argv[i].lower()
        if opt == b"count":
            count = parse_ll(argv[i + 1])
            if count < 0:
                count = 0
        elif opt == b"block":
            deadline = parse_timeout(server, argv[i + 1], seconds=False)
        else:
            return None
        i += 2
    key = argv[n - 2]
    gname = argv[2]
    s = lookup(c, key)
    g = s.group(gname) if s is not None else None
    if g is None:
        raise CommandError("NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with "
                           "GROUP option" % (as_text(key), as_text(gname)))
    serve = s.length and s.last_valid_id() > g.last_id
    now = server.cmd_time_ms
    props = [] if server.aof is not None else None   # None: nothing logs
    cname = argv[3]
    consumer = seen_consumer(c, g, key, cname, now)
    if serve:
        entries = serve_group(c, s, g, consumer, key, gname, (g.last_id + 1) & MAX_ID, count,
                               False, props)
        server.dirty += 1
    if props is not None:
        server.propagate_as(*props)
    if not serve:
        if deadline is not None:
            # As read_streams: the consumer is seen (or created) first, then the
            # read waits; a re-run that finds nothing (block() knows it by
            # c.reprocessing) keeps its first deadline.
            return block(c, [key], deadline, Stream, NULL_ARRAY, unblock_on_nokey=True,
                         data=BlockedRead([key], [MAX_ID], {}, gname, cname, True, True))
        return NULL_ARRAY
    if c.resp3:
        return {key: entries}
    return [[key, entries]]



# ----------------------------------------------------------------------
# XGROUP
# ----------------------------------------------------------------------

container("xgroup", group="stream", summary="A container for consumer groups commands.",
          since="5.0.0", complexity="Depends on subcommand.")


def _xgroup_common(c, argv, create: bool, setid: bool):
    """Valkey's shared XGROUP prologue: options, key, group.
    Returns (stream or None, group or None, mkstream, entries_read)."""
    mkstream = False
    entries_read = INVALID_ENTRIES_READ
    n = len(argv)
    i = 5
    while i < n:
        opt = argv[i].lower()
        if create and opt == b"mkstream":
            mkstream = True
            i += 1
        elif (create or setid) and opt == b"entriesread" and i + 1 < n:
            entries_read = parse_ll(argv[i + 1])
            if entries_read < 0 and entries_read != INVALID_ENTRIES_READ:
                raise CommandError(ERR_ENTRIESREAD)
            i += 2
        else:
            raise subcommand_error(argv)
    s = lookup(c, argv[2])
    g = None
    if not mkstream:
        if s is None:
            raise CommandError(ERR_XGROUP_NOKEY)
        g = s.group(argv[3])
    elif s is not None:
        g = s.group(argv[3])
    return s, g, mkstream, entries_read


def _require_group(argv, g):
    if g is None:
        raise CommandError("NOGROUP No such consumer group '%s' for key name '%s'"
                           % (as_text(argv[3]), as_text(argv[2])))


@command("xgroup|create", -5, "write denyoom", (2, 2, 1), group="stream", since="5.0.0",
         key_flags="RW insert",
         args="key:k group id-selector(id | new-id=$) [MKSTREAM] entriesread[ENTRIESREAD "
              "entries-read:i]", complexity="O(1)",
         history=(("7.0.0", "Added the `entries_read` named argument."),))
def xgroup_create(c, argv):
    """Creates a consumer group.

    XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]
    """
    s, g, mkstream, entries_read = _xgroup_common(c, argv, True, False)
    if len(argv) > 8:
        raise subcommand_error(argv)
    key = argv[2]
    if argv[4] == b"$":
        last = s.last_id if s is not None else 0
    else:
        last = parse_id(argv[4], 0, strict=True)[0]
    if s is None:
        s = Stream()
        c.db.add(key, s)
        c.server.written(c.db, key, "", "", n=0)
    if s.create_group(argv[3], last, entries_read) is None:
        raise CommandError(ERR_BUSYGROUP)
    changed(c, key, "xgroup-create")
    return OK


@command("xgroup|setid", -5, "write", (2, 2, 1), group="stream", since="5.0.0",
         key_flags="RW update",
         args="key:k group id-selector(id | new-id=$) entriesread[ENTRIESREAD entries-read:i]",
         complexity="O(1)", history=(("7.0.0", "Added the optional `entries_read` argument."),))
def xgroup_setid(c, argv):
    """Sets the last-delivered ID of a consumer group.

    XGROUP SETID key group id|$ [ENTRIESREAD entries-read]
    """
    s, g, _, entries_read = _xgroup_common(c, argv, False, True)
    _require_group(argv, g)
    if len(argv) not in (5, 7):
        raise subcommand_error(argv)
    if argv[4] == b"$":
        last = s.last_id
    else:
        last = parse_id(argv[4], 0)[0]
    g.last_id = last
    g.entries_read = entries_read
    changed(c, argv[2], "xgroup-setid")
    return OK


@command("xgroup|destroy", 4, "write", (2, 2, 1), group="stream", since="5.0.0",
         key_flags="RW delete", args="key:k group",
         complexity="O(N) where N is the number of entries in the group's pending entries list "
                    "(PEL).")
def xgroup_destroy(c, argv):
    """Destroys a consumer group.

    XGROUP DESTROY key group
    """
    s, g, _, _ = _xgroup_common(c, argv, False, False)
    if g is None:
        return 0
    del s.groups[argv[3]]
    key = argv[2]
    changed(c, key, "xgroup-destroy")
    # Blocked XREADGROUPs on this group re-run and get NOGROUP.
    c.server.signal_ready(c.db, key)
    return 1


@command("xgroup|createconsumer", 5, "write denyoom", (2, 2, 1), group="stream", since="6.2.0",
         key_flags="RW insert", args="key:k group consumer", complexity="O(1)")
def xgroup_createconsumer(c, argv):
    """Creates a consumer in a consumer group.

    XGROUP CREATECONSUMER key group consumer
    """
    s, g, _, _ = _xgroup_common(c, argv, False, False)
    _require_group(argv, g)
    if g.create_consumer(argv[4], c.server.cmd_time_ms) is None:
        return 0
    changed(c, argv[2], "xgroup-createconsumer")
    return 1


@command("xgroup|delconsumer", 5, "write", (2, 2, 1), group="stream", since="5.0.0",
         key_flags="RW delete", args="key:k group consumer", complexity="O(1)")
def xgroup_delconsumer(c, argv):
    """Deletes a consumer from a consumer group.

    XGROUP DELCONSUMER key group consumer
    """
    s, g, _, _ = _xgroup_common(c, argv, False, False)
    _require_group(argv, g)
    consumer = g.consumers.get(argv[4])
    if consumer is None:
        return 0
    pending = g.delete_consumer(consumer)
    changed(c, argv[2], "xgroup-delconsumer")
    return pending


@command("xgroup|help", 2, "loading stale", group="stream", since="5.0.0", complexity="O(1)")
def xgroup_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return help_reply(argv, [
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
    ])


# ----------------------------------------------------------------------
# XACK / XPENDING / XCLAIM / XAUTOCLAIM
# ----------------------------------------------------------------------

@command("xack", -4, "write fast", (1, 1, 1), group="stream", since="5.0.0", key_flags="RW update",
         args="key:k group id...",
         summary="Returns the number of messages that were successfully acknowledged by the "
                 "consumer group member of a stream.",
         complexity="O(1) for each message ID processed.")
def xack(c, argv):
    """Returns the number of messages that were successfully acknowledged.

    XACK key group id [id ...]
    """
    s = lookup(c, argv[1])
    g = s.group(argv[2]) if s is not None else None
    if g is None:
        return 0
    acked = g.ack_all(parse_ids(argv[3:]))
    if acked:
        changed(c, argv[1], "", acked)
    return acked


@command("xpending", -3, "readonly", (1, 1, 1), group="stream", since="5.0.0",
         args="key:k group filters[[IDLE min-idle-time:i]@6.2.0 start end count:i [consumer]]",
         summary="Returns the information and entries from a stream consumer group's pending "
                 "entries list.",
         complexity="O(N) with N being the number of elements returned, so asking for a small "
                    "fixed number of entries per call is O(1). O(M), where M is the total number "
                    "of entries scanned when used with the IDLE filter. When the command returns "
                    "just the summary and the list of consumers is small, it runs in O(1) time; "
                    "otherwise, an additional O(N) time for iterating every consumer.",
         history=(("6.2.0", "Added the `IDLE` option and exclusive range intervals."),))
def xpending(c, argv):
    """Returns the information and entries from a stream consumer group's PEL.

    XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
    """
    n = len(argv)
    justinfo = n == 3
    if n != 3 and (n < 6 or n > 9):
        raise CommandError(errors.SYNTAX)
    minidle = 0
    consumer_name = None
    if n >= 6:
        startidx = 3
        if argv[3].lower() == b"idle":
            minidle = parse_ll(argv[4])
            if n < 8:
                raise CommandError(errors.SYNTAX)
            startidx += 2
        count = parse_ll(argv[startidx + 2])
        if count < 0:
            count = 0
        start, end = parse_range(argv[startidx], argv[startidx + 1])
        if startidx + 3 < n:
            consumer_name = argv[startidx + 3]
    s = lookup(c, argv[1])
    g = s.group(argv[2]) if s is not None else None
    if g is None:
        raise nogroup_error(argv[1], argv[2])
    if justinfo:
        pel = g.pel
        if not pel:
            return [0, None, None, NULL_ARRAY]
        consumers = [[cons.name, b"%d" % len(cons.pel)]
                     for cons in g.sorted_consumers() if cons.pel]
        return [len(pel), id_bytes(pel.first()), id_bytes(pel.last()), consumers]
    if consumer_name is not None:
        consumer = g.consumers.get(consumer_name)
        if consumer is None:
            return []
        pel = consumer.pel
    else:
        pel = g.pel
    now = c.server.cmd_time_ms
    out = []
    if not count or start > end:
        return out
    for i in pel.irange(start, end):
        nack = pel[i]
        if minidle and now - nack.delivery_time < minidle:
            continue
        elapsed = now - nack.delivery_time
        out.append([id_bytes(i), nack.consumer.name, elapsed if elapsed > 0 else 0,
                    nack.delivery_count])
        if len(out) >= count:
            break
    return out


def _xclaim_options(argv, j: int, now: int) -> tuple:
    """XCLAIM's options from argv[j] on: (force, justid, retrycount,
    deliverytime, last_id), -1 for a retry count or delivery time not given."""
    n = len(argv)
    force = justid = False
    retrycount = -1
    deliverytime = -1
    last_id = 0
    while j < n:
        moreargs = n - 1 - j
        opt = argv[j].lower()
        if opt == b"force":
            force = True
        elif opt == b"justid":
            justid = True
        elif opt == b"idle" and moreargs:
            j += 1
            deliverytime = now - parse_ll(argv[j], "ERR Invalid IDLE option argument for XCLAIM")
        elif opt == b"time" and moreargs:
            j += 1
            deliverytime = parse_ll(argv[j], "ERR Invalid TIME option argument for XCLAIM")
        elif opt == b"retrycount" and moreargs:
            j += 1
            retrycount = parse_ll(argv[j], "ERR Invalid RETRYCOUNT option argument for XCLAIM")
        elif opt == b"lastid" and moreargs:
            j += 1
            last_id = parse_id(argv[j], 0, strict=True)[0]
        else:
            raise CommandError("ERR Unrecognized XCLAIM option '%s'" % as_text(argv[j]))
        j += 1
    return force, justid, retrycount, deliverytime, last_id


@command("xclaim", -6, "write fast", (1, 1, 1), group="stream", since="5.0.0",
         key_flags="RW update",
         args="key:k group consumer min-idle-time id... [IDLE ms:i] [TIME "
              "unix-time-milliseconds:t] [RETRYCOUNT count:i] [FORCE] [JUSTID] [LASTID lastid]",
         summary="Changes, or acquires, ownership of a message in a consumer group, as if the "
                 "message was delivered a consumer group member.",
         complexity="O(log N) with N being the number of messages in the PEL of the consumer "
                    "group.")
def xclaim(c, argv):
    """Changes, or acquires, ownership of a message in a consumer group.

    XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-ms]
        [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID id]
    """
    key = argv[1]
    gname = argv[2]
    s = lookup(c, key)
    g = s.group(gname) if s is not None else None
    if g is None:
        raise nogroup_error(key, gname)
    minidle = parse_ll(argv[4], "ERR Invalid min-idle-time argument for XCLAIM")
    if minidle < 0:
        minidle = 0
    n = len(argv)
    ids = []
    j = 5
    while j < n:
        try:
            ids.append(parse_id(argv[j], 0, strict=True)[0])
        except CommandError:
            break
        j += 1
    last_id_arg = j - 1
    server = c.server
    now = server.cmd_time_ms
    force, justid, retrycount, deliverytime, last_id = _xclaim_options(argv, j, now)
    props = [] if c.server.aof is not None else None   # None: nothing logs
    propagate_last_id = False
    if last_id > g.last_id:
        g.last_id = last_id
        propagate_last_id = True
    if deliverytime != -1:
        if deliverytime < 0 or deliverytime > now:
            deliverytime = now
    else:
        deliverytime = now
    cname = argv[3]
    consumer = seen_consumer(c, g, key, cname, now)
    out = []
    dirty = 0
    pel = g.pel
    # Replaying an AOF rewrite's PEL (rewrite_commands: XCLAIM ... FORCE per
    # NACK): a pending entry whose stream entry was trimmed or deleted is
    # restored as it was, as Valkey's RDB preamble keeps it.  A logged XCLAIM
    # that dropped a NACK (its entry gone) still drops it on replay: the
    # replay has that NACK at that point, so it never reaches the restore.
    # Outside loading, FORCE of a missing entry does nothing, as in Valkey.
    restore = force and server.loading
    for k in range(5, last_id_arg + 1):
        eid = ids[k - 5]
        nack = pel.get(eid)
        items = s.get(eid)
        if items is None:
            if nack is not None:
                if props is not None:
                    props.append(xclaim_prop(key, gname, nack.consumer.name, argv[k], nack, g))
                propagate_last_id = False
                dirty += 1
                g.ack(eid)
                continue
            if not restore:
                continue
        if force and nack is None:
            nack = NACK(now, None)
            pel[eid] = nack
        if nack is None:
            continue
        if nack.consumer is not None and minidle and now - nack.delivery_time < minidle:
            continue
        nack.delivery_time = deliverytime
        if retrycount >= 0:
            nack.delivery_count = retrycount
        elif not justid:
            nack.delivery_count += 1
        g.assign(eid, nack, consumer)
        out.append(id_bytes(eid) if justid else [id_bytes(eid), items])
        consumer.active_time = now
        if props is not None:
            props.append(xclaim_prop(key, gname, cname, argv[k], nack, g))
        propagate_last_id = False
        dirty += 1
    if propagate_last_id:
        if props is not None:
            props.append(setid_prop(key, gname, g))
        dirty += 1
    if dirty:
        changed(c, key, "", dirty)
    server.propagate_as(*(props or ()))
    return out


@command("xautoclaim", -6, "write fast", (1, 1, 1), group="stream", since="6.2.0",
         key_flags="RW delete",
         args="key:k group consumer min-idle-time start [COUNT count:i] [JUSTID]",
         summary="Changes, or acquires, ownership of messages in a consumer group, as if the "
                 "messages were delivered to as consumer group member.",
         complexity="O(1) if COUNT is small.",
         history=(("7.0.0",
                   "Added an element to the reply array, containing deleted entries the command "
                   "cleared from the PEL"),))
def xautoclaim(c, argv):
    """Changes, or acquires, ownership of messages in a consumer group.

    XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
    """
    key = argv[1]
    gname = argv[2]
    minidle = parse_ll(argv[4], "ERR Invalid min-idle-time argument for XAUTOCLAIM")
    if minidle < 0:
        minidle = 0
    start, ex = parse_interval(argv[5], 0)
    if ex:
        if start == MAX_ID:
            raise CommandError(ERR_START_INTERVAL)
        start += 1
    count = 100
    justid = False
    n = len(argv)
    j = 6
    max_count = (2 ** 63 - 1) // 16
    while j < n:
        moreargs = n - 1 - j
        opt = argv[j].lower()
        if opt == b"count" and moreargs:
            v = string2ll(argv[j + 1])
            if v is None or v < 1 or v > max_count:
                raise CommandError("ERR COUNT must be > 0")
            count = v
            j += 1
        elif opt == b"justid":
            justid = True
        else:
            raise CommandError(errors.SYNTAX)
        j += 1
    s = lookup(c, key)
    g = s.group(gname) if s is not None else None
    if g is None:
        raise nogroup_error(key, gname)
    server = c.server
    now = server.cmd_time_ms
    cname = argv[3]
    consumer = seen_consumer(c, g, key, cname, now)
    attempts = count * 10
    pel = g.pel
    claimed = []
    deleted = []
    props = [] if c.server.aof is not None else None   # None: nothing logs
    dirty = 0
    # The scan visits at most `attempts` entries; one more is the cursor.
    candidates = list(islice(pel.irange(start), attempts + 1))
    idx = 0
    ncand = len(candidates)
    while attempts and count and idx < ncand:
        attempts -= 1
        eid = candidates[idx]
        idx += 1
        nack = pel[eid]
        items = s.get(eid)
        if items is None:
            if props is not None:
                props.append(xclaim_prop(key, gname, nack.consumer.name, id_bytes(eid), nack, g))
            dirty += 1
            g.ack(eid)
            deleted.append(id_bytes(eid))
            count -= 1
            continue
        if minidle and now - nack.delivery_time < minidle:
            continue
        g.assign(eid, nack, consumer)
        nack.delivery_time = now
        if not justid:
            nack.delivery_count += 1
        claimed.append(id_bytes(eid) if justid else [id_bytes(eid), items])
        count -= 1
        consumer.active_time = now
        if props is not None:
            props.append(xclaim_prop(key, gname, cname, id_bytes(eid), nack, g))
        dirty += 1
    cursor = id_bytes(candidates[idx]) if idx < ncand else b"0-0"
    if dirty:
        changed(c, key, "", dirty)
    server.propagate_as(*(props or ()))
    return [cursor, claimed, deleted]
