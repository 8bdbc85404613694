"""Other projects' test suites as the measure: fakeredis, RQ, arq and ioredis against hotkv.

Each Python suite is fetched at a pinned release from PyPI (the source
distribution carries the tests; ioredis's come from a checkout, below),
patched by a small patch file in ``compat/suites/`` (only to make the
server's port, and for fakeredis the server's identity, come from the
environment), and run by pytest (ioredis: mocha) against a fresh hotkv (``python -m
hotkv.tools.cli serve --port P --save ""`` in a subprocess) and, with
``--reference``, against a fresh valkey-server 8.1.8 (tests/support.py
``ReferenceValkey``).  The result per suite and server is pytest's JUnit XML,
read into passed / failed / skipped counts; every test that fails on hotkv
but not on the reference is listed.

    python compat/suites.py --reference                   # every suite, both servers
    python compat/suites.py --suite fakeredis --reference --json out.json
    python compat/suites.py --suite rq -k test_queue      # pytest -k, hotkv only
    python compat/suites.py --suite ioredis --ioredis-dir ~/src/ioredis --reference

The suites, and how each is pointed at a server:

* fakeredis 2.41.0 -- only its real-server variants (``-m real``; the
  ``fake`` variants test fakeredis, not the server), ``test/test_stack``
  left out (JSON, Bloom, TimeSeries: Valkey 8.1.8 has no such modules).
  Upstream always talks to ``localhost:6390``; the patch reads
  ``FAKEREDIS_REAL_PORT``.  fakeredis reads the server's type from INFO's
  ``server_name`` and builds a FakeServer of that type, so hotkv's
  ``server_name:hotkv`` makes it raise ``Unsupported server type: hotkv``;
  it has no option for this, so the patch adds two environment overrides,
  ``FAKEREDIS_SERVER_TYPE`` and ``FAKEREDIS_VALKEY_VERSION``, which the
  runner sets to ``valkey`` and ``8.1.8`` for hotkv (hotkv's
  ``redis_version:7.2.4`` is what Valkey 8.1.8 reports too).  Valkey's own
  INFO is used as it is.  Some 860 real-server tests are marked
  ``unsupported_server_types("valkey")`` and skip on both then, so a second
  profile, ``fakeredis-redis``, presents both servers as Redis 7.2.4
  (``FAKEREDIS_SERVER_TYPE=redis``, valkey_version dropped: both report
  ``redis_version:7.2.4``) and runs those too.  Test-only packages (pytest-mock, pytest-timeout)
  and fakeredis's wheel (its tests read its version from the package
  metadata) go into the suite's own ``site`` directory on PYTHONPATH.
* RQ 3.0.0 -- its tests use ``Redis()`` (port 6379) and a few
  ``redis://127.0.0.1:6379`` URLs; the patch reads ``RQ_TEST_REDIS_PORT``.
  Runs in this environment (rq 3.0.0 and redis-py are installed).  A
  worker's teardown can wait out the whole ``sleep_time=60`` of its pub/sub
  thread (redis-py 8.2's PubSubWorkerThread may re-enter get_message after
  UNSUBSCRIBE's reply: measured with ``rq worker -b``, 60 s on valkey-server
  as on hotkv, one run in two), so the patch takes it from
  ``RQ_TEST_PUBSUB_SLEEP``, which the runner sets to 1 s.
* arq 0.28.0 -- upstream starts a Redis container with testcontainers;
  the patch replaces that with ``ARQ_TEST_REDIS_PORT``.  arq needs
  redis-py < 6 and pytest-asyncio 0.23 (its ``event_loop`` fixture), so it
  runs in its own venv with the versions of its uv.lock.
* ioredis 6.0.0 -- its functional tests (``test/functional/**/*.ts``,
  with ``test/helpers/*.ts``, run by mocha under ts-node as upstream's
  ``npm run test:js`` does, without the unit tests).  The npm package
  (``npm pack ioredis@6.0.0``) holds only ``built/``, no tests; they are only
  in the GitHub repository, which CI cannot reach, so CI does not run this
  suite.  Get a checkout of the release yourself and name it with
  ``--ioredis-dir DIR`` (or $HOTKV_IOREDIS_DIR)::

      git clone --branch v6.0.0 --depth 1 https://github.com/redis/ioredis ~/src/ioredis

  (v6.0.0 is commit 8ed2946504a36ae9b1e186b9dccc56afcd046d78.)  The checkout
  is left as it is: it is copied (without .git, node_modules, docs, built)
  into the cache, patched there, and its test dependencies (mocha, ts-node,
  chai, sinon, ...) installed with ``npm ci`` from the npm registry.  Upstream
  talks to ``127.0.0.1:6379``; the patch adds ``test/helpers/port.ts``, which
  sets the client's default port from ``IOREDIS_TEST_PORT``, and makes the
  few tests that write 6379 out (expected ports, a mock sentinel's answer,
  a NAT map) use it.  Mocha's counts are passes / failures / pending (the
  table's "skipped"); a failing hook counts as one failure and the tests it
  stops are counted nowhere, as mocha reports them.  ``-k`` is mocha's
  ``--grep``.  The tests' mock servers listen on fixed ports (17379-17381,
  26379-30303, 44444, 55555): the server under test never takes those.

Downloads are cached in $HOTKV_SUITES_DIR (default ~/.cache/hotkv-suites).
``available(name)`` says why a suite cannot be had (no network, no tool);
compat/test_suites.py skips with that reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PATCHES = os.path.join(HERE, "suites")
sys.path.insert(0, os.path.join(ROOT, "tests"))

from support import RawClient, ReferenceValkey, free_port  # noqa: E402

CACHE = os.environ.get("HOTKV_SUITES_DIR",
                       os.path.join(os.path.expanduser("~"), ".cache", "hotkv-suites"))
VALKEY_VERSION = "8.1.8"


@dataclasses.dataclass
class Suite:
    name: str                         # the suite's name on the command line
    version: str
    pytest_args: list[str]            # after ``python -m pytest``, in the source tree
    package: str = ""                 # the PyPI project, when not ``name``
    site: list[str] = dataclasses.field(default_factory=list)   # --target, on PYTHONPATH
    venv: list[str] = dataclasses.field(default_factory=list)   # a venv of its own
    unavailable: str = ""             # why it is never run
    timeout: int = 2400               # the whole run, seconds
    runner: str = "pytest"            # or "mocha" (ioredis: an npm project)
    avoid_ports: tuple = ()           # ports the suite's own mock servers take

    @property
    def key(self) -> str:
        return "%s-%s" % (self.package or self.name, self.version)

    @property
    def dir(self) -> str:
        return os.path.join(CACHE, self.key)

    @property
    def src(self) -> str:
        return os.path.join(self.dir, "src")

    def env(self, port: int, kind: str) -> dict:
        """The environment that points the patched suite at a server of
        ``kind`` ("hotkv" or "valkey") on ``port``."""
        if self.name == "fakeredis":
            env = {"FAKEREDIS_REAL_PORT": str(port)}
            if kind == "hotkv":        # INFO says server_name:hotkv (see the docstring)
                env.update(FAKEREDIS_SERVER_TYPE="valkey", FAKEREDIS_VALKEY_VERSION=VALKEY_VERSION)
            return env
        if self.name == "fakeredis-redis":     # both servers taken for Redis 7.2.4
            return {"FAKEREDIS_REAL_PORT": str(port), "FAKEREDIS_SERVER_TYPE": "redis"}
        if self.name == "rq":
            return {"RQ_TEST_REDIS_PORT": str(port), "RQ_TEST_PUBSUB_SLEEP": "1"}
        if self.name == "arq":
            return {"ARQ_TEST_REDIS_PORT": str(port)}
        if self.name == "ioredis":     # as upstream's test:js script, plus the port
            return {"IOREDIS_TEST_PORT": str(port), "TS_NODE_TRANSPILE_ONLY": "true",
                    "NODE_ENV": "test"}
        return {}


SUITES = [
    Suite("fakeredis", "2.41.0",
          ["-m", "real", "--timeout", "60", "test", "--ignore", "test/test_stack"],
          site=["fakeredis==2.41.0", "pytest-mock==3.15.1", "pytest-timeout==2.4.0"]),
    Suite("fakeredis-redis", "2.41.0",
          ["-m", "real", "--timeout", "60", "test", "--ignore", "test/test_stack"],
          package="fakeredis",
          site=["fakeredis==2.41.0", "pytest-mock==3.15.1", "pytest-timeout==2.4.0"]),
    Suite("rq", "3.0.0", ["tests"], site=["pytest-timeout==2.4.0"]),
    Suite("arq", "0.28.0", ["tests"],
          venv=["pytest==8.4.2", "pytest-asyncio==0.23.6", "pytest-mock==3.15.1",
                "pytest-timeout==2.4.0", "redis[hiredis]==4.6.0", "dirty-equals==0.11",
                "msgpack==1.1.2", "pydantic==2.12.5", "pytz==2025.2", "click==8.1.8",
                "watchfiles==1.1.1"]),
    Suite("ioredis", "6.0.0", ["test/helpers/*.ts", "test/functional/**/*.ts"],
          runner="mocha", timeout=3600,
          avoid_ports=(17379, 17380, 17381, 22222, 26379, 27379, 27380, 27381, 27382,
                       30000, 30001, 30002, 30003, 30004, 30005, 30006, 30010, 30301,
                       30302, 30303, 44444, 55555)),
]
BY_NAME = {s.name: s for s in SUITES}


class Unavailable(Exception):
    """The suite cannot be fetched or prepared here; the message says why."""


def _run(argv: list[str], what: str, **kw) -> None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable("%s: %s" % (what, e)) from e
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise Unavailable("%s failed: %s" % (what, " / ".join(tail)))


# The ioredis checkout (see the docstring): --ioredis-dir, else $HOTKV_IOREDIS_DIR.
IOREDIS_DIR = os.environ.get("HOTKV_IOREDIS_DIR", "")
IOREDIS_CLONE = "git clone --branch v%s --depth 1 https://github.com/redis/ioredis DIR"


def _python(suite: Suite) -> str:
    return os.path.join(suite.dir, "venv", "bin", "python") if suite.venv else sys.executable


def prepare(suite: Suite) -> None:
    """Download, unpack and patch the suite and install its test-only
    packages, once (a ``ready`` stamp marks a finished preparation)."""
    if suite.unavailable:
        raise Unavailable(suite.unavailable)
    if suite.runner == "mocha":
        return _prepare_npm(suite)
    patch_file = os.path.join(PATCHES, suite.key + ".patch")
    with open(patch_file, "rb") as f:      # a changed patch or pin prepares again
        recipe = hashlib.sha256(f.read() + repr((suite.site, suite.venv)).encode()).hexdigest()
    stamp = os.path.join(suite.dir, "ready")
    if os.path.exists(stamp) and open(stamp).read() == recipe:
        return
    shutil.rmtree(suite.dir, ignore_errors=True)
    os.makedirs(suite.dir)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory() as dl:
        spec = "%s==%s" % (suite.package or suite.name, suite.version)
        _run(pip + ["download", "--no-deps", "--no-binary", ":all:", "-d", dl, spec],
             "pip download " + spec)
        (sdist,) = glob.glob(os.path.join(dl, "*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(suite.dir, filter="data")
        os.rename(os.path.join(suite.dir, suite.key), suite.src)
    with open(patch_file) as f:
        _run(["patch", "-p1", "--forward", "--quiet"], "patch " + suite.key,
             stdin=f, cwd=suite.src)
    if suite.site:
        _run(pip + ["install", "--no-deps", "--target", os.path.join(suite.dir, "site"),
                    *suite.site], "pip install %s" % " ".join(suite.site))
    if suite.venv:
        venv = os.path.join(suite.dir, "venv")
        _run([sys.executable, "-m", "venv", venv], "python -m venv")
        _run([os.path.join(venv, "bin", "python"), "-m", "pip", "-q",
              "--disable-pip-version-check", "install", *suite.venv],
             "pip install (venv) %s" % " ".join(suite.venv))
    with open(stamp, "w") as f:
        f.write(recipe)


def _prepare_npm(suite: Suite) -> None:
    """ioredis: copy the user's checkout into the cache, patch the copy and
    ``npm ci`` its dependencies, once per patch and checkout contents."""
    checkout = os.path.abspath(os.path.expanduser(IOREDIS_DIR)) if IOREDIS_DIR else ""
    clone = IOREDIS_CLONE % suite.version
    if not checkout:
        raise Unavailable("no ioredis checkout: its tests are only on GitHub; run `%s` "
                          "and give --ioredis-dir DIR (or HOTKV_IOREDIS_DIR)" % clone)
    try:
        with open(os.path.join(checkout, "package.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise Unavailable("%s is not an ioredis checkout: %s" % (checkout, e)) from e
    if meta.get("name") != "ioredis" or meta.get("version") != suite.version:
        raise Unavailable("%s holds %s %s, not ioredis %s (%s)" % (
            checkout, meta.get("name"), meta.get("version"), suite.version, clone))
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise Unavailable("%s is not installed" % tool)
    top = {".git", "node_modules", "docs", "built", ".nyc_output", "coverage"}
    ignore = lambda d, names: [n for n in names if d == checkout and n in top]  # noqa: E731
    recipe = hashlib.sha256()
    with open(os.path.join(PATCHES, suite.key + ".patch"), "rb") as f:
        recipe.update(f.read())
    for d, dirs, files in os.walk(checkout):   # the checkout's contents, as copied
        dirs[:] = sorted(n for n in dirs if n not in ignore(d, dirs))
        for n in sorted(files):
            path = os.path.join(d, n)
            if os.path.isfile(path):
                recipe.update(os.path.relpath(path, checkout).encode() + b"\0")
                with open(path, "rb") as f:
                    recipe.update(f.read())
    recipe = recipe.hexdigest()
    stamp = os.path.join(suite.dir, "ready")
    if os.path.exists(stamp) and open(stamp).read() == recipe:
        return
    shutil.rmtree(suite.dir, ignore_errors=True)
    os.makedirs(suite.dir)
    shutil.copytree(checkout, suite.src, ignore=ignore, symlinks=True)
    with open(os.path.join(PATCHES, suite.key + ".patch")) as f:
        _run(["patch", "-p1", "--forward", "--quiet"], "patch " + suite.key,
             stdin=f, cwd=suite.src)
    _run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel", "error"],
         "npm ci (in %s)" % suite.src, cwd=suite.src)
    with open(stamp, "w") as f:
        f.write(recipe)


def available(name: str) -> str:
    """'' when the suite is ready to run, else why it is not."""
    if shutil.which("patch") is None:
        return "the patch program is not installed"
    try:
        prepare(BY_NAME[name])
    except Unavailable as e:
        return str(e)
    return ""


# ----------------------------------------------------------------------
# The servers
# ----------------------------------------------------------------------

class Hotkv:
    """``python -m hotkv.tools.cli serve`` on a free port, in a subprocess, with
    the reference's settings (no persistence, DEBUG allowed)."""

    def __init__(self):
        self.proc = None
        self.port = None
        self.dir = None

    def start(self) -> "Hotkv":
        self.dir = tempfile.mkdtemp(prefix="hotkv-suite-")
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hotkv.tools.cli", "serve", "--port", str(self.port),
                 "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir,
                 "--enable-debug-command", "yes"],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 20
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    c = RawClient("127.0.0.1", self.port, timeout=1)
                    ok = c.call("PING") == b"+PONG\r\n"
                    c.close()
                    if ok:
                        return self
                except OSError:
                    time.sleep(0.05)
            self.stop()
            self.dir = tempfile.mkdtemp(prefix="hotkv-suite-")
        raise RuntimeError("could not start hotkv")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def start_server(kind: str, avoid=()):
    """A fresh server of ``kind`` on a free port that is not in ``avoid``."""
    for _ in range(5):
        server = Hotkv().start() if kind == "hotkv" else ReferenceValkey().start()
        if server.port not in avoid:
            return server
        server.stop()
    raise RuntimeError("no free port outside %s" % (avoid,))


