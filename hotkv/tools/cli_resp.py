"""``hotkv cli``'s wire and output layer: a blocking RESP2/RESP3 connection
and valkey-cli's four reply formats.

Owns: ``Conn`` (send a command, read one reply, tell whether a reply is
already buffered), ``Reply`` (a parsed reply, RESP3 types included), and
the formats valkey-cli prints a reply in -- the human form on a terminal
(``format_tty``: valkey-cli's cliFormatReplyTTY), the raw form for a pipe
(``format_raw``: cliFormatReplyRaw), ``--csv`` (``format_csv``) -- plus
``repr_bytes`` (sdscatrepr, the quoting valkey-cli uses everywhere).

Invariants: formatting works on bytes end to end (a reply may be any bytes,
not UTF-8); a verbatim string (``=``) carries its text without the
``txt:`` prefix, as hiredis hands it to valkey-cli; attributes (``|``) are
read and dropped.
"""

from __future__ import annotations

import os
import select
import sys

VERSION = "8.1.8"   # the valkey-cli whose behaviour this follows


def _atoi(s: str) -> int:
    """C's atoi/strtol: the leading integer, 0 when there is none."""
    s = s.strip()
    n = 0
    for i, ch in enumerate(s):
        if not (ch.isdigit() or (i == 0 and ch in "+-")):
            s = s[:i]
            break
    try:
        n = int(s)
    except ValueError:
        n = 0
    return n


def write(data: bytes):
    """To stdout, flushed (valkey-cli flushes after every reply)."""
    buf = getattr(sys.stdout, "buffer", None)
    if buf is not None:
        sys.stdout.flush()
        buf.write(data)
        buf.flush()
    else:   # pragma: no cover - a stdout without bytes underneath
        sys.stdout.write(data.decode("utf-8", "replace"))
        sys.stdout.flush()



class Reply:
    """One RESP reply: ``kind`` is status, error, int, bulk, nil, array, map,
    set, push, double, bool, verbatim, bignum; ``value`` bytes / int / list
    (a map's list is key, value, key, value ...)."""
    __slots__ = ("kind", "value")

    def __init__(self, kind, value=None):
        self.kind = kind
        self.value = value

    def __repr__(self):   # pragma: no cover - debugging aid
        return "Reply(%s, %r)" % (self.kind, self.value)


class ProtocolError(Exception):
    pass


class Conn:
    """A blocking RESP connection with its own reply reader."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.pos = 0

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    @staticmethod
    def encode(args) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode("utf-8", "surrogateescape")
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def send(self, args):
        self.sock.sendall(self.encode(args))

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("Server closed the connection")
        if self.pos:
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += data

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line, self.pos = self.buf[self.pos:i], i + 2
                return line
            self._fill()

    def _exact(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n + 2
        return data

    def read(self) -> Reply:
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return Reply("status", rest)
        if t == b"-":
            return Reply("error", rest)
        if t == b":":
            return Reply("int", int(rest))
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return Reply("nil")
            data = self._exact(n)
            return Reply("verbatim", data[4:]) if t == b"=" else Reply("bulk", data)
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return Reply("nil")
            kind = {b"*": "array", b"~": "set", b">": "push"}[t]
            return Reply(kind, [self.read() for _ in range(n)])
        if t == b"%":
            n = int(rest)
            return Reply("map", [self.read() for _ in range(2 * n)])
        if t == b"|":
            for _ in range(2 * int(rest)):
                self.read()
            return self.read()
        if t == b"_":
            return Reply("nil")
        if t == b",":
            return Reply("double", rest)
        if t == b"#":
            return Reply("bool", rest == b"t")
        if t == b"(":
            return Reply("bignum", rest)
        raise ProtocolError("Protocol error, got %r as reply type byte" % t)

    def buffered(self) -> bool:
        """True when unread bytes are already here (a reply, or its start)."""
        return self.pos < len(self.buf)

    def readable(self, timeout: float | None) -> bool:
        if self.buffered():
            return True
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    def call(self, *args) -> Reply:
        self.send(args)
        return self.read()


def context_error(e) -> str:
    """hiredis's errstr for a failed read or write."""
    if isinstance(e, OSError) and e.errno:
        return os.strerror(e.errno)
    return str(e)


def txt(b) -> str:
    if isinstance(b, str):
        return b
    return b.decode("utf-8", "surrogateescape")


def repr_bytes(b: bytes) -> bytes:
    """sdscatrepr: the quoted form valkey-cli prints a string in."""
    out = bytearray(b'"')
    for c in b:
        if c in (0x5C, 0x22):
            out += b"\\" + bytes((c,))
        elif c == 10:
            out += b"\\n"
        elif c == 13:
            out += b"\\r"
        elif c == 9:
            out += b"\\t"
        elif c == 7:
            out += b"\\a"
        elif c == 8:
            out += b"\\b"
        elif 32 <= c < 127:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    out += b'"'
    return bytes(out)


_AGGREGATES = ("array", "map", "set", "push")
_EMPTY = {"array": b"(empty array)\n", "map": b"(empty hash)\n", "set": b"(empty set)\n",
          "push": b"(empty push)\n"}


def _multiline(r: Reply) -> bool:
    """cliIsMultilineValueTTY: does the human form of r take several lines?"""
    if r.kind in ("array", "set", "push"):
        if not r.value:
            return False
        return len(r.value) > 1 or _multiline(r.value[0])
    if r.kind == "map":
        if not r.value:
            return False
        return len(r.value) > 2 or _multiline(r.value[1])
    return False


