"""Stream commands: XADD ... XINFO, with Valkey 8's replies, errors and
propagation (Valkey's t_stream.c is the spec).

The data structure lives in hotkv/types/stream.py (groups:
hotkv/types/stream_groups.py); this module parses
arguments, replies, announces changes and chooses what the AOF logs:
* XADD with ``*`` / ``ms-*`` is logged with the ID it assigned, and
  ``MAXLEN ~ n`` / ``MINID ~ id`` as ``=`` with the exact resulting length
  or first ID, so replaying the AOF trims the same entries;
* XREADGROUP, XCLAIM and XAUTOCLAIM log one ``XCLAIM ... TIME RETRYCOUNT
  FORCE JUSTID LASTID`` per PEL change plus ``XGROUP SETID ... ENTRIESREAD``
  when the group's last-delivered ID moved, never themselves (those forms
  are only built while an AOF is on: ``server.aof``).

The shapes a queue sends all day -- XADD with ``*`` alone or after one
``MAXLEN|MINID ~|= threshold``, and XREADGROUP of one stream with ``>`` --
take fast paths that must decide exactly as the general parsers
(``_xadd_general``, ``_xread``) would, errors included, and hand anything
else to them before changing anything.

Fast paths (twin; test): XADD's shapes (``_xadd_general``;
tests/test_streams_fastpaths.py::test_xadd_fast_shapes_leave_what_the_general_parser_leaves);
``_xreadgroup_one`` (``_xread``, and an AOF server's per-entry
``_serve_group``; tests/test_fastpaths_server.py::
test_xreadgroup_fast_general_aof_and_valkey_agree); ``parse_ids`` and
``parse_id``'s digit-only form (``parse_id`` of each, its C-string form;
tests/test_streams_fastpaths.py::test_parse_ids_is_parse_id_of_each,
tests/test_fastpaths.py::test_ll_and_parse_id_fast_forms); ``_ll``
(``string2ll``; same test); the inlined ``Server.written`` in xadd (see
hotkv/commands/lists.py).  Counts of 0 meaning "no limit" are checked
against Valkey in tests/test_fastpaths_nolimit.py.

Blocking XREAD / XREADGROUP use hotkv/blocking.py.  The IDs a blocked
XREAD resolved ``$`` to are kept in the waiter (``block(..., data=)``), so
re-execution after a write means "newer than when I blocked".  A blocked
XREADGROUP waits with ``unblock_on_nokey``: when its key is deleted or
replaced, re-execution replies NOGROUP / WRONGTYPE as Valkey does.

Which writes wake whom follows Valkey: XADD and the creation of a stream
signal blocked readers (and WATCH); XDEL / XTRIM / MKSTREAM touch WATCHers;
XGROUP DESTROY wakes XREADGROUP waiters; group bookkeeping (XACK, XCLAIM,
SETID, consumers) only counts as a change for the AOF.
"""

from __future__ import annotations

from itertools import islice

from .. import errors
from ..blocking import block, parse_timeout
from ..errors import CommandError, WrongType
from ..registry import command, container, spec
from ..resp import NULL_ARRAY, OK, Entries, Simple
from ..types.stream import Stream
from ..types.stream_groups import NACK
from ..types.stream_ids import INVALID_ENTRIES_READ, MASK64, MAX_ID, id_bytes, make_id
from ..util import string2ll

