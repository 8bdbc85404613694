"""RESP: the request parser and the reply encoder.

Owns the wire format and nothing else: no sockets, no commands, no state of
the keyspace.  Two halves:

* ``RequestParser`` turns the bytes a client sends into commands (lists of
  ``bytes``).  Well-formed multibulk traffic is parsed by ``hiredis.Reader``
  (C speed).  Whatever hiredis cannot settle on its own -- inline commands,
  a command split across reads, a malformed or oversized header -- goes
  through a Python state machine that follows Redis's processMultibulkBuffer
  and processInlineBuffer rule for rule, so limits and error texts match.
  Invariant: a command is returned only once all of its bytes arrived, and
  no buffer is ever sized from a length the client merely *declared*.

* ``encode`` appends the RESP2 or RESP3 encoding of a reply value to a list of
  byte chunks (the connection joins them once per read batch).  Reply values
  are plain Python objects: ``bytes`` is a bulk string, ``int`` an integer,
  ``None`` a null, ``list``/``tuple`` an array, ``dict`` a map, ``set`` a
  set, and the small marker classes below cover the rest.

Fast paths: ``_one_command`` (a read of up to 1 KB that is one command:
split at CRLF, each length line compared with its argument; ``_one_long``
from 1 to 16 KB, jumping over each argument by its length) vs ``_slow``
alone, whole and split, on single commands with every framing Redis
refuses or reads otherwise: tests/test_fastpaths.py::
test_parser_one_command_equals_slow.  ``RequestParser._fast`` (hiredis, after ``_screen``; the
arguments' type and the CRLF after each bulk string -- which hiredis skips
unread -- checked by counting CRLFs in the read and in one join of the
arguments, ``_bulk_strings_framed``; one by one when a read is not consumed
whole) vs ``_slow`` alone,
whole and split at every byte: tests/test_fastpaths.py::
test_parser_fast_equals_slow.  Big values (issue 32): ``_walk`` (a read
over 32 KB: headers walked in Python, each argument sliced out of the read
once, where hiredis copied the read and then each argument) and
``_collect`` (a bulk of 32 KB or more that a read leaves incomplete: the
next reads kept as they come and joined once, where the state machine
appended each to its buffer and copied the argument out twice) vs the
state machine fed the whole stream and vs hiredis, whole, split at every
byte and in random reads: tests/test_bigvalues.py.  ``encode``'s header caches and
``_encode_entries``'s one-field entries vs plain formatting:
tests/test_fastpaths.py::test_encode_caches_equal_plain_formatting.
"""

from __future__ import annotations

import re

import hiredis

from .fpconv import d2string

__all__ = [
    "ProtocolError", "RequestParser", "encode", "Simple", "Verbatim", "Push",
    "Double", "SetReply", "NULL_ARRAY", "NULL_BULK", "OK", "QUEUED", "PONG", "ErrorReply",
    "split_inline_args", "format_double",
]

INLINE_MAX_SIZE = 64 * 1024
INT_MAX = 2**31 - 1


class ProtocolError(Exception):
    """The client broke the protocol; reply with the message and close."""


# --------------------------------------------------------------------------
# Reply markers
# --------------------------------------------------------------------------

class Simple(bytes):
    """A status reply (``+OK``)."""
    __slots__ = ()


class Verbatim(bytes):
    """Text that RESP3 sends as a verbatim string (``=``) and RESP2 as bulk."""
    __slots__ = ()


class Double(float):
    """A float that RESP3 sends as a double (``,``) and RESP2 as bulk."""
    __slots__ = ()


class DoubleText(bytes):
    """A double already written as text (GEOPOS's long-double coordinates):
    RESP3 sends it as a double (``,``), RESP2 as bulk."""
    __slots__ = ()


class Push(list):
    """An out-of-band message: RESP3 push (``>``), RESP2 plain array."""
    __slots__ = ()


class SetReply(list):
    """A set whose order matters to the reply (COMMAND INFO flags): RESP3 ``~``,
    RESP2 array, elements in list order."""
    __slots__ = ()


class Entries(list):
    """Stream entries, ``[[id, (field, value, ...)], ...]``, an entry's
    fields NULL_ARRAY when it was deleted while pending.  The same
    bytes as a plain list in RESP2 and RESP3; the encoder writes a one-field
    entry without a call, which is most of what a worker's XREADGROUP
    costs to encode.  IDs, fields and values are bytes (a stream holds
    nothing else)."""
    __slots__ = ()


