"""``hotkv cli``: a redis-cli for people who installed hotkv with pip.

``hotkv cli [-h host] [-p port] [-a password] [--user name] [-n db] [-u URL]
[--tls --cacert F --cert F --key F --insecure] [-3|--resp3] [--raw|--no-raw]
[command args...]``: with a command it runs it once and prints the reply;
without, it is interactive (readline history in ~/.hotkv_cli_history, TAB
completes command names, ``help CMD`` prints the command's syntax and summary
from the server's COMMAND DOCS).  Against any server: it speaks RESP itself
(RESP2, or RESP3 after HELLO 3).

Output follows redis-cli 7's formats, byte for byte (tests/test_cli_tool.py
compares with the real redis-cli): on a TTY, or with --no-raw, the human form
(``(integer) 1``, ``"a"`` quoted as sdscatrepr quotes, ``1) ...`` with nested
indentation, ``(nil)``, ``(error) ERR ...``, ``(empty array)``, RESP3's
``1# "k" => "v"``, ``1~ ...``, ``(double) 1.5``, ``(true)``); otherwise (or
with --raw) the raw form: strings as they are, one array element a line, an
error's text on its own line.  Exit code: 0 (an error reply too, as
valkey-cli), 1 when the server cannot be reached.
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
from urllib.parse import unquote, urlparse

USAGE = """usage: hotkv cli [OPTIONS] [cmd [arg [arg ...]]]
  -h HOST       server host (default 127.0.0.1)
  -p PORT       server port (default 6379)
  -a PASSWORD   password (AUTH); --user NAME for an ACL user
  -n DB         database number
  -u URL        redis://[user:password@]host:port[/db] (rediss:// for TLS)
  -3, --resp3   speak RESP3 (HELLO 3)
  --tls         TLS; --cacert FILE, --cert FILE, --key FILE, --insecure
  --raw         raw output (the default when stdout is not a terminal)
  --no-raw      human output even when stdout is not a terminal
  --help        this text
"""


class Reply:
    """One RESP reply: ``kind`` is status, error, int, bulk, nil, array, map,
    set, push, double, bool, verbatim, bignum; ``value`` bytes / int / list."""
    __slots__ = ("kind", "value")

    def __init__(self, kind, value=None):
        self.kind = kind
        self.value = value


class ProtocolError(Exception):
    pass


class Conn:
    """A blocking RESP connection with its own reply reader."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def send(self, args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode("utf-8", "surrogateescape")
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("Server closed the connection")
        self.buf += data

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
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
        if t == b"|":   # attributes: read and dropped, as redis-cli shows the reply
            n = int(rest)
            for _ in range(2 * n):
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

    def call(self, *args) -> Reply:
        self.send(args)
        return self.read()


# -- output -----------------------------------------------------------------

def repr_bytes(b: bytes) -> str:
    """sdscatrepr: the quoted form redis-cli prints a string in."""
    out = ['"']
    for c in b:
        ch = chr(c)
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\a":
            out.append("\\a")
        elif ch == "\b":
            out.append("\\b")
        elif 32 <= c < 127:
            out.append(ch)
        else:
            out.append("\\x%02x" % c)
    out.append('"')
    return "".join(out)