ERR_INVALID_ID = "ERR Invalid stream ID specified as stream command argument"
ERR_XADD_SMALLER = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
ERR_XADD_ZERO = "ERR The ID specified in XADD must be greater than 0-0"
ERR_EXHAUSTED = "ERR The stream has exhausted the last possible ID, unable to add more items"
ERR_TOO_LARGE = "ERR Elements are too large to be stored"
ERR_BOTH_STRATEGIES = "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
ERR_MAXLEN_NEG = "ERR The MAXLEN argument must be >= 0."
ERR_LIMIT_NEG = "ERR The LIMIT argument must be >= 0."
ERR_LIMIT_NO_STRATEGY = "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
ERR_XTRIM_NO_STRATEGY = "ERR syntax error, XTRIM must be called with a trimming strategy"
ERR_LIMIT_NO_APPROX = "ERR syntax error, LIMIT cannot be used without the special ~ option"
ERR_START_INTERVAL = "ERR invalid start ID for the interval"
ERR_END_INTERVAL = "ERR invalid end ID for the interval"
ERR_NOT_IN_GROUP = "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
ERR_NOACK_NOT_IN_GROUP = "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."
ERR_MISSING_GROUP = "ERR Missing GROUP option for XREADGROUP"
ERR_DOLLAR_IN_GROUP = ("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read "
                       "the history of this consumer by specifying a proper ID, or use the > ID to "
                       "get new messages. The $ ID would just return an empty result set.")
ERR_PLUS_IN_GROUP = ("ERR The + ID is meaningless in the context of XREADGROUP: you want to read "
                     "the history of this consumer by specifying a proper ID, or use the > ID to "
                     "get new messages. The + ID would just return an empty result set.")
ERR_GT_NOT_IN_GROUP = ("ERR The > ID can be specified only when calling XREADGROUP using the "
                       "GROUP <group> <consumer> option.")
ERR_LAST_ZERO = "ERR the stream last element ID is 0-0"
ERR_XGROUP_NOKEY = ("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE "
                    "you may want to use the MKSTREAM option to create an empty stream "
                    "automatically.")
ERR_BUSYGROUP = "BUSYGROUP Consumer Group name already exists"
ERR_ENTRIESREAD = "ERR value for ENTRIESREAD must be positive or -1"

_WS = b" \t\n\v\f\r"


# ----------------------------------------------------------------------
# Argument parsing
# ----------------------------------------------------------------------

def _cstr(arg: bytes) -> bytes:
    """The argument as C string functions see it (up to the first NUL)."""
    nul = arg.find(b"\0")
    return arg if nul < 0 else arg[:nul]


def _string2ull(s: bytes):
    """Valkey's string2ull: a canonical int64 >= 0, else what strtoull
    accepts whole (leading space, a sign, leading zeros); None if neither."""
    v = string2ll(s)
    if v is not None:
        return v if v >= 0 else None
    t = s.lstrip(_WS)
    neg = False
    if t[:1] in (b"+", b"-"):
        neg = t[:1] == b"-"
        t = t[1:]
    if not t or not t.isdigit():
        return None
    v = int(t)
    if v > MASK64:
        return None
    return (-v) & MASK64 if neg else v


def parse_id(arg: bytes, missing_seq: int = 0, strict: bool = False, seq_star: bool = False):
    """A stream ID argument -> (id, seq_given).  ``strict`` rejects - and +;
    ``seq_star`` accepts ``ms-*`` (seq_given False)."""
    ms, dash, seq = arg.partition(b"-")
    # The common forms, fast: at most 19 digits a side cannot pass 2**64.
    if len(ms) < 20 and ms.isdigit():
        if not dash:
            return (int(ms) << 64) | missing_seq, True
        if len(seq) < 20 and seq.isdigit():
            return (int(ms) << 64) | int(seq), True
    if len(arg) > 127:
        raise CommandError(ERR_INVALID_ID)
    buf = _cstr(arg)
    if buf == b"-":
        if strict:
            raise CommandError(ERR_INVALID_ID)
        return 0, True
    if buf == b"+":
        if strict:
            raise CommandError(ERR_INVALID_ID)
        return MAX_ID, True
    dash = buf.find(b"-")
    if dash >= 0:
        ms = _string2ull(buf[:dash])
        if ms is None:
            raise CommandError(ERR_INVALID_ID)
        rest = buf[dash + 1:]
        if seq_star and rest == b"*":
            return ms << 64, False
        seq = _string2ull(rest)
        if seq is None:
            raise CommandError(ERR_INVALID_ID)
    else:
        ms = _string2ull(buf)
        if ms is None:
            raise CommandError(ERR_INVALID_ID)
        seq = missing_seq
    return (ms << 64) | seq, True


