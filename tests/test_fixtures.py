"""hotkv's pytest fixtures (hotkv/pytest_plugin.py), run as a user runs them.

Each test writes a small test file (and a conftest.py when it needs one)
into a temporary directory and runs pytest on it in a subprocess with the
plugin loaded as ``-p hotkv.pytest_plugin`` (plugin autoloading off, so
exactly the plugins named are loaded: the installed package also
registers the plugin through its ``pytest11`` entry point), then checks
the run's outcome and what the generated tests recorded: per-test
isolation and reset on the session server, the ``hotkv`` marker, the
URL exported to a subprocess, the seeded state restored per test, one
server per pytest-xdist worker under ``-n 4``, the pytest-asyncio and
anyio fixtures, and that an interrupted run (Ctrl-C, a crashed xdist
worker) leaves no process and nothing listening.

Cost: 6 pytest runs, 12 interpreters (the -n 4 run is 5), ~13 s of CPU in
all (measured); the wall time was 33-54 s on the shared 2-core machine at
load average 8-13, less on idle cores (not measured).  Every wait is
bounded (RUN_TIMEOUT, _wait_records, _read_until).
"""

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_TIMEOUT = 120


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    env.update(extra)
    return env


def _write(tmp_path, files: dict):
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))


def _argv(*args, plugins=()):
    # Plugins hotkv's imports (pytest_asyncio) go first: pytest can only
    # assertion-rewrite a plugin module it imports itself.
    loads = [x for name in (*plugins, "hotkv.pytest_plugin") for x in ("-p", name)]
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *loads,
            "-o", "addopts=", *args]


def run_pytest(tmp_path, files: dict, *args, plugins=(), **env):
    _write(tmp_path, files)
    return subprocess.run(_argv(*args, plugins=plugins), cwd=tmp_path, env=_env(**env),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _counts(out: str) -> dict:
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|error|errors|skipped)",
                                             out)}


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


BASIC = '''
import os, subprocess, sys
import pytest

SESSION = {}


def test_isolated_first(hotkv_client, hotkv):
    SESSION["port"] = hotkv.port
    hotkv_client.set("first", 1)
    hotkv.clock.freeze()                 # reset after the test
    hotkv.faults.error("GET")            # cleared after the test
    hotkv.journal.start()                # stopped after the test
    assert hotkv_client.dbsize() == 1


def test_isolated_second(hotkv_client, hotkv):
    assert hotkv.port == SESSION["port"]          # the session server again
    assert hotkv_client.dbsize() == 0             # emptied in between
    assert hotkv.clock.real                       # the frozen clock was reset
    assert hotkv_client.get("x") is None          # no fault left over
    assert not hotkv.journal.recording


@pytest.mark.hotkv(appendonly=True, requirepass="s3cret")
def test_marker_gives_own_server(hotkv, hotkv_client):
    assert hotkv.port != SESSION["port"]
    assert hotkv_client.config_get("appendonly") == {"appendonly": "yes"}
    assert hotkv_client.set("k", "v")
    assert os.path.isdir(os.path.join(hotkv.server.config.values["dir"], "appendonlydir"))


def test_url_env_reaches_a_subprocess(hotkv_url_env, hotkv_client):
    code = ("import os, valkey; "
            "valkey.Valkey.from_url(os.environ['REDIS_URL']).set('from-child', "
            "os.environ['CELERY_BROKER_URL'])")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert hotkv_client.get("from-child") == hotkv_url_env["CELERY_BROKER_URL"].encode()
    assert hotkv_url_env["REDIS_PORT"] == str(hotkv_client.connection_pool
                                             .connection_kwargs["port"])


def test_client_is_in_process(hotkv_client, hotkv):
    # no socket: the server lists the connection at the in-process address,
    # and the session server runs in-process commands in the test's thread
    assert hotkv_client.client_info()["laddr"] == "/inprocess:0"
    assert hotkv.loop_lock is not None


def test_url_env_is_restored_after():
    assert os.environ.get("REDIS_URL") is None


def test_seeded_first(hotkv_seeded, hotkv_client):
    assert hotkv_client.lpop("q") == b"j1"
    hotkv_client.delete("user:1")
    hotkv_client.set("extra", 1)


def test_seeded_second(hotkv_seeded, hotkv_client):
    assert hotkv_client.lrange("q", 0, -1) == [b"j1", b"j2"]
    assert hotkv_client.hgetall("user:1") == {b"name": b"ada"}
    assert hotkv_client.exists("extra") == 0
    assert hotkv_seeded.inspect.keys() == [b"q", b"user:1"]
'''