class ErrorReply:
    """An error inside an aggregate reply (an EXEC result, say)."""
    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message


class _NullArray:
    """RESP2 ``*-1`` (a timed-out BLPOP, an aborted EXEC); RESP3 ``_``."""
    __slots__ = ()


NULL_ARRAY = _NullArray()
NULL_BULK = None
OK = Simple(b"OK")
QUEUED = Simple(b"QUEUED")
PONG = Simple(b"PONG")

_OK_BYTES = b"+OK\r\n"
_CRLF = b"\r\n"
_INT_CACHE = [b":%d\r\n" % i for i in range(0, 1024)]
_BULK_HDR_CACHE = [b"$%d\r\n" % i for i in range(0, 1024)]
_ARR_HDR_CACHE = [b"*%d\r\n" % i for i in range(0, 256)]


def format_double(value: float) -> bytes:
    """A double as Valkey's d2string writes it (hotkv.protocol.fpconv: integral
    values within +-2**62 in full, else fpconv_dtoa's Grisu2 digits)."""
    return d2string(value)




def encode(value, out: list, resp3: bool) -> None:
    """Append the encoding of ``value`` to ``out``."""
    t = type(value)
    if t is bytes:
        n = len(value)
        out.append(_BULK_HDR_CACHE[n] if n < 1024 else b"$%d\r\n" % n)
        out.append(value)
        out.append(_CRLF)
    elif t is Simple:
        if value is OK:
            out.append(_OK_BYTES)
        else:
            out.append(b"+" + value + _CRLF)
    elif t is int:
        out.append(_INT_CACHE[value] if 0 <= value < 1024 else b":%d\r\n" % value)
    elif value is None:
        out.append(b"_\r\n" if resp3 else b"$-1\r\n")
    elif t is list or t is tuple:
        n = len(value)
        out.append(_ARR_HDR_CACHE[n] if n < 256 else b"*%d\r\n" % n)
        for item in value:
            if type(item) is bytes:   # the common element, without a call per item
                n = len(item)
                out.append(_BULK_HDR_CACHE[n] if n < 1024 else b"$%d\r\n" % n)
                out.append(item)
                out.append(_CRLF)
            else:
                encode(item, out, resp3)
    elif t is Entries:
        _encode_entries(value, out, resp3)
    elif t is ErrorReply:
        out.append(b"-" + value.message.encode("utf-8", "surrogateescape") + _CRLF)
    elif t is dict:
        out.append((b"%%%d\r\n" if resp3 else b"*%d\r\n") % (len(value) * (1 if resp3 else 2)))
        for k, v in value.items():
            encode(k, out, resp3)
            encode(v, out, resp3)
    elif t is set or t is frozenset:
        out.append((b"~%d\r\n" if resp3 else b"*%d\r\n") % len(value))
        for item in value:
            encode(item, out, resp3)
    elif t is SetReply:
        out.append((b"~%d\r\n" if resp3 else b"*%d\r\n") % len(value))
        for item in value:
            encode(item, out, resp3)
    elif t is Push:
        out.append((b">%d\r\n" if resp3 else b"*%d\r\n") % len(value))
        for item in value:
            encode(item, out, resp3)
    elif t is Double or t is float:
        text = format_double(value)
        if resp3:
            out.append(b"," + text + _CRLF)
        else:
            out.append(b"$%d\r\n%b\r\n" % (len(text), text))
    elif t is Verbatim or t is DoubleText:
        if resp3:
            out.append(b"=%d\r\ntxt:%b\r\n" % (len(value) + 4, value) if t is Verbatim
                       else b"," + value + _CRLF)
        else:
            out.append(b"$%d\r\n%b\r\n" % (len(value), value))
    elif t is bool:
        if resp3:
            out.append(b"#t\r\n" if value else b"#f\r\n")
        else:
            out.append(b":1\r\n" if value else b":0\r\n")
    elif value is NULL_ARRAY:
        out.append(b"_\r\n" if resp3 else b"*-1\r\n")
    elif isinstance(value, bytes):  # bytes subclasses we did not name
        out.append(b"$%d\r\n" % len(value))
        out.append(bytes(value))
        out.append(_CRLF)
    elif isinstance(value, int):
        out.append(b":%d\r\n" % value)
    elif isinstance(value, str):
        data = value.encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    else:
        raise TypeError(f"cannot encode reply of type {t.__name__}")