def parse_ids(args) -> list:
    """parse_id(arg, strict=True)[0] of each of args.  A worker acks IDs of
    one read, most of them in the same millisecond: that part is converted
    once."""
    out = []
    prev = None
    base = 0
    for arg in args:
        ms, dash, seq = arg.partition(b"-")
        if ms != prev:
            if not (len(ms) < 20 and ms.isdigit()):
                out.append(parse_id(arg, 0, strict=True)[0])
                continue
            prev = ms
            base = int(ms) << 64
        if len(seq) < 20 and seq.isdigit():
            out.append(base | int(seq))
        else:
            out.append(parse_id(arg, 0, strict=True)[0])
    return out


def parse_interval(arg: bytes, missing_seq: int):
    """A range bound: (id, exclusive)."""
    if len(arg) > 1 and arg[:1] == b"(":
        return parse_id(arg[1:], missing_seq, strict=True)[0], True
    return parse_id(arg, missing_seq)[0], False


def parse_range(start_arg: bytes, end_arg: bytes):
    if start_arg == b"-" and end_arg == b"+":
        return 0, MAX_ID
    start, ex = parse_interval(start_arg, 0)
    if ex:
        if start == MAX_ID:
            raise CommandError(ERR_START_INTERVAL)
        start += 1
    end, ex = parse_interval(end_arg, MASK64)
    if ex:
        if end == 0:
            raise CommandError(ERR_END_INTERVAL)
        end -= 1
    return start, end


def _ll(arg: bytes, message: str = errors.NOT_INTEGER) -> int:
    if 0 < len(arg) < 19 and arg.isdigit() and (arg[0] != 48 or len(arg) == 1):
        return int(arg)           # what string2ll accepts, without its regex
    v = string2ll(arg)
    if v is None:
        raise CommandError(message)
    return v


def _lookup(c, key):
    return c.db.lookup_typed(key, Stream)


def _entries(pairs):
    return Entries([[id_bytes(i), items] for i, items in pairs])


def _help(argv, lines):
    cmd = _cstr(argv[0]).upper().decode("utf-8", "surrogateescape")
    out = [Simple(b"%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" % cmd.encode(
        "utf-8", "surrogateescape"))]
    out += [Simple(line.encode()) for line in lines]
    out += [Simple(b"HELP"), Simple(b"    Print this help.")]
    return out


def _subcommand_syntax(argv):
    sub = _cstr(argv[1])[:128].decode("utf-8", "surrogateescape")
    cmd = _cstr(argv[0]).upper().decode("utf-8", "surrogateescape")
    return CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                        "Try %s HELP." % (sub, cmd))


def _fmt(arg: bytes) -> str:
    """%s of a key or name in an error text."""
    return _cstr(arg).decode("utf-8", "surrogateescape")


def _nogroup(key, group):
    return CommandError("NOGROUP No such key '%s' or consumer group '%s'" % (_fmt(key), _fmt(group)))


# ----------------------------------------------------------------------
# Change announcements (see the module docstring for who wakes whom)
# ----------------------------------------------------------------------

def _touched(c, key, event: str, n: int = 1):
    """dirty += n, WATCHers of key fail, keyspace event."""
    server = c.server
    db = c.db
    server.dirty += n
    if key in db.watched:
        db.touch_watched(key)
    if event:
        server.event(db, key, "t", event)


def _changed(c, key, event: str = "", n: int = 1):
    """Group bookkeeping changed: dirty += n and the event, nothing else."""
    c.server.dirty += n
    if event:
        c.server.event(c.db, key, "t", event)