CONFTEST_SEED = '''
import pytest


@pytest.fixture(scope="session")
def hotkv_seed_data():
    return {"user:1": {"name": "ada"}, "q": ["j1", "j2"]}
'''


def test_session_server_marker_url_env_and_seeded_state(tmp_path):
    proc = run_pytest(tmp_path, {"test_basic.py": BASIC, "conftest.py": CONFTEST_SEED},
                      "-p", "no:randomly")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _counts(proc.stdout) == {"passed": 8}


XDIST = '''
import os
import pytest


@pytest.mark.parametrize("i", range(12))
def test_each_worker_own_server(i, hotkv, hotkv_client):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(os.environ["RECORD_DIR"], "%s-%d" % (worker, i)), "w") as f:
        f.write("%d" % hotkv.port)
    hotkv_client.set("k%d" % i, i)
    assert hotkv_client.dbsize() == 1
'''


def test_xdist_gives_each_worker_its_own_server(tmp_path):
    pytest.importorskip("xdist")
    record = tmp_path / "record"
    record.mkdir()
    proc = run_pytest(tmp_path, {"test_x.py": XDIST}, "-p", "xdist.plugin", "-n", "4",
                      RECORD_DIR=str(record))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _counts(proc.stdout) == {"passed": 12}
    ports = {}
    for name in os.listdir(record):
        worker = name.rsplit("-", 1)[0]
        ports.setdefault(worker, set()).add(int((record / name).read_text()))
    assert len(ports) == 4 and all(w.startswith("gw") for w in ports)
    assert all(len(p) == 1 for p in ports.values())         # one server per worker
    assert len({p for s in ports.values() for p in s}) == 4  # and no two share one


ASYNC = '''
import pytest
import redis.asyncio as aioredis


@pytest.mark.asyncio
async def test_asyncio_server(hotkv_async):
    r = aioredis.Redis(host=hotkv_async.host, port=hotkv_async.port)
    assert await r.set("k", "v")
    assert await r.get("k") == b"v"
    await r.rpush("q", "job")
    assert (await r.blpop(["q"], 1)) == (b"q", b"job")
    assert hotkv_async.inspect.keys() == [b"k"]      # in the same loop: read in place
    await r.aclose()


@pytest.mark.asyncio
@pytest.mark.hotkv(requirepass="pw")
async def test_asyncio_marker(hotkv_async):
    r = aioredis.Redis(host=hotkv_async.host, port=hotkv_async.port, password="pw")
    assert await r.ping()
    await r.aclose()


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_anyio_server(hotkv_anyio):
    r = aioredis.Redis(host=hotkv_anyio.host, port=hotkv_anyio.port)
    await r.xadd("s", {"f": "v"})
    assert await r.xlen("s") == 1
    assert hotkv_anyio.inspect.stream("s").length == 1
    await r.aclose()
'''


