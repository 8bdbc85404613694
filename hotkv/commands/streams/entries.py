"""The stream's entries: XADD, XTRIM, XLEN, XRANGE, XREVRANGE, XDEL, XSETID
and XREAD, with Valkey 8's replies, errors and propagation (Valkey's
t_stream.c is the spec).

The data structure lives in hotkv/types/stream.py; the rest of the
package is listed in its __init__.  This module parses arguments, replies,
announces changes and chooses what the AOF logs: XADD with ``*`` / ``ms-*`` is
logged with the ID it assigned, and ``MAXLEN ~ n`` / ``MINID ~ id`` as
``=`` with the exact resulting length or first ID, so replaying the AOF
trims the same entries.

The shapes a queue sends all day -- XADD with ``*`` alone or after one
``MAXLEN|MINID ~|= threshold`` -- take fast paths that must decide exactly
as the general parser (``_xadd_general``) would, errors included, and hand
anything else to it before changing anything.

Fast paths (twin; test): XADD's shapes (``_xadd_general``;
tests/test_streams_fastpaths.py::test_xadd_fast_shapes_leave_what_the_general_parser_leaves);
the inlined ``Server.written`` in xadd (see hotkv/commands/lists.py); for
``parse_ids``, ``parse_id`` and ``parse_ll`` see ``args``, for XREADGROUP's
see ``groups``.  Counts of 0 meaning "no limit" are checked against
Valkey in tests/test_fastpaths_nolimit.py.

Which writes wake whom follows Valkey: XADD and the creation of a stream
signal blocked readers (and WATCH); XDEL / XTRIM touch WATCHers; XSETID
only counts as a change for the AOF.
"""

from __future__ import annotations

from ...core.registry import command, spec
from ...protocol import errors
from ...protocol.errors import CommandError, WrongType
from ...protocol.resp import NULL_ARRAY, OK, Entries
from ...protocol.util import string2ll
from ...types.stream import Stream
from ...types.stream_ids import MASK64, MAX_ID, id_bytes, make_id
from .args import (
    ERR_BOTH_STRATEGIES,
    ERR_EXHAUSTED,
    ERR_LIMIT_NEG,
    ERR_LIMIT_NO_APPROX,
    ERR_LIMIT_NO_STRATEGY,
    ERR_MAXLEN_NEG,
    ERR_TOO_LARGE,
    ERR_XADD_SMALLER,
    ERR_XADD_ZERO,
    ERR_XTRIM_NO_STRATEGY,
    parse_id,
    parse_ll,
    parse_range,
)
from .changes import changed, lookup, node_limits, touched
from .read import read_streams, xread_keys

# ----------------------------------------------------------------------
# XADD / XTRIM
# ----------------------------------------------------------------------

class _TrimArgs:
    __slots__ = ("maxlen", "minid", "approx", "limit", "arg_idx", "id", "id_given",
                 "seq_given", "nomkstream", "idpos")