def _seen_consumer(c, g, key, cname: bytes, now: int):
    """The group's consumer cname, created (with its event) if new; seen now."""
    consumer = g.consumers.get(cname)
    if consumer is None:
        consumer = g.create_consumer(cname, now)
        _changed(c, key, "xgroup-createconsumer")
    consumer.seen_time = now
    return consumer


def _node_limits(c):
    values = c.server.config.values
    return values["stream-node-max-bytes"], values["stream-node-max-entries"]


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
        maxlen = _ll(argv[4])
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
            maxlen = _ll(argv[i + 1])
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
            a.limit = _ll(argv[i + 1])
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
                                         "trimming feature"),))
def xadd(c, argv):
    """Appends a new message to a stream. Creates the key if it doesn't exist.

    XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]
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
    if key in db.watched or key in db.blocking or server.notify is not None:
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
    s = _lookup(c, key)
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
    node_max_bytes, node_max_entries = _node_limits(c)
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


@command("xtrim", -4, "write", (1, 1, 1), group="stream", since="5.0.0")
def xtrim(c, argv):
    """Deletes messages from the beginning of a stream.

    XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
    """
    a = _parse_add_trim(c, argv, False)
    key = argv[1]
    s = _lookup(c, key)
    if s is None:
        return 0
    deleted = _trim(s, a)
    if deleted:
        if a.approx:
            rewritten = list(argv)
            rewritten[a.arg_idx - 1] = b"="
            rewritten[a.arg_idx] = _exact_trim_arg(s, a)
            c.server.propagate_as(rewritten)
        _touched(c, key, "xtrim", deleted)
    return deleted


# ----------------------------------------------------------------------
# XLEN / XRANGE / XREVRANGE / XDEL / XSETID
# ----------------------------------------------------------------------

@command("xlen", 2, "readonly fast", (1, 1, 1), group="stream", since="5.0.0")
def xlen(c, argv):
    """Return the number of messages in a stream.

    XLEN key
    """
    s = _lookup(c, argv[1])
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
            count = _ll(argv[j + 1])
            if count < 0:
                count = 0
            j += 2
        else:
            raise CommandError(errors.SYNTAX)
    s = _lookup(c, argv[1])
    if s is None:
        return []
    if count == 0:
        return NULL_ARRAY
    if count < 0:
        count = 0
    if rev:
        return Entries(s.revrange_entries(start, end, count))
    return Entries(s.range_entries(start, end, count))


@command("xrange", -4, "readonly", (1, 1, 1), group="stream", since="5.0.0")
def xrange(c, argv):
    """Returns the messages from a stream within a range of IDs.

    XRANGE key start end [COUNT count]
    """
    return _xrange(c, argv, False)


@command("xrevrange", -4, "readonly", (1, 1, 1), group="stream", since="5.0.0")
def xrevrange(c, argv):
    """Returns the messages from a stream within a range of IDs in reverse order.

    XREVRANGE key end start [COUNT count]
    """
    return _xrange(c, argv, True)


@command("xdel", -3, "write fast", (1, 1, 1), group="stream", since="5.0.0")
def xdel(c, argv):
    """Returns the number of messages after removing them from a stream.

    XDEL key id [id ...]
    """
    key = argv[1]
    s = _lookup(c, key)
    if s is None:
        return 0
    ids = [parse_id(a, 0, strict=True)[0] for a in argv[2:]]
    deleted = 0
    first_entry = False
    for i in ids:
        if s.delete(i):
            if i == s.first_id:
                first_entry = True
            if i > s.max_deleted_id:
                s.max_deleted_id = i
            deleted += 1
    if deleted:
        if s.length == 0:
            s.first_id = 0
        elif first_entry:
            s.first_id = s.first_valid_id()
        _touched(c, key, "xdel", deleted)
    return deleted


@command("xsetid", -3, "write denyoom fast", (1, 1, 1), group="stream", since="5.0.0")
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
            entries_added = _ll(argv[i + 1])
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
    s = _lookup(c, key)
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
    _changed(c, key, "xsetid")
    return OK


# ----------------------------------------------------------------------
# XREAD / XREADGROUP
# ----------------------------------------------------------------------

def _xread_keys(startfrom):
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


def _xclaim_prop(key, gname, cname, eid_arg, nack, g):
    return [b"XCLAIM", key, gname, cname, b"0", eid_arg, b"TIME", b"%d" % nack.delivery_time,
            b"RETRYCOUNT", b"%d" % nack.delivery_count, b"FORCE", b"JUSTID", b"LASTID",
            id_bytes(g.last_id)]


def _setid_prop(key, gname, g):
    return [b"XGROUP", b"SETID", key, gname, id_bytes(g.last_id), b"ENTRIESREAD",
            b"%d" % g.entries_read]


def _serve_group(c, s, g, consumer, key, gname, start, count, noack, props):
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
                props.append(_xclaim_prop(key, gname, consumer.name, id_bytes(eid), nack, g))
    if moved and props is not None:
        props.append(_setid_prop(key, gname, g))
    return _entries(pairs)


def _serve_history(c, s, consumer, start, count):
    """A consumer's own pending entries >= start (XREADGROUP with an ID)."""
    now = c.server.cmd_time_ms
    out = Entries()
    cpel = consumer.pel
    for eid in cpel.irange(minimum=start):
        if count and len(out) >= count:
            break
        items = s.get(eid)
        if items is None:
            out.append([id_bytes(eid), NULL_ARRAY])
        else:
            nack = cpel[eid]
            nack.delivery_time = now
            nack.delivery_count += 1
            out.append([id_bytes(eid), items])
    return out


