"""Run Valkey's own Tcl test units against hotkv and guard the pass counts.

Each unit gets a fresh hotkv server (units change CONFIG values and leave
them changed), started in a subprocess on a free port, and is run by the
bundle's ``run.sh`` (../shared/conformance beside the repository, or
$HOTKV_CONFORMANCE_DIR).  Tests hotkv is known to fail are listed, each with
its reason, in ``compat/conformance-skip.txt`` (run.sh's skip-file format);
``compat/conformance-baseline.json`` records the pass count per unit that
hotkv has reached.  ``--check`` exits 1 if any unit passes fewer tests than
recorded or fails any test not in the skip file.

    python compat/conformance.py                # all 13 units, report
    python compat/conformance.py --check        # what CI runs
    python compat/conformance.py type/list multi --check
    python compat/conformance.py --one-server --check   # all units on one server

Back to back on one server (``--one-server``), the reference valkey-server
8.1.8 passes exactly the counts below too (1,293 over the 19 units, measured
with the bundle's reference.sh); hotkv is held to the same baseline there.

Spawn mode (``--spawn``): the harness starts the server itself, as it starts
valkey-server, through ``compat/valkey-server-shim`` (``hotkv.tools.cli.valkey_server``),
once or several times per unit; this runs the units external mode cannot (acl,
auth, aofrw, info, shutdown, limits, networking, querybuf...) and every test
tagged ``external:skip``.  The profile is the bundle's run-spawn.sh's (no tag
filter, the bundle's skip.txt), so the counts compare with the reference's in
its reference-spawn.txt (2,920 passed over 54 units).  hotkv's known failures in
the units CI runs, each with its reason, are ``compat/conformance-spawn-skip.txt``
(a CI unit fails on any other failure); every unit is held to its pass count in
the baseline file, which holds one count per unit and mode (``external``,
``spawn``).

    python compat/conformance.py --spawn --check          # SPAWN_CI_UNITS, as CI
    python compat/conformance.py --spawn --all --check    # every unit (27 min, loaded)
    python compat/conformance.py --spawn acl shutdown --record
    HOTKV_SPAWN_ALL=1 pytest compat/test_conformance.py -k spawn   # every unit

CI runs ``SPAWN_CI_UNITS`` in spawn mode, the units chosen for what they guard
(server start, config files and command line, shutdown and signals, ACL files,
listeners, oom score, clients) at their measured cost: the first 13 take 44 s on 2
cores (12 s of it acl and introspection-2); pubsub, protocol, multi, info,
type/stream-cgroups, functions and slowlog joined them later (their replication-stream,
AOF and restart tests): 1, 2, 6, 3, 6, 6 and 2 s at load 8 (the 17 first units took
55 s together then), 4, 9, 20, 15, 19, 10 and 2 s at load 12; the slow units (hyperloglog
about a minute, aofrw 40 s, scripting 3 min, type/list, maxmemory, and wait and
client-eviction, which time out) are left to ``--all``.
Recorded per unit at commits fbea1c2 (the full run), 88a29f0 and 8f940be (the
units re-run after later fixes); a second full run at 1dfa258 (21 min) passed
2,153, no unit below its record.  Re-measured at 55a3271-fc1c8d6 (the gap units,
at load 11-12): multi 61, pubsub 31, protocol 25, type/stream-cgroups 65, aofrw 22,
scripting 552 (stops at SCRIPT DEBUG, which hotkv has not), info 19, introspection
49, functions 108 (parity), maxmemory 19 (times out at 400 s), slowlog 20 (parity),
other 28, dump 26, expire 64, wait 38 (parity, at 1abe1e2: 36 s), scan 24 and
sort 54 (their cluster halves stop at CLUSTER ADDSLOTSRANGE: a hotkv cluster node
owned every slot from its start).  Re-measured 2026-12-01 evening (8d6a9ae-4fc6d2c, the
units each change touched, at load 8-17): scripting 629 (SCRIPT DEBUG; left: 8,000
arguments through lupa; 633 on 2026-12-02, hotkv.lua.bytecode), scan 48, sort 58,
expire 71, client-eviction 17, maxmemory 29,
info 23, other 29, dump 27, type/list 285, type/string 82, type/incr 32, type/zset 322,
acl 106, auth 13, bitfield 22, networking 3, oom-score-adj 6, tracking 58, pause 18,
obuf-limits 9, pubsubshard 10, replybufsize 1, querybuf 3 (1 once at load 15):
2,923 recorded against the reference's 2,920 (info and type/set pass more than the
reference; below it: scripting, maxmemory, memefficiency 2 of 5: see README.md).
2026-12-02: scripting 633 (parity); maxmemory 29 in the last 2 quiet runs after that
day's eviction fixes, 28 under load (four runs before the fixes passed 22-26):
2,927 recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BASELINE = os.path.join(HERE, "conformance-baseline.json")
SKIPFILE = os.path.join(HERE, "conformance-skip.txt")
UNITS = ["type/list", "type/list-2", "type/list-3", "type/stream", "type/stream-cgroups",
         "pubsub", "keyspace", "multi", "expire", "type/string", "type/incr",
         "info-command", "protocol",
         # Beyond the bundle's default selection: the types queue libraries use
         # for job data, registries and schedules.
         "type/hash", "type/set", "type/zset", "sort", "dump", "scan"]
# The units of issue 15's command families, guarded in external mode too
# (geo, 35 s, and hyperloglog, 69 s, joined them once the units ran beside the
# rest of the suite: together 40 s of CPU).
FAMILY_UNITS = ["bitops", "bitfield", "functions", "scripting", "tracking", "latency-monitor",
                "introspection", "introspection-2", "pause", "slowlog", "other", "lazyfree",
                "geo", "hyperloglog"]
# What the reference valkey-server 8.1.8 passes with the same profile.
REFERENCE = {"type/list": 252, "type/list-2": 2, "type/list-3": 11, "type/stream": 72,
             "type/stream-cgroups": 55, "pubsub": 30, "keyspace": 58, "multi": 35,
             "expire": 58, "type/string": 79, "type/incr": 32, "info-command": 3,
             "protocol": 19, "type/hash": 74, "type/set": 114, "type/zset": 316,
             "sort": 53, "dump": 9, "scan": 21,
             # the issue-15 units (the reference's counts in the measurement)
             "bitops": 50, "bitfield": 18, "functions": 85, "scripting": 390, "tracking": 55,
             "latency-monitor": 12, "introspection": 32, "introspection-2": 45, "pause": 16,
             "slowlog": 13, "other": 21, "lazyfree": 4, "geo": 64, "hyperloglog": 25}

SHIM = os.path.join(HERE, "valkey-server-shim")
SPAWN_SKIPFILE = os.path.join(HERE, "conformance-spawn-skip.txt")
# What CI runs in spawn mode (the rest with --all / HOTKV_SPAWN_ALL=1); see the
# docstring.  Chosen by measured cost on 2 cores: each runs in 1 to 10 seconds.
SPAWN_CI_UNITS = ["acl", "acl-v2", "auth", "limits", "networking", "quit", "shutdown",
                  "oom-score-adj", "introspection-2", "lazyfree", "bitops", "bitfield",
                  "tracking",
                  # at parity or with their known failures listed, 4-20 s each: every
                  # external:skip test of these (replication streams, AOF, restarts)
                  "pubsub", "protocol", "multi", "info", "type/stream-cgroups", "functions",
                  "slowlog"]

_LINE = re.compile(r"^(\S+): (\d+) passed, (\d+) failed, (\d+) skipped$")

SERVER_CODE = """
import signal, sys, threading
import hotkv
srv = hotkv.EmbeddedServer(port=int(sys.argv[1]))
srv.start()
print("ready", flush=True)
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: done.set())
signal.signal(signal.SIGINT, lambda *a: done.set())
done.wait()
srv.stop()
"""


def bundle_dir() -> str | None:
    for path in (os.environ.get("HOTKV_CONFORMANCE_DIR"),
                 os.path.join(ROOT, "..", "shared", "conformance")):
        if path and os.path.isfile(os.path.join(path, "run.sh")):
            return os.path.abspath(path)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SERVER_CODE, str(port)],
                            stdout=subprocess.PIPE, cwd=ROOT)
    line = proc.stdout.readline()
    if b"ready" not in line:
        proc.kill()
        raise RuntimeError("hotkv did not start for the conformance run")
    return proc


def stop_server(proc: subprocess.Popen):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_unit(bundle: str, unit: str, timeout: int) -> dict:
    port = free_port()
    proc = start_server(port)
    env = dict(os.environ, TCL_TIMEOUT=str(timeout), EXTRA_SKIPFILE=SKIPFILE, SHOW_FAILS="1")
    started = time.time()
    try:
        out = subprocess.run(["bash", os.path.join(bundle, "run.sh"), str(port), unit],
                             env=env, capture_output=True, text=True, timeout=timeout + 60)
    finally:
        alive = proc.poll() is None
        stop_server(proc)
    result = {"unit": unit, "passed": 0, "failed": 0, "skipped": 0, "failures": [],
              "seconds": round(time.time() - started, 1), "server_alive": alive,
              "aborted": None}
    for line in out.stdout.splitlines():
        m = _LINE.match(line)
        if m and m.group(1) == unit:
            result["passed"], result["failed"], result["skipped"] = map(int, m.groups()[1:])
        elif line.startswith("  [err] "):
            result["failures"].append(line[8:])
        elif line.startswith("  ABORTED: "):
            result["aborted"] = line[11:]
    if out.returncode != 0:
        result["aborted"] = (result["aborted"] or "") + f" run.sh exit {out.returncode}: " + \
            out.stderr.strip()[-300:]
    return result


def run_units_one_server(bundle: str, units: list, timeout: int) -> dict:
    """All ``units`` back to back on one hotkv, as a user's server lives:
    each unit leaves its CONFIG changes (stream-node-max-entries 2 after
    type/stream, list-max-* ...) and its data layout to the next.  The
    reference passes the same counts this way as on a fresh server per unit.
    Returns {unit: result} in run_unit's shape (``seconds`` is the total)."""
    port = free_port()
    proc = start_server(port)
    env = dict(os.environ, TCL_TIMEOUT=str(timeout), EXTRA_SKIPFILE=SKIPFILE, SHOW_FAILS="1")
    started = time.time()
    try:
        out = subprocess.run(["bash", os.path.join(bundle, "run.sh"), str(port), *units],
                             env=env, capture_output=True, text=True,
                             timeout=timeout * len(units) + 60)
    finally:
        alive = proc.poll() is None
        stop_server(proc)
    seconds = round(time.time() - started, 1)
    results = {u: {"unit": u, "passed": 0, "failed": 0, "skipped": 0, "failures": [],
                   "seconds": seconds, "server_alive": alive, "aborted": None} for u in units}
    current = None
    for line in out.stdout.splitlines():
        m = _LINE.match(line)
        if m and m.group(1) in results:
            current = results[m.group(1)]
            current["passed"], current["failed"], current["skipped"] = map(int, m.groups()[1:])
        elif current is not None and line.startswith("  [err] "):
            current["failures"].append(line[8:])
        elif current is not None and line.startswith("  ABORTED: "):
            current["aborted"] = line[11:]
    if out.returncode != 0:
        for res in results.values():
            res["aborted"] = (res["aborted"] or "") + f" run.sh exit {out.returncode}: " + \
                out.stderr.strip()[-300:]
    return results


