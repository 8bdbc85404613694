"""The XREAD / XREADGROUP engine: one parser for both, delivery, blocking.

No command is registered here: XREAD is ``entries``' and XREADGROUP (with
its fast path ``_xreadgroup_one`` for a worker's ``GROUP g c [COUNT n]
[BLOCK ms] STREAMS key >``) is ``groups``'; both run ``read_streams``
(Valkey's xreadCommand, ``group_mode`` for the second).
Owns delivery to a group's consumer (``serve_group``: new entries, with
the PEL changes; ``_serve_history``: a consumer's own pending entries,
``Stream.pending_history``) and
the AOF forms of those changes: while an AOF is on (``server.aof``),
XREADGROUP, XCLAIM and XAUTOCLAIM log one ``XCLAIM ... TIME RETRYCOUNT
FORCE JUSTID LASTID`` per PEL change (``xclaim_prop``) plus ``XGROUP
SETID ... ENTRIESREAD`` when the group's last-delivered ID moved
(``setid_prop``), never themselves.

Blocking uses hotkv/core/blocking.py.  The IDs a blocked XREAD resolved ``$`` to
are kept in the waiter (``block(..., data=BlockedRead)``), so re-execution
after a write means "newer than when I blocked".  A blocked XREADGROUP
waits with ``unblock_on_nokey``: when its key is deleted or replaced,
re-execution replies NOGROUP / WRONGTYPE as Valkey does.

Invariants: ``_still_empty`` (the re-block shortcut of a woken waiter)
answers True only when the full run would block again, having done what
that run does on the way (consumers' seen-time); ``serve_group`` without
an AOF (the batch form) leaves the stream, group and PEL as the per-entry
form does (tests/test_fastpaths_server.py::
test_xreadgroup_fast_general_aof_and_valkey_agree).
"""

from __future__ import annotations

from ...core.blocking import block, parse_timeout
from ...protocol import errors
from ...protocol.errors import CommandError
from ...protocol.resp import NULL_ARRAY, Entries
from ...types.stream import Stream
from ...types.stream_groups import NACK
from ...types.stream_ids import MAX_ID, id_bytes
from .args import (
    ERR_DOLLAR_IN_GROUP,
    ERR_GT_NOT_IN_GROUP,
    ERR_LAST_ZERO,
    ERR_MISSING_GROUP,
    ERR_NOACK_NOT_IN_GROUP,
    ERR_NOT_IN_GROUP,
    ERR_PLUS_IN_GROUP,
    as_text,
    entries_reply,
    parse_id,
    parse_ll,
)
from .changes import changed, lookup


def xread_keys(startfrom):
    def keys(argv):
        n = len(argv)
        for i in range(startfrom, n):
            if argv[i].lower() == b"streams":
                count = (n - i - 1) // 2
                return list(range(i + 1, i + 1 + count))
        return []
    return keys


class _DupKey(bytes):
    """A map key equal only to itself: RESP3 maps may repeat a stream name
    (XREAD STREAMS s s 0 0) and Python dicts cannot."""
    __slots__ = ()
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other


def xclaim_prop(key, gname, cname, eid_arg, nack, g):
    return [b"XCLAIM", key, gname, cname, b"0", eid_arg, b"TIME", b"%d" % nack.delivery_time,
            b"RETRYCOUNT", b"%d" % nack.delivery_count, b"FORCE", b"JUSTID", b"LASTID",
            id_bytes(g.last_id)]


def setid_prop(key, gname, g):
    return [b"XGROUP", b"SETID", key, gname, id_bytes(g.last_id), b"ENTRIESREAD",
            b"%d" % g.entries_read]


def serve_group(c, s, g, consumer, key, gname, start, count, noack, props):
    """Deliver entries >= start to consumer (XREADGROUP >)."""
    now = c.server.cmd_time_ms
    if props is None:
        # Nothing logs the PEL changes one by one: do them as a batch.
        ids = []
        entries = s.range_entries(start, MAX_ID, count, ids)
        if ids:
            s.advance_group_through(g, ids)
            if not noack:
                g.deliver(ids, consumer, now)
        return Entries(entries)
    pairs = s.range(start, MAX_ID, count)
    moved = False
    pel = g.pel
    for eid, _items in pairs:
        if eid > g.last_id:
            s.advance_group(g, eid)
            moved = True
        if not noack:
            nack = pel.get(eid)
            if nack is None:
                nack = NACK(now, consumer)
                pel[eid] = nack
                consumer.pel[eid] = nack
            else:
                # SETID moved the group back: the entry changes hands.
                g.assign(eid, nack, consumer)
                nack.delivery_time = now
                nack.delivery_count = 1
            consumer.active_time = now
            if props is not None:
                props.append(xclaim_prop(key, gname, consumer.name, id_bytes(eid), nack, g))
    if moved and props is not None:
        props.append(setid_prop(key, gname, g))
    return entries_reply(pairs)