def _parse_add_trim(c, argv, xadd: bool) -> _TrimArgs:
    a = _TrimArgs()
    a.idpos = 2
    a.maxlen = a.minid = None
    a.approx = False
    a.limit = 0
    a.arg_idx = -1
    a.id = 0
    a.id_given = False
    a.seq_given = True
    a.nomkstream = False
    if xadd and argv[2] == b"*":       # the common case: no options
        a.limit = 0
        return a
    limit_given = False
    n = len(argv)
    i = 2
    if xadd and n > 6 and argv[5] == b"*" and argv[3] == b"~" and argv[2].lower() == b"maxlen":
        # The capped queue, XADD key MAXLEN ~ n * ...: what the loop below
        # would conclude, without walking it.
        maxlen = parse_ll(argv[4])
        if maxlen < 0:
            raise CommandError(ERR_MAXLEN_NEG)
        a.maxlen = maxlen
        a.approx = True
        a.arg_idx = 4
        i = 5    # the loop stops at once, on the "*"
    while i < n:
        moreargs = n - 1 - i
        opt = argv[i]
        low = opt.lower()
        if xadd and opt == b"*":
            break
        if low == b"maxlen" and moreargs:
            if a.maxlen is not None or a.minid is not None:
                raise CommandError(ERR_BOTH_STRATEGIES)
            a.approx = False
            nxt = argv[i + 1]
            if moreargs >= 2 and nxt == b"~":
                a.approx = True
                i += 1
            elif moreargs >= 2 and nxt == b"=":
                i += 1
            maxlen = parse_ll(argv[i + 1])
            if maxlen < 0:
                raise CommandError(ERR_MAXLEN_NEG)
            i += 1
            a.maxlen = maxlen
            a.arg_idx = i
        elif low == b"minid" and moreargs:
            if a.maxlen is not None or a.minid is not None:
                raise CommandError(ERR_BOTH_STRATEGIES)
            a.approx = False
            nxt = argv[i + 1]
            if moreargs >= 2 and nxt == b"~":
                a.approx = True
                i += 1
            elif moreargs >= 2 and nxt == b"=":
                i += 1
            a.minid = parse_id(argv[i + 1], 0, strict=True)[0]
            i += 1
            a.arg_idx = i
        elif low == b"limit" and moreargs:
            a.limit = parse_ll(argv[i + 1])
            if a.limit < 0:
                raise CommandError(ERR_LIMIT_NEG)
            limit_given = True
            i += 1
        elif xadd and low == b"nomkstream":
            a.nomkstream = True
        elif xadd:
            a.id, a.seq_given = parse_id(opt, 0, strict=True, seq_star=True)
            a.id_given = True
            break
        else:
            raise CommandError(errors.SYNTAX)
        i += 1
    a.idpos = i
    no_strategy = a.maxlen is None and a.minid is None
    if a.limit and no_strategy:
        raise CommandError(ERR_LIMIT_NO_STRATEGY)
    if not xadd and no_strategy:
        raise CommandError(ERR_XTRIM_NO_STRATEGY)
    if c.is_fake:
        # Logged commands were rewritten to be exact: never limit replay.
        a.limit = 0
    elif limit_given:
        if not a.approx:
            raise CommandError(ERR_LIMIT_NO_APPROX)
    elif a.approx:
        limit = 100 * c.server.config.values["stream-node-max-entries"]
        if limit <= 0:
            limit = 10000
        if limit > 1000000:
            limit = 1000000
        a.limit = limit
    else:
        a.limit = 0
    return a


def _trim(s: Stream, a: _TrimArgs) -> int:
    return s.trim(maxlen=a.maxlen, minid=a.minid, approx=a.approx, limit=a.limit)


def _exact_trim_arg(s: Stream, a: _TrimArgs) -> bytes:
    if a.maxlen is not None:
        return b"%d" % s.length
    return id_bytes(s.first_edge_id())


@command("xadd", -5, "write denyoom fast", group="stream", since="5.0.0",
         key_specs=(spec("RW update", notes="UPDATE instead of INSERT because of the optional "
                                         "trimming feature"),),
         args="key:k [NOMKSTREAM]@6.2.0 trim[strategy(MAXLEN | MINID@6.2.0) operator[equal== | "
              "approximately=~] threshold [LIMIT count:i]@6.2.0] id-selector(auto-id=* | id) "
              "data(field value)...",
         complexity="O(1) when adding a new entry, O(N) when trimming where N being the number "
                    "of entries evicted.",
         history=(("6.2.0",
                   "Added the `NOMKSTREAM` option, `MINID` trimming strategy and the `LIMIT` "
                   "option."),
                  ("7.0.0", "Added support for the `<ms>-*` explicit ID form.")))