def test_asyncio_and_anyio_fixtures(tmp_path):
    pytest.importorskip("pytest_asyncio")
    pytest.importorskip("anyio")
    proc = run_pytest(tmp_path, {"test_async.py": ASYNC},
                      plugins=("pytest_asyncio.plugin", "anyio.pytest_plugin"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _counts(proc.stdout) == {"passed": 3}
    assert "warning" not in proc.stdout, proc.stdout


HANG = '''
import os, time
import pytest


@pytest.mark.parametrize("i", range(int(os.environ["TESTS"])))
def test_waits_to_be_interrupted(i, hotkv, hotkv_server_factory):
    other = hotkv_server_factory(appendonly=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = os.path.join(os.environ["RECORD_DIR"], worker)
    with open(path + ".tmp", "w") as f:
        f.write("%d %d %d" % (os.getpid(), hotkv.port, other.port))
    os.rename(path + ".tmp", path)
    if os.environ.get("CRASH") and worker == "gw0":
        os.kill(os.getpid(), 9)           # an xdist worker crash
    for _ in range(600):                  # bounded: 60 s at most
        time.sleep(0.1)
'''


def _wait_records(record, n: int, timeout: float = 60) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = [x for x in os.listdir(record) if not x.endswith(".tmp")]
        if len(names) >= n:
            return [tuple(map(int, (record / x).read_text().split())) for x in names]
        time.sleep(0.05)
    raise AssertionError("the generated tests did not start")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:   # a zombie not yet reaped by its parent is gone too
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def _read_until(proc, text: bytes, out: bytearray, timeout: float = 60):
    """Read proc's output into out until it holds text (bounded)."""
    import select
    deadline = time.monotonic() + timeout
    while text not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
    assert text in out, out.decode(errors="replace")


def _interrupt_and_check(tmp_path, workers: int, n: int, wait_text: bytes = b"", **env):
    """Run the hanging tests; once n have started (and wait_text was
    printed), Ctrl-C the run; then no process of it may be left and none
    of its servers may still listen.  Returns the run's output."""
    record = tmp_path / "record"
    record.mkdir()
    _write(tmp_path, {"test_hang.py": HANG})
    args = _argv("-p", "xdist.plugin", "-n", str(workers), "test_hang.py") if workers \
        else _argv("test_hang.py")
    proc = subprocess.Popen(args, cwd=tmp_path,
                            env=_env(RECORD_DIR=str(record), TESTS=str(n),
                                     PYTHONUNBUFFERED="1", **env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    out = bytearray()
    try:
        recs = _wait_records(record, n)
        if wait_text:
            _read_until(proc, wait_text, out)
        # Ctrl-C in a terminal: SIGINT to the whole foreground process group.
        os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        out += rest
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Workers finish exiting after the controller; give them (bounded) time.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (
            all(_gone(pid) for pid, _, _ in recs) and _group_gone(proc.pid)):
        time.sleep(0.05)
    for pid, port, other in recs:
        assert _gone(pid), "pytest process %d still running" % pid
        assert not _listening(port) and not _listening(other)
    assert _group_gone(proc.pid), "a process of the interrupted run is still alive"
    return out.decode(errors="replace")


def _group_gone(pgid: int) -> bool:
    """No live (non-zombie) process left in the process group."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                fields = f.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


def test_ctrl_c_leaves_nothing_listening(tmp_path):
    out = _interrupt_and_check(tmp_path, 0, 1)
    assert "KeyboardInterrupt" in out


def test_ctrl_c_under_xdist_and_a_crashed_worker_leave_nothing(tmp_path):
    pytest.importorskip("xdist")
    # gw0 kills itself (SIGKILL) once its servers run; after xdist saw it
    # go down, the run is interrupted with gw1 still in its test.
    out = _interrupt_and_check(tmp_path, 2, 2, wait_text=b"[gw0] node down", CRASH="1")
    assert "KeyboardInterrupt" in out, out


def test_the_plugin_loads_no_server_until_a_fixture_is_used():
    # pytest imports the plugin in every session of a project with hotkv
    # installed: importing it must not load the server and its commands.
    code = ("import sys, hotkv.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m in ('hotkv.server', 'hotkv.commands', "
            "'hotkv.embedded', 'hotkv.pytest_fixtures')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