def _serve_history(c, s, consumer, start, count):
    """A consumer's own pending entries >= start (XREADGROUP with an ID);
    a deleted entry's fields are a null array."""
    return Entries([[id_bytes(eid), NULL_ARRAY if items is None else items]
                    for eid, items in s.pending_history(consumer, start, count,
                                                         c.server.cmd_time_ms)])


class BlockedRead:
    """What a blocked XREAD / XREADGROUP resolved when it first ran, kept in
    its waiter: the keys, the IDs ('$' as the last ID at that time), and
    the group and consumer.  ``quick``: a re-run can tell cheaply that it
    still has nothing to serve (no '+' argument)."""
    __slots__ = ("keys", "ids", "resolved", "gname", "cname", "quick", "group_mode")

    def __init__(self, keys, ids, resolved, gname, cname, quick, group_mode):
        self.keys = keys
        self.ids = ids
        self.resolved = resolved
        self.gname = gname
        self.cname = cname
        self.quick = quick
        self.group_mode = group_mode

    def still_waiting(self, waiter) -> bool:
        """dispatch.serve_ready_keys asks before re-running the command:
        True when the re-run would only block again (it then stays where it
        is in the queues -- the order re-blocking would give), having done
        what that re-run does on the way (consumers' seen-time)."""
        if not self.quick:
            return False
        try:
            return _still_empty(waiter.db, waiter.client.server, self, self.group_mode)
        except CommandError:
            return False          # WRONGTYPE: the re-run replies it


def _still_empty(db, server, st: BlockedRead, group_mode: bool) -> bool:
    """A woken waiter that would block again: nothing newer than its IDs
    (or its group's last-delivered ID) in any of its streams.  Does what
    the full run would do on the way (the consumers' seen-time); False when
    the full run must decide (data to serve, errors to give)."""
    if group_mode:
        consumers = []
        for key in st.keys:
            s = db.lookup_typed(key, Stream)
            g = s.group(st.gname) if s is not None else None
            if g is None:
                return False
            # last_id bounds the last live ID: usually enough to decide.
            if s.length and s.last_id > g.last_id and s.last_valid_id() > g.last_id:
                return False
            consumer = g.consumers.get(st.cname)
            if consumer is None:
                return False
            consumers.append(consumer)
        now = server.cmd_time_ms
        for consumer in consumers:
            consumer.seen_time = now
        return True
    for key, gt in zip(st.keys, st.ids):
        s = db.lookup_typed(key, Stream)
        if s is not None and s.length and s.last_id > gt and s.last_valid_id() > gt:
            return False
    return True


def _xread_options(server, argv, group_mode: bool):
    """XREAD / XREADGROUP's options, up to STREAMS: (deadline, count,
    position of the first key, number of streams, noack, group, consumer);
    the errors Valkey gives, in its order."""
    name = "xreadgroup" if group_mode else "xread"
    deadline = None
    count = 0
    streams_arg = 0
    nstreams = 0
    noack = False
    gname = cname = None
    n = len(argv)
    i = 1
    while i < n:
        moreargs = n - i - 1
        opt = argv[i].lower()
        if opt == b"block" and moreargs:
            i += 1
            deadline = parse_timeout(server, argv[i], seconds=False)
        elif opt == b"count" and moreargs:
            i += 1
            count = parse_ll(argv[i])
            if count < 0:
                count = 0
        elif opt == b"streams" and moreargs:
            streams_arg = i + 1
            nstreams = n - streams_arg
            if nstreams % 2:
                raise CommandError(
                    "ERR Unbalanced '%s' list of streams: for each stream key an ID or '%s' "
                    "must be specified." % (name, ">" if group_mode else "$"))
            nstreams //= 2
            break
        elif opt == b"group" and moreargs >= 2:
            if not group_mode:
                raise CommandError(ERR_NOT_IN_GROUP)
            gname = argv[i + 1]
            cname = argv[i + 2]
            i += 2
        elif opt == b"noack":
            if not group_mode:
                raise CommandError(ERR_NOACK_NOT_IN_GROUP)
            noack = True
        else:
            raise CommandError(errors.SYNTAX)
        i += 1
    if streams_arg == 0:
        raise CommandError(errors.SYNTAX)
    if group_mode and gname is None:
        raise CommandError(ERR_MISSING_GROUP)
    return deadline, count, streams_arg, nstreams, noack, gname, cname


