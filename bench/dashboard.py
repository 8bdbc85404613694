"""The dashboard's cost: P1 LPUSH with the dashboard open and /metrics
scraped every second, against the same server with http-port off (issue 19's
target: >= 0.95x).

    python bench/dashboard.py                      # 3 rounds of 100k requests each way
    python bench/dashboard.py --rounds 5 --requests 200000 --clients 50
    python bench/dashboard.py --keys 100000     # beside 100k other keys (costly snapshots)
    python bench/dashboard.py --queues 10000    # the cost of a sample with 10k counted lists
    python bench/dashboard.py --handlers [--tree DIR]   # LPUSH+RPOP handler CPU, counters off/on
    python bench/dashboard.py --pipeline 16 --tests lpush,lpop [--tree DIR]

``--handlers`` times the LPUSH and RPOP handlers themselves, in this process
(no network: what the counters' attribute test and counting add to a list
command), CPU time per LPUSH+RPOP pair, best of 15, counters off and on;
``--tree DIR`` imports hotkv from DIR (``git archive <commit> | tar -x -C
DIR``: the same figure for another commit, e.g. before the counters).
``--pipeline``/``--tests`` change the load (redis-benchmark ``-P``/``-t``;
the CPU per request is over all the tests' requests).

One ``EmbeddedServer`` takes redis-benchmark ``-P 1 -t lpush -n N -q`` two
ways per round, in turn: "off" (``CONFIG SET http-port 0``: no listener, no
sampler) and "on" (``CONFIG SET http-port P``; a child process plays the
open page -- GET /api/state once a second, as the page polls -- and a
Prometheus scraper -- GET /metrics once a second).  The list is emptied
between runs.  Reports req/s per run, the median of each way and its ratio,
and the server's CPU time per request (this process's CPU time: the server
thread is all that runs in it -- the pollers are another process), which a
shared machine disturbs less than req/s; also the cost of one snapshot
(the sampler's once-a-second work) on the final list, and of one whole
sample (the per-list counters' sweep, hotkv.http.counts, and the snapshot)
once ``--queues`` lists (default 1,000) have been pushed to and popped from
with the counters on.  With the dashboard on, every LPUSH is also counted
(hotkv.http.counts: the "on" way pays it).
A measurement, not a test: nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if "--tree" in sys.argv:
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--tree") + 1]))
else:
    sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from hotkv import EmbeddedServer  # noqa: E402

POLLER = r"""
import sys, time, urllib.request
port = int(sys.argv[1])
base = "http://127.0.0.1:%d" % port
while True:
    t = time.monotonic()
    for path in ("/api/state", "/metrics"):
        try:
            urllib.request.urlopen(base + path, timeout=10).read()
        except OSError:
            pass
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))
"""


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keys", type=int, default=0,
                    help="other keys in the server (a big keyspace: costly snapshots)")
    ap.add_argument("--queues", type=int, default=1000,
                    help="counted lists for the cost of one sample (counters' sweep)")
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--tests", default="lpush", help="redis-benchmark -t (lpush, lpush,lpop)")
    ap.add_argument("--handlers", action="store_true",
                    help="only time the LPUSH/RPOP handlers in-process, counters off and on")
    ap.add_argument("--tree", help="import hotkv from this directory (with --handlers)")
    args = ap.parse_args()
    if args.handlers:
        return handlers()
    if shutil.which("redis-benchmark") is None:
        print("redis-benchmark is not on PATH")
        return 1
    import redis
    figures: dict = {"off": [], "on": []}
    cpu_figures: dict = {"off": [], "on": []}
    http_port = free_port()
    with EmbeddedServer() as server:
        r = redis.Redis(host="127.0.0.1", port=server.port)
        fill(r, args.keys)
        tests, pipeline = args.tests, args.pipeline

        def lpush_rps(port, requests, clients):
            return bench_rps(port, requests, clients, pipeline, tests)
        lpush_rps(server.port, 10_000, args.clients)      # warm-up
        r.delete("mylist")
        for rnd in range(args.rounds):
            for way in ("off", "on"):
                poller = None
                if way == "on":
                    r.config_set("http-port", http_port)
                    poller = subprocess.Popen([sys.executable, "-c", POLLER, str(http_port)])
                    time.sleep(1.5)    # the page and the scraper are polling
                cpu = time.process_time()
                rps = lpush_rps(server.port, args.requests, args.clients)
                cpu_us = (time.process_time() - cpu) / (args.requests * len(tests.split(","))) \
                    * 1e6
                if poller is not None:
                    poller.kill()
                    poller.wait()
                    r.config_set("http-port", 0)
                if rnd == args.rounds - 1 and way == "on":
                    snap_ms = snapshot_ms(server)
                    sample = sample_ms(server, r, args.queues)
                r.delete("mylist")   # redis-benchmark's LPUSH key; other keys stay
                figures[way].append(rps)
                cpu_figures[way].append(cpu_us)
                print("round %d  %-4s %10.0f req/s  %6.2f us CPU/req"
                      % (rnd + 1, way, rps, cpu_us), flush=True)
    off, on = statistics.median(figures["off"]), statistics.median(figures["on"])
    coff, con = statistics.median(cpu_figures["off"]), statistics.median(cpu_figures["on"])
    print("P%d %s" % (args.pipeline, args.tests))
    print("median req/s: off %.0f, on %.0f -> on/off %.2f (target >= 0.95)" % (off, on, on / off))
    print("median server CPU us/req: off %.2f, on %.2f -> off/on %.2f" % (coff, con, coff / con))
    print("one snapshot with a %d-item list and %d other keys: %.1f ms"
          % (args.requests, args.keys, snap_ms))
    print("one sample (counters' sweep + snapshot) with %d counted lists: %.1f ms"
          % (args.queues, sample))
    return 0


def bench_rps(port: int, requests: int, clients: int, pipeline: int, tests: str) -> float:
    """redis-benchmark -P pipeline -t tests: the median of the tests' req/s."""
    out = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-P", str(pipeline), "-t", tests,
         "-n", str(requests), "-c", str(clients), "-q"],
        check=True, capture_output=True, text=True, timeout=600).stdout
    # "LPUSH: 81234.56 requests per second, p50=..." (after \r progress lines)
    found = [float(v) for v in re.findall(r"[A-Z]+: ([\d.]+) requests per second", out)]
    if not found:
        raise RuntimeError("unexpected redis-benchmark output: %r" % out[-300:])
    return statistics.median(found)