def xadd(c, argv):
    """Appends a new message to a stream. Creates the key if it doesn't exist.

    XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id
        field value [field value ...]
    """
    # The shapes queues use -- ``*`` alone or after one MAXLEN|MINID ~|=
    # threshold -- are decided here in the order _xadd_general would meet
    # them (same errors, same effects); anything else goes there.
    n = len(argv)
    opt = argv[2]
    maxlen = minid = None
    approx = False
    if opt == b"*":
        idpos = 2
    elif n > 6 and argv[5] == b"*" and (argv[3] == b"~" or argv[3] == b"="):
        low = opt.lower()
        if low == b"maxlen":
            maxlen = _MAXLENS.get(argv[4])
            if maxlen is None:
                maxlen = string2ll(argv[4])
                if maxlen is None:
                    raise CommandError(errors.NOT_INTEGER)
                if maxlen < 0:
                    raise CommandError(ERR_MAXLEN_NEG)
                if len(_MAXLENS) < 64:
                    _MAXLENS[argv[4]] = maxlen
        elif low == b"minid":
            minid = parse_id(argv[4], 0, strict=True)[0]
        else:
            return _xadd_general(c, argv)
        approx = argv[3] == b"~"
        idpos = 5
    else:
        return _xadd_general(c, argv)
    nfv = n - idpos - 1
    if nfv < 2 or nfv & 1:
        raise errors.wrong_args("xadd")
    db = c.db
    key = argv[1]
    s = db.lookup(key)
    if s is None:
        s = Stream()
        db.add(key, s)
    elif type(s) is not Stream:
        raise WrongType()
    last = s.last_id
    if last == MAX_ID:
        raise CommandError(ERR_EXHAUSTED)
    server = c.server
    ms = server.cmd_time_ms
    if ms > (last >> 64):
        new = ms << 64
        reply = b"%d-0" % ms
    else:
        new = last + 1
        reply = b"%d-%d" % (new >> 64, new & MASK64)
    values = server.config.values
    if nfv == 2:
        field = argv[idpos + 1]
        value = argv[idpos + 2]
        if len(field) + len(value) > 1 << 30:
            raise CommandError(ERR_TOO_LARGE)
        s.append_one(new, field, value, values["stream-node-max-bytes"],
                     values["stream-node-max-entries"])
    else:
        if sum(map(len, argv[idpos + 1:])) > 1 << 30:
            raise CommandError(ERR_TOO_LARGE)
        s.append(new, argv, idpos + 1, values["stream-node-max-bytes"],
                 values["stream-node-max-entries"])
    if key in db.watched or key in db.blocking or server.notify is not None \
            or server.tracking_on and (key in server.tracking.table
                                       or server.tracking.prefixes):
        server.written(db, key, "t", "xadd")
    else:
        server.dirty += 1   # Server.written, inlined (see lists._pusher)
    if idpos == 2:
        if server.aof is not None:
            rewritten = list(argv)
            rewritten[2] = reply
            server.propagate_as(rewritten)
        return reply
    # Trimming only ever starts at the first node: when it would keep that
    # node whole (or, by ID, reach no entry of it), skip the call.
    if maxlen is not None:
        length = s.length
        trim = length > maxlen and (not approx or length - s.nodes[0].live >= maxlen)
    else:
        trim = s.nodes[0].ids[0] < minid
    if trim:
        limit = _approx_limit(c) if approx else 0
        if s.trim(maxlen, minid, approx, limit):
            server.event(db, key, "t", "xtrim")
    if server.aof is not None:
        rewritten = list(argv)
        if approx:
            rewritten[3] = b"="
            rewritten[4] = b"%d" % s.length if maxlen is not None else id_bytes(s.first_edge_id())
        rewritten[5] = reply
        server.propagate_as(rewritten)
    return reply


# Parsed MAXLEN thresholds: a capped stream repeats its own with every XADD.
_MAXLENS: dict = {}


def _approx_limit(c) -> int:
    """The entries a ``~`` trim may remove when no LIMIT is given (none
    for replayed commands: they were logged exact)."""
    if c.is_fake:
        return 0
    limit = 100 * c.server.config.values["stream-node-max-entries"]
    if limit <= 0:
        limit = 10000
    if limit > 1000000:
        limit = 1000000
    return limit


