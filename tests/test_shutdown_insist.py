"""Signal shutdowns that wait or refuse (hotkv/tools/cli.py ``SignalShutdown``), each run
against ``python -m hotkv serve`` and valkey-server 8.1.8 with the same command
line, as Valkey's Tcl unit shutdown does in spawn mode:

* a second SIGINT while the final save runs (slowed by rdb-key-save-delay)
  exits at once, code 1, with "You insist... exiting now." and the save's
  temp-<pid>.rdb removed;
* SIGTERM (shutdown-on-sigterm default) while the first rewrite of an AOF just
  turned on runs is refused -- "Writing initial AOF, can't exit.", the server
  keeps serving -- and with ``force`` the server exits ("Exit anyway.");
* a signal's shutdown held by DEBUG PAUSE-CRON is cancelled by SHUTDOWN ABORT.

Process helpers come from test_shutdown_signals.  Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from test_shutdown_signals import LEGACY, RAW, Proc

SET = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n"


def _set_keys(proc: Proc, n: int):
    for i in range(n):
        key = str(i).encode()
        assert proc.call(SET % (len(key), key)) == b"+OK\r\n"


def _config_set(proc: Proc, name: str, value: str) -> bytes:
    args = [b"CONFIG", b"SET", name.encode(), value.encode()]
    payload = b"*4\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    return proc.call(payload)


def _wait(fn, timeout: float = 20.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return True
        time.sleep(0.02)
    return False


def _messages(proc: Proc) -> list[str]:
    out = []
    for line in proc.lines():
        m = RAW.match(line) or LEGACY.match(line)
        if m:
            out.append(m.group(m.lastindex))
    return out


@pytest.mark.parametrize("kind", ["hotkv", "valkey"])
def test_second_sigint_during_final_save_exits_now(kind):
    proc = Proc(kind, ["--save", "900 1"])
    try:
        _set_keys(proc, 20)
        assert _config_set(proc, "rdb-key-save-delay", "100000") == b"+OK\r\n"   # 2 s
        pid = proc.proc.pid
        temp = os.path.join(proc.dir, "temp-%d.rdb" % pid)
        proc.proc.send_signal(signal.SIGINT)
        assert _wait(lambda: os.path.exists(temp)), "the final save did not start"
        proc.proc.send_signal(signal.SIGINT)
        assert proc.wait() == 1
        assert not os.path.exists(temp)
        assert "You insist... exiting now." in _messages(proc)
        assert not os.path.exists(os.path.join(proc.dir, "dump.rdb"))
    finally:
        proc.cleanup()


def _info_field(proc: Proc, name: bytes) -> bytes | None:
    reply = proc.call(b"*2\r\n$4\r\nINFO\r\n$11\r\npersistence\r\n")
    for line in reply.split(b"\r\n"):
        if line.startswith(name + b":"):
            return line.split(b":", 1)[1]
    return None


@pytest.mark.parametrize("kind", ["hotkv", "valkey"])
def test_sigterm_refused_while_the_initial_aof_is_written(kind):
    proc = Proc(kind, ["--save", "", "--appendonly", "no"])
    try:
        _set_keys(proc, 10)
        assert _config_set(proc, "rdb-key-save-delay", "10000000") == b"+OK\r\n"
        assert _config_set(proc, "appendonly", "yes") == b"+OK\r\n"
        assert _wait(lambda: _info_field(proc, b"aof_rewrite_in_progress") == b"1")
        proc.proc.send_signal(signal.SIGTERM)
        assert _wait(lambda: "Writing initial AOF, can't exit." in _messages(proc))
        assert proc.call(b"*1\r\n$4\r\nPING\r\n") == b"+PONG\r\n"
        assert _config_set(proc, "shutdown-on-sigterm", "force") == b"+OK\r\n"
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.wait() == 0
        assert "Writing initial AOF. Exit anyway." in _messages(proc)
    finally:
        proc.cleanup()


@pytest.mark.parametrize("kind", ["hotkv", "valkey"])
def test_shutdown_abort_cancels_a_signal_held_by_pause_cron(kind):
    """Valkey runs a signal's shutdown from its cron: with DEBUG PAUSE-CRON 1 it
    waits, and SHUTDOWN ABORT cancels it ("Shutdown manually aborted.")."""
    proc = Proc(kind, ["--save", "900 1", "--enable-debug-command", "yes"])
    try:
        assert proc.call(b"*3\r\n$5\r\nDEBUG\r\n$10\r\npause-cron\r\n$1\r\n1\r\n") == b"+OK\r\n"
        proc.proc.send_signal(signal.SIGTERM)
        assert _wait(lambda: "Received SIGTERM scheduling shutdown..." in _messages(proc))
        assert proc.call(b"*2\r\n$8\r\nSHUTDOWN\r\n$5\r\nABORT\r\n") == b"+OK\r\n"
        assert "Shutdown manually aborted." in _messages(proc)
        assert proc.call(b"*3\r\n$5\r\nDEBUG\r\n$10\r\npause-cron\r\n$1\r\n0\r\n") == b"+OK\r\n"
        assert proc.call(b"*1\r\n$4\r\nPING\r\n") == b"+PONG\r\n"
        assert proc.call(b"*2\r\n$8\r\nSHUTDOWN\r\n$5\r\nABORT\r\n") == \
            b"-ERR No shutdown in progress.\r\n"
    finally:
        proc.cleanup()