def format_tty(r: Reply, prefix: bytes = b"") -> bytes:
    """The human form (valkey-cli's cliFormatReplyTTY)."""
    k = r.kind
    if k == "error":
        return b"(error) %s\n" % r.value
    if k == "status":
        return r.value + b"\n"
    if k == "int":
        return b"(integer) %d\n" % r.value
    if k == "double":
        return b"(double) %s\n" % r.value
    if k == "bignum":
        return r.value + b"\n"   # hiredis hands a big number over as a string
    if k == "bool":
        return b"(true)\n" if r.value else b"(false)\n"
    if k == "nil":
        return b"(nil)\n"
    if k == "bulk":
        return repr_bytes(r.value) + b"\n"
    if k == "verbatim":
        return r.value + b"\n"
    items = r.value
    if not items:
        return _EMPTY[k]
    count = len(items) // 2 if k == "map" else len(items)
    idxlen = len(str(count))
    child = prefix + b" " * (idxlen + 2)
    sep = {"set": b"~", "map": b"#"}.get(k, b")")
    out = []
    i = 0
    while i < len(items):
        n = i // 2 + 1 if k == "map" else i + 1
        out.append(b"%s%*d%s " % (b"" if i == 0 else prefix, idxlen, n, sep))
        out.append(format_tty(items[i], child))
        if k == "map":
            i += 1
            out[-1] = out[-1][:-1] + b" => "
            if _multiline(items[i]):
                out.append(b"\n" + child)
            out.append(format_tty(items[i], child))
        i += 1
    return b"".join(out)


def format_raw(r: Reply, delim: bytes = b"\n", status=None) -> bytes:
    """The raw form (valkey-cli's cliFormatReplyRaw; the caller adds the
    command delimiter).  ``status``, when given, formats status replies (the
    Lua debugger's lines)."""
    k = r.kind
    if k == "nil":
        return b""
    if k == "error":
        return r.value + b"\n"
    if k == "status" and status is not None:
        return status(r.value)
    if k in ("status", "bulk", "verbatim", "double", "bignum"):
        return r.value
    if k == "int":
        return b"%d" % r.value
    if k == "bool":
        return b"(true)" if r.value else b"(false)"
    items = r.value
    if k == "map":
        return delim.join(format_raw(items[i], delim, status) + b" "
                          + format_raw(items[i + 1], delim, status)
                          for i in range(0, len(items), 2))
    return delim.join(format_raw(x, delim, status) for x in items)


def format_csv(r: Reply) -> bytes:
    """valkey-cli's cliFormatReplyCSV (the caller adds the newline)."""
    k = r.kind
    if k == "error":
        return b"ERROR," + repr_bytes(r.value)
    if k in ("status", "bulk", "verbatim"):
        return repr_bytes(r.value)
    if k == "int":
        return b"%d" % r.value
    if k in ("double", "bignum"):
        return r.value
    if k == "nil":
        return b"NULL"
    if k == "bool":
        return b"true" if r.value else b"false"
    return b",".join(format_csv(x) for x in r.value)


def _json_string(b: bytes, quoted: bool) -> bytes:
    """A string in --json (escapeJsonString: bytes above 0x1f pass as they
    are) or --quoted-json (sdscatrepr's form with every backslash doubled)."""
    if quoted:
        return repr_bytes(b).replace(b"\\", b"\\\\")
    out = bytearray(b'"')
    for c in b:
        if c in (0x5C, 0x22):
            out += b"\\" + bytes((c,))
        elif c in _JSON_ESCAPES:
            out += _JSON_ESCAPES[c]
        elif c <= 0x1F:
            out += b"\\u%04x" % c
        else:
            out.append(c)
    out += b'"'
    return bytes(out)


_JSON_ESCAPES = {10: b"\\n", 12: b"\\f", 13: b"\\r", 9: b"\\t", 8: b"\\b"}


def format_json(r: Reply, quoted: bool = False) -> bytes:
    """valkey-cli's --json / --quoted-json form (cliFormatReplyJson; the
    caller adds the newline).  A map's key that is not a string is made one;
    an error is ``error:"..."``, cut at its first NUL as valkey-cli's."""
    k = r.kind
    if k == "error":
        return b"error:" + _json_string(r.value.split(b"\0", 1)[0], quoted)
    if k in ("status", "bulk", "verbatim"):
        return _json_string(r.value, quoted)
    if k == "int":
        return b"%d" % r.value
    if k in ("double", "bignum"):
        return r.value
    if k == "nil":
        return b"null"
    if k == "bool":
        return b"true" if r.value else b"false"
    items = r.value
    if k != "map":
        return b"[" + b",".join(format_json(x, quoted) for x in items) + b"]"
    out = []
    for i in range(0, len(items), 2):
        key = format_json(items[i], quoted)
        if items[i].kind not in ("error", "status", "bulk", "verbatim") and key[:1] != b'"':
            key = b'"' + key + b'"'
        out.append(key + b":" + format_json(items[i + 1], quoted))
    return b"{" + b",".join(out) + b"}"


def is_pubsub_push(r: Reply, resp3: bool) -> bool:
    """valkey-cli's isPubsubPush: a [p|s]message or [p|s][un]subscribe."""
    if r.kind != ("push" if resp3 else "array") or len(r.value) < 3:
        return False
    head = r.value[0]
    if head.kind not in ("bulk", "status", "verbatim"):
        return False
    return head.value.endswith(b"message") or head.value.endswith(b"subscribe")
