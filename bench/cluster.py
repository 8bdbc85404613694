"""Cluster mode's two targets (issue 18), side by side in one run.

    python bench/cluster.py                       # 5 start-ups each, 5 rounds of LPUSH
    python bench/cluster.py --starts 10 --rounds 7 --requests 200000

1. Start-up: ``EmbeddedCluster(masters=3, replicas_per_master=1)`` from the
   call until every node answers ``cluster_state:ok``, against six
   valkey-server 8.1.8 processes with ``--cluster-enabled yes`` joined by
   ``valkey-cli --cluster create --cluster-replicas 1 --cluster-yes`` until
   every node says ``cluster_state:ok`` (the target: under 50 ms).
2. The price of cluster mode on one node: redis-benchmark ``-P 16 -t lpush``
   against two ``hotkv serve`` processes, standalone and
   ``--cluster-enabled yes`` (one node owning every slot), in turn each round;
   the median req/s of each and their ratio (the target: at least 0.9x),
   and each server's CPU time per request (from /proc, which a shared
   machine disturbs less than req/s).

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
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import redis  # noqa: E402

from hotkv import EmbeddedCluster  # noqa: E402
from support import ReferenceValkey, free_port, valkey_server_binary  # noqa: E402


def _ok(port: int) -> bool:
    try:
        info = redis.Redis(port=port, socket_timeout=2).execute_command("CLUSTER", "INFO")
    except redis.RedisError:
        return False
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in text


def start_hotkv_cluster() -> float:
    t0 = time.perf_counter()
    cluster = EmbeddedCluster(masters=3, replicas_per_master=1).start()
    try:
        ports = [n.port for n in cluster.nodes]
        while not all(_ok(p) for p in ports):
            time.sleep(0.001)
        return time.perf_counter() - t0
    finally:
        cluster.stop()


def start_valkey_cluster(cli: str) -> float:
    t0 = time.perf_counter()
    servers = []
    try:
        for _ in range(6):
            servers.append(ReferenceValkey("--cluster-enabled", "yes").start())
        addrs = ["127.0.0.1:%d" % s.port for s in servers]
        subprocess.run([cli, "--cluster", "create", *addrs, "--cluster-replicas", "1",
                        "--cluster-yes"], check=True, capture_output=True, timeout=120)
        deadline = time.time() + 60
        while not all(_ok(s.port) for s in servers):
            if time.time() > deadline:
                raise RuntimeError("the valkey cluster never reached cluster_state:ok")
            time.sleep(0.001)
        return time.perf_counter() - t0
    finally:
        for s in servers:
            s.stop()


def cpu_seconds(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lpush_rps(port: int, requests: int, clients: int) -> float:
    out = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-P", "16", "-t", "lpush",
         "-n", str(requests), "-c", str(clients), "-q"],
        check=True, capture_output=True, text=True, timeout=600).stdout
    m = re.findall(r"LPUSH: ([\d.]+) requests per second", out)
    if not m:
        raise RuntimeError("unexpected redis-benchmark output: %r" % out[-300:])
    return float(m[-1])


def cluster_port() -> int:
    """A free port a cluster node accepts (at most 55535: its bus port is the
    port + 10000; valkey-server and hotkv refuse a higher one)."""
    for _ in range(200):
        port = free_port()
        if port <= 55535:
            return port
    raise RuntimeError("no free port at or below 55535")


def serve(port: int, *extra: str) -> subprocess.Popen:
    d = tempfile.mkdtemp(prefix="hotkv-bench-cluster.")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "hotkv", "serve", "--port", str(port),
                             "--save", "", "--dir", d, *extra], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while True:
        try:
            redis.Redis(port=port, socket_timeout=1).ping()
            return proc
        except redis.RedisError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("hotkv serve did not start") from None
            time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--clients", type=int, default=50)
    args = ap.parse_args()
    cli = os.path.join(os.path.dirname(valkey_server_binary()), "valkey-cli")
    if not os.access(cli, os.X_OK):
        cli = shutil.which("valkey-cli") or ""
    hot = [start_hotkv_cluster() * 1000 for _ in range(args.starts)]
    print("EmbeddedCluster(3, 1) ready: median %.1f ms (%.1f-%.1f), %d starts"
          % (statistics.median(hot), min(hot), max(hot), len(hot)), flush=True)
    if cli:
        ref = [start_valkey_cluster(cli) * 1000 for _ in range(args.starts)]
        print("6 valkey-server + --cluster create ready: median %.0f ms (%.0f-%.0f); "
              "ratio %.0fx" % (statistics.median(ref), min(ref), max(ref),
                               statistics.median(ref) / statistics.median(hot)), flush=True)
    else:
        print("valkey-cli not found: the reference start-up is not measured")
    if shutil.which("redis-benchmark") is None:
        print("redis-benchmark is not on PATH: the LPUSH figures are not measured")
        return 0
    ports = {"standalone": free_port(), "cluster": cluster_port()}
    procs = {"standalone": serve(ports["standalone"]),
             "cluster": serve(ports["cluster"], "--cluster-enabled", "yes")}
    rps: dict = {k: [] for k in procs}
    cpu: dict = {k: [] for k in procs}
    try:
        for way, port in ports.items():
            lpush_rps(port, 20_000, args.clients)            # warm-up
        for rnd in range(args.rounds):
            for way, port in ports.items():
                redis.Redis(port=port).delete("mylist")
                c0 = cpu_seconds(procs[way].pid)
                rps[way].append(lpush_rps(port, args.requests, args.clients))
                cpu[way].append((cpu_seconds(procs[way].pid) - c0) / args.requests * 1e6)
                print("round %d  %-10s %10.0f req/s  %5.2f us CPU/req"
                      % (rnd + 1, way, rps[way][-1], cpu[way][-1]), flush=True)
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
    s, c = statistics.median(rps["standalone"]), statistics.median(rps["cluster"])
    cs, cc = statistics.median(cpu["standalone"]), statistics.median(cpu["cluster"])
    print("P16 LPUSH median req/s: standalone %.0f, cluster %.0f -> cluster/standalone %.2f "
          "(target >= 0.90)" % (s, c, c / s))
    print("server CPU us/req: standalone %.2f, cluster %.2f -> standalone/cluster %.2f"
          % (cs, cc, cs / cc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