def fill(r, n: int):
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.set("key:%d" % i, "v")
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()


def snapshot_ms(server) -> float:
    """CPU ms of one snapshot of the server as it is, best of 5 (run on its
    loop thread: this process's CPU clock counts it)."""
    from hotkv.http.state import snapshot
    from hotkv.testing import on_loop
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        on_loop(server.server, lambda: snapshot(server.server, 50))
        best = min(best, (time.process_time() - t0) * 1000)
    return best


def handlers() -> int:
    import timeit
    import types

    import hotkv.commands  # noqa: F401  (registers every command)
    from hotkv.core.registry import COMMANDS
    from hotkv.server import Server
    s = Server()
    c = types.SimpleNamespace(db=s.dbs[0], server=s, in_exec=False, is_fake=False)
    lpush, rpop = COMMANDS["lpush"].func, COMMANDS["rpop"].func
    push, pop = [b"LPUSH", b"q", b"job-payload"], [b"RPOP", b"q"]
    lpush(c, [b"LPUSH", b"q", b"keep"])   # the list never empties

    def pair():
        lpush(c, push)
        rpop(c, pop)
    ways = ["off"]
    try:
        from hotkv.http import counts
        ways.append("on")
    except ImportError:   # a commit before the counters
        counts = None
    for way in ways:
        if way == "on":
            counts.start(s)
        best = min(timeit.repeat(pair, number=100_000, repeat=15,
                                 timer=time.process_time)) / 100_000
        print("counters %-3s %7.1f ns CPU per LPUSH+RPOP pair (handlers only)"
              % (way, best * 1e9))
    return 0


def sample_ms(server, r, queues: int) -> float:
    """CPU ms of one Sampler.sample() (sweep + snapshot) once ``queues``
    lists were pushed to and popped from (emptied: counted, no key) with the
    counters on, best of 5; the lists' counters are then dropped."""
    from hotkv.http.state import Sampler
    from hotkv.testing import on_loop
    try:
        from hotkv.http import counts
    except ImportError:   # a commit before the counters (--tree)
        return float("nan")
    on_loop(server.server, lambda: counts.start(server.server))
    pipe = r.pipeline(transaction=False)
    for i in range(queues):
        pipe.lpush("queue:%d" % i, "job").rpop("queue:%d" % i)
        if i % 5_000 == 4_999:
            pipe.execute()
    pipe.execute()
    sampler = Sampler(server.server)
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        on_loop(server.server, sampler.sample)
        best = min(best, (time.process_time() - t0) * 1000)
    on_loop(server.server, lambda: counts.stop(server.server))
    return best


if __name__ == "__main__":
    sys.exit(main())
