"""``hotkv serve`` and ``hotkv --version`` (hotkv/tools/cli.py), run as real
subprocesses: the listening line, connections, config files, signals."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import tempfile

import pytest

import hotkv
from support import RawClient

LINE = re.compile(r"^hotkv \S+ listening on (.+)\n$")


def start(*args, cwd=None):
    # A server of its own directory: `hotkv serve` saves dump.rdb there on
    # exit (Valkey's default save points) and loads it at start.
    if cwd is None:
        cwd = tempfile.mkdtemp(prefix="hotkv-cli-")
    proc = subprocess.Popen([sys.executable, "-m", "hotkv.tools.cli", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    if not ready:
        proc.kill()
        raise AssertionError("no listening line: %s" % proc.stderr.read())
    line = proc.stdout.readline()
    return proc, line


def port_of(line: str) -> int:
    m = LINE.match(line)
    assert m, line
    return int(m.group(1).split(",")[0].rsplit(":", 1)[1])


def stop(proc, sig=signal.SIGTERM) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_version():
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "--version"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout == "hotkv %s\n" % hotkv.__version__


def test_serve_prints_one_line_and_stops_on_sigterm():
    proc, line = start("--port", "0", "--save", "")
    try:
        port = port_of(line)
        assert line.startswith("hotkv %s listening on 127.0.0.1:" % hotkv.__version__)
        c = RawClient("127.0.0.1", port)
        assert c.call("PING") == b"+PONG\r\n"
        assert c.call("SET", "k", "v") == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "port") == b"*2\r\n$4\r\nport\r\n$%d\r\n%d\r\n" % (
            len(str(port)), port)
        c.close()
    finally:
        code = stop(proc, signal.SIGTERM)
    assert code == 0
    assert proc.stdout.read() == ""   # exactly one line


def test_sigint_exits_zero_and_options():
    proc, line = start("--port", "0", "--databases", "4", "--requirepass", "s3cret",
                       "--loglevel", "warning")
    try:
        c = RawClient("127.0.0.1", port_of(line))
        assert c.call("PING").startswith(b"-NOAUTH")
        assert c.call("AUTH", "s3cret") == b"+OK\r\n"
        assert c.call("SELECT", "3") == b"+OK\r\n"
        assert c.call("SELECT", "4") == b"-ERR DB index is out of range\r\n"
        c.close()
    finally:
        code = stop(proc, signal.SIGINT)
    assert code == 0


def test_config_file_and_command_line_override(tmp_path):
    conf = tmp_path / "hotkv.conf"
    conf.write_text("# a redis.conf-style file\n"
                    "port 0\n"
                    "save 900 1\n"
                    "save 300 10\n"
                    "maxmemory 1mb\n"
                    "hz 15\n"
                    'requirepass "two words"\n')
    proc, line = start(str(conf), "--maxmemory", "2mb")
    try:
        c = RawClient("127.0.0.1", port_of(line))
        assert c.call("AUTH", "two words") == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "maxmemory") == b"*2\r\n$9\r\nmaxmemory\r\n$7\r\n2097152\r\n"
        assert c.call("CONFIG", "GET", "save") == b"*2\r\n$4\r\nsave\r\n$12\r\n900 1 300 10\r\n"
        assert b"config_file:%s\r\n" % str(conf).encode() in c.call("INFO", "server")
        assert c.call("CONFIG", "SET", "hz", "20") == b"+OK\r\n"
        assert c.call("CONFIG", "REWRITE") == b"+OK\r\n"
        c.close()
    finally:
        assert stop(proc) == 0
    lines = conf.read_text().splitlines()
    assert lines[0] == "# a redis.conf-style file"
    assert "hz 20" in lines and "hz 15" not in lines


def test_unixsocket_and_dir(tmp_path):
    sock = str(tmp_path / "hotkv.sock")
    proc, line = start("--port", "0", "--unixsocket", sock, "--dir", str(tmp_path))
    try:
        assert ("unix:%s" % sock) in line
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock)
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        assert s.recv(100) == b"+PONG\r\n"
        s.close()
    finally:
        assert stop(proc) == 0
    assert not os.path.exists(sock)


def test_shutdown_command_exits_zero():
    proc, line = start("--port", "0")
    c = RawClient("127.0.0.1", port_of(line))
    c.send("SHUTDOWN", "NOSAVE")
    assert c.is_closed(wait=5)
    assert proc.wait(10) == 0


@pytest.mark.parametrize("args,message", [
    (["--nosuchoption", "1"], "unknown setting 'nosuchoption'"),
    (["--port", "abc"], "invalid value 'abc' for 'port'"),
    (["--requirepass"], "--requirepass needs a value"),
    (["/nonexistent/hotkv.conf"], "cannot read config file"),
    (["a.conf", "b.conf"], "unexpected argument 'b.conf'"),
])
def test_bad_options_fail_clearly(args, message):
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "serve", *args],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert message in out.stderr
    assert out.stdout == ""


def test_port_in_use_fails():
    proc, line = start("--port", "0")
    try:
        port = port_of(line)
        out = subprocess.run([sys.executable, "-m", "hotkv", "serve", "--port", str(port)],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 1
        assert "cannot listen" in out.stderr
    finally:
        assert stop(proc) == 0


def test_console_script_entry_point():
    from importlib.metadata import entry_points
    eps = [ep for ep in entry_points(group="console_scripts") if ep.name == "hotkv"]
    assert eps and eps[0].value == "hotkv.tools.cli:main"
    from hotkv.tools.cli import main
    assert main(["--version"]) == 0
    assert main(["nosuch"]) == 2


def test_line_means_accepting():
    # The line is printed once the server accepts connections: connect at
    # once, without retrying.
    proc, line = start("--port", "0")
    try:
        assert LINE.match(line)
        assert RawClient("127.0.0.1", port_of(line)).call("PING") == b"+PONG\r\n"
    finally:
        assert stop(proc) == 0


def test_serve_help():
    from hotkv.tools.cli import main
    assert main(["serve", "--help"]) == 0
    assert main(["--help"]) == 0
    assert main([]) == 2


def test_config_file_include(tmp_path):
    common = tmp_path / "common.conf"
    common.write_text("maxmemory 3mb\nhz 13\n")
    conf = tmp_path / "hotkv.conf"
    conf.write_text("port 0\ninclude %s\nhz 14\n" % common)
    proc, line = start(str(conf))
    try:
        c = RawClient("127.0.0.1", port_of(line))
        assert c.call("CONFIG", "GET", "maxmemory") == b"*2\r\n$9\r\nmaxmemory\r\n$7\r\n3145728\r\n"
        assert c.call("CONFIG", "GET", "hz") == b"*2\r\n$2\r\nhz\r\n$2\r\n14\r\n"
        c.close()
    finally:
        assert stop(proc) == 0


def test_start_failure_is_reported_without_traceback(tmp_path):
    acl = tmp_path / "users.acl"
    acl.write_text("user alice on nosuchrule\n")
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "serve", "--port", "0",
                          "--aclfile", str(acl)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "hotkv serve: cannot start:" in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""