class _Blocked:
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
        """blocking.serve_ready_keys asks before re-running the command:
        True when the re-run would only block again (it then stays where it
        is in the queues -- the order re-blocking would give), having done
        what that re-run does on the way (consumers' seen-time)."""
        if not self.quick:
            return False
        try:
            return _still_empty(waiter.db, waiter.client.server, self, self.group_mode)
        except CommandError:
            return False          # WRONGTYPE: the re-run replies it


def _still_empty(db, server, st: _Blocked, group_mode: bool) -> bool:
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


def _xread(c, argv, group_mode: bool):
    server = c.server
    waiter = c.reprocessing
    if waiter and type(waiter.data) is _Blocked and waiter.data.quick:
        # Woken by a write to one of its keys: most wake-ups of an idle
        # worker find nothing for it -- re-block without re-parsing.
        st = waiter.data
        if _still_empty(c.db, server, st, group_mode):
            return block(c, st.keys, 0, Stream, NULL_ARRAY, unblock_on_nokey=group_mode,
                         data=st)
    db = c.db
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
            count = _ll(argv[i])
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

    keys = argv[streams_arg:streams_arg + nstreams]
    id_args = argv[streams_arg + nstreams:]
    ids = [0] * nstreams
    groups = [None] * nstreams if group_mode else None
    resolved = None   # position -> ID that '$' meant when we first ran
    if waiter and type(waiter.data) is _Blocked:
        resolved = waiter.data.resolved
    for k in range(nstreams):
        key = keys[k]
        s = _lookup(c, key)
        if group_mode:
            g = s.group(gname) if s is not None else None
            if g is None:
                raise CommandError(
                    "NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with GROUP "
                    "option" % (_fmt(key), _fmt(gname)))
            groups[k] = g
        arg = id_args[k]
        if arg == b"$":
            if group_mode:
                raise CommandError(ERR_DOLLAR_IN_GROUP)
            if resolved is not None and k in resolved:
                ids[k] = resolved[k]
            else:
                ids[k] = s.last_id if s is not None else 0
        elif arg == b"+":
            if group_mode:
                raise CommandError(ERR_PLUS_IN_GROUP)
            if s is not None:
                if s.last_id == 0:
                    raise CommandError(ERR_LAST_ZERO)
                ids[k] = s.last_id - 1
            else:
                ids[k] = 0
        elif arg == b">":
            if not group_mode:
                raise CommandError(ERR_GT_NOT_IN_GROUP)
            ids[k] = MAX_ID
        else:
            ids[k] = parse_id(arg, 0, strict=True)[0]

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
                _changed(c, key, "xgroup-createconsumer")
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
                entries = _serve_group(c, s, groups[k], consumer, key, gname, start, count,
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
        data = _Blocked(keys, ids, resolved, gname, cname,
                        group_mode or b"+" not in id_args, group_mode)
        return block(c, keys, deadline, Stream, NULL_ARRAY, unblock_on_nokey=group_mode,
                     data=data)
    return NULL_ARRAY


@command("xread", -4, "readonly blocking", keys_fn=_xread_keys(1), group="stream",
         since="5.0.0", key_specs=(spec("RO access", "keyword STREAMS 1", "range -1 1 2"),))
def xread(c, argv):
    """Returns messages from multiple streams with IDs greater than the ones requested.

    XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id|$|+ [id ...]
    """
    return _xread(c, argv, False)


@command("xreadgroup", -7, "write blocking", keys_fn=_xread_keys(4), group="stream",
         since="5.0.0", key_specs=(spec("RO access", "keyword STREAMS 4", "range -1 1 2"),))
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
    return _xread(c, argv, True)


def _xreadgroup_one(c, argv, n):
    """The worker's read, ``GROUP g c [COUNT n] [BLOCK ms] STREAMS key >``,
    as _xread would do it, blocking included; None (having changed nothing)
    when _xread must decide: other options."""
    server = c.server
    count = 0
    deadline = None
    i = 4
    while i < n - 3:
        opt = argv[i].lower()
        if opt == b"count":
            count = _ll(argv[i + 1])
            if count < 0:
                count = 0
        elif opt == b"block":
            deadline = parse_timeout(server, argv[i + 1], seconds=False)
        else:
            return None
        i += 2
    key = argv[n - 2]
    gname = argv[2]
    s = _lookup(c, key)
    g = s.group(gname) if s is not None else None
    if g is None:
        raise CommandError("NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with "
                           "GROUP option" % (_fmt(key), _fmt(gname)))
    serve = s.length and s.last_valid_id() > g.last_id
    now = server.cmd_time_ms
    props = [] if server.aof is not None else None   # None: nothing logs
    cname = argv[3]
    consumer = _seen_consumer(c, g, key, cname, now)
    if serve:
        entries = _serve_group(c, s, g, consumer, key, gname, (g.last_id + 1) & MAX_ID, count,
                               False, props)
        server.dirty += 1
    if props is not None:
        server.propagate_as(*props)
    if not serve:
        if deadline is not None:
            # As _xread: the consumer is seen (or created) first, then the
            # read waits; a re-run that finds nothing (block() knows it by
            # c.reprocessing) keeps its first deadline.
            return block(c, [key], deadline, Stream, NULL_ARRAY, unblock_on_nokey=True,
                         data=_Blocked([key], [MAX_ID], {}, gname, cname, True, True))
        return NULL_ARRAY
    if c.resp3:
        return {key: entries}
    return [[key, entries]]


# ----------------------------------------------------------------------
# XGROUP
# ----------------------------------------------------------------------

container("xgroup", group="stream", summary="A container for consumer groups commands.",
          since="5.0.0")


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
            entries_read = _ll(argv[i + 1])
            if entries_read < 0 and entries_read != INVALID_ENTRIES_READ:
                raise CommandError(ERR_ENTRIESREAD)
            i += 2
        else:
            raise _subcommand_syntax(argv)
    s = _lookup(c, argv[2])
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
                           % (_fmt(argv[3]), _fmt(argv[2])))


