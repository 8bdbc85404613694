"""The command journal's cost: P1 LPUSH with the journal off, on, and on with replies.

    python bench/journal.py                      # 3 rounds of 100k requests each way
    python bench/journal.py --rounds 5 --requests 200000 --clients 50
    python bench/journal.py --dispatcher         # in process, CPU ns per command
    python bench/journal.py --instructions       # in process, under valgrind (~4 min)

One ``EmbeddedServer`` (the way tests run hotkv) takes redis-benchmark
``-P 1 -t lpush -n N -q`` three ways per round -- journal off,
``journal.start()``, ``journal.start(replies=True)`` -- in turn, the order
reversed every other round, so background load hits each alike; the journal
is cleared between runs (each run records N entries).  Reports requests/s
per run, the median of each way and its ratio to off (issue 16's target:
on >= 0.9x off), the server's CPU time per request (this process's CPU
time: the server thread is all that runs in it), which a machine shared
with other work disturbs less than req/s, and both ratios taken round by
round.  A measurement, not a test: nothing here is asserted.

``--dispatcher`` measures instead the dispatcher alone, in process, on the
CPU clock (best of 5 x 200k LPUSH parsed by the RESP parser and run through
``process_commands``, a bare client, no sockets): the code before the hook
existed (dispatch.call with its hook block taken out), the hook off, the
journal on, on with replies -- what the hook costs when off, and the
journal's own cost.  ``--instructions [N]`` runs the same under valgrind's
callgrind and counts instructions per command (N each way, dumps taken
between the ways): the one figure here no machine load moves (cache misses
are not in it).
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


_LPUSH = b"*3\r\n$5\r\nLPUSH\r\n$6\r\nmylist\r\n$3\r\nxxx\r\n"   # redis-benchmark's


def _dispatcher():
    """A bare server and client, and the ways to run LPUSHes through the
    dispatcher: name -> (process_commands, set-up).  The arguments come out
    of the RESP parser fresh for every command, as on a connection (the
    journal keeps them: reused ones would hide what that costs)."""
    import types

    from hotkv.clients.client import Client
    from hotkv.core import dispatch
    from hotkv.server import Server
    from hotkv.testing.journal import journal_of
    src = open(dispatch.__file__).read()
    start = src.index("    if server.test_hooks is not None:   # hotkv.testing")
    end = src.index("    try:\n        reply = func(client, argv)", start)
    before = types.ModuleType("hotkv.dispatch_before")
    before.__package__ = "hotkv"
    exec(compile(src[:start] + src[end:], "dispatch_before", "exec"), before.__dict__)
    server = Server({"save": ""})
    client = Client(server)
    journal = journal_of(server)
    ways = {
        "before the hook": (before.process_commands, journal.stop),
        "hook off": (dispatch.process_commands, journal.stop),
        "journal on": (dispatch.process_commands, journal.start),   # no loop: at once
        "on+replies": (dispatch.process_commands, lambda: journal.start(replies=True)),
    }
    return server, client, journal, ways


def _run_lpushes(server, client, journal, process_commands, n: int) -> None:
    from hotkv.protocol.resp import RequestParser
    parser = RequestParser()
    data = _LPUSH * 100
    for _ in range(n // 100):
        commands, _error = parser.feed(data)
        process_commands(client, commands)
        client.out.clear()


def _reset(server, journal) -> None:
    import gc
    server.dbs[0].clear()
    journal.clear()
    gc.collect()


def dispatcher_ns(rounds: int) -> None:
    server, client, journal, ways = _dispatcher()
    n = 200_000
    for rnd in range(rounds):
        best = {}
        # Alternate the order round to round: a drift in load hits each way alike.
        for way in (list(ways) if rnd % 2 == 0 else list(ways)[::-1]):
            process_commands, setup = ways[way]
            setup()
            times = []
            for _ in range(5):
                _reset(server, journal)
                t = time.process_time()
                _run_lpushes(server, client, journal, process_commands, n)
                times.append(time.process_time() - t)
            journal.stop()
            best[way] = min(times) / n * 1e9
        print("round %d  ns per LPUSH (parse + dispatch): %s; journal on/off %.3f"
              % (rnd + 1, ", ".join("%s %.0f" % kv for kv in best.items()),
                 best["hook off"] / best["journal on"]))


def _instructions_child(n: int) -> None:
    """Under callgrind: each way's n LPUSHes between two counter dumps."""
    pid = str(os.getpid())

    def dump(tag):
        subprocess.run(["callgrind_control", "--dump=" + tag, pid], check=True,
                       capture_output=True, timeout=600)
    server, client, journal, ways = _dispatcher()
    for way, (process_commands, setup) in ways.items():     # warm up: specialise, allocate
        setup()
        _reset(server, journal)
        _run_lpushes(server, client, journal, process_commands, 2000)
    journal.stop()
    dump("calibrate")
    dump("dump-alone")      # what a dump itself costs, taken off each way's count
    for i, (way, (process_commands, setup)) in enumerate(ways.items()):
        setup()
        _reset(server, journal)
        dump("setup-%d" % i)
        _run_lpushes(server, client, journal, process_commands, n)
        dump("run-%d" % i)
        journal.stop()