def _xadd_general(c, argv):
    a = _parse_add_trim(c, argv, True)
    field_pos = a.idpos + 1
    nfv = len(argv) - field_pos
    if nfv < 2 or nfv % 2:
        raise errors.wrong_args("xadd")
    if a.id_given and a.seq_given and a.id == 0:
        raise CommandError(ERR_XADD_ZERO)
    db = c.db
    key = argv[1]
    s = lookup(c, key)
    if s is None:
        if a.nomkstream:
            return None
        s = Stream()
        db.add(key, s)
    last = s.last_id
    if last == MAX_ID:
        raise CommandError(ERR_EXHAUSTED)
    if a.id_given:
        if a.seq_given:
            new = a.id
        elif (last >> 64) == (a.id >> 64):
            if last & MASK64 == MASK64:
                raise CommandError(ERR_XADD_SMALLER)
            new = last + 1
        else:
            new = a.id
    else:
        ms = c.server.cmd_time_ms
        new = make_id(ms, 0) if ms > (last >> 64) else last + 1
    if new <= last:
        raise CommandError(ERR_XADD_SMALLER)
    total = 0
    for k in range(field_pos, len(argv)):
        total += len(argv[k])
    if total > 1 << 30:
        raise CommandError(ERR_TOO_LARGE)
    node_max_bytes, node_max_entries = node_limits(c)
    s.append(new, argv, field_pos, node_max_bytes, node_max_entries)
    reply = id_bytes(new)
    server = c.server
    server.written(db, key, "t", "xadd")
    rewritten = None
    if a.maxlen is not None or a.minid is not None:
        if _trim(s, a):
            server.event(db, key, "t", "xtrim")
        if a.approx and server.aof is not None:
            rewritten = list(argv)
            rewritten[a.arg_idx - 1] = b"="
            rewritten[a.arg_idx] = _exact_trim_arg(s, a)
    # The logged form is only read by the AOF (dispatch.call): none, no work.
    if (not a.id_given or not a.seq_given) and server.aof is not None:
        if rewritten is None:
            rewritten = list(argv)
        rewritten[a.idpos] = reply
    if rewritten is not None:
        server.propagate_as(rewritten)
    return reply


@command("xtrim", -4, "write", (1, 1, 1), group="stream", since="5.0.0", key_flags="RW delete",
         args="key:k trim(strategy(MAXLEN | MINID@6.2.0) operator[equal== | approximately=~] "
              "threshold [LIMIT count:i]@6.2.0)",
         complexity="O(N), with N being the number of evicted entries. Constant times are very "
                    "small however, since entries are organized in macro nodes containing multiple "
                    "entries that can be released with a single deallocation.",
         history=(("6.2.0", "Added the `MINID` trimming strategy and the `LIMIT` option."),))
def xtrim(c, argv):
    """Deletes messages from the beginning of a stream.

    XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
    """
    a = _parse_add_trim(c, argv, False)
    key = argv[1]
    s = lookup(c, key)
    if s is None:
        return 0
    deleted = _trim(s, a)
    if deleted:
        if a.approx:
            rewritten = list(argv)
            rewritten[a.arg_idx - 1] = b"="
            rewritten[a.arg_idx] = _exact_trim_arg(s, a)
            c.server.propagate_as(rewritten)
        touched(c, key, "xtrim", deleted)
    return deleted


# ----------------------------------------------------------------------
# XLEN / XRANGE / XREVRANGE / XDEL / XSETID
# ----------------------------------------------------------------------

@command("xlen", 2, "readonly fast", (1, 1, 1), group="stream", since="5.0.0", key_flags="RO",
         args="key:k", complexity="O(1)")
def xlen(c, argv):
    """Return the number of messages in a stream.

    XLEN key
    """
    s = lookup(c, argv[1])
    return 0 if s is None else s.length


def _xrange(c, argv, rev: bool):
    if rev:
        start, end = parse_range(argv[3], argv[2])
    else:
        start, end = parse_range(argv[2], argv[3])
    count = -1
    n = len(argv)
    j = 4
    while j < n:
        if argv[j].lower() == b"count" and n - j - 1 >= 1:
            count = parse_ll(argv[j + 1])
            if count < 0:
                count = 0
            j += 2
        else:
            raise CommandError(errors.SYNTAX)
    s = lookup(c, argv[1])
    if s is None:
        return []
    if count == 0:
        return NULL_ARRAY
    if count < 0:
        count = 0
    if rev:
        return Entries(s.revrange_entries(start, end, count))
    return Entries(s.range_entries(start, end, count))


@command("xrange", -4, "readonly", (1, 1, 1), group="stream", since="5.0.0",
         args="key:k start end [COUNT count:i]",
         complexity="O(N) with N being the number of elements being returned. If N is constant "
                    "(e.g. always asking for the first 10 elements with COUNT), you can consider "
                    "it O(1).", history=(("6.2.0", "Added exclusive ranges."),))