@command("xgroup|create", -5, "write denyoom", (2, 2, 1), group="stream", since="5.0.0")
def xgroup_create(c, argv):
    """Creates a consumer group.

    XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]
    """
    s, g, mkstream, entries_read = _xgroup_common(c, argv, True, False)
    if len(argv) > 8:
        raise _subcommand_syntax(argv)
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
    _changed(c, key, "xgroup-create")
    return OK


@command("xgroup|setid", -5, "write", (2, 2, 1), group="stream", since="5.0.0")
def xgroup_setid(c, argv):
    """Sets the last-delivered ID of a consumer group.

    XGROUP SETID key group id|$ [ENTRIESREAD entries-read]
    """
    s, g, _, entries_read = _xgroup_common(c, argv, False, True)
    _require_group(argv, g)
    if len(argv) not in (5, 7):
        raise _subcommand_syntax(argv)
    if argv[4] == b"$":
        last = s.last_id
    else:
        last = parse_id(argv[4], 0)[0]
    g.last_id = last
    g.entries_read = entries_read
    _changed(c, argv[2], "xgroup-setid")
    return OK


@command("xgroup|destroy", 4, "write", (2, 2, 1), group="stream", since="5.0.0")
def xgroup_destroy(c, argv):
    """Destroys a consumer group.

    XGROUP DESTROY key group
    """
    s, g, _, _ = _xgroup_common(c, argv, False, False)
    if g is None:
        return 0
    del s.groups[argv[3]]
    key = argv[2]
    _changed(c, key, "xgroup-destroy")
    # Blocked XREADGROUPs on this group re-run and get NOGROUP.
    c.server.signal_ready(c.db, key)
    return 1


