"""The test toolkit's types (issue 30): hotkv ships ``py.typed`` and its public
test-control API is annotated, so a user's type checker sees real types.

* ``test_py_typed_ships``: ``hotkv/py.typed`` (PEP 561) is in the package and
  pyproject's package-data lists it (tests/test_install.py checks that the
  built wheel, made from the sdist, holds it).
* ``test_public_api_is_annotated``: every public method, property and function of
  ``PUBLIC`` below -- the clock, faults, journal, inspector, snapshots, time
  travel, the embedded servers, the in-process clients and the fake classes'
  constructors -- annotates each parameter (but self/cls) and its return, and
  ``typing.get_type_hints`` resolves them.  Names a module imports only under
  ``if TYPE_CHECKING:`` (kept out of run time: import cost, import cycles) are
  resolved by running that block here.
* ``test_user_code_type_checks``: a user-style test module using the toolkit
  passes ``mypy --strict``, with ``assert_type`` on what each call returns (an
  ``Any`` where a type belongs fails).  Skipped without mypy (in the test
  extra); hotkv's own modules are followed silently (their inside is not
  what is checked).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import os
import pathlib
import subprocess
import sys
import textwrap
import typing

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# module -> the public classes and functions whose API is checked.
PUBLIC = {
    "hotkv.core.clock": ["Clock"],
    "hotkv.testing.faults": ["Faults", "Fault", "Switch", "faults_of", "unmatched_report",
                             "restart", "restart_async"],
    "hotkv.testing.journal": ["Journal", "Entry", "journal_of"],
    "hotkv.testing.inspect": ["Inspector", "run_on_loop", "QueueInfo", "StreamInfo",
                              "GroupInfo", "ConsumerInfo", "PendingEntry", "LibraryQueue",
                              "Job"],
    "hotkv.testing.snapshot": ["Snapshot", "take", "restore", "load_rdb", "seed",
                               "commands_for", "run_commands"],
    "hotkv.testing.timetravel": ["Travel", "travel"],
    "hotkv.embedded": ["_Common", "EmbeddedServer", "AsyncEmbeddedServer"],
    "hotkv.inprocess": ["client", "async_client", "connection_class"],
    "hotkv.fake": ["FakeServer", "_FakeMixin"],
}
# Dunder methods users reach (with, len(), iter()...); other dunders are left out.
DUNDERS = {"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__", "__len__",
           "__iter__", "__repr__"}


def _type_checking_names(module) -> dict:
    """What ``module`` imports under ``if TYPE_CHECKING:``, imported now."""
    tree = ast.parse(inspect.getsource(module))
    ns: dict = {"__name__": module.__name__, "__package__": module.__package__}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING", "typing.TYPE_CHECKING"):
            exec(compile(ast.Module(body=node.body, type_ignores=[]), module.__file__,
                         "exec"), ns)
    return {k: v for k, v in ns.items() if not k.startswith("__")}


def _members(cls) -> dict:
    """name -> function for cls's public methods and properties (its hotkv bases' too)."""
    out: dict = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("hotkv"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") and name not in DUNDERS:
                continue
            if isinstance(value, property):
                value = value.fget
            elif isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value):
                out[name] = value
    return out


def _targets():
    """(label, function, names for get_type_hints) for every checked callable."""
    out = []
    for modname, names in PUBLIC.items():
        module = importlib.import_module(modname)
        local = _type_checking_names(module)
        for name in names:
            obj = getattr(module, name)
            if dataclasses.is_dataclass(obj):     # a view: its fields, checked whole
                out.append(("%s.%s" % (modname, name), obj, local))
            elif isinstance(obj, type):
                for member, fn in _members(obj).items():
                    out.append(("%s.%s.%s" % (modname, name, member), fn, local))
            else:
                out.append(("%s.%s" % (modname, name), obj, local))
    return out


def _missing(fn) -> list[str]:
    fn = inspect.unwrap(fn)
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    out = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        out.append("return")
    return out


def test_py_typed_ships():
    assert (ROOT / "hotkv" / "py.typed").is_file(), "hotkv/py.typed (PEP 561) is missing"
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib
    except ImportError:      # Python 3.10: read the one line
        section = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
        assert '"hotkv" = ["py.typed"]' in section, section
        return
    data = tomllib.loads(text)["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data.get("hotkv", []), data


def test_public_api_is_annotated():
    targets = _targets()
    assert len(targets) > 80, len(targets)    # the scan finds the API
    missing, unresolved = [], []
    for label, fn, local in targets:
        if inspect.isclass(fn):      # a dataclass view: its fields
            try:
                hints = typing.get_type_hints(fn, localns=local)
            except Exception as e:
                unresolved.append("%s: %s: %s" % (label, type(e).__name__, e))
                continue
            missing += ["%s.%s" % (label, f.name) for f in dataclasses.fields(fn)
                        if f.name not in hints]
            continue
        gaps = _missing(fn)
        if gaps:
            missing.append("%s: %s" % (label, ", ".join(gaps)))
            continue
        try:
            typing.get_type_hints(inspect.unwrap(fn), localns=local)
        except Exception as e:
            unresolved.append("%s: %s: %s" % (label, type(e).__name__, e))
    assert not missing, "not annotated:\n  " + "\n  ".join(missing)
    assert not unresolved, "annotations that do not resolve:\n  " + "\n  ".join(unresolved)


def test_the_check_sees_a_gap():
    # The scan itself: an unannotated parameter or return is reported.
    def f(self, a: int, b) -> None: ...

    def g(x: int): ...
    assert _missing(f) == ["b"] and _missing(g) == ["return"]
    names = [label for label, _, _ in _targets()]
    for expected in ("hotkv.core.clock.Clock.advance", "hotkv.core.clock.Clock.frozen",
                     "hotkv.testing.faults.Faults.error", "hotkv.testing.faults.Fault.remove",
                     "hotkv.testing.journal.Journal.for_client",
                     "hotkv.testing.journal.Journal.__len__",
                     "hotkv.testing.inspect.Inspector.queue",
                     "hotkv.embedded.EmbeddedServer.client", "hotkv.embedded._Common.clock",
                     "hotkv.embedded.AsyncEmbeddedServer.__aenter__",
                     "hotkv.fake._FakeMixin.__init__", "hotkv.inprocess.client"):
        assert expected in names, expected


USER_CODE = '''
from __future__ import annotations

import datetime

import redis
import redis.asyncio
import valkey
from typing_extensions import assert_type

from hotkv.core.clock import Clock
from hotkv.embedded import AsyncEmbeddedServer, EmbeddedServer
from hotkv.fake import FakeRedis, FakeServer
from hotkv.inprocess import async_client, client
from hotkv.testing.faults import Fault, Faults, Switch
from hotkv.testing.inspect import Inspector, LibraryQueue, QueueInfo, StreamInfo
from hotkv.testing.journal import Entry, Journal
from hotkv.testing.snapshot import Snapshot
from hotkv.testing.timetravel import Travel, travel


def test_sync(server: EmbeddedServer) -> None:
    assert_type(server.start(), EmbeddedServer)
    assert_type(server.url, str)
    assert_type(server.port, int)
    assert_type(server.host, str)
    clock = server.clock
    assert_type(clock, Clock)
    assert_type(clock.freeze(), Clock)
    assert_type(clock.freeze(at=datetime.datetime(2030, 1, 1)), Clock)
    assert_type(clock.advance(datetime.timedelta(hours=1)).advance(2.5).advance(3), Clock)
    assert_type(clock.set(1_900_000_000), Clock)
    assert_type(clock.ms(), int)
    assert_type(clock.us(), int)
    assert_type(clock.datetime(), datetime.datetime)
    assert_type(clock.monotonic(), float)
    assert_type(clock.frozen, bool)
    assert_type(clock.real, bool)
    with clock.freeze() as frozen:
        assert_type(frozen, Clock)
    clock.unfreeze().reset()

    faults = server.faults
    assert_type(faults, Faults)
    fault = faults.error("GET", keys="job:*", client="worker-*", nth=2,
                         message="LOADING Redis is loading the dataset in memory")
    assert_type(fault, Fault)
    with faults.delay(0.5, ["BRPOP", "CLIENT SETNAME"], at="command") as held:
        assert_type(held, Fault)
    assert_type(faults.drop("EXEC", when="after", times=1).fired, int)
    assert_type(fault.active, bool)
    fault.remove()
    with faults.pause() as pause:
        assert_type(pause, Switch)
    assert_type(faults.oom(), Switch)
    assert_type(faults.drop_connections(), int)
    assert_type(faults.unfired(), list[Fault])
    faults.clear()
    assert_type(faults.restart(keep_data=False), Faults)

    journal = server.journal
    assert_type(journal.start(replies=True), Journal)
    with journal as j:
        assert_type(j, Journal)
    assert_type(len(journal), int)
    for entry in journal:
        assert_type(entry, Entry)
        assert_type(entry.argv, tuple[bytes, ...])
        assert_type(entry.reply, bytes | None)
    assert_type(journal.for_client("worker-*"), list[Entry])
    assert_type(journal.for_client(7), list[Entry])
    assert_type(journal.commands("XACK", client="w"), list[Entry])
    assert_type(journal.keys(), list[bytes])
    assert_type(journal.assert_called("XACK", "stream", "group", ..., count=1), list[Entry])
    journal.assert_not_called("DEL")
    assert_type(journal.assert_order(["SET k v", ["XACK", "s", ...]]), list[Entry])
    assert_type(journal.stop(), Journal)
    journal.clear()

    look = server.inspect
    assert_type(look, Inspector)
    assert_type(look.keys("job:*"), list[bytes])
    assert_type(look.type(b"k"), str | None)
    assert_type(look.ttl("k"), float | None)
    assert_type(look.queue("jobs", pushed="right", processing="jobs:wip"), QueueInfo | None)
    assert_type(look.stream("events"), StreamInfo | None)
    assert_type(look.rq(), dict[str, LibraryQueue])
    assert_type(look.celery(backend_db=1), dict[str, LibraryQueue])
    assert_type(look.taskiq(), LibraryQueue | None)
    info = look.queue("jobs")
    if info is not None:
        assert_type(info.depth, int)

    snap = server.snapshot()
    assert_type(snap, Snapshot)
    server.restore(snap)
    assert_type(server.seed({"k": "v", "q": ["a", "b"]}, ttl={"k": 1.5}), int)
    server.wait_until(lambda s: True, timeout=1.0)
    server.wait_idle()
    assert_type(server.restart(), EmbeddedServer)

    assert_type(server.client(), redis.Redis)
    assert_type(server.client("valkey", decode_responses=True), valkey.Valkey)
    assert_type(client(server), redis.Redis)
    assert_type(async_client(server), redis.asyncio.Redis)

    with travel(server, to=datetime.datetime(2030, 1, 1)) as t:
        assert_type(t, Travel)
        assert_type(t.advance(datetime.timedelta(hours=1)).advance(60), Travel)
        assert_type(t.time(), float)

    fake = FakeServer(server_type="valkey", maxmemory="10mb")
    assert_type(fake.embedded, EmbeddedServer)
    assert_type(FakeServer.get_server("k"), FakeServer)
    assert_type(FakeRedis.from_url("redis://x:1/0"), FakeRedis)
    FakeRedis(server=fake, connected=False, decode_responses=True)
    server.stop()


async def test_async() -> None:
    async with AsyncEmbeddedServer(appendonly=True) as server:
        assert_type(server, AsyncEmbeddedServer)
        assert_type(server.clock.advance(5), Clock)
        await server.wait_until(lambda s: True)
        await server.wait_idle(timeout=2)
        assert_type(await server.restart(), AsyncEmbeddedServer)
'''


def test_user_code_type_checks(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (it is in the test extra)")
    pytest.importorskip("valkey")
    pytest.importorskip("redis")
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_CODE))
    env = dict(os.environ, MYPYPATH=str(ROOT))
    # --follow-imports=silent: hotkv's modules are read for their types, their own
    # bodies are not what this checks.  MYPYPATH: an editable install's import hook
    # is invisible to mypy.
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                        "--no-incremental", "--cache-dir", os.devnull, "test_user.py"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
