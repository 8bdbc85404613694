"""CPU time per request of a hotkv server process at two commits, side by side.

    python bench/cpu_ab.py BASE HEAD [ROUNDS]

Each commit's tree is exported (git archive) under a temporary directory;
each round starts ``python -m hotkv serve`` from each tree in turn (the
order alternates by round) and drives it with ``redis-benchmark -t
set,get,lpush -n 100000 -q`` at -P 1 and -P 16, reading the server process's
utime+stime from /proc before and after.  CPU time, not wall time: other
processes on a loaded machine slow both equally, their spread remains.
Prints the median microseconds per request of each commit and the median
(and range) of the per-round ratios HEAD/BASE.  Linux only (/proc).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUESTS = 100000
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _round(tree: str) -> dict:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=tree)
    proc = subprocess.Popen([sys.executable, "-m", "hotkv", "serve", "--port", str(port)],
                            cwd=tree, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        out = {}
        for pipe in ("1", "16"):
            before = _cpu(proc.pid)
            subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set,get,lpush",
                            "-n", str(REQUESTS), "-P", pipe, "-q"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            out["P" + pipe] = (_cpu(proc.pid) - before) / (3 * REQUESTS) * 1e6
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv) -> int:
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    revs = argv[:2]
    rounds = int(argv[2]) if len(argv) > 2 else 6
    with tempfile.TemporaryDirectory(prefix="hotkv-cpu-ab-") as tmp:
        trees = []
        for i, rev in enumerate(revs):
            trees.append(os.path.join(tmp, str(i)))
            os.makedirs(trees[i])
            subprocess.run("git -C %s archive %s | tar -x -C %s" % (ROOT, rev, trees[i]),
                           shell=True, check=True)
        results = [{"P1": [], "P16": []} for _ in revs]
        for r in range(rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                for tag, us in _round(trees[i]).items():
                    results[i][tag].append(us)
    base, head = revs
    for tag in ("P1", "P16"):
        a, b = results[0][tag], results[1][tag]
        ratios = [y / x for x, y in zip(a, b)]
        print("%-4s us CPU/request  %s %.2f (%.2f-%.2f)  %s %.2f (%.2f-%.2f)  "
              "ratio median %.3f (%.3f-%.3f)" % (
                  tag, base, statistics.median(a), min(a), max(a), head, statistics.median(b),
                  min(b), max(b), statistics.median(ratios), min(ratios), max(ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
