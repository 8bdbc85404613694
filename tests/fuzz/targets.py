"""Fuzz targets for hotkv's hostile-input surface, shared by the atheris entry
points (fuzz_parser.py, fuzz_dispatch.py: coverage-guided, run for as long as
you like) and the bounded hypothesis runs in tests/test_hostile.py (CI).

* ``parse_check(data, cuts, auth_required)``: the RESP request parser never
  raises, returns only lists of bytes, and gives the same commands and the
  same protocol error whether the bytes arrive at once, split at ``cuts``,
  or one byte per read (which never reaches the hiredis fast path).
* ``Dispatcher.run(argv)``: any command line through the real dispatcher (an
  in-process Server, no sockets) produces exactly one well-formed reply,
  never an unhandled exception, never an "internal error" reply, and
  finishes within ``HANG_SECONDS``.
* ``check_resp(data)``: a strict RESP2/RESP3 reply validator.
"""

from __future__ import annotations

import signal

SMALL_LIMIT = 60_000   # keep inputs under the 64 KB inline / count-line limits
HANG_SECONDS = 5


class Malformed(AssertionError):
    pass


# ----------------------------------------------------------------------
# Strict RESP validation
# ----------------------------------------------------------------------

def _line(data: bytes, pos: int):
    nl = data.find(b"\r\n", pos)
    if nl < 0:
        raise Malformed(f"unterminated line at {pos}: {data[pos:pos + 40]!r}")
    return data[pos:nl], nl + 2


def _int(text: bytes, what: str) -> int:
    if not text or not (text.lstrip(b"-").isdigit()) or text.count(b"-") > 1:
        raise Malformed(f"bad {what} {text!r}")
    return int(text)


def _one(data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise Malformed("truncated reply")
    kind = data[pos:pos + 1]
    body, pos = _line(data, pos + 1)
    if kind in (b"+", b"-"):
        if b"\r" in body or b"\n" in body:
            raise Malformed("newline inside a status/error line")
        return pos
    if kind == b":" or kind == b"(":
        _int(body, "integer")
        return pos
    if kind in (b"$", b"=", b"!"):
        n = _int(body, "bulk length")
        if n == -1 and kind == b"$":
            return pos
        if n < 0 or pos + n + 2 > len(data) or data[pos + n:pos + n + 2] != b"\r\n":
            raise Malformed(f"bad bulk of {n} bytes")
        if kind == b"=" and data[pos + 3:pos + 4] != b":":
            raise Malformed("verbatim string without a format")
        return pos + n + 2
    if kind in (b"*", b">", b"~", b"%", b"|"):
        n = _int(body, "aggregate length")
        if n == -1 and kind == b"*":
            return pos
        if n < 0:
            raise Malformed("negative aggregate length")
        for _ in range(n * (2 if kind in (b"%", b"|") else 1)):
            pos = _one(data, pos)
        if kind == b"|":
            pos = _one(data, pos)
        return pos
    if kind == b",":
        t = body.lower()
        if t not in (b"inf", b"-inf", b"nan"):
            try:
                float(t)
            except ValueError:
                raise Malformed(f"bad double {body!r}") from None
        return pos
    if kind == b"#":
        if body not in (b"t", b"f"):
            raise Malformed("bad boolean")
        return pos
    if kind == b"_":
        if body:
            raise Malformed("null with a body")
        return pos
    raise Malformed(f"unknown reply type {kind!r}")


def check_resp(data: bytes) -> list[bytes]:
    """Split data into whole replies; Malformed if any is not valid RESP."""
    out = []
    pos = 0
    while pos < len(data):
        end = _one(data, pos)
        out.append(data[pos:end])
        pos = end
    return out


# ----------------------------------------------------------------------
# Parser
# ----------------------------------------------------------------------

def _parse(data_chunks, auth_required: bool):
    from hotkv.protocol.resp import RequestParser
    p = RequestParser(1024 * 1024)
    p.auth_required = auth_required
    commands = []
    for chunk in data_chunks:
        cmds, error = p.feed(chunk)
        for argv in cmds:
            if type(argv) is not list or not argv or any(type(a) is not bytes for a in argv):
                raise Malformed(f"parser returned {argv!r}")
        commands.extend(cmds)
        if error is not None:
            if not isinstance(error, str) or not error.startswith("Protocol error"):
                raise Malformed(f"bad protocol error {error!r}")
            return commands, error, p.pending
    return commands, None, p.pending


def parse_check(data: bytes, cuts=(), auth_required: bool = False):
    """The parser property; returns the commands parsed."""
    data = bytes(data[:SMALL_LIMIT])
    whole = _parse([data] if data else [], auth_required)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in zip(points, points[1:]) if b > a]
    split = _parse(chunks, auth_required)
    if whole[:2] != split[:2]:
        raise Malformed(f"split-dependent parse of {data[:200]!r} at {points[:20]}:\n"
                        f" whole: {whole[:2]!r}\n split: {split[:2]!r}")
    if whole[2] < 0:
        raise Malformed("negative pending size")
    if len(data) <= 2048:
        # One byte per read never reaches hiredis: Redis's own rules only.
        slow = _parse([data[i:i + 1] for i in range(len(data))], auth_required)
        if whole[:2] != slow[:2]:
            raise Malformed(f"fast path disagrees with the byte-by-byte parse of "
                            f"{data[:200]!r}:\n fast: {whole[:2]!r}\n slow: {slow[:2]!r}")
    return whole[0]