def _encode_entries(entries: Entries, out: list, resp3: bool) -> None:
    n = len(entries)
    out.append(_ARR_HDR_CACHE[n] if n < 256 else b"*%d\r\n" % n)
    bulk = _BULK_HDR_CACHE
    for eid, items in entries:
        if type(items) is tuple and len(items) == 2:
            f, v = items
            nf = len(f)
            nv = len(v)
            if nf < 1024 and nv < 1024:
                out += (_ENTRY_HDR, bulk[len(eid)], eid, _CRLF_PAIR_HDR, bulk[nf], f, _CRLF,
                        bulk[nv], v, _CRLF)
                continue
        out += (_ENTRY_HDR, bulk[len(eid)], eid, _CRLF)     # an ID has at most 41 bytes
        encode(items, out, resp3)


_ENTRY_HDR = b"*2\r\n"
_CRLF_PAIR_HDR = b"\r\n*2\r\n"


def encode_error(message: str) -> bytes:
    """An error line; Redis turns newlines into spaces so the frame stays valid."""
    if "\r" in message or "\n" in message:
        message = message.replace("\r", " ").replace("\n", " ")
    return b"-" + message.encode("utf-8", "surrogateescape") + _CRLF


# --------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------

def _string2ll(data) -> int | None:
    """Redis's string2ll: strict decimal, no sign but '-', no leading zeros."""
    n = len(data)
    if n == 0 or n > 20:
        return None
    if n == 1:
        c = data[0]
        return c - 48 if 48 <= c <= 57 else None
    start = 1 if data[0] == 45 else 0
    if start == n or not (49 <= data[start] <= 57):
        return None
    for i in range(start + 1, n):
        if not 48 <= data[i] <= 57:
            return None
    v = int(data)
    if v > 9223372036854775807 or v < -9223372036854775808:
        return None
    return v


_HEX = b"0123456789abcdefABCDEF"


def split_inline_args(line: bytes) -> list[bytes] | None:
    """Split an inline command line as Redis's sdssplitargs; None = unbalanced."""
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in b" \n\r\t\v\f":
            i += 1
        if i >= n:
            return args
        cur = bytearray()
        inq = insq = False
        while True:
            if inq:
                if i >= n:
                    return None
                c = line[i]
                if (c == 92 and i + 3 < n and line[i + 1] == 120
                        and line[i + 2] in _HEX and line[i + 3] in _HEX):
                    cur.append(int(line[i + 2:i + 4], 16))
                    i += 3
                elif c == 92 and i + 1 < n:
                    i += 1
                    c = line[i]
                    cur.append({110: 10, 114: 13, 116: 9, 98: 8, 97: 7}.get(c, c))
                elif c == 34:
                    if i + 1 < n and line[i + 1] not in b" \n\r\t\v\f":
                        return None
                    inq = False
                    i += 1
                    break
                else:
                    cur.append(c)
            elif insq:
                if i >= n:
                    return None
                c = line[i]
                if c == 92 and i + 1 < n and line[i + 1] == 39:
                    i += 1
                    cur.append(39)
                elif c == 39:
                    if i + 1 < n and line[i + 1] not in b" \n\r\t\v\f":
                        return None
                    insq = False
                    i += 1
                    break
                else:
                    cur.append(c)
            else:
                if i >= n:
                    break
                c = line[i]
                if c in b" \n\r\t\v\f":
                    break
                if c == 34:
                    inq = True
                elif c == 39:
                    insq = True
                else:
                    cur.append(c)
            i += 1
        args.append(bytes(cur))


_HANDOFF = "handoff"
# What hiredis must not be given, or whose result must be checked:
# * hiredis builds a Python list as soon as it reads an array header, and a
#   half-read array is freed element by element: "*2000000000\r\n" alone
#   would cost seconds of CPU.  A read with a large count (or bytes that
#   merely look like one) takes the slow path, which allocates nothing from
#   a declared count.
# * hiredis also reads RESP3 and simple strings: "*1\r\n+0\r\n" would come
#   back as [b"0"] (Redis: "expected '$', got '+'").  A read with a line
#   starting with + = ( | % > or ~ still goes to hiredis, but its result is
#   kept only if every command and argument header sits where a canonical
#   encoding puts it (``_canonical``); otherwise the slow path judges it.
#   A "~", ">" or "%" line with nothing after it (MAXLEN ~ in every queue's
#   XADD, the ">" of every XREADGROUP) does not count: hiredis reads no
#   aggregate from it (it has no length), so it can only be a bulk string's
#   content.
# Every header starts a line, so one search finds both kinds: a regex with
# a literal prefix costs ~20 ns a line, and any other pass over the bytes in
# Python (memmem, count, translate) costs as much each.
_SUSPECT = re.compile(rb"\r\n[+=(|%>~*](?<![~>%](?=\r\n))(?<!\*(?![0-9]{6}))").search
_BIG_HEAD = re.compile(rb"\*[0-9]{6}").match
_BIG_COUNT = re.compile(rb"\*[0-9]{6}").search
SCREEN_OK, SCREEN_CHECK, SCREEN_SLOW = 0, 1, 2
_lf_join = b"\n".join
_join = b"".join
# A bulk string at least this long that a read leaves incomplete is
# collected over the next reads (RequestParser._collect), Valkey's
# PROTO_MBULK_BIG_ARG.
_BIG_BULK = 32 * 1024
_NO_BUDGET = 1 << 62