def _txt(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


_AGGREGATES = ("array", "map", "set", "push")


def format_tty(r: Reply, prefix: str = "") -> str:
    """redis-cli's cliFormatReplyTTY."""
    k = r.kind
    if k == "error":
        return "(error) %s\n" % _txt(r.value)
    if k == "status":
        return _txt(r.value) + "\n"
    if k == "int":
        return "(integer) %d\n" % r.value
    if k == "double":
        return "(double) %s\n" % _txt(r.value)
    if k == "bignum":
        return "(big number) %s\n" % _txt(r.value)
    if k == "bool":
        return "(true)\n" if r.value else "(false)\n"
    if k == "nil":
        return "(nil)\n"
    if k == "bulk":
        return repr_bytes(r.value) + "\n"
    if k == "verbatim":
        return _txt(r.value) + "\n"
    items = r.value
    if not items:
        return {"map": "(empty hash)\n", "set": "(empty set)\n"}.get(k, "(empty array)\n")
    count = len(items) // 2 if k == "map" else len(items)
    idxlen = len(str(count))
    child = prefix + " " * (idxlen + 2)
    sep = {"set": "~", "map": "#"}.get(k, ")")
    out = []
    i = 0
    n = 1
    while i < len(items):
        out.append("%s%*d%s " % ("" if i == 0 else prefix, idxlen, n, sep))
        out.append(format_tty(items[i], child))
        if k == "map":
            value = items[i + 1]
            # An aggregate value starts on its own line, indented as a child.
            out[-1] = out[-1][:-1] + (" => \n" + child if value.kind in _AGGREGATES
                                      else " => ") + format_tty(value, child)
            i += 1
        i += 1
        n += 1
    return "".join(out)


def format_raw(r: Reply) -> str:
    """redis-cli's cliFormatReplyRaw (its caller adds the final newline)."""
    k = r.kind
    if k == "nil":
        return ""
    if k == "error":   # its own newline, then the caller's
        return _txt(r.value) + "\n"
    if k in ("status", "bulk", "verbatim", "double", "bignum"):
        return _txt(r.value)
    if k == "int":
        return "%d" % r.value
    if k == "bool":
        return "1" if r.value else "0"
    parts = []
    items = r.value
    i = 0
    while i < len(items):
        if k == "map":
            parts.append(format_raw(items[i]) + " " + format_raw(items[i + 1]))
            i += 2
        else:
            parts.append(format_raw(items[i]))
            i += 1
    return "\n".join(parts)


# -- arguments and connection -------------------------------------------------

class Options:
    host = "127.0.0.1"
    port = 6379
    password = None
    user = None
    db = 0
    resp3 = False
    tls = False
    cacert = cert = key = None
    insecure = False
    raw = None   # None: decided by isatty


def parse_args(argv: list[str]):
    o = Options()
    i = 0
    valued = {"-h": "host", "-p": "port", "-a": "password", "--pass": "password",
              "--user": "user", "-n": "db", "--cacert": "cacert", "--cert": "cert",
              "--key": "key", "-u": "url"}
    while i < len(argv):
        a = argv[i]
        if a in valued:
            if i + 1 >= len(argv):
                raise SystemExit("hotkv cli: option %s needs a value" % a)
            v = argv[i + 1]
            if valued[a] == "url":
                _apply_url(o, v)
            else:
                setattr(o, valued[a], int(v) if valued[a] in ("port", "db") else v)
            i += 2
        elif a in ("-3", "--resp3"):
            o.resp3, i = True, i + 1
        elif a == "--tls":
            o.tls, i = True, i + 1
        elif a == "--insecure":
            o.insecure, i = True, i + 1
        elif a == "--raw":
            o.raw, i = True, i + 1
        elif a == "--no-raw":
            o.raw, i = False, i + 1
        elif a == "--help":
            sys.stdout.write(USAGE)
            raise SystemExit(0)
        else:
            break
    return o, argv[i:]


def _apply_url(o, url: str):
    u = urlparse(url)
    if u.scheme not in ("redis", "rediss", "valkey", "valkeys"):
        raise SystemExit("hotkv cli: invalid URI scheme '%s'" % u.scheme)
    o.tls = u.scheme in ("rediss", "valkeys")
    o.host = u.hostname or o.host
    o.port = u.port or o.port
    if u.username:
        o.user = unquote(u.username)
    if u.password:
        o.password = unquote(u.password)
    if u.path and u.path.strip("/"):
        o.db = int(u.path.strip("/"))


def connect(o) -> Conn:
    sock = socket.create_connection((o.host, o.port), timeout=None)
    if o.tls:
        ctx = ssl.create_default_context(cafile=o.cacert)
        if o.cert:
            ctx.load_cert_chain(o.cert, o.key)
        if o.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        sock = ctx.wrap_socket(sock, server_hostname=o.host)
    conn = Conn(sock)
    if o.resp3:
        args = ["HELLO", "3"]
        if o.password is not None:
            args += ["AUTH", o.user or "default", o.password]
        r = conn.call(*args)
        if r.kind == "error":
            raise ConnectionError(_txt(r.value))
    elif o.password is not None:
        r = conn.call(*(["AUTH", o.user, o.password] if o.user else ["AUTH", o.password]))
        if r.kind == "error":
            sys.stderr.write("AUTH failed: %s\n" % _txt(r.value))
    if o.db:
        r = conn.call("SELECT", str(o.db))
        if r.kind == "error":
            raise ConnectionError(_txt(r.value))
    return conn


def output(r: Reply, raw: bool) -> str:
    return format_raw(r) + "\n" if raw else format_tty(r)


def write(text: str):
    """To stdout as the server's bytes (a reply may be any bytes, not UTF-8)."""
    data = text.encode("utf-8", "surrogateescape")
    buf = getattr(sys.stdout, "buffer", None)
    if buf is not None:
        sys.stdout.flush()
        buf.write(data)
        buf.flush()
    else:   # pragma: no cover - a stdout without bytes underneath
        sys.stdout.write(data.decode("utf-8", "replace"))


# -- interactive --------------------------------------------------------------

def _docs(conn) -> dict:
    """COMMAND DOCS -> {name: (syntax, summary)}; {} when the server has none."""
    try:
        r = conn.call("COMMAND", "DOCS")
    except (OSError, ProtocolError):
        return {}
    if r.kind not in ("array", "map"):
        return {}
    out = {}
    items = r.value
    for i in range(0, len(items) - 1, 2):
        name = _txt(items[i].value).lower()
        doc = _pairs(items[i + 1])
        summary = _txt(doc.get("summary", Reply("bulk", b"")).value or b"")
        args = doc.get("arguments")
        syntax = " ".join(_arg_syntax(a) for a in (args.value if args else ()))
        out[name] = (syntax, summary)
    return out


def _pairs(r: Reply) -> dict:
    if r.kind not in ("array", "map"):
        return {}
    v = r.value
    return {_txt(v[i].value): v[i + 1] for i in range(0, len(v) - 1, 2)}


def _arg_syntax(r: Reply) -> str:
    d = _pairs(r)
    name = _txt(d["name"].value) if "name" in d else "arg"
    token = _txt(d["token"].value) if "token" in d else None
    kind = _txt(d["type"].value) if "type" in d else ""
    flags = [_txt(f.value) for f in d["flags"].value] if "flags" in d else []
    if kind in ("oneof", "block") and "arguments" in d:
        inner = [_arg_syntax(a) for a in d["arguments"].value]
        text = ("|" if kind == "oneof" else " ").join(inner)
        if kind == "oneof" and "optional" not in flags:
            text = "<" + text + ">"
    elif kind == "pure-token":
        text = token or name
        token = None
    else:
        text = name
    if token:
        text = token + " " + text
    if "multiple" in flags:
        text += " [" + text + " ...]"
    return "[" + text + "]" if "optional" in flags else text


def _split(line: str):
    """redis-cli's line splitting (sdssplitargs): quotes and escapes; None if
    the quotes are unbalanced."""
    from ..protocol.resp import split_inline_args
    words = split_inline_args(line.encode("utf-8", "surrogateescape"))
    return words


def interactive(o, conn) -> int:
    try:
        import readline
    except ImportError:   # pragma: no cover - no readline on this platform
        readline = None
    docs = _docs(conn)
    hist = os.path.expanduser("~/.hotkv_cli_history")
    if readline is not None:
        try:
            readline.read_history_file(hist)
        except OSError:
            pass
        names = sorted(docs)

        def complete(text, state):
            matches = [n.upper() for n in names if n.startswith(text.lower())]
            return matches[state] if state < len(matches) else None
        readline.set_completer(complete)
        readline.parse_and_bind("tab: complete")
    raw = bool(o.raw)
    db = o.db
    try:
        while True:
            prompt = "%s:%d%s> " % (o.host, o.port, "[%d]" % db if db else "")
            try:
                line = input(prompt)
            except EOFError:
                sys.stdout.write("\n")
                return 0
            words = _split(line)
            if words is None:
                sys.stdout.write("Invalid argument(s)\n")
                continue
            if not words:
                continue
            name = words[0].decode("utf-8", "replace").lower()
            if name in ("quit", "exit"):
                return 0
            if name == "help":
                sys.stdout.write(_help(docs, words[1:]))
                continue
            try:
                r = conn.call(*words)
            except (OSError, ConnectionError) as e:
                sys.stdout.write("Error: %s\n" % e)
                return 1
            if name == "select" and r.kind == "status" and len(words) > 1:
                db = int(words[1])
            write(output(r, raw))
            if r.kind == "error" and b"wrong number of arguments" in r.value and name in docs:
                sys.stdout.write("  usage: %s %s\n" % (name.upper(), docs[name][0]))
    finally:
        if readline is not None:
            try:
                readline.write_history_file(hist)
            except OSError:
                pass


def _help(docs: dict, args) -> str:
    if not args:
        return ("hotkv cli: type a command and its arguments; TAB completes command "
                "names; 'help CMD' shows a command's syntax; 'quit' leaves.\n")
    name = b" ".join(args).decode("utf-8", "replace").lower()
    if name not in docs:
        return "No help for '%s'\n" % name
    syntax, summary = docs[name]
    return "\n  %s %s\n  summary: %s\n\n" % (name.upper(), syntax, summary)


def main(argv: list[str]) -> int:
    o, command = parse_args(argv)
    try:
        conn = connect(o)
    except (OSError, ConnectionError) as e:
        sys.stderr.write("Could not connect to %s:%d: %s\n" % (o.host, o.port, e))
        return 1
    if command:
        raw = (not sys.stdout.isatty()) if o.raw is None else o.raw
        try:
            r = conn.call(*command)
        except (OSError, ConnectionError) as e:
            sys.stderr.write("Error: %s\n" % e)
            return 1
        write(output(r, raw))
        return 0   # an error reply is output, not a failure (valkey-cli's exit code)
    return interactive(o, conn)


__all__ = ["main", "format_tty", "format_raw", "Conn", "Reply", "connect", "parse_args"]
