"""Crash tests: ``hotkv serve --appendonly yes`` killed with SIGKILL.

Producers push numbered jobs the ways job queues do (LPUSH, BLMOVE to a
processing list, XADD + XREADGROUP, SET with a TTL) and record what the
server acknowledged; the server is SIGKILLed at a random moment and
restarted on the same directory; every acknowledged job must be there
exactly once.  Also: a kill during BGREWRITEAOF, damaged files and a full
disk (RLIMIT_FSIZE in the server process) through the real command line.

Servers use ports 21220-21239.
"""

from __future__ import annotations

import collections
import os
import random
import resource
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

from support import RawClient, aof_manifest, encode_command

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="needs Linux (SIGKILL, RLIMIT_FSIZE, prlimit)")

PORT_BASE = 21220


class Server:
    """A ``hotkv serve`` process on dir, restartable."""

    def __init__(self, d, port, fsync="always", extra=(), fsize=0):
        self.dir = d
        self.port = port
        self.fsync = fsync
        self.extra = list(extra)
        self.fsize = fsize
        self.proc = None
        self.log_path = os.path.join(d, "server.log")

    def _preexec(self):
        if self.fsize:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.fsize, resource.RLIM_INFINITY))

    def start(self, expect_fail=False, extra=()):
        for _ in range(50):
            code = self._start(expect_fail, extra)
            # A rewrite child of the killed server may hold the port for a
            # moment: it dies with its parent, asynchronously.
            if expect_fail or code == 0 or "address already in use" not in self.log()[-300:]:
                return code
            time.sleep(0.1)
        raise AssertionError("port still in use:\n" + self.log())

    def _start(self, expect_fail, extra):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from hotkv.tools.cli import main; sys.exit(main())",
             "serve", "--port", str(self.port), "--bind", "127.0.0.1", "--appendonly", "yes",
             "--appendfsync", self.fsync, "--dir", self.dir, "--loglevel", "notice",
             *self.extra, *extra],
            stdout=subprocess.PIPE, stderr=log, preexec_fn=self._preexec)
        log.close()
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else b""
        if expect_fail:
            self.proc.wait(30)
            return self.proc.returncode
        if not line and self.proc.wait(30) != 0 and "address already in use" in self.log()[-300:]:
            return self.proc.returncode
        assert b"listening" in line, "server did not start:\n" + self.log()
        return 0

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def client(self, timeout=5.0) -> RawClient:
        return RawClient("127.0.0.1", self.port, timeout=timeout)