# Past this many bytes a read is screened by its '*' bytes alone (the
# regexes below cost about 0.35 ns a byte: 70 us of a 100 KB SET; below
# it, what the long-read screen asks of hiredis's commands costs more).
_SCAN_LIMIT = 32768

# A read of at most this many bytes that is one command (what an unpipelined
# client sends) is checked by ``_one_command``: one split and one comparison
# of every length line with the argument it heads (0.6 us for an LPUSH,
# where the screen, hiredis and the CRLF count took 1.9 us).  Reads of 1-16
# KB by ``_one_long``: a SET of a 1 KB value by an unpipelined client went to
# hiredis at 62,600 req/s where a 900-byte one ran at 73,700 (redis-benchmark
# -c 10, quiet).
_ONE_LIMIT = 16384
_STAR_COUNT = {b"*%d" % n: n for n in range(1, 256)}
_DOLLAR_LINE = tuple(b"$%d" % n for n in range(1025))


def _one_command(data: bytes):
    """The arguments of ``data`` if it is exactly one multibulk of bulk
    strings in Redis's own framing (``*<n>``, then ``$<len>`` and the
    argument per element, every line ended by CRLF, no leading zeros and
    n >= 1), else None.  Callers pass at most 1 KB (``_one_long`` reads
    longer ones).

    Split at every CRLF, such a read is ``*n``, then n pairs of a length
    line and an argument, then the empty piece after the last CRLF, and
    nothing else.  Conversely, when the pieces have that shape and each
    argument is exactly as long as its line says, a sequential parse reads
    the same thing: it takes the header line, the length line, then that
    many bytes -- the piece, since the piece is that long and a CRLF
    follows it -- and so on.  An argument holding CRLF leaves a piece
    shorter than its line says: None, and the general path reads it."""
    parts = data.split(b"\r\n")
    args = parts[2::2]
    if _STAR_COUNT.get(parts[0]) != len(args):
        return None
    lines = [_DOLLAR_LINE[len(a)] for a in args]
    lines.append(b"")
    return args if parts[1::2] == lines else None


_DOLLAR_LEN = {line: n for n, line in enumerate(_DOLLAR_LINE)}


def _one_long(data: bytes):
    """``_one_command`` for a read of 1-16 KB: the same answer, found by
    jumping over each argument by its length line (splitting, or looking for
    the next header, would scan the value byte by byte: 3.8 us for a 4 KB
    SET).  Each length line must be one of Redis's own (``$`` and the
    decimal, no leading zero or sign), each argument followed by CRLF, and
    the last one end the read."""
    find = data.find
    nl = find(b"\r\n")
    n = _STAR_COUNT.get(data[:nl]) if nl > 0 else None
    if n is None:
        return None
    pos = nl + 2
    args = []
    for _ in range(n):
        nl = find(b"\r\n", pos)
        if nl < 0:
            return None
        line = data[pos:nl]
        ln = _DOLLAR_LEN.get(line)
        if ln is None:
            digits = line[1:]
            if line[:1] != b"$" or not digits.isdigit() or digits[:1] == b"0" \
                    or len(digits) > 5:
                return None
            ln = int(digits)
        pos = nl + 2 + ln
        if data[pos:pos + 2] != b"\r\n":
            return None
        args.append(data[nl + 2:pos])
        pos += 2
    return args if pos == len(data) else None