# ----------------------------------------------------------------------
# Running a suite
# ----------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    suite: str
    server: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    failures: dict = dataclasses.field(default_factory=dict)   # test id -> first line
    error: str = ""          # the run itself went wrong (no XML, timeout)


def read_junit(path: str, result: Result) -> None:
    for case in ET.parse(path).getroot().iter("testcase"):
        test = "%s::%s" % (case.get("classname", ""), case.get("name", ""))
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            if test in result.failures:     # a failing test whose teardown failed too
                continue
            result.failed += 1
            message = (bad.get("message") or bad.text or "").strip().splitlines()
            result.failures[test] = message[0][:300] if message else ""
        elif case.find("skipped") is not None:
            result.skipped += 1
        else:
            result.passed += 1


def read_mocha_json(path: str, src: str, result: Result) -> None:
    """Mocha's json reporter: passes / failures / pending.  A failing hook
    is one failure (titled '"before each" hook for ...')."""
    with open(path) as f:
        report = json.load(f)
    stats = report["stats"]
    result.passed, result.skipped = stats["passes"], stats["pending"]
    for case in report["failures"]:
        test = "%s::%s" % (os.path.relpath(case.get("file") or "?", src), case["fullTitle"])
        message = (case.get("err", {}).get("message") or "").strip().splitlines()
        result.failures[test] = message[0][:300] if message else ""
    result.failed = len(result.failures)


