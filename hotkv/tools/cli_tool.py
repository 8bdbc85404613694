"""``hotkv cli``: valkey-cli for people who installed hotkv with pip.

``hotkv cli [OPTIONS] [cmd [arg ...]]`` takes valkey-cli's options and
prints what valkey-cli prints, byte for byte, on a terminal and through a
pipe (tests/test_cli_tool.py and tests/test_cli_transcripts.py run the same
sessions through both, in a pty and through pipes).  Against any server: it
speaks RESP2, or RESP3 after HELLO 3.

Owns: option parsing (valkey-cli's parseOptions), connecting (TCP with
-t/-4/-6 or a unix socket with -s; AUTH, SELECT, HELLO 3: cliConnect),
one-shot commands with ``-r``/``-i``/``-x``/``-X``/``-e``/``--quoted-input``
(noninteractive / cliSendCommand), -c's -MOVED/-ASK redirects
(issueCommandRepeat), --eval, the Lua debugger's lines in a reply, and the
streaming replies of SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and MONITOR until
Ctrl-C.  The other modes live beside it: cli_resp.py (wire and reply
formats, --json), cli_modes.py (--scan, --bigkeys, --memkeys, --stat,
--latency, --pipe), cli_more.py (--hotkeys, --latency-dist, --lru-test,
--intrinsic-latency, --rdb, --replica), cli_repl.py (the interactive prompt,
a linenoise-compatible line editor, the Lua debugger's prompt), cli_help.py
(``help CMD`` and the hints, from COMMAND DOCS).

Invariants: output mode is valkey-cli's: the human form when stdout is a
terminal (or FAKETTY is set, or --no-raw), else raw; INFO, CLIENT LIST,
MEMORY DOCTOR, LATENCY DOCTOR and the other commands valkey-cli prints
verbatim are printed verbatim on a terminal too.  Exit codes: 0 even for an
error reply (1 with -e), 1 when the server cannot be reached; Ctrl-C in a
streaming one-shot command ends the process by SIGINT, as valkey-cli's.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import ssl
import sys
import time
from urllib.parse import unquote, urlparse

from ..protocol.resp import split_inline_args
from . import cli_modes, cli_more
from .cli_help import output_help
from .cli_repl import ask_password, ldb_session, repl
from .cli_resp import (
    VERSION,
    Conn,
    ProtocolError,
    Reply,
    _atoi,
    context_error,
    format_csv,
    format_json,
    format_raw,
    format_tty,
    is_pubsub_push,
    repr_bytes,
    txt,
    write,
)

USAGE = """hotkv cli (valkey-cli %s compatible)