class Prefetch:
    """Runs the Tcl units a pytest session selected in one background thread,
    in the order given, while the rest of the suite runs; each test then takes
    its own result (waiting for it if need be).

    Why: a unit's wall time is mostly the harness waiting (``after`` and
    ``wait_for_condition``): the 19 units back to back took 218 s of wall time
    and 56 s of CPU (tclsh, run.sh and the server together, 25 % of one core),
    so run in line they were a quarter of CI's budget for little work.  One
    unit at a time: the units' own timing is as it was, beside the suite."""

    def __init__(self):
        self.jobs: dict = {}
        self.thread = None

    def start(self, jobs: list):
        """jobs: [(key, fn)], run in order; fn() returns the result."""
        import concurrent.futures
        import threading
        queue = []
        for key, fn in jobs:
            if key not in self.jobs:
                self.jobs[key] = concurrent.futures.Future()
                queue.append((key, fn))

        def work():
            for key, fn in queue:
                fut = self.jobs[key]
                try:
                    fut.set_result(fn())
                except BaseException as e:   # handed to the test that takes it
                    fut.set_exception(e)
        if queue:
            self.thread = threading.Thread(target=work, name="conformance-prefetch",
                                           daemon=True)
            self.thread.start()

    def take(self, key, fn):
        """key's result from the background run, or fn() now if it was not
        started (a test run by itself, or HOTKV_CONFORMANCE_INLINE=1)."""
        fut = self.jobs.pop(key, None)
        return fn() if fut is None else fut.result()


