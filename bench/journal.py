"""The command journal's cost: P1 LPUSH with the journal off, on, and on with replies.

    python bench/journal.py                      # 3 rounds of 100k requests each way
    python bench/journal.py --rounds 5 --requests 200000 --clients 50

One ``EmbeddedServer`` (the way tests run hotkv) takes redis-benchmark
``-P 1 -t lpush -n N -q`` three ways per round, in turn -- journal off,
``journal.start()``, ``journal.start(replies=True)`` -- so background load
hits each alike; the journal is cleared between runs (each run records N
entries).  Reports requests/s per run, the median of each way and its ratio
to off (issue 16's target: on >= 0.9x off), and the server's CPU time
per request (this process's CPU time: the server thread is all that runs in
it), which a machine shared with other work disturbs less than req/s.
A measurement, not a test: nothing here is asserted.

``--dispatcher`` measures instead the dispatcher alone, in process, on the
CPU clock (best of 5 x 200k LPUSH through ``process_commands``, a bare
client, no sockets): the code before the hook existed (dispatch.call with
its two hook lines taken out), the hook off, the journal on, on with
replies -- what the hook costs when off, and the journal's own cost.
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
sys.path.insert(0, os.path.dirname(HERE))

from hotkv import EmbeddedServer  # noqa: E402


def lpush_rps(port: int, requests: int, clients: int) -> float:
    out = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-P", "1", "-t", "lpush",
         "-n", str(requests), "-c", str(clients), "-q"],
        check=True, capture_output=True, text=True, timeout=600).stdout
    # "LPUSH: 81234.56 requests per second, p50=..." (after \r progress lines)
    m = re.findall(r"LPUSH: ([\d.]+) requests per second", out)
    if not m:
        raise RuntimeError("unexpected redis-benchmark output: %r" % out[-300:])
    return float(m[-1])


def dispatcher_ns(rounds: int) -> None:
    import types

    from hotkv import dispatch
    from hotkv.client import Client
    from hotkv.server import Server
    from hotkv.testing.journal import journal_of
    src = open(dispatch.__file__).read()
    hook = ("    func = cmd.func\n"
            "    if server.test_hooks is not None:   # hotkv.testing: a fault or the journal "
            "is on\n"
            "        func = server.test_hooks(client, cmd, argv, func, outer)\n"
            "    try:\n"
            "        reply = func(client, argv)")
    if src.count(hook) != 1:
        raise RuntimeError("dispatch.call's hook lines changed: update this script")
    before = types.ModuleType("hotkv.dispatch_before")
    before.__package__ = "hotkv"
    exec(compile(src.replace(hook, "    try:\n        reply = cmd.func(client, argv)"),
                 "dispatch_before", "exec"), before.__dict__)
    server = Server({"save": ""})
    client = Client(server)
    journal = journal_of(server)
    n = 200_000
    batch = [[b"LPUSH", b"q", b"x"]] * 1000

    def run(process_commands) -> float:
        best = float("inf")
        for _ in range(5):
            server.dbs[0].clear()
            journal.clear()
            t = time.process_time()
            for _ in range(n // len(batch)):
                process_commands(client, batch)
                client.out.clear()
            best = min(best, time.process_time() - t)
        return best / n * 1e9

    for rnd in range(rounds):
        old = run(before.process_commands)
        off = run(dispatch.process_commands)
        journal.start()       # no loop: start/stop act at once
        on = run(dispatch.process_commands)
        journal.start(replies=True)
        replies = run(dispatch.process_commands)
        journal.stop()
        print("round %d  ns per LPUSH: before the hook %.0f, hook off %.0f, journal on %.0f, "
              "on+replies %.0f" % (rnd + 1, old, off, on, replies))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--dispatcher", action="store_true",
                    help="the dispatcher alone, in process (CPU ns per command)")
    args = ap.parse_args()
    if args.dispatcher:
        dispatcher_ns(args.rounds)
        return 0
    if shutil.which("redis-benchmark") is None:
        print("redis-benchmark is not on PATH")
        return 1
    ways = {"off": None, "on": False, "on+replies": True}
    figures: dict = {w: [] for w in ways}
    cpu_figures: dict = {w: [] for w in ways}
    import redis
    with EmbeddedServer() as server:
        flush = redis.Redis(host="127.0.0.1", port=server.port)
        lpush_rps(server.port, 10_000, args.clients)      # warm-up
        for rnd in range(args.rounds):
            for way, replies in ways.items():
                server.journal.clear()
                if replies is not None:
                    server.journal.start(replies=replies)
                cpu = time.process_time()   # this process is the server (one thread)
                rps = lpush_rps(server.port, args.requests, args.clients)
                cpu_us = (time.process_time() - cpu) / args.requests * 1e6
                recorded = len(server.journal)
                server.journal.stop()
                server.journal.clear()
                flush.flushall()     # each run starts from an empty list
                figures[way].append(rps)
                cpu_figures[way].append(cpu_us)
                print("round %d  %-11s %10.0f req/s  %6.2f us CPU/req  (%d entries)"
                      % (rnd + 1, way, rps, cpu_us, recorded))
    base = statistics.median(figures["off"])
    base_cpu = statistics.median(cpu_figures["off"])
    print()
    for way, values in figures.items():
        med = statistics.median(values)
        cpu = statistics.median(cpu_figures[way])
        print("%-11s median %8.0f req/s %.3fx off (range %.0f-%.0f); "
              "%.2f us CPU/req, off/on %.3f"
              % (way, med, med / base, min(values), max(values), cpu, base_cpu / cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