@command("xgroup|createconsumer", 5, "write denyoom", (2, 2, 1), group="stream", since="6.2.0")
def xgroup_createconsumer(c, argv):
    """Creates a consumer in a consumer group.

    XGROUP CREATECONSUMER key group consumer
    """
    s, g, _, _ = _xgroup_common(c, argv, False, False)
    _require_group(argv, g)
    if g.create_consumer(argv[4], c.server.cmd_time_ms) is None:
        return 0
    _changed(c, argv[2], "xgroup-createconsumer")
    return 1


@command("xgroup|delconsumer", 5, "write", (2, 2, 1), group="stream", since="5.0.0")
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
    _changed(c, argv[2], "xgroup-delconsumer")
    return pending


@command("xgroup|help", 2, "loading stale", group="stream", since="5.0.0")
def xgroup_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return _help(argv, [
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

@command("xack", -4, "write fast", (1, 1, 1), group="stream", since="5.0.0")
def xack(c, argv):
    """Returns the number of messages that were successfully acknowledged.

    XACK key group id [id ...]
    """
    s = _lookup(c, argv[1])
    g = s.group(argv[2]) if s is not None else None
    if g is None:
        return 0
    acked = g.ack_all(parse_ids(argv[3:]))
    if acked:
        _changed(c, argv[1], "", acked)
    return acked


@command("xpending", -3, "readonly", (1, 1, 1), group="stream", since="5.0.0")
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
            minidle = _ll(argv[4])
            if n < 8:
                raise CommandError(errors.SYNTAX)
            startidx += 2
        count = _ll(argv[startidx + 2])
        if count < 0:
            count = 0
        start, end = parse_range(argv[startidx], argv[startidx + 1])
        if startidx + 3 < n:
            consumer_name = argv[startidx + 3]
    s = _lookup(c, argv[1])
    g = s.group(argv[2]) if s is not None else None
    if g is None:
        raise _nogroup(argv[1], argv[2])
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


@command("xclaim", -6, "write fast", (1, 1, 1), group="stream", since="5.0.0")
def xclaim(c, argv):
    """Changes, or acquires, ownership of a message in a consumer group.

    XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-ms]
        [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID id]
    """
    key = argv[1]
    gname = argv[2]
    s = _lookup(c, key)
    g = s.group(gname) if s is not None else None
    if g is None:
        raise _nogroup(key, gname)
    minidle = _ll(argv[4], "ERR Invalid min-idle-time argument for XCLAIM")
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
            deliverytime = now - _ll(argv[j], "ERR Invalid IDLE option argument for XCLAIM")
        elif opt == b"time" and moreargs:
            j += 1
            deliverytime = _ll(argv[j], "ERR Invalid TIME option argument for XCLAIM")
        elif opt == b"retrycount" and moreargs:
            j += 1
            retrycount = _ll(argv[j], "ERR Invalid RETRYCOUNT option argument for XCLAIM")
        elif opt == b"lastid" and moreargs:
            j += 1
            last_id = parse_id(argv[j], 0, strict=True)[0]
        else:
            raise CommandError("ERR Unrecognized XCLAIM option '%s'" % _fmt(argv[j]))
        j += 1
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
    consumer = _seen_consumer(c, g, key, cname, now)
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
                    props.append(_xclaim_prop(key, gname, nack.consumer.name, argv[k], nack, g))
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
            props.append(_xclaim_prop(key, gname, cname, argv[k], nack, g))
        propagate_last_id = False
        dirty += 1
    if propagate_last_id:
        if props is not None:
            props.append(_setid_prop(key, gname, g))
        dirty += 1
    if dirty:
        _changed(c, key, "", dirty)
    server.propagate_as(*(props or ()))
    return out


@command("xautoclaim", -6, "write fast", (1, 1, 1), group="stream", since="6.2.0")
def xautoclaim(c, argv):
    """Changes, or acquires, ownership of messages in a consumer group.

    XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
    """
    key = argv[1]
    gname = argv[2]
    minidle = _ll(argv[4], "ERR Invalid min-idle-time argument for XAUTOCLAIM")
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
    s = _lookup(c, key)
    g = s.group(gname) if s is not None else None
    if g is None:
        raise _nogroup(key, gname)
    server = c.server
    now = server.cmd_time_ms
    cname = argv[3]
    consumer = _seen_consumer(c, g, key, cname, now)
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
                props.append(_xclaim_prop(key, gname, nack.consumer.name, id_bytes(eid), nack, g))
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
            props.append(_xclaim_prop(key, gname, cname, id_bytes(eid), nack, g))
        dirty += 1
    cursor = id_bytes(candidates[idx]) if idx < ncand else b"0-0"
    if dirty:
        _changed(c, key, "", dirty)
    server.propagate_as(*(props or ()))
    return [cursor, claimed, deleted]


# ----------------------------------------------------------------------
# XINFO
# ----------------------------------------------------------------------

container("xinfo", group="stream", summary="A container for stream introspection commands.",
          since="5.0.0")


def _xinfo_stream_or_error(c, key):
    s = _lookup(c, key)
    if s is None:
        raise CommandError(errors.NO_SUCH_KEY)
    return s


@command("xinfo|consumers", 4, "readonly", (2, 2, 1), group="stream", since="5.0.0")
def xinfo_consumers(c, argv):
    """Returns a list of the consumers in a consumer group.

    XINFO CONSUMERS key group
    """
    s = _xinfo_stream_or_error(c, argv[2])
    g = s.group(argv[3])
    if g is None:
        raise CommandError("NOGROUP No such consumer group '%s' for key name '%s'"
                           % (_fmt(argv[3]), _fmt(argv[2])))
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


@command("xinfo|groups", 3, "readonly", (2, 2, 1), group="stream", since="5.0.0")
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


@command("xinfo|stream", -3, "readonly", (2, 2, 1), group="stream", since="5.0.0")
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
            raise _subcommand_syntax(argv)
        if len(opts) == 3:
            if opts[1].lower() != b"count":
                raise _subcommand_syntax(argv)
            count = _ll(opts[2])
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
    out[b"entries"] = _entries(s.range(0, MAX_ID, count))
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


@command("xinfo|help", 2, "loading stale", group="stream", since="5.0.0")
def xinfo_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return _help(argv, [
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
    ])