PREFETCH = Prefetch()


def load_baseline(mode: str = "external") -> dict:
    """{unit: passed} recorded for ``mode`` ("external" or "spawn")."""
    return _load_baselines().get(mode, {})


def _load_baselines() -> dict:
    if not os.path.exists(BASELINE):
        return {}
    with open(BASELINE) as f:
        data = json.load(f)
    if data and not isinstance(next(iter(data.values())), dict):
        data = {"external": data}   # the first format: external mode only
    return data


def reference_spawn(bundle: str) -> dict:
    """{unit: passed} of valkey-server 8.1.8 in spawn mode (the bundle's
    reference-spawn.txt, run-spawn.sh's profile)."""
    out = {}
    path = os.path.join(bundle, "reference-spawn.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:   # "... skipped" may be followed by "(timed out after 600s)"
                m = re.match(r"^(\S+): (\d+) passed, \d+ failed", line)
                if m:
                    out[m.group(1)] = int(m.group(2))
    return out


def spawn_units(bundle: str) -> list:
    """Every unit of the bundle (what run-spawn.sh runs by default)."""
    root = os.path.join(bundle, "tcl", "tests", "unit")
    units = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".tcl"):
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                units.append(rel[:-4].replace(os.sep, "/"))
    return sorted(units)


def _skip_lines(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#")]


_RESULT = re.compile(r"^\[(ok|err|exception|skip|ignore)\]:? ?(.*?)(?: \(\d+ ms\))?$")


def run_unit_spawn(bundle: str, unit: str, timeout: int, logdir: str | None = None) -> dict:
    """One unit with the harness spawning hotkv (compat/valkey-server-shim) as
    run-spawn.sh does, plus hotkv's spawn skip file.  The harness and every
    server it started share one process group, killed when the unit times out,
    so no server outlives the run."""
    import shutil
    import tempfile
    work = tempfile.mkdtemp(prefix="hotkv-spawn.")
    started = time.time()
    result = {"unit": unit, "passed": 0, "failed": 0, "skipped": 0, "failures": [],
              "seconds": 0.0, "server_alive": True, "aborted": None}
    try:
        tree = os.path.join(work, "tree")
        shutil.copytree(os.path.join(bundle, "tcl"), tree)
        os.makedirs(os.path.join(tree, "src"))
        os.makedirs(os.path.join(tree, "tests", "tmp"), exist_ok=True)
        os.symlink(SHIM, os.path.join(tree, "src", "valkey-server"))
        skipfile = os.path.join(work, "skip.txt")
        with open(skipfile, "w") as f:
            for line in _skip_lines(os.path.join(bundle, "skip.txt")) + \
                    _skip_lines(SPAWN_SKIPFILE):
                f.write(line + "\n")
        cmd = ["tclsh", "tests/test_helper.tcl", "--single", "unit/" + unit, "--clients", "1",
               "--timeout", str(timeout), "--durable", "--ignore-encoding", "--ignore-digest",
               "--skipfile", skipfile]
        # The shim runs this interpreter (the one with hotkv's dependencies).
        env = dict(os.environ, HOTKV_SHIM_PYTHON=sys.executable)
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            result["failed"] += 1
            result["aborted"] = "timed out after %ds" % timeout
        finally:
            try:   # servers the harness left behind (it died, or was killed)
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.decode("utf-8", "replace"))
        if logdir:
            os.makedirs(logdir, exist_ok=True)
            with open(os.path.join(logdir, unit.replace("/", "_") + ".log"), "w") as f:
                f.write(text)
        for line in text.splitlines():
            m = _RESULT.match(line)
            if not m:
                continue
            kind = m.group(1)
            if kind == "ok":
                result["passed"] += 1
            elif kind in ("skip", "ignore"):
                result["skipped"] += 1
            else:
                result["failed"] += 1
                result["failures"].append(m.group(2)[:200])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = round(time.time() - started, 1)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("units", nargs="*")
    ap.add_argument("--check", action="store_true", help="fail below the recorded baseline")
    ap.add_argument("--record", action="store_true", help="write the counts as the new baseline")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("TCL_TIMEOUT", "300")))
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--one-server", action="store_true",
                    help="run the units back to back on one server (checked against the "
                         "reference's counts, which are the same that way)")
    ap.add_argument("--spawn", action="store_true",
                    help="spawn mode: the harness starts hotkv (compat/valkey-server-shim)")
    ap.add_argument("--all", action="store_true",
                    help="with --spawn: every unit of the bundle, not SPAWN_CI_UNITS")
    ap.add_argument("--logdir", help="with --spawn: keep each unit's harness output here")
    args = ap.parse_args(argv)
    bundle = bundle_dir()
    if bundle is None:
        print("conformance: no ../shared/conformance bundle (set HOTKV_CONFORMANCE_DIR)",
              file=sys.stderr)
        return 2
    mode = "spawn" if args.spawn else "external"
    if args.units:
        units = args.units
    elif args.spawn:
        units = spawn_units(bundle) if args.all else SPAWN_CI_UNITS
    else:
        units = UNITS
    reference = reference_spawn(bundle) if args.spawn else REFERENCE
    baselines = _load_baselines()
    baseline = baselines.get(mode, {})
    results = []
    problems = []
    together = run_units_one_server(bundle, units, args.timeout) \
        if args.one_server and not args.spawn else None
    for unit in units:
        if together is not None:
            res = together[unit]
        elif args.spawn:
            res = run_unit_spawn(bundle, unit, args.timeout, args.logdir)
        else:
            res = run_unit(bundle, unit, args.timeout)
        results.append(res)
        want = baseline.get(unit, 0)
        print(f"{unit}: {res['passed']} passed, {res['failed']} failed, {res['skipped']} skipped "
              f"(reference {reference.get(unit, '?')}, recorded {want}) in {res['seconds']}s",
              flush=True)
        for name in res["failures"]:
            print(f"  [err] {name}", flush=True)
        if res["aborted"]:
            print(f"  ABORTED: {res['aborted']}", flush=True)
        if not res["server_alive"]:
            problems.append(f"{unit}: the server died during the run")
        if res["passed"] < want:
            problems.append(f"{unit}: {res['passed']} passed, below the recorded {want}")
        if res["failed"] and (not args.spawn or unit in SPAWN_CI_UNITS):
            # Spawn mode lists known failures for the CI units only; the other
            # units are held to their pass counts.
            skipfile = "conformance-spawn-skip.txt" if args.spawn else "conformance-skip.txt"
            problems.append(f"{unit}: {res['failed']} failed (not in compat/{skipfile})")
    total = sum(r["passed"] for r in results)
    ref = sum(reference.get(r["unit"], 0) for r in results)
    print(f"total ({mode} mode): {total} passed of the reference's {ref}; "
          f"{sum(r['failed'] for r in results)} failed; "
          f"{sum(r['seconds'] for r in results):.0f}s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.record:
        baseline.update({r["unit"]: r["passed"] for r in results})
        baselines[mode] = dict(sorted(baseline.items()))
        with open(BASELINE, "w") as f:
            json.dump(baselines, f, indent=2)   # the file's layout
            f.write("\n")
    if args.check and problems:
        for p in problems:
            print("conformance: " + p, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