def instructions(n: int) -> int:
    """The dispatcher's instructions per LPUSH under valgrind's callgrind: what
    a loaded machine cannot disturb (but cache misses are not in it)."""
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            print("%s is not on PATH" % tool)
            return 1
    import glob
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=%s/cg.out" % d,
                        sys.executable, os.path.abspath(__file__), "--instructions-child",
                        str(n)], check=True, capture_output=True, timeout=3600,
                       env=dict(os.environ, PYTHONHASHSEED="0"))
        totals = {}
        for path in glob.glob(d + "/cg.out.*"):
            text = open(path).read()
            tag = re.search(r"^desc: Trigger: dump (\S+)$", text, re.M)
            if tag:
                totals[tag.group(1)] = int(re.search(r"^totals: (\d+)$", text, re.M).group(1))
    alone = totals["dump-alone"]
    _server, _client, _journal, ways = _dispatcher()
    per = {way: (totals["run-%d" % i] - alone) / n for i, way in enumerate(ways)}
    for way, v in per.items():
        print("%-16s %7.0f instructions per LPUSH (parse + dispatch)  +%5.0f over hook off"
              % (way, v, v - per["hook off"]))
    print("journal on/off %.3f, on+replies/off %.3f"
          % (per["hook off"] / per["journal on"], per["hook off"] / per["on+replies"]))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--dispatcher", action="store_true",
                    help="the dispatcher alone, in process (CPU ns per command)")
    ap.add_argument("--instructions", type=int, metavar="N", nargs="?", const=20_000,
                    help="the dispatcher alone under valgrind: instructions per command "
                         "(N commands each way, 20k by default)")
    ap.add_argument("--instructions-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.instructions_child:
        _instructions_child(args.instructions_child)
        return 0
    if args.instructions:
        return instructions(args.instructions)
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
            # Alternate the order round to round: a drift in load hits each way alike.
            for way in (list(ways) if rnd % 2 == 0 else list(ways)[::-1]):
                replies = ways[way]
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
                      % (rnd + 1, way, rps, cpu_us, recorded), flush=True)
    base = statistics.median(figures["off"])
    base_cpu = statistics.median(cpu_figures["off"])
    print()
    for way, values in figures.items():
        med = statistics.median(values)
        cpu = statistics.median(cpu_figures[way])
        print("%-11s median %8.0f req/s %.3fx off (range %.0f-%.0f); "
              "%.2f us CPU/req, off/on %.3f"
              % (way, med, med / base, min(values), max(values), cpu, base_cpu / cpu))
    # The same ratios round by round (each way's run beside off's in the same
    # round): less exposed to the load drifting over the whole run.
    for way in list(ways)[1:]:
        rps = sorted(v / o for v, o in zip(figures[way], figures["off"]))
        cpu = sorted(o / v for v, o in zip(cpu_figures[way], cpu_figures["off"]))
        print("%-11s per round: req/s x off median %.3f (%.3f-%.3f); CPU/req off/on "
              "median %.3f (%.3f-%.3f)" % (way, statistics.median(rps), rps[0], rps[-1],
                                            statistics.median(cpu), cpu[0], cpu[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