def _read_id(s, arg: bytes, k: int, resolved, group_mode: bool) -> int:
    """The ID the k-th stream is read after: ``$`` its last ID (or what it
    meant when the read first ran: ``resolved``), ``+`` one before its last
    entry, ``>`` (groups) MAX_ID, else the ID given."""
    if arg == b"$":
        if group_mode:
            raise CommandError(ERR_DOLLAR_IN_GROUP)
        if resolved is not None and k in resolved:
            return resolved[k]
        else:
            return s.last_id if s is not None else 0
    elif arg == b"+":
        if group_mode:
            raise CommandError(ERR_PLUS_IN_GROUP)
        if s is not None:
            if s.last_id == 0:
                raise CommandError(ERR_LAST_ZERO)
            return s.last_id - 1
        else:
            return 0
    elif arg == b">":
        if not group_mode:
            raise CommandError(ERR_GT_NOT_IN_GROUP)
        return MAX_ID
    else:
        return parse_id(arg, 0, strict=True)[0]


def read_streams(c, argv, group_mode: bool):
    server = c.server
    waiter = c.reprocessing
    if waiter and type(waiter.data) is BlockedRead and waiter.data.quick:
        # Woken by a write to one of its keys: most wake-ups of an idle
        # worker find nothing for it -- re-block without re-parsing.
        st = waiter.data
        if _still_empty(c.db, server, st, group_mode):
            return block(c, st.keys, 0, Stream, NULL_ARRAY, unblock_on_nokey=group_mode,
                         data=st)
    db = c.db
    deadline, count, streams_arg, nstreams, noack, gname, cname = \
        _xread_options(server, argv, group_mode)

    keys = argv[streams_arg:streams_arg + nstreams]
    id_args = argv[streams_arg + nstreams:]
    ids = [0] * nstreams
    groups = [None] * nstreams if group_mode else None
    resolved = None   # position -> ID that '$' meant when we first ran
    if waiter and type(waiter.data) is BlockedRead:
        resolved = waiter.data.resolved
    for k in range(nstreams):
        key = keys[k]
        s = lookup(c, key)
        if group_mode:
            g = s.group(gname) if s is not None else None
            if g is None:
                raise CommandError(
                    "NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with GROUP "
                    "option" % (as_text(key), as_text(gname)))
            groups[k] = g
        ids[k] = _read_id(s, id_args[k], k, resolved, group_mode)

    results = []
    props = [] if c.server.aof is not None else None   # None: nothing logs
    now = server.cmd_time_ms
    for k in range(nstreams):
        key = keys[k]
        s = db.lookup(key)
        if s is None:
            continue
        gt = ids[k]
        serve = False
        history = False
        consumer = None
        if group_mode:
            g = groups[k]
            if gt != MAX_ID:
                serve = history = True
            elif s.length:
                if s.last_valid_id() > g.last_id:
                    serve = True
                    gt = g.last_id
            consumer = g.consumers.get(cname)
            if consumer is None:
                consumer = g.create_consumer(cname, now)
                changed(c, key, "xgroup-createconsumer")
                if noack and props is not None:
                    props.append([b"XGROUP", b"CREATECONSUMER", key, gname, cname])
            consumer.seen_time = now
        elif s.length:
            if s.last_valid_id() > gt:
                serve = True
        if not serve:
            continue
        start = (gt + 1) & MAX_ID
        if group_mode:
            if history:
                entries = _serve_history(c, s, consumer, start, count)
            else:
                entries = serve_group(c, s, groups[k], consumer, key, gname, start, count,
                                       noack, props)
            server.dirty += 1
        else:
            entries = Entries(s.range_entries(start, MAX_ID, count))
        results.append((key, entries))
    if group_mode and props is not None:
        # Logged as the XCLAIM / XGROUP forms above, never as itself.
        server.propagate_as(*props)
    if results:
        if c.resp3:
            out = {}
            for key, entries in results:
                if key in out:
                    key = _DupKey(key)
                out[key] = entries
            return out
        return [[key, entries] for key, entries in results]
    if deadline is not None:
        resolved = {k: ids[k] for k in range(nstreams) if id_args[k] == b"$"}
        data = BlockedRead(keys, ids, resolved, gname, cname,
                        group_mode or b"+" not in id_args, group_mode)
        return block(c, keys, deadline, Stream, NULL_ARRAY, unblock_on_nokey=group_mode,
                     data=data)
    return NULL_ARRAY