def _screen(data: bytes) -> int:
    """How a read that starts with a multibulk header may be parsed."""
    if _BIG_HEAD(data) is not None:
        return SCREEN_SLOW
    if len(data) > _SCAN_LIMIT:
        # A long read (big values): a large count is looked for at each '*'
        # only (memchr), and the commands hiredis reads are checked header by
        # header (_canonical: an odd line is caught by its first byte).  A
        # read with more than 64 '*' bytes goes to the regexes below.
        find = data.find
        i = find(b"*", 1)
        seen = 0
        while i >= 0 and seen < 64:
            if _BIG_HEAD(data, i) is not None:
                return SCREEN_SLOW
            seen += 1
            i = find(b"*", i + 1)
        if i < 0:
            return SCREEN_CHECK
    m = _SUSPECT(data)
    if m is None:
        return SCREEN_OK
    # The first odd line may hide a large count further on.
    if data[m.end() - 1] == 42 or _BIG_COUNT(data) is not None:
        return SCREEN_SLOW
    return SCREEN_CHECK


class RequestParser:
    """Incremental request parser for one connection.

    ``feed(data)`` returns ``(commands, error)``: every command completed by
    the bytes seen so far, and a protocol error message (or None).  After an
    error the connection must be closed; the commands before it still run,
    as in Redis.
    """

    __slots__ = ("_reader", "_buf", "_args", "_want", "_bulklen", "max_bulk_len",
                 "auth_required", "_argbytes", "held", "whole", "more", "_parts", "_have")

    def __init__(self, max_bulk_len: int = 512 * 1024 * 1024):
        self._reader = hiredis.Reader()
        self._buf = bytearray()    # slow path: bytes not yet parsed
        self._args = None          # slow path: arguments of a half-read multibulk
        self._want = 0
        self._bulklen = -1
        self._argbytes = 0         # memory held by _args (counts in ``pending``)
        # A big bulk string arriving over several reads (``_collect``): the
        # reads so far, kept as they came, and their length.  Invariant:
        # while _parts is not None, _buf is empty, _args is not None and
        # _bulklen is the bulk's length (at least _BIG_BULK).
        self._parts = None
        self._have = 0
        # ``pending`` as of the end of the last feed, kept as a plain
        # attribute: the network layer reads it twice per read.
        self.held = 0
        # The last read, when the fast path turned all of it into the
        # commands feed returned (and nothing was held before it), else
        # None: the primary side may pass it on verbatim (hotkv.replication.primary).
        self.whole = None
        # feed stopped at its budget with bytes left unparsed: feed(b"", ...)
        # again (soon) to go on.
        self.more = False
        self.max_bulk_len = max_bulk_len
        # An unauthenticated client may only send small commands (Redis's
        # defence against memory exhaustion before AUTH).
        self.auth_required = False

    def drop(self):
        """Forget what is held (the connection closed): a half-read command's
        bytes go now, not when the collector reaches the client object."""
        self._reader = hiredis.Reader()
        self._buf = bytearray()
        self._args = self._parts = None
        self._want = self._argbytes = self.held = self._have = 0
        self._bulklen = -1
        self.whole = None
        self.more = False

    @property
    def pending(self) -> int:
        """Bytes held for a command not yet complete (query buffer size),
        including the arguments already split off it: a client sending an
        endless multibulk of tiny arguments is bounded too."""
        return len(self._buf) + self._argbytes + self._have

    def feed(self, data: bytes, budget: int = 0):
        """``budget``: when not 0, the slow path (a long multibulk, inline
        commands) stops after about that many arguments and sets ``more``
        while bytes are left to parse: a request of 200,000 arguments is
        parsed over many calls (the network layer makes one per loop turn,
        as Valkey parses a read's worth per turn).  hiredis's reads are not
        bounded: they are one read's worth, parsed in C."""
        commands: list = []
        buf = self._buf
        self.whole = None
        self.more = False
        if self._parts is not None:
            data = self._collect(data, commands)
            if type(data) is not bytes:   # still collecting, or an error
                self.held = self._have + self._argbytes
                return commands, data
            if not data:
                self.held = self._argbytes
                return commands, None
        if len(data) <= _ONE_LIMIT and not buf and self._args is None and \
                data[:1] == b"*" and not self.auth_required and type(data) is bytes:
            if len(data) > 1024:
                args = _one_long(data)
            elif b"\r\n*" not in data:
                # Probably one command (a pipeline's next header is "\r\n*").
                args = _one_command(data)
            else:
                args = None
            if args is not None:
                commands.append(args)
                self.whole = data
                return commands, None
        if len(data) > _SCAN_LIMIT and not buf and self._args is None and \
                data[:1] == b"*" and not self.auth_required and type(data) is bytes:
            pos = self._walk(data, commands)
            if pos == len(data):    # all parsed, or a big bulk's start collected
                if self._parts is None:
                    self.whole = data
                self.held = self._have + self._argbytes
                return commands, None
            if pos:
                data = data[pos:]
        if buf or self._args is not None or data[:1] != b"*" or self.auth_required:
            buf += data
        else:
            screen = _screen(data)
            if screen == SCREEN_SLOW:
                buf += data
            else:
                rest = self._fast(data, commands, screen)
                if rest is None:
                    self.whole = data
                    return commands, None
                buf += rest
        try:
            while True:
                error = self._slow(commands, True, budget or _NO_BUDGET)
                if error is not _HANDOFF:
                    return commands, error
                # The slow path finished the command it was holding and what is
                # left starts a new multibulk: give it back to hiredis.
                data = bytes(buf)
                screen = _screen(data)
                if screen == SCREEN_SLOW:
                    return commands, self._slow(commands, False, budget or _NO_BUDGET)
                rest = self._fast(data, commands, screen)
                buf.clear()
                if rest is None:
                    return commands, None
                buf += rest
        finally:
            self.held = len(buf) + self._argbytes + self._have

    def _fast(self, data: bytes, commands: list, check: int = SCREEN_OK):
        """Parse with hiredis; return None if all of data was consumed cleanly,
        else the bytes (from the first command hiredis did not complete) that
        the slow path must judge."""
        reader = self._reader
        reader.feed(data)
        done = len(commands)
        whole = False
        args: list = []     # every argument read, for _bulk_strings_framed
        try:
            while True:
                cmd = reader.gets()
                if cmd is False:
                    break
                if type(cmd) is not list or not cmd:
                    raise hiredis.ProtocolError("not a command")
                commands.append(cmd)
                args += cmd
            if not reader.has_data():
                # hiredis may sit inside an array exactly at an element
                # boundary, where has_data() is False too.  A null array is
                # a whole reply only at the top level, so it tells the two
                # apart for the price of one more gets().
                reader.feed(b"*-1\r\n")
                whole = reader.gets() is None
        except hiredis.ProtocolError:
            pass
        end = 0
        if len(commands) > done:
            if check and not self._canonical(data, commands, done):
                del commands[done:]
                whole = False
            elif not whole or not self._bulk_strings_framed(data, len(commands) - done, args):
                # Part of the read is left, something is wrong, or an argument
                # ends in CR: walk the commands, up to the first one that is
                # not all bulk strings each ended by CRLF (the slow path
                # judges it and what follows).
                good, end = self._framed_prefix(data, commands, done)
                if done + good < len(commands):
                    del commands[done + good:]
                    whole = False
        if whole:
            return None
        # The read ended inside a command, or hiredis met something it cannot
        # settle the way Redis does: skip what it completed and let the slow
        # path judge the rest (it checks declared lengths at once).
        self._reader = hiredis.Reader()
        return data[end:]

    @staticmethod
    def _bulk_strings_framed(data: bytes, ncommands: int, args: list) -> bool:
        """Whether data (all of it) held ncommands commands whose arguments,
        ``args``, are all bytes objects, each bulk string followed by CRLF
        (hiredis skips those two bytes unread; Valkey refuses anything else:
        "invalid CRLF in request").  False also when an argument ends in CR:
        the caller then checks them one by one (``_framed_prefix``).

        Counted, not walked: data holds one CRLF per header line, one per
        bulk terminator and those inside the arguments.  Joining the
        arguments with LF between and after them (a TypeError: one is not
        bytes) counts those inside, plus one per argument ending in CR.  A
        terminator that is not CRLF holds none, and adds at most one when its
        argument ends in CR and it starts with LF; so the counts are equal
        only if every terminator is CRLF and no argument ends in CR.  (Every
        other line hiredis accepts holds at most one CRLF per element, as a
        header does: it cannot make up for a missing one.)  Consumes args."""
        nargs = len(args)
        if len(data) > 4096 + 1024 * nargs:
            # Big values (over 1 KB an argument on average): counting CRLFs
            # would scan every byte of them (about 1 ns a byte); the caller
            # walks the headers instead (a Python step an argument).
            return False
        args.append(b"")
        try:
            joined = _lf_join(args)
        except TypeError:
            return False
        inside = joined.count(b"\r\n") if b"\r" in joined else 0
        return data.count(b"\r\n") == ncommands + 2 * nargs + inside

    @staticmethod
    def _framed_prefix(data: bytes, commands: list, start: int) -> tuple[int, int]:
        """How many of commands[start:], read by hiredis from data, were sent
        as ``*<n>`` headers of ``$<len>`` bulk strings each followed by CRLF,
        and the offset just past them."""
        pos = done = 0
        find = data.find
        for i in range(start, len(commands)):
            if data[pos:pos + 1] != b"*":
                break
            at = find(b"\r\n", pos) + 2
            for arg in commands[i]:
                if type(arg) is not bytes or data[at:at + 1] != b"$":
                    return i - start, pos
                at = find(b"\r\n", at) + 2 + len(arg)
                if data[at:at + 2] != b"\r\n":
                    return i - start, pos
                at += 2
            pos = at
            done += 1
        return done, pos

    @staticmethod
    def _canonical(data: bytes, commands: list, start: int) -> bool:
        """Whether the commands hiredis read from data (from index start on)
        were all sent as ``*<n>`` headers of ``$<len>`` bulk strings.  Only
        header positions are checked (their counts and lengths hiredis read
        already): a RESP3 or simple-string element, an attribute or a
        top-level non-array is caught by its first byte."""
        pos = 0
        find = data.find
        try:
            for i in range(start, len(commands)):
                if data[pos] != 42:    # '*'
                    return False
                pos = find(b"\r\n", pos) + 2
                for arg in commands[i]:
                    if data[pos] != 36 or arg is None:    # '$', and not $-1 (a null)
                        return False
                    pos = find(b"\r\n", pos) + 4 + len(arg)
        except IndexError:
            return False
        return True

    def _walk(self, data: bytes, commands: list) -> int:
        """Big values in a long read (fast path): the headers walked in
        Python, each argument sliced out of the read once (hiredis would copy
        the read into its buffer first, then each argument out of it).
        Returns the offset of the first command not parsed -- one not sent
        canonically (``*<n>`` of ``$<len>`` bulk strings, each ended by CRLF,
        Redis's limits met), or a read of small arguments, which hiredis
        reads faster: the caller's other paths judge it.  A command whose
        big bulk string the read leaves incomplete is started, its bulk
        collected (``_collect``), and the whole read counts as parsed."""
        n = len(data)
        find = data.find
        first = len(commands)
        pos = walked = 0
        maxlen = self.max_bulk_len
        while pos < n:
            if data[pos] != 42:    # '*'
                return pos
            nl = find(b"\r\n", pos + 1, pos + 24)
            count = _string2ll(data[pos + 1:nl]) if nl > 0 else None
            if count is None or count < 1 or count > INT_MAX:
                return pos
            at = nl + 2
            args = []
            while count:
                walked += 1
                if walked > 4 + (at >> 10):
                    # small arguments (on average under 1 KB): hiredis's, from
                    # the start of the read if little was walked (no copy)
                    if pos < 4096:
                        del commands[first:]
                        return 0
                    return pos
                if at >= n or data[at] != 36:    # '$'
                    return pos
                nl = find(b"\r\n", at + 1, at + 24)
                ln = _string2ll(data[at + 1:nl]) if nl > 0 else None
                if ln is None or ln < 0 or ln > maxlen:
                    return pos
                at = nl + 2
                end = at + ln
                if end + 2 > n:
                    if ln < _BIG_BULK:
                        return pos
                    self._args = args
                    self._want = count
                    self._bulklen = ln
                    self._argbytes = sum(map(len, args)) + 48 * len(args)
                    self._parts = [memoryview(data)[at:]] if at < n else []
                    self._have = n - at
                    return n
                if data[end] != 13 or data[end + 1] != 10:
                    return pos
                args.append(data[at:end])
                at = end + 2
                count -= 1
            commands.append(args)
            pos = at
        return pos

    def _collect(self, data, commands: list):
        """The next read of a big bulk string (``_parts``).  Until its last
        byte and CRLF arrived, a read is kept as it is (no copy, no scan);
        the read that completes it is joined with them once into the
        argument.  Returns the bytes of the read after the bulk's CRLF
        (the caller parses them as a read of their own), None while the
        bulk is incomplete, or the protocol error (a str)."""
        if type(data) is not bytes:
            data = bytes(data)    # kept past this call: must not change under us
        parts = self._parts
        ln = self._bulklen
        have = self._have
        n = len(data)
        if have + n < ln + 2:
            if n:
                parts.append(data)
                self._have = have + n
            return None
        need = ln + 2 - have      # the bytes of data that end the bulk, its CRLF included
        cut = need - 2            # of which the value's (-1: the CR came before)
        if cut >= 0:
            term = data[cut:need]
            if cut:
                parts.append(memoryview(data)[:cut])
            arg = _join(parts)
        else:
            arg = _join(parts)
            term = arg[ln:] + data[:1]
            arg = arg[:ln]
        self._parts = None
        self._have = 0
        if term != _CRLF:
            return "Protocol error: invalid CRLF in request"
        args = self._args
        args.append(arg)
        self._argbytes += ln + 48
        self._bulklen = -1
        self._want -= 1
        if not self._want:
            commands.append(args)
            self._args = None
            self._argbytes = 0
        return data[need:] if need < n else b""

    def _slow(self, commands: list, handoff: bool = True, budget: int = 0):
        """Redis's own parsing rules, one command at a time.  With handoff,
        returns _HANDOFF at the first command boundary followed by a
        multibulk, so hiredis can take over.  With a budget, stops (setting
        ``more``) once about that many arguments were read and bytes are
        left."""
        buf = self._buf
        may_handoff = handoff
        handoff = False
        left = budget or _NO_BUDGET
        while True:
            if self._args is None:
                if not buf:
                    return None
                if left <= 0:
                    self.more = True
                    return None
                if handoff and buf[0] == 42 and not self.auth_required:
                    return _HANDOFF
                if buf[0] != 42:  # not '*': inline command
                    nl = buf.find(b"\n")
                    if nl < 0:
                        if len(buf) > INLINE_MAX_SIZE:
                            return "Protocol error: too big inline request"
                        return None
                    end = nl - 1 if nl > 0 and buf[nl - 1] == 13 else nl
                    args = split_inline_args(bytes(buf[:end]))
                    if args is None:
                        return "Protocol error: unbalanced quotes in request"
                    del buf[:nl + 1]
                    left -= len(args) + 1
                    if args:
                        commands.append(args)
                    continue
                nl = buf.find(b"\r")
                if nl < 0:
                    if len(buf) > INLINE_MAX_SIZE:
                        return "Protocol error: too big mbulk count string"
                    return None
                if nl + 1 >= len(buf):
                    return None  # wait for the \n
                count = _string2ll(buf[1:nl])
                if count is None or count > INT_MAX:
                    return "Protocol error: invalid multibulk length"
                if count > 10 and self.auth_required:
                    return "Protocol error: unauthenticated multibulk length"
                del buf[:nl + 2]
                if count <= 0:
                    continue
                self._args = []
                self._want = count
                self._bulklen = -1
            # Reading the arguments of a multibulk.
            args = self._args
            while self._want:
                if left <= 0 and buf:
                    self.more = True
                    return None
                left -= 1
                if self._bulklen < 0:
                    nl = buf.find(b"\r")
                    if nl < 0:
                        if len(buf) > INLINE_MAX_SIZE:
                            return "Protocol error: too big bulk count string"
                        return None
                    if nl + 1 >= len(buf):
                        return None
                    if buf[0] != 36:  # '$'
                        return "Protocol error: expected '$', got '%s'" % chr(buf[0])
                    ln = _string2ll(buf[1:nl])
                    if ln is None or ln < 0 or ln > self.max_bulk_len:
                        return "Protocol error: invalid bulk length"
                    if ln > 16384 and self.auth_required:
                        return "Protocol error: unauthenticated bulk length"
                    del buf[:nl + 2]
                    self._bulklen = ln
                ln = self._bulklen
                if len(buf) < ln + 2:
                    if ln >= _BIG_BULK:
                        # The rest comes in later reads: they are kept as
                        # they come and joined once (``_collect``).
                        self._parts = [bytes(buf)]
                        self._have = len(buf)
                        buf.clear()
                    return None
                if buf[ln] != 13 or buf[ln + 1] != 10:
                    return "Protocol error: invalid CRLF in request"
                # (one copy: buf[:ln] would make a bytearray first)
                args.append(bytes(memoryview(buf)[:ln]) if ln > 1024 else bytes(buf[:ln]))
                del buf[:ln + 2]
                self._argbytes += ln + 48   # the bytes object and its list slot
                self._bulklen = -1
                self._want -= 1
            commands.append(args)
            self._args = None
            self._argbytes = 0
            handoff = may_handoff