Usage: hotkv cli [OPTIONS] [cmd [arg [arg ...]]]
  -h <hostname>      Server hostname (default: 127.0.0.1).
  -p <port>          Server port (default: 6379).
  -t <timeout>       Connection timeout in seconds (decimals allowed; 0: no limit).
  -s <socket>        Server unix socket (instead of hostname and port).
  -a <password>      Password to use when connecting to the server.
  --user <username>  Used to send ACL style 'AUTH username pass'. Needs -a.
  --pass <password>  Alias of -a.
  --askpass          Read the password from STDIN, shown as '*' (-a and REDISCLI_AUTH ignored).
  -u <uri>           Server URI valkey://user:password@host:port/dbnum (valkeys:// for TLS).
  -r <repeat>        Execute specified command N times.
  -i <interval>      When -r is used, waits <interval> seconds per command.
  -n <db>            Database number.
  -2 / -3            Start session in RESP2 / RESP3 protocol mode.
  -x                 Read last argument from STDIN.
  -X <tag>           Read the argument written <tag> from STDIN (-X t RESTORE k 0 t).
  -d <delimiter>     Delimiter between response bulks for raw formatting (default: \\n).
  -D <delimiter>     Delimiter between responses for raw formatting (default: \\n).
  -c                 Cluster mode: follow -MOVED and -ASK redirections.
  -e                 Return exit error code when command execution fails.
  -4 / -6            Prefer IPv4 / IPv6 addresses when the hostname has both.
  --tls, --cacert <file>, --cert <file>, --key <file>, --insecure   TLS.
  --raw / --no-raw   Raw / formatted output (raw is the default when STDOUT is not a tty).
  --quoted-input     Read each argument as a quoted string ("a\\x00b").
  --csv              Output in CSV format.
  --json             Output in JSON format (RESP3 unless -2 is given).
  --quoted-json      Like --json, with strings quoted to ASCII, not Unicode.
  --show-pushes <yn> Whether to print RESP3 PUSH messages.
  --stat             Print rolling stats about server: mem, clients, ...
  --latency          Sample latency (one line after 1 s when not on a tty).
  --latency-history  Like --latency but tracking latency changes over time.
  --latency-dist     Latency as a spectrum of xterm-256 colours, one line per -i (1 s).
  --mono             --latency-dist in shades of grey.
  --replica          Act as a replica: print the commands the primary sends.
  --rdb <filename>   Download an RDB snapshot through SYNC ("-" for stdout).
  --functions-rdb <filename> Like --rdb, with the functions only, no keys.
  --pipe             Transfer raw RESP protocol from stdin to server.
  --pipe-timeout <n> In --pipe mode, abort after <n> seconds without replies (default 30).
  --bigkeys          Sample keys looking for keys with many elements (complexity).
  --memkeys          Sample keys looking for keys consuming a lot of memory.
  --memkeys-samples <n> Like --memkeys, with MEMORY USAGE's SAMPLES.
  --hotkeys          Sample keys looking for hot keys (needs an *lfu maxmemory-policy).
  --scan             List all keys using the SCAN command.
  --pattern <pat>    Keys pattern when using the --scan or --bigkeys options.
  --count <count>    Count option when using --scan or --bigkeys (default: 10).
  --quoted-pattern <pat> Like --pattern, written as a quoted string (binary-safe).
  --intrinsic-latency <sec> Measure this machine's intrinsic latency for <sec> seconds.
  --lru-test <keys>  A cache workload over <keys> keys (80-20): hits and misses each second.
  --eval <file>      EVAL the Lua script in <file>: --eval f.lua key1 key2 , arg1 arg2
  --ldb              With --eval: run the script in the Lua debugger.
  --ldb-sync-mode    Like --ldb, with the synchronous debugger (the server blocks and
                     the script's writes are kept).
  --verbose          Verbose mode (accepted; valkey-cli's cluster manager uses it).
  --no-auth-warning  Don't show the warning message when using a password.
  --help             Output this help and exit.
  --version          Output version and exit.
""" % VERSION

_VALUED = {"-h": "host", "-p": "port", "-a": "password", "--pass": "password",
           "--user": "user", "-n": "db", "--cacert": "cacert", "--cert": "cert",
           "--key": "key", "-r": "repeat", "-i": "interval", "--pattern": "pattern",
           "--count": "count", "-d": "mb_delim", "-D": "cmd_delim",
           "--pipe-timeout": "pipe_timeout", "--memkeys-samples": "memkeys_samples",
           "--show-pushes": "show_pushes", "-u": "url", "-X": "stdin_tag_name",
           "--eval": "eval", "--rdb": "rdb", "--functions-rdb": "functions_rdb",
           "--intrinsic-latency": "intrinsic_latency", "-s": "hostsocket", "-t": "timeout",
           "--quoted-pattern": "quoted_pattern", "--lru-test": "lru_test"}
_FLAGS = {"-x": "stdin_lastarg", "-e": "set_errcode", "-3": "resp3", "--resp3": "resp3",
          "-2": "resp2", "--tls": "tls", "--insecure": "insecure", "--scan": "scan",
          "--bigkeys": "bigkeys", "--memkeys": "memkeys", "--stat": "stat",
          "--latency": "latency", "--pipe": "pipe", "--no-auth-warning": "no_auth_warning",
          "--latency-history": "latency_history", "-c": "cluster_mode",
          "--hotkeys": "hotkeys", "--latency-dist": "latency_dist", "--replica": "replica",
          "--slave": "replica", "-4": "prefer_ipv4", "-6": "prefer_ipv6",
          "--quoted-input": "quoted_input", "--verbose": "verbose", "--mono": "mono",
          "--askpass": "askpass"}


class Options:
    host = "127.0.0.1"
    port = 6379
    password = None
    user = None
    db = 0
    resp3 = False
    resp2 = False
    tls = False
    cacert = cert = key = None
    insecure = False
    output = None          # "standard", "raw", "csv"
    push_output = None
    repeat = 1
    interval = 0.0         # seconds
    stdin_lastarg = False
    set_errcode = False
    scan = bigkeys = memkeys = stat = latency = latency_history = pipe = False
    memkeys_samples = 0
    pattern = None
    count = 10
    pipe_timeout = 30
    mb_delim = b"\n"
    cmd_delim = b"\n"
    no_auth_warning = False
    show_pushes = None
    stdin_tag_name = None  # -X <tag>
    cluster_mode = False
    eval = None            # --eval <file>
    eval_ldb = eval_ldb_sync = False
    hotkeys = latency_dist = replica = False
    rdb = functions_rdb = None
    intrinsic_latency = None
    hostsocket = None      # -s <unix socket>
    timeout = None         # -t <seconds>: the connect timeout
    prefer_ipv4 = prefer_ipv6 = False
    quoted_input = verbose = mono = askpass = False
    lru_test = None        # --lru-test <keys>


def _atof(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        return 0.0


def parse_args(argv: list[str]):
    """valkey-cli's parseOptions: (options, the command's words)."""
    o = Options()
    tty = sys.stdout.isatty() or os.environ.get("FAKETTY") is not None
    o.output = "standard" if tty else "raw"
    o.push_output = tty
    i = 0
    while i < len(argv):
        a = argv[i]
        last = i == len(argv) - 1
        if a in _VALUED and not last:
            name, v = _VALUED[a], argv[i + 1]
            i += 2
            if name == "url":
                _apply_url(o, v)
            elif name in ("port", "db", "count", "pipe_timeout", "memkeys_samples", "repeat",
                          "intrinsic_latency"):
                setattr(o, name, _atoi(v))
                if name == "port" and not 0 <= o.port <= 65535:
                    sys.stderr.write("Invalid server port.\n")
                    raise SystemExit(1)
                if name == "memkeys_samples":
                    o.memkeys = True
            elif name == "interval":
                o.interval = _atof(v)
            elif name == "lru_test":
                o.lru_test = _strtoll(v)
            elif name == "timeout":
                o.timeout = _connect_timeout(v)
            elif name == "quoted_pattern":
                o.pattern = unquote_c_string(v.encode("utf-8", "surrogateescape"))
                if o.pattern is None:
                    sys.stderr.write("Invalid quoted string specified for --quoted-pattern.\n")
                    raise SystemExit(1)
            elif name in ("mb_delim", "cmd_delim"):
                setattr(o, name, v.encode("utf-8", "surrogateescape"))
            elif name == "show_pushes":
                if v[:1].lower() == "n":
                    o.push_output = False
                elif v[:1].lower() == "y":
                    o.push_output = True
                else:
                    sys.stderr.write("Unknown --show-pushes value '%s' (valid: '[y]es', "
                                     "'[n]o')\n" % v)
            else:
                setattr(o, name, v)
        elif a in _FLAGS:
            setattr(o, _FLAGS[a], True)
            if a == "--latency-history":
                o.latency = True
            i += 1
        elif a == "--raw":
            o.output, i = "raw", i + 1
        elif a == "--no-raw":
            o.output, i = "standard", i + 1
        elif a == "--csv":
            o.output, i = "csv", i + 1
        elif a in ("--json", "--quoted-json"):
            # RESP3 unless -3 or -2 says otherwise; HELLO 3 may fail quietly.
            o.resp3 = o.resp3 or "json"
            o.output, i = a[2:], i + 1
        elif a in ("--ldb", "--ldb-sync-mode"):
            o.eval_ldb = True
            o.eval_ldb_sync = o.eval_ldb_sync or a == "--ldb-sync-mode"
            o.output, i = "raw", i + 1
        elif a == "--help" or (a == "-h" and last):
            sys.stdout.write(USAGE)
            raise SystemExit(0)
        elif a in ("-v", "--version"):
            sys.stdout.write("valkey-cli %s (hotkv cli)\n" % VERSION)
            raise SystemExit(0)
        elif a.startswith("-"):
            sys.stderr.write("Unrecognized option or bad number of args for: '%s'\n" % a)
            raise SystemExit(1)
        else:
            break
    _check_options(o)
    if o.password is None and os.environ.get("REDISCLI_AUTH") is not None:
        o.password = os.environ["REDISCLI_AUTH"]
    return o, argv[i:]


_STRTOD = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan"
                     r"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?)",
                     re.I)


def _strtoll(v: str) -> int:
    m = re.match(r"\s*([+-]?\d+)", v)
    return max(-2 ** 63, min(2 ** 63 - 1, int(m.group(1)))) if m else 0


def _connect_timeout(v: str) -> float:
    """-t: strtod's whole string, a number >= 0."""
    m = _STRTOD.fullmatch(v)
    seconds = float("nan")
    if m:
        t = v.strip().lower()
        seconds = float.fromhex(t) if "0x" in t else float(t)
    if seconds != seconds or seconds < 0:
        sys.stderr.write("Invalid connection timeout for -t.\n")
        raise SystemExit(1)
    return seconds if 0 < seconds < 1e9 else None   # 0 (and inf): no limit


def unquote_c_string(b: bytes):
    """unquoteCString: one argument written as at the prompt ("a\\x00b"), or
    None when it is not exactly one."""
    words = split_inline_args(b)
    return words[0] if words is not None and len(words) == 1 else None


def _check_options(o):
    """parseOptions' closing checks, in valkey-cli's order."""
    if o.hostsocket is not None and o.cluster_mode:
        sys.stderr.write("Options -c and -s are mutually exclusive.\n")
        raise SystemExit(1)
    if o.resp2 and o.resp3 is True:
        sys.stderr.write("Options -2 and -3 are mutually exclusive.\n")
        raise SystemExit(1)
    if o.eval_ldb and o.eval is None:
        sys.stderr.write("Options --ldb and --ldb-sync-mode require --eval.\n"
                         "Try %s --help for more information.\n" % PROGRAM)
        raise SystemExit(1)
    if not o.no_auth_warning and o.password is not None:
        sys.stderr.write("Warning: Using a password with '-a' or '-u' option on the command"
                         " line interface may not be safe.\n")
    if o.rdb is not None and o.functions_rdb is not None:
        sys.stderr.write("Option --functions-rdb and --rdb are mutually exclusive.\n")
        raise SystemExit(1)
    if o.stdin_lastarg and o.stdin_tag_name is not None:
        sys.stderr.write("Options -x and -X are mutually exclusive.\n")
        raise SystemExit(1)
    if o.prefer_ipv4 and o.prefer_ipv6:
        sys.stderr.write("Options -4 and -6 are mutually exclusive.\n")
        raise SystemExit(1)


PROGRAM = "hotkv cli"   # valkey-cli's argv[0] in its messages


def _apply_url(o, url: str):
    u = urlparse(url)
    if u.scheme not in ("redis", "rediss", "valkey", "valkeys"):
        sys.stderr.write("Invalid URI scheme\n")
        raise SystemExit(1)
    o.tls = u.scheme in ("rediss", "valkeys")
    o.host = u.hostname or o.host
    o.port = u.port or o.port
    if u.username:
        o.user = unquote(u.username)
    if u.password:
        o.password = unquote(u.password)
    if u.path and u.path.strip("/"):
        o.db = _atoi(u.path.strip("/"))


# -- output ---------------------------------------------------------------------

def format_reply(r: Reply, o, verbatim: bool = False, status=None) -> bytes:
    """valkey-cli's cliFormatReply for the session's output mode (``status``:
    the Lua debugger's, for the raw form)."""
    if verbatim:
        return format_raw(r, o.mb_delim, status)
    if o.output == "standard":
        return format_tty(r)
    if o.output == "csv":
        return format_csv(r) + b"\n"
    if o.output in ("json", "quoted-json"):
        return format_json(r, o.output == "quoted-json") + b"\n"
    return format_raw(r, o.mb_delim, status) + o.cmd_delim


def format_push(r: Reply, o) -> bytes:
    """An out-of-band RESP3 push (cliPushHandler); invalidations get their
    own line on a terminal."""
    v = r.value
    if (o.output == "standard" and r.kind == "push" and len(v) == 2
            and v[0].kind == "bulk" and v[0].value.startswith(b"invalidate")
            and v[1].kind == "array"):
        keys = b", ".join(b"'" + k.value + b"'" for k in v[1].value)
        return b"-> invalidate: " + keys + b"\n"
    return format_reply(r, o)


# Commands whose (bulk string) reply valkey-cli prints verbatim on a
# terminal: cliSendCommand's output_raw list.
def prints_verbatim(words: list[bytes]) -> bool:
    w = [x.lower() for x in words[:3]]
    n = len(words)
    c = w[0]
    sub = w[1] if n >= 2 else b""
    return (c in (b"info", b"lolwut")
            or (n >= 2 and c == b"debug" and sub in (b"htstats", b"htstats-key",
                                                   b"client-eviction"))
            or (n >= 2 and c == b"memory" and sub in (b"malloc-stats", b"doctor"))
            or (n == 2 and c == b"cluster" and sub in (b"nodes", b"info"))
            or (n >= 2 and c == b"client" and sub in (b"list", b"info"))
            or (n == 3 and c == b"latency" and sub == b"graph")
            or (n == 2 and c == b"latency" and sub == b"doctor")
            or (n >= 2 and c == b"proxy" and sub == b"info"))


# -- connection -------------------------------------------------------------------

class Session:
    """One client's state: the options, the connection (None when not
    connected), the selected db, MULTI, subscribed mode, RESP3."""

    def __init__(self, o):
        self.o = o
        self.conn = None
        self.dbnum = 0
        self.input_dbnum = o.db
        self.in_multi = False
        self.pre_multi_dbnum = 0
        self.pubsub_mode = False
        self.monitor_mode = False
        self.current_resp3 = False
        self.interactive = False
        self.aborted = False        # Ctrl-C in MONITOR / subscribed mode
        self.on_prompt_change = None
        self.eval_ldb = o.eval_ldb  # in a Lua debugger session (--ldb, SCRIPT DEBUG)
        self.eval_ldb_end = False   # the session just ended: EVAL's reply is next
        self.enable_ldb_on_eval = False
        self.legacy_help = False    # COMMAND DOCS failed after a debugging session

    def prompt_changed(self):
        if self.on_prompt_change is not None:
            self.on_prompt_change()

    def connect(self, force: bool = False, quiet: bool = False) -> bool:
        """cliConnect: connect, AUTH, SELECT, HELLO 3."""
        o = self.o
        if self.conn is not None and not force:
            return True
        if self.conn is not None:
            self.conn.close()
            self.conn = None
            self.dbnum = 0
            self.in_multi = False
            self.pubsub_mode = False
            self.prompt_changed()
        unix = o.hostsocket is not None and not (o.cluster_mode and self.reissue)
        try:
            sock = _open(o, unix)
        except OSError as e:
            if not quiet:
                where = o.hostsocket if unix else "%s:%d" % (o.host, o.port)
                sys.stderr.write("Could not connect to Valkey at %s: %s\n"
                                 % (where, _strerror(e)))
            return False
        if o.tls:
            try:
                ctx = ssl.create_default_context(cafile=o.cacert)
                if o.cert:
                    ctx.load_cert_chain(o.cert, o.key)
                if o.insecure:
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
                sock = ctx.wrap_socket(sock, server_hostname=o.host)
            except (OSError, ssl.SSLError) as e:
                sys.stderr.write("Could not negotiate a TLS connection: %s\n" % e)
                sock.close()
                return False
        self.conn = Conn(sock)
        self.current_resp3 = False
        self._pushes_inline = False
        try:
            if o.password is not None:
                args = ["AUTH", o.user, o.password] if o.user else ["AUTH", o.password]
                r = self.conn.call(*args)
                if r.kind == "error":
                    sys.stderr.write("AUTH failed: %s\n" % txt(r.value))
                    return False
            if self.input_dbnum != self.dbnum:
                r = self.conn.call("SELECT", str(self.input_dbnum))
                if r.kind == "error":
                    sys.stderr.write("SELECT %d failed: %s\n" % (self.input_dbnum,
                                                                 txt(r.value)))
                    return False
                self.dbnum = self.input_dbnum
                self.prompt_changed()
            if o.resp3 and not o.resp2:
                r = self.conn.call("HELLO", "3")
                if r.kind == "error":
                    sys.stderr.write("HELLO 3 failed: %s\n" % txt(r.value))
                    if o.resp3 is True:   # -3; --json goes on in RESP2
                        return False
                self.current_resp3 = True
        except (OSError, ConnectionError, ProtocolError):
            sys.stderr.write("\nI/O error\n")
            return False
        return True

    # -- one command ------------------------------------------------------------

    def read_reply(self, verbatim: bool, show: bool = True) -> Reply:
        """cliReadReply: the next reply (pushes printed on the way when the
        session shows them), printed in the output mode."""
        o = self.o
        while True:
            r = self.conn.read()
            if r.kind == "push" and o.push_output and not self._pushes_inline:
                write(format_push(r, o))
                continue
            break
        if o.cluster_mode and r.kind == "error" and (r.value.startswith(b"MOVED ")
                                                     or r.value.startswith(b"ASK ")):
            self._redirect(r.value)
            return r
        if r.kind == "error" and not self.interactive and o.set_errcode:
            sys.stdout.flush()
            sys.stderr.write("%s\n" % txt(r.value))
            sys.stderr.flush()
            raise SystemExit(1)
        if show:
            write(format_reply(r, o, verbatim, self._ldb_line if self.eval_ldb else None))
        return r

    def _ldb_line(self, line: bytes) -> bytes:
        """A Lua debugger's status line, coloured on an xterm; ``<endsession>``
        ends the session (the EVAL's own reply follows, in the human form)."""
        if line.startswith(b"<endsession>"):
            self.enable_ldb_on_eval = self.eval_ldb = False
            self.eval_ldb_end = True
            self.o.output = "standard"
            self.prompt_changed()
            return b""
        return cli_more.ldb_colour(line)

    _pushes_inline = False
    conn_lost = False      # the server closed the connection: reconnect first
    reissue = False        # -c: a -MOVED or -ASK sent us to another node
    send_asking = False

    def _redirect(self, err: bytes):
        """-c: ``MOVED <slot> <host>:<port>`` or ``ASK ...``: the node to
        connect to and send the command again (ASKING first for ASK)."""
        parts = err.split(b" ")
        slot = _atoi(txt(parts[1])) if len(parts) > 1 else 0
        host, _, port = (parts[2] if len(parts) > 2 else b"").rpartition(b":")
        if host:   # 'MOVED 3999 :6381' when the endpoint is unknown
            self.o.host = txt(host)
        self.o.port = _atoi(txt(port))
        if self.interactive:
            write(b"-> Redirected to slot [%d] located at %s:%d\n"
                  % (slot, self.o.host.encode(), self.o.port))
        self.reissue = True
        if err.startswith(b"ASK "):
            self.send_asking = True
        self.prompt_changed()

    def send_command(self, words: list[bytes], repeat: int) -> bool:
        """cliSendCommand: send ``words`` ``repeat`` times (forever when
        negative), print the replies; follows MONITOR and [P|S]SUBSCRIBE."""
        o = self.o
        name = words[0].lower()
        verbatim = prints_verbatim(words)
        if name == b"monitor":
            self.monitor_mode = True
        is_sub = name in (b"subscribe", b"psubscribe", b"ssubscribe")
        is_unsub = name in (b"unsubscribe", b"punsubscribe", b"sunsubscribe")
        if len(words) == 3 and name == b"script" and words[1].lower() == b"debug":
            self.enable_ldb_on_eval = words[2].lower() in (b"yes", b"sync")
        if name == b"eval" and self.enable_ldb_on_eval:
            self.eval_ldb = True
            o.output = "raw"
        while repeat < 0 or repeat > 0:
            repeat -= 1
            if name in (b"sync", b"psync"):
                write(b"Entering replica output mode...  (press Ctrl-C to quit)\n")
                cli_more.replica_mode(self, words)
                return False
            self.conn.send(words)
            if self.monitor_mode:
                while self.monitor_mode:
                    r = self.read_reply(verbatim)
                    if r.kind == "error":
                        self.monitor_mode = False
                return True
            expected = 0
            if is_sub or is_unsub:
                expected = len(words) - 1 if len(words) > 1 else 1
                self._pushes_inline = True
            try:
                while True:
                    r = self.read_reply(verbatim)
                    if self.pubsub_mode or expected > 0:
                        if is_pubsub_push(r, self.current_resp3):
                            if expected > 0 and r.value[0].value.lower() == name:
                                if is_sub and not self.pubsub_mode:
                                    self.pubsub_mode = True
                                    self.prompt_changed()
                                expected -= 1
                                if expected > 0:
                                    continue
                            else:
                                continue
                        elif r.kind == "push":
                            continue
                    self._after(words, r)
                    break
            finally:
                if not self.pubsub_mode:
                    self._pushes_inline = False
            if self.reissue:
                break
            if o.interval:
                time.sleep(o.interval)
        return True

    def _after(self, words, r):
        """The session state a successful command changes (SELECT, MULTI...)."""
        name = words[0].lower()
        n = len(words)
        err = r.kind == "error"
        if name == b"select" and n == 2 and not err:
            self.input_dbnum = self.dbnum = _atoi(txt(words[1]))
            self.prompt_changed()
        elif name == b"auth" and n in (2, 3):
            if self.input_dbnum != self.dbnum:
                rr = self.conn.call("SELECT", str(self.input_dbnum))
                if rr.kind != "error":
                    self.dbnum = self.input_dbnum
                    self.prompt_changed()
        elif name == b"multi" and n == 1 and not err:
            self.in_multi = True
            self.pre_multi_dbnum = self.dbnum
            self.prompt_changed()
        elif name == b"exec" and n == 1 and self.in_multi:
            self.in_multi = False
            if err or r.kind == "nil":
                self.input_dbnum = self.dbnum = self.pre_multi_dbnum
            self.prompt_changed()
        elif name == b"discard" and n == 1 and not err:
            self.in_multi = False
            self.input_dbnum = self.dbnum = self.pre_multi_dbnum
            self.prompt_changed()
        elif name == b"reset" and n == 1 and not err:
            self.in_multi = False
            self.dbnum = self.input_dbnum = 0
            self.current_resp3 = False
            self.pubsub_mode = False
            self._pushes_inline = False
            self.prompt_changed()
        elif name == b"hello":
            if r.kind == "map":
                self.current_resp3 = True
            elif r.kind == "array":
                self.current_resp3 = False

    def issue(self, words: list[bytes], repeat: int) -> bool:
        """issueCommandRepeat: ``help`` is answered here; otherwise
        (re)connect when needed and send."""
        if not self.eval_ldb and words[0].lower() in (b"help", b"?"):
            output_help(self, words[1:])
            return True
        while True:
            if self.conn is None or self.reissue or self.conn_lost:
                if self.conn_lost and self.legacy_help:
                    self.help_entries = None   # `help` asks COMMAND DOCS again
                self.conn_lost = False
                if not self.connect(force=True):
                    self.reissue = False
                    return False
            self.reissue = False
            try:
                if self.send_asking:
                    self.send_asking = False
                    r = self.conn.call("ASKING")
                    if r.kind == "error":
                        sys.stderr.write("ASKING failed: %s\n" % txt(r.value))
                        return False
                ok = self.send_command(words, repeat)
            except (OSError, ConnectionError, ProtocolError) as e:
                if self.aborted:
                    raise
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if not self.interactive:
                    sys.stderr.write("Error: %s\n" % _context_error(e))
                return False
            if not (self.o.cluster_mode and self.reissue):
                return ok


def _open(o, unix: bool):
    """A connected socket: the unix socket (-s), or the host's addresses in
    turn (IPv4 first with -4, IPv6 first with -6), within -t's timeout."""
    if unix:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(o.timeout)
            sock.connect(o.hostsocket)
        except OSError:
            sock.close()
            raise
        sock.settimeout(None)
        return sock
    infos = socket.getaddrinfo(o.host, o.port, 0, socket.SOCK_STREAM)
    if o.prefer_ipv4 or o.prefer_ipv6:
        first = socket.AF_INET if o.prefer_ipv4 else socket.AF_INET6
        infos.sort(key=lambda info: info[0] != first)
    error = None
    for family, kind, proto, _, addr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(o.timeout)
            sock.connect(addr)
        except OSError as e:
            sock.close()
            error = e
            continue
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise error


def _strerror(e: OSError) -> str:
    if isinstance(e, socket.gaierror):
        return e.strerror
    if isinstance(e, TimeoutError) and not e.errno:
        return os.strerror(errno.ETIMEDOUT)
    return os.strerror(e.errno) if e.errno else str(e)


_context_error = context_error


# -- for hotkv queues (queues_tui.py, queues_remote.py) -------------------------

_txt = txt


def connect(o) -> Conn:
    """A connection set up as ``o`` says (AUTH, SELECT, HELLO 3); raises
    ConnectionError / OSError when that fails."""
    sock = socket.create_connection((o.host, o.port))
    if o.tls:
        ctx = ssl.create_default_context(cafile=o.cacert)
        if o.cert:
            ctx.load_cert_chain(o.cert, o.key)
        if o.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        sock = ctx.wrap_socket(sock, server_hostname=o.host)
    conn = Conn(sock)
    steps = []
    if o.password is not None:
        steps.append(["AUTH", o.user, o.password] if o.user else ["AUTH", o.password])
    if o.db:
        steps.append(["SELECT", str(o.db)])
    if o.resp3:
        steps.append(["HELLO", "3"])
    for args in steps:
        r = conn.call(*args)
        if r.kind == "error":
            conn.close()
            raise ConnectionError(txt(r.value))
    return conn


def _read_stdin_arg() -> bytes:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else \
        sys.stdin.read().encode()
    return data


def noninteractive(s: Session, words: list[bytes]) -> int:
    """valkey-cli's noninteractive(): one command (``-r`` times), then the
    pushes of a subscription until Ctrl-C."""
    o = s.o
    if o.quoted_input:
        words = [unquote_c_string(w) for w in words]
        if None in words:
            write(b"Invalid quoted string\n")
            return 1
    if o.stdin_lastarg:
        words = words + [_read_stdin_arg()]
    elif o.stdin_tag_name is not None:
        tag = o.stdin_tag_name.encode("utf-8", "surrogateescape")
        if tag not in words:
            sys.stderr.write("Using -X option but stdin tag not match.\n")
            return 1
        words = list(words)
        words[words.index(tag)] = _read_stdin_arg()
    ok = s.issue(words, o.repeat)
    while s.pubsub_mode:
        try:
            s.read_reply(False)
        except (OSError, ConnectionError, ProtocolError) as e:
            sys.stderr.write("Error: %s\n" % _context_error(e))
            return 1
    return 0 if ok else 1


def _run_mode(s: Session) -> int:
    """The first of the special modes asked for, in valkey-cli's order."""
    o = s.o
    if o.latency_dist and not o.latency:
        return cli_more.latency_dist(s)
    if o.replica and not o.latency:
        cli_more.send_replconf(s, "capa", "eof")
        cli_more.send_replconf(s, "rdb-filter-only", "")
        return cli_more.replica_mode(s)
    if (o.rdb is not None or o.functions_rdb is not None) and not o.latency:
        return cli_more.get_rdb(s)
    if o.hotkeys and not (o.latency or o.pipe or o.bigkeys or o.memkeys):
        return cli_more.hot_keys(s)
    if o.lru_test is not None and not (o.latency or o.pipe or o.bigkeys or o.memkeys
                                       or o.stat or o.scan):
        return cli_more.lru_test(s)
    return cli_modes.run(s)


def eval_mode(s: Session, args: list[bytes]) -> int:
    """valkey-cli --eval FILE [key ...] [, arg ...]: EVAL the file's script
    (with --ldb, in the Lua debugger: cli_repl.ldb_session)."""
    o = s.o
    if o.eval_ldb:
        return ldb_session(s, args)
    ok = s.issue(cli_more.eval_words(o.eval, args), o.repeat)
    return 0 if ok else 1


def _die_by_sigint():
    """Leave as a C program killed by Ctrl-C does (valkey-cli installs no
    SIGINT handler outside the prompt)."""
    sys.stdout.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    raise SystemExit(130)   # pragma: no cover - the signal ends the process first


def main(argv: list[str]) -> int:
    try:
        o, command = parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    words = [a.encode("utf-8", "surrogateescape") for a in command]
    if o.askpass:
        o.password = ask_password(b"Please input password: ")
    s = Session(o)
    try:
        if o.latency or o.latency_dist or o.replica or o.rdb is not None \
                or o.functions_rdb is not None or o.pipe or o.bigkeys or o.memkeys \
                or o.hotkeys or o.stat or o.scan or o.lru_test is not None:
            if not s.connect():
                return 1
            return _run_mode(s)
        if o.intrinsic_latency is not None:
            return cli_more.intrinsic_latency(o.intrinsic_latency)
        if o.eval is not None:
            if not s.connect():
                return 1
            return eval_mode(s, words)
        if not words:
            s.connect()
            return repl(s)
        s.connect(quiet=True)
        return noninteractive(s, words)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        _die_by_sigint()
    except BrokenPipeError:
        return 1


__all__ = ["main", "format_tty", "format_raw", "format_csv", "Conn", "Reply", "Session",
           "parse_args", "repr_bytes"]