def _run_to_end(argv, suite, env, log, server, result):
    """Run one suite's test command in its tree (output to ``log`` or nowhere),
    bounded by the suite's timeout; then stop the server under test and note
    the wall time on ``result``."""
    start = time.time()
    out = open(log, "w") if log else subprocess.DEVNULL
    try:
        subprocess.run(argv, cwd=suite.src, env=env, stdout=out, stderr=subprocess.STDOUT,
                       timeout=suite.timeout)
    except subprocess.TimeoutExpired:
        result.error = "timed out after %d s" % suite.timeout
    finally:
        if log:
            out.close()
        server.stop()
    result.seconds = round(time.time() - start, 1)


def run_suite(suite: Suite, kind: str, extra: list[str] = (), log=None) -> Result:
    """Run the (prepared) suite against a fresh server of ``kind``;
    ``extra`` replaces the suite's own selection of tests when given."""
    if suite.runner == "mocha":
        return run_mocha(suite, kind, extra, log)
    result = Result(suite.name, kind)
    server = start_server(kind)
    xml = os.path.join(suite.dir, "junit-%s-%s.xml" % (suite.name, kind))
    if os.path.exists(xml):
        os.remove(xml)
    env = dict(os.environ, **suite.env(server.port, kind))
    env.pop("PYTHONPATH", None)
    if suite.site:
        env["PYTHONPATH"] = os.path.join(suite.dir, "site")
    args = list(extra) if extra else list(suite.pytest_args)
    argv = ["nice", "-n", "10", _python(suite), "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-o", "addopts=", "--junitxml", xml, *args]
    _run_to_end(argv, suite, env, log, server, result)
    if os.path.exists(xml):
        read_junit(xml, result)
    elif not result.error:
        result.error = "pytest wrote no report"
    return result