def xrange(c, argv):
    """Returns the messages from a stream within a range of IDs.

    XRANGE key start end [COUNT count]
    """
    return _xrange(c, argv, False)


@command("xrevrange", -4, "readonly", (1, 1, 1), group="stream", since="5.0.0",
         args="key:k end start [COUNT count:i]",
         complexity="O(N) with N being the number of elements returned. If N is constant (e.g. "
                    "always asking for the first 10 elements with COUNT), you can consider it "
                    "O(1).", history=(("6.2.0", "Added exclusive ranges."),))
def xrevrange(c, argv):
    """Returns the messages from a stream within a range of IDs in reverse order.

    XREVRANGE key end start [COUNT count]
    """
    return _xrange(c, argv, True)


@command("xdel", -3, "write fast", (1, 1, 1), group="stream", since="5.0.0", key_flags="RW delete",
         args="key:k id...",
         complexity="O(1) for each single item to delete in the stream, regardless of the stream "
                    "size.")
def xdel(c, argv):
    """Returns the number of messages after removing them from a stream.

    XDEL key id [id ...]
    """
    key = argv[1]
    s = lookup(c, key)
    if s is None:
        return 0
    deleted = s.delete_ids([parse_id(a, 0, strict=True)[0] for a in argv[2:]])
    if deleted:
        touched(c, key, "xdel", deleted)
    return deleted


@command("xsetid", -3, "write denyoom fast", (1, 1, 1), group="stream", since="5.0.0",
         key_flags="RW update",
         args="key:k last-id [ENTRIESADDED entries-added:i]@7.0.0 [MAXDELETEDID "
              "max-deleted-id]@7.0.0", complexity="O(1)",
         history=(("7.0.0", "Added the `entries_added` and `max_deleted_entry_id` arguments."),))
def xsetid(c, argv):
    """An internal command for replicating stream values.

    XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
    """
    new = parse_id(argv[2], 0, strict=True)[0]
    max_xdel = 0
    entries_added = -1
    n = len(argv)
    i = 3
    while i < n:
        moreargs = n - 1 - i
        opt = argv[i].lower()
        if opt == b"entriesadded" and moreargs:
            entries_added = parse_ll(argv[i + 1])
            if entries_added < 0:
                raise CommandError("ERR entries_added must be positive")
            i += 2
        elif opt == b"maxdeletedid" and moreargs:
            max_xdel = parse_id(argv[i + 1], 0, strict=True)[0]
            if new < max_xdel:
                raise CommandError("ERR The ID specified in XSETID is smaller than the provided "
                                   "max_deleted_entry_id")
            i += 2
        else:
            raise CommandError(errors.SYNTAX)
    key = argv[1]
    s = lookup(c, key)
    if s is None:
        raise CommandError(errors.NO_SUCH_KEY)
    if new < s.max_deleted_id:
        raise CommandError("ERR The ID specified in XSETID is smaller than current "
                           "max_deleted_entry_id")
    if s.length > 0:
        if new < s.last_valid_id():
            raise CommandError("ERR The ID specified in XSETID is smaller than the target "
                               "stream top item")
        if entries_added != -1 and s.length > entries_added:
            raise CommandError("ERR The entries_added specified in XSETID is smaller than the "
                               "target stream length")
    s.last_id = new
    if entries_added != -1:
        s.entries_added = entries_added
    if max_xdel:
        s.max_deleted_id = max_xdel
    changed(c, key, "xsetid")
    return OK




# ----------------------------------------------------------------------
# XREAD (its engine, shared with XREADGROUP: read)
# ----------------------------------------------------------------------


@command("xread", -4, "readonly blocking", keys_fn=xread_keys(1), group="stream",
         since="5.0.0", key_specs=(spec("RO access", "keyword STREAMS 1", "range -1 1 2"),),
         args="[COUNT count:i] [BLOCK milliseconds:i] (STREAMS key:k... id...)",
         summary="Returns messages from multiple streams with IDs greater than the ones "
                 "requested. Blocks until a message is available otherwise.")
def xread(c, argv):
    """Returns messages from multiple streams with IDs greater than the ones requested.

    XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id|$|+ [id ...]
    """
    return read_streams(c, argv, False)