# ----------------------------------------------------------------------
# Dispatcher
# ----------------------------------------------------------------------

# Commands that act on the process or the whole server rather than on data,
# or that a fuzzer must not run (they stop, fork, write files or pause).
EXCLUDED = {
    "shutdown", "debug", "monitor", "sync", "psync", "replicaof", "slaveof", "save",
    "bgsave", "bgrewriteaof", "failover", "quit", "client|pause", "client|kill",
    "config|set", "config|rewrite", "config|resetstat", "acl|save", "acl|load",
    "acl|deluser", "acl|setuser", "wait", "waitaof", "cluster", "module", "script|kill",
    "function|kill", "function|flush", "function|restore", "eval", "evalsha", "eval_ro",
    "evalsha_ro", "fcall", "fcall_ro", "hello", "auth", "reset", "latency|reset",
    "swapdb", "select", "multi", "subscribe", "psubscribe", "ssubscribe",
}
# Commands that answer once per argument (Redis's pub/sub confirmations).
MULTI_REPLY = {"unsubscribe", "punsubscribe", "sunsubscribe", "subscribe", "psubscribe",
               "ssubscribe"}
# Commands whose negative counts ask for that many replies (Redis too would
# try): keep their numbers small.
RANDOM_COUNT = {"srandmember", "hrandfield", "zrandmember"}


class _Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise _Hang()


class Dispatcher:
    """The real dispatcher on an in-process server, one plain client."""

    def __init__(self):
        import hotkv  # noqa: F401  (registers every command)
        from hotkv.clients.client import Client
        from hotkv.server import Server
        self.server = Server({"save": "", "appendonly": "no", "proto-max-bulk-len": "1mb",
                              "client-query-buffer-limit": "1mb"})
        self.client = Client(self.server, addr="127.0.0.1:1", laddr="127.0.0.1:2")
        self.logged: list = []
        self.server.log_exception = lambda cmd, argv, exc: self.logged.append(
            (cmd.name, argv, repr(exc)))
        from hotkv.core.registry import all_commands
        self.commands = sorted({c.name for c in all_commands()
                                if c.func is not None and c.name not in EXCLUDED
                                and c.name.split("|")[0] not in EXCLUDED
                                and not (c.subcommands and c.parent is None)})

    def run(self, argv, resp3: bool = False) -> bytes:
        from hotkv.core import blocking
        from hotkv.core.dispatch import process_command
        c = self.client
        c.resp3 = resp3
        name = argv[0].lower().decode("latin-1")
        if name in RANDOM_COUNT:
            argv = [a if not a.lstrip(b"-").isdigit() or len(a) < 6 else b"-3" for a in argv]
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(HANG_SECONDS)
        try:
            process_command(c, argv)
            if c.blocked is not None:
                blocking.unblock(c)
        except _Hang:
            raise Malformed(f"{argv!r} did not finish within {HANG_SECONDS}s") from None
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        if c.multi:
            from hotkv.core.multi import discard_transaction
            discard_transaction(c)
        out = b"".join(c.out)
        c.out.clear()
        c.closing = False
        c.reply_mode = 0
        if self.logged:
            raise Malformed(f"unhandled exception in a handler: {self.logged!r}")
        replies = check_resp(out)
        if len(replies) != 1 and not (replies and name in MULTI_REPLY):
            raise Malformed(f"{argv!r} gave {len(replies)} replies: {out[:300]!r}")
        if b"internal error" in out[:200]:
            raise Malformed(f"{argv!r}: {out[:300]!r}")
        return out

    def reset(self):
        for db in self.server.dbs:
            db.clear()


# Arguments the generators draw from: what commands parse (numbers, options,
# ids, ranges) next to hostile bytes.
INTERESTING = [
    b"", b"0", b"1", b"-1", b"2", b"10", b"-10", b"100", b"1.5", b"-0", b"+1", b"01", b" 1",
    b"inf", b"-inf", b"+inf", b"nan", b"1e308", b"1e-308", b"9223372036854775807",
    b"-9223372036854775808", b"9223372036854775808", b"18446744073709551615", b"4294967296",
    b"2147483647", b"-2147483648", b"(1", b"[a", b"-", b"+", b"*", b"$", b">", b"0-0",
    b"0-1", b"1-0", b"*", b"$", b"18446744073709551615-18446744073709551615",
    b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR", b"EX", b"PX", b"EXAT", b"PXAT", b"KEEPTTL",
    b"GET", b"WITHSCORES", b"LIMIT", b"COUNT", b"MATCH", b"TYPE", b"BLOCK", b"STREAMS",
    b"GROUP", b"MAXLEN", b"MINID", b"~", b"=", b"LEFT", b"RIGHT", b"BEFORE", b"AFTER",
    b"BYSCORE", b"BYLEX", b"REV", b"ASC", b"DESC", b"ALPHA", b"STORE", b"IDLE", b"TIME",
    b"RETRYCOUNT", b"FORCE", b"JUSTID", b"MKSTREAM", b"ENTRIESREAD", b"NOACK", b"WITHVALUES",
    b"RANK", b"MAXLEN", b"AND", b"OR", b"XOR", b"NOT", b"k", b"key", b"list", b"x" * 300,
    b"\x00", b"\xff\xfe", b"\r\n", b"a b", b"\xc3\x28", b"k\x00k",
]
