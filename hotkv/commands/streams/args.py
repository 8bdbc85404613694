"""What the stream commands parse and say: error texts, IDs, integers, help.

No command is registered here (the package's ``entries``, ``groups`` and
``info`` modules do that).  Owns the stream ID forms Valkey's t_stream.c
accepts (``ms-seq``, ``ms``, ``-`` / ``+``, ``ms-*`` for XADD, ``(`` for an
exclusive range bound; NULs and lengths as its C-string parser sees them),
the integer parser the stream commands share (``parse_ll``), the error
texts, and the replies built the same way by several commands: entries
(``entries_reply``), XGROUP / XINFO help and unknown-subcommand errors,
NOGROUP errors.

Invariants: ``parse_ids`` is ``parse_id(arg, strict=True)[0]`` of each
argument and ``parse_ll`` is ``string2ll`` with Redis's message (fast forms,
tests/test_streams_fastpaths.py::test_parse_ids_is_parse_id_of_each,
tests/test_fastpaths.py::test_ll_and_parse_id_fast_forms).
"""

from __future__ import annotations

from ...protocol import errors
from ...protocol.errors import CommandError
from ...protocol.resp import Entries, Simple
from ...protocol.util import string2ll
from ...types.stream_ids import MASK64, MAX_ID, id_bytes

ERR_INVALID_ID = "ERR Invalid stream ID specified as stream command argument"
ERR_XADD_SMALLER = ("ERR The ID specified in XADD is equal or smaller than the target stream "
                    "top item")
ERR_XADD_ZERO = "ERR The ID specified in XADD must be greater than 0-0"
ERR_EXHAUSTED = "ERR The stream has exhausted the last possible ID, unable to add more items"
ERR_TOO_LARGE = "ERR Elements are too large to be stored"
ERR_BOTH_STRATEGIES = ("ERR syntax error, MAXLEN and MINID options at the same time are not "
                       "compatible")
ERR_MAXLEN_NEG = "ERR The MAXLEN argument must be >= 0."
ERR_LIMIT_NEG = "ERR The LIMIT argument must be >= 0."
ERR_LIMIT_NO_STRATEGY = ("ERR syntax error, LIMIT cannot be used without specifying a trimming "
                         "strategy")
ERR_XTRIM_NO_STRATEGY = "ERR syntax error, XTRIM must be called with a trimming strategy"
ERR_LIMIT_NO_APPROX = "ERR syntax error, LIMIT cannot be used without the special ~ option"
ERR_START_INTERVAL = "ERR invalid start ID for the interval"
ERR_END_INTERVAL = "ERR invalid end ID for the interval"
ERR_NOT_IN_GROUP = "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
ERR_NOACK_NOT_IN_GROUP = ("ERR The NOACK option is only supported by XREADGROUP. You called XREAD "
                          "instead.")
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


def parse_ll(arg: bytes, message: str = errors.NOT_INTEGER) -> int:
    if 0 < len(arg) < 19 and arg.isdigit() and (arg[0] != 48 or len(arg) == 1):
        return int(arg)           # what string2ll accepts, without its regex
    v = string2ll(arg)
    if v is None:
        raise CommandError(message)
    return v


def entries_reply(pairs):
    return Entries([[id_bytes(i), items] for i, items in pairs])


def help_reply(argv, lines):
    cmd = _cstr(argv[0]).upper().decode("utf-8", "surrogateescape")
    out = [Simple(b"%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" % cmd.encode(
        "utf-8", "surrogateescape"))]
    out += [Simple(line.encode()) for line in lines]
    out += [Simple(b"HELP"), Simple(b"    Print this help.")]
    return out


def subcommand_error(argv):
    sub = _cstr(argv[1])[:128].decode("utf-8", "surrogateescape")
    cmd = _cstr(argv[0]).upper().decode("utf-8", "surrogateescape")
    return CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                        "Try %s HELP." % (sub, cmd))


def as_text(arg: bytes) -> str:
    """%s of a key or name in an error text."""
    return _cstr(arg).decode("utf-8", "surrogateescape")


def nogroup_error(key, group):
    return CommandError("NOGROUP No such key '%s' or consumer group '%s'"
                        % (as_text(key), as_text(group)))