def run_mocha(suite: Suite, kind: str, extra: list[str] = (), log=None) -> Result:
    """ioredis: mocha (as its package.json configures it: ts-node, 8 s per
    test, --exit) over the functional tests, json reporter to a file."""
    result = Result(suite.name, kind)
    server = start_server(kind, suite.avoid_ports)
    report = os.path.join(suite.dir, "mocha-%s-%s.json" % (suite.name, kind))
    if os.path.exists(report):
        os.remove(report)
    env = dict(os.environ, **suite.env(server.port, kind))
    args = list(extra) if extra else list(suite.pytest_args)
    argv = ["nice", "-n", "10", os.path.join("node_modules", ".bin", "mocha"),
            "--no-experimental-strip-types", "--reporter", "json",
            "--reporter-option", "output=" + report, *args]
    _run_to_end(argv, suite, env, log, server, result)
    if os.path.exists(report):
        read_mocha_json(report, suite.src, result)
    elif not result.error:
        result.error = "mocha wrote no report"
    return result


def hotkv_only(ours: Result, ref: Result | None) -> dict:
    """Tests that fail on hotkv and not on the reference (all of hotkv's
    failures when there is no reference run)."""
    if ref is None:
        return dict(ours.failures)
    return {t: m for t, m in ours.failures.items() if t not in ref.failures}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="ioredis's functional tests are only in its GitHub repository, which CI "
        "cannot reach (CI does not run them): clone the release yourself, `%s`, and give "
        "--ioredis-dir DIR; the copy in the cache is patched and `npm ci` installs its "
        "test dependencies from the npm registry." % (IOREDIS_CLONE % BY_NAME["ioredis"].version))
    ap.add_argument("--suite", action="append", choices=list(BY_NAME),
                    help="the suite to run (repeatable; default: all)")
    ap.add_argument("--reference", action="store_true",
                    help="run each suite against valkey-server %s too" % VALKEY_VERSION)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("-k", help="pytest -k expression (replaces nothing else); "
                    "for ioredis, mocha's --grep")
    ap.add_argument("--ioredis-dir", metavar="DIR",
                    help="a checkout of ioredis v%s, which CI cannot fetch: `%s` "
                    "(default $HOTKV_IOREDIS_DIR)" % (BY_NAME["ioredis"].version,
                                                      IOREDIS_CLONE % BY_NAME["ioredis"].version))
    ap.add_argument("--logs", help="a directory for each run's pytest output")
    args = ap.parse_args(argv)
    if args.ioredis_dir:
        global IOREDIS_DIR
        IOREDIS_DIR = args.ioredis_dir
    names = args.suite or list(BY_NAME)
    rows, report = [], {}
    for name in names:
        suite = BY_NAME[name]
        why = available(name)
        if why:
            print("%s %s: not run: %s" % (suite.name, suite.version, why), flush=True)
            report[name] = {"version": suite.version, "not_run": why}
            continue
        extra = (suite.pytest_args + (["--grep", args.k] if suite.runner == "mocha"
                                      else ["-k", args.k])) if args.k else []
        runs = {}
        for kind in ["hotkv"] + (["valkey"] if args.reference else []):
            log = os.path.join(args.logs, "%s-%s.log" % (name, kind)) if args.logs else None
            if args.logs:
                os.makedirs(args.logs, exist_ok=True)
            print("%s %s on %s ..." % (suite.name, suite.version, kind), flush=True)
            runs[kind] = run_suite(suite, kind, extra, log)
        only = hotkv_only(runs["hotkv"], runs.get("valkey"))
        report[name] = {"version": suite.version,
                        **{k: dataclasses.asdict(r) for k, r in runs.items()},
                        "hotkv_only_failures": only}
        rows.append((suite, runs, only))
    print()
    print("| suite | hotkv passed / failed / skipped | valkey %s passed / failed / skipped "
          "| fail on hotkv only |" % VALKEY_VERSION)
    print("|---|---|---|---|")
    for suite, runs, only in rows:
        cells = []
        for kind in ("hotkv", "valkey"):
            r = runs.get(kind)
            cells.append("-" if r is None else "%d / %d / %d%s" % (
                r.passed, r.failed, r.skipped, " (%s)" % r.error if r.error else ""))
        print("| %s %s | %s | %s | %d |" % (suite.name, suite.version, *cells, len(only)))
    for suite, runs, only in rows:
        if only:
            print("\n%s: fails on hotkv%s:" % (
                suite.name, " only" if "valkey" in runs else ""))
            for test, message in sorted(only.items()):
                print("  %s\n      %s" % (test, message))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