@pytest.fixture
def make_server(tmp_path):
    made = []

    def make(port_offset, **kw):
        s = Server(str(tmp_path), PORT_BASE + port_offset, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.kill()


def value(reply: bytes):
    """A tiny RESP decoder for the replies we check."""
    v, _ = _decode(reply, 0)
    return v


def _decode(b, pos):
    kind = b[pos:pos + 1]
    nl = b.index(b"\r\n", pos)
    head = b[pos + 1:nl]
    pos = nl + 2
    if kind in (b"+", b"-"):
        return (head if kind == b"+" else Exception(head.decode())), pos
    if kind == b":":
        return int(head), pos
    if kind == b"$":
        n = int(head)
        if n < 0:
            return None, pos
        return b[pos:pos + n], pos + n + 2
    if kind == b"*":
        n = int(head)
        if n < 0:
            return None, pos
        out = []
        for _ in range(n):
            x, pos = _decode(b, pos)
            out.append(x)
        return out, pos
    raise ValueError(b[pos:pos + 20])


class Workload:
    """Job-queue traffic; records exactly what the server acknowledged."""

    def __init__(self, port, tag):
        self.port = port
        self.tag = tag
        self.stop = threading.Event()
        self.pushed = set()          # LPUSH acknowledged
        self.moved = set()           # BLMOVE returned it
        self.xadded = {}             # id -> job, XADD acknowledged
        self.delivered = set()       # ids XREADGROUP returned
        self.setkeys = set()         # SET ... EX acknowledged
        self.threads = [threading.Thread(target=self._run, args=(fn,), daemon=True)
                        for fn in (self._push, self._move, self._xadd, self._xread, self._set)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)

    def _run(self, fn):
        try:
            c = RawClient("127.0.0.1", self.port, timeout=5)
        except OSError:
            return
        try:
            fn(c)
        except (OSError, ConnectionError, ValueError):
            pass          # the server died under us: what was acked is recorded
        finally:
            c.close()

    def _push(self, c):
        i = 0
        while not self.stop.is_set():
            job = b"%s-p%d" % (self.tag, i)
            if c.call("LPUSH", "queue", job).startswith(b":"):
                self.pushed.add(job)
            i += 1

    def _move(self, c):
        while not self.stop.is_set():
            r = value(c.call("BLMOVE", "queue", "processing", "RIGHT", "LEFT", "0.05"))
            if isinstance(r, bytes):
                self.moved.add(r)

    def _xadd(self, c):
        i = 0
        while not self.stop.is_set():
            job = b"%s-x%d" % (self.tag, i)
            r = value(c.call("XADD", "jobs", "*", "job", job))
            if isinstance(r, bytes):
                self.xadded[r] = job
            i += 1

    def _xread(self, c):
        while not self.stop.is_set():
            r = value(c.call("XREADGROUP", "GROUP", "g", "worker", "COUNT", "20", "BLOCK", "50",
                             "STREAMS", "jobs", ">"))
            if r:
                for _, entries in r:
                    for eid, _fields in entries:
                        self.delivered.add(eid)

    def _set(self, c):
        i = 0
        while not self.stop.is_set():
            key = b"job:%s-s%d" % (self.tag, i)
            if c.call("SET", key, "payload", "EX", "3600") == b"+OK\r\n":
                self.setkeys.add(key)
            i += 1


class Ledger:
    """Everything acknowledged over all rounds."""

    def __init__(self):
        self.pushed, self.moved, self.delivered, self.setkeys = set(), set(), set(), set()
        self.xadded = {}

    def add(self, w: Workload):
        self.pushed |= w.pushed
        self.moved |= w.moved
        self.delivered |= w.delivered
        self.setkeys |= w.setkeys
        self.xadded.update(w.xadded)

    def verify(self, c: RawClient):
        queue = value(c.call("LRANGE", "queue", "0", "-1"))
        processing = value(c.call("LRANGE", "processing", "0", "-1"))
        counts = collections.Counter(queue + processing)
        dup = [j for j, n in counts.items() if n > 1]
        assert not dup, "jobs present twice: %r" % dup[:5]
        lost = [j for j in self.pushed if counts[j] != 1]
        assert not lost, "acknowledged LPUSH jobs lost: %r" % lost[:5]
        in_processing = set(processing)
        lost = [j for j in self.moved if j not in in_processing]
        assert not lost, "acknowledged BLMOVE jobs not in processing: %r" % lost[:5]
        entries = value(c.call("XRANGE", "jobs", "-", "+"))
        stream = {eid: fields[1] for eid, fields in entries}
        jobs = collections.Counter(stream.values())
        assert all(n == 1 for n in jobs.values()), "a stream job twice"
        lost = [i for i, job in self.xadded.items() if stream.get(i) != job]
        assert not lost, "acknowledged XADD entries lost: %r" % lost[:5]
        pel = {p[0] for p in value(c.call("XPENDING", "jobs", "g", "-", "+", "1000000"))}
        lost = [i for i in self.delivered if i not in pel]
        assert not lost, "delivered entries missing from the PEL: %r" % lost[:5]
        for key in self.setkeys:
            ttl = value(c.call("PTTL", key))
            assert ttl > 0, "acknowledged SET %r: ttl %r" % (key, ttl)
        return len(self.pushed) + len(self.xadded) + len(self.setkeys)


def _setup_group(s: Server):
    c = s.client()
    c.call("XGROUP", "CREATE", "jobs", "g", "$", "MKSTREAM")
    c.close()


@pytest.mark.parametrize("fsync,rounds,port", [("always", 3, 0), ("everysec", 2, 1)])
def test_sigkill_loses_no_acknowledged_job(make_server, fsync, rounds, port):
    s = make_server(port, fsync=fsync)
    s.start()
    _setup_group(s)
    ledger = Ledger()
    rng = random.Random()
    total = 0
    for r in range(rounds):
        w = Workload(s.port, b"r%d" % r).start()
        time.sleep(rng.uniform(0.3, 0.8))
        s.kill()                               # SIGKILL: no shutdown path runs
        w.join()
        ledger.add(w)
        s.start()
        c = s.client()
        total = ledger.verify(c)
        c.close()
    assert total > 50, "the workload barely ran"
    assert len(ledger.moved) > 0 and len(ledger.delivered) > 0


def _preload(s: Server, n: int):
    c = s.client(timeout=30)
    batch = []
    for i in range(0, n, 500):
        batch.append(encode_command("MSET", *[x for j in range(i, min(n, i + 500))
                                              for x in (b"pre:%d" % j, b"v%d" % j)]))
    c.send_raw(b"".join(batch))
    for _ in batch:
        assert c.read_reply() == b"+OK\r\n"
    c.close()


def _check_preload(c: RawClient, n: int):
    for i in range(0, n, 5000):
        keys = [b"pre:%d" % j for j in range(i, min(n, i + 5000))]
        got = value(c.call("MGET", *keys))
        assert got == [b"v%d" % j for j in range(i, min(n, i + 5000))]


def test_sigkill_during_bgrewriteaof(make_server):
    s = make_server(2, fsync="always")
    s.start()
    _setup_group(s)
    n = 100_000
    _preload(s, n)
    ledger = Ledger()
    rng = random.Random()
    for r, finish in enumerate((False, False, True)):
        w = Workload(s.port, b"w%d" % r).start()
        time.sleep(0.1)
        c = s.client()
        base_before = [seq for _, seq, k in (aof_manifest(s.dir) or []) if k == "b"]
        assert c.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
        if finish:
            # Let it complete, keep writing to the new file, then kill.
            deadline = time.time() + 30
            while b"aof_rewrite_in_progress:1" in c.call("INFO", "persistence"):
                assert time.time() < deadline
                time.sleep(0.02)
            assert b"aof_last_bgrewrite_status:ok" in c.call("INFO", "persistence")
            time.sleep(0.2)
        else:
            time.sleep(rng.uniform(0.0, 0.3))
        c.close()
        s.kill()
        w.join()
        ledger.add(w)
        s.start()
        c = s.client(timeout=30)
        ledger.verify(c)
        _check_preload(c, n)
        c.close()
        assert not [f for f in os.listdir(s.dir) if f.startswith("temp-rewriteaof")]
        # The manifest names existing files only, no temp file is left; a
        # killed rewrite left the incr file opened at its fork in it.
        adir = os.path.join(s.dir, "appendonlydir")
        rows = aof_manifest(s.dir)
        assert rows and all(os.path.exists(os.path.join(adir, f)) for f, _, _ in rows)
        assert not [f for f in os.listdir(adir) if f.startswith("temp-")]
        assert [k for _, _, k in rows].count("b") == 1
        base_after = [seq for _, seq, k in rows if k == "b"]
        if not finish and base_after == base_before:
            # Killed before it finished (on a loaded machine it may finish
            # first: then its new base is there and the check does not apply).
            assert [k for _, _, k in rows].count("i") >= 2, rows


def test_damaged_files_through_the_command_line(make_server):
    """An old single-file AOF is moved into appendonlydir as the base of a
    new manifest (Valkey's upgrade), then loaded."""
    s = make_server(3)
    path = os.path.join(s.dir, "appendonly.aof")
    moved = os.path.join(s.dir, "appendonlydir", "appendonly.aof")
    good = encode_command("SELECT", "0") + encode_command("RPUSH", "queue", "a", "b")
    with open(path, "wb") as f:
        f.write(good + encode_command("RPUSH", "queue", "c")[:-4])
    # Refused when aof-load-truncated is off: clear message with the offset.
    assert s.start(expect_fail=True, extra=("--aof-load-truncated", "no")) != 0
    assert "offset %d" % len(good) in s.log() and "aof-load-truncated" in s.log()
    # Cut (with a warning) when it is on, the default.
    s.start()
    c = s.client()
    assert value(c.call("LRANGE", "queue", "0", "-1")) == [b"a", b"b"]
    c.close()
    s.kill()
    assert "Truncating" in s.log() and "migrated an old-style AOF" in s.log()
    assert not os.path.exists(path) and os.path.getsize(moved) == len(good)
    # Garbage in the middle: refused, whatever aof-load-truncated says.
    with open(moved, "wb") as f:
        f.write(good + b"\x00\x01garbage" + encode_command("SET", "k", "v"))
    assert s.start(expect_fail=True) != 0
    assert "offset %d" % len(good) in s.log()
    assert os.path.getsize(moved) > len(good) + 10          # never truncated


def test_full_disk_refuses_writes_serves_reads_and_recovers(make_server):
    """Under everysec a full disk is not fatal (under always it is: the next
    test).  The file-size limit cuts the record that reaches it short,
    which counts as ENOSPC, as Valkey reports a short write."""
    s = make_server(4, fsync="everysec", fsize=48 * 1024)
    s.start()
    writer = s.client(timeout=2)
    reader = s.client()
    acked = []
    held_key = None
    payload = b"x" * 700
    for i in range(200):
        key = b"d:%d" % i
        writer.send("SET", key, payload)
        try:
            reply = writer.read_reply()
        except OSError:           # no reply: held because it is not on disk
            held_key = key
            break
        assert reply == b"+OK\r\n", reply
        acked.append(key)
    assert held_key is not None, "the file-size limit was never reached"
    assert acked, "nothing could be written at all"
    # Reads are served; writes are refused with Redis's MISCONF text.
    assert value(reader.call("GET", acked[0])) == payload
    err = reader.call("SET", "other", "1")
    assert err == b"-MISCONF Errors writing to the AOF file: No space left on device\r\n", err
    assert b"aof_last_write_status:err" in reader.call("INFO", "persistence")
    # Room again: the held write is acknowledged, writes resume.
    resource.prlimit(s.proc.pid, resource.RLIMIT_FSIZE,
                     (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    writer.sock.settimeout(10)
    assert writer.read_reply() == b"+OK\r\n"
    acked.append(held_key)
    deadline = time.time() + 10
    while reader.call("SET", "after", "1") != b"+OK\r\n":
        assert time.time() < deadline
        time.sleep(0.05)
    assert b"aof_last_write_status:ok" in reader.call("INFO", "persistence")
    writer.close()
    reader.close()
    s.kill()
    s.fsize = 0
    s.start()
    c = s.client()
    assert value(c.call("MGET", *acked)) == [payload] * len(acked)
    assert value(c.call("GET", "other")) is None and value(c.call("GET", "after")) == b"1"
    c.close()
    assert "Truncating" not in s.log()      # the partial record was cut back
    assert "Short write while writing to the AOF file" in s.log()


def test_full_disk_under_always_exits_and_keeps_every_acknowledged_write(make_server):
    """Under always a write that cannot reach the file is fatal, as in
    valkey-server: the SET in flight and the GET pipelined behind it are
    never answered, the process logs Valkey's line and exits with status 1
    (no final save); after a restart with room again every acknowledged
    write is there and the unanswered one is not."""
    s = make_server(5, fsync="always", fsize=48 * 1024)
    s.start()
    writer = s.client(timeout=30)
    acked = []
    lost_key = None
    payload = b"x" * 700
    for i in range(200):
        key = b"d:%d" % i
        writer.send_raw(encode_command("SET", key, payload) + encode_command("GET", key))
        try:
            replies = (writer.read_reply(), writer.read_reply())
        except ConnectionError:           # closed without a reply: the server exited
            lost_key = key
            break
        assert replies == (b"+OK\r\n", b"$700\r\n" + payload + b"\r\n"), replies
        acked.append(key)
    assert lost_key is not None, "the file-size limit was never reached"
    assert acked, "nothing could be written at all"
    assert writer.buf == b""                # not even the start of a reply
    writer.close()
    assert s.proc.wait(30) == 1
    assert ("Can't recover from AOF write error when the AOF fsync policy is 'always'. "
            "Exiting...") in s.log()
    s.proc = None
    s.fsize = 0
    s.start()
    c = s.client()
    assert value(c.call("MGET", *acked)) == [payload] * len(acked)
    assert value(c.call("EXISTS", lost_key)) == 0
    c.close()
    assert "Truncating" not in s.log()      # the partial record was cut back before the exit
