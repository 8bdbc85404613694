"""hotkv's import graph: no cycle, and the core never imports a command module.

Reads every module under hotkv/ with ``ast`` (no import is executed) and
collects every import of a hotkv module -- at module level and inside
functions alike, relative or absolute, ``from . import x`` resolved to the
submodule ``x`` -- then finds the strongly connected components (Tarjan).
A component of more than one module is an import cycle: the test fails and
lists each edge of it with its line.  Issue #13 measured 12 modules in one
cycle (32 function-level imports); the explicit wiring (``hotkv.server``
calls its subsystems by name) and the core helpers moved out of
``commands/`` (``hotkv.core.multi``, ``hotkv.clients.clientinfo``, ``hotkv.core.pause``,
``hotkv.observe.cmdlog``, ``hotkv.core.stats``, ``hotkv.version``) left none.

``ALLOWED`` is where a justified function-level import would be listed,
with its reason; such an edge is left out of the graph, and the test checks
that it still exists and still is function-level (so the list cannot rot).
It is empty: no cycle needed one.

The second rule is the layering itself: only ``hotkv.server`` (which
registers the commands: a server needs them, and ``import hotkv`` alone --
``hotkv cli`` -- then loads none) and the command modules import ``hotkv.commands``
(hotkv.http, the dashboard, asks INFO through the registry,
as a client would).

Runs in well under a second; nothing to scale.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hotkv"

# (importer, imported) -> why this function-level import may close a cycle.
ALLOWED: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _targets(mods, name, path, node) -> list[str]:
    """The hotkv modules one import statement loads (their packages aside)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in mods]
    if node.level:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        parts = package.split(".")
        parts = parts[:len(parts) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base != "hotkv" and not base.startswith("hotkv."):
        return []
    out = []
    for alias in node.names:
        sub = base + "." + alias.name
        if sub in mods:
            out.append(sub)            # from . import x: the submodule x
        elif base in mods:
            out.append(base)           # from .x import name: the module x
    return out


def _graph():
    """{module: {imported: (line, function_level)}} over hotkv's modules."""
    mods = _modules()
    edges: dict[str, dict[str, tuple[int, bool]]] = {m: {} for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        nested = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                nested.update(id(n) for n in ast.walk(fn) if n is not fn)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(mods, name, path, node):
                    if target != name and target not in edges[name]:
                        edges[name][target] = (node.lineno, id(node) in nested)
    return edges


def _cycles(edges) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_the_imports():
    # A broken resolver would find no cycle anywhere: check known edges.
    edges = _graph()
    assert "hotkv.core.dispatch" in edges["hotkv.net.connection"]
    assert "hotkv.commands" in edges["hotkv.server"]
    assert "hotkv.protocol.resp" in edges["hotkv.commands.connection"]   # from ..resp import
    # and that a cycle is reported when one exists
    fake = {"a": {"b": (1, False)}, "b": {"c": (1, True)}, "c": {"a": (1, False)}, "d": {}}
    assert _cycles(fake) == [["a", "b", "c"]]


def test_no_import_cycle():
    edges = _graph()
    for (src, dst), reason in ALLOWED.items():
        assert reason
        assert dst in edges[src], f"allowed import {src} -> {dst} is gone: drop it from ALLOWED"
        assert edges[src][dst][1], f"allowed import {src} -> {dst} is not function-level"
        del edges[src][dst]
    report = []
    for component in _cycles(edges):
        report.append("cycle of %d modules: %s" % (len(component), ", ".join(component)))
        for src in component:
            for dst, (line, nested) in sorted(edges[src].items()):
                if dst in component:
                    where = "function-level" if nested else "module-level"
                    report.append("    %s -> %s  (line %d, %s)" % (src, dst, line, where))
    assert not report, "\n".join(report)


def test_core_does_not_import_commands():
    edges = _graph()
    wrong = sorted(
        "%s -> %s (line %d)" % (src, dst, line)
        for src, targets in edges.items()
        for dst, (line, _) in targets.items()
        if (dst == "hotkv.commands" or dst.startswith("hotkv.commands."))
        and src != "hotkv.server" and not src.startswith("hotkv.commands")
    )
    assert not wrong, "core modules import command modules:\n" + "\n".join(wrong)


# (importer, imported) -> why this import is inside a function.  Issue 29 found
# 67 function-level imports of hotkv modules; a function-level import hides an
# edge from the reader of the module's header, so each one left says why it
# cannot be at the top: an optional dependency, or a cycle the floors cannot
# avoid.  At most 8 (the bound).
FUNCTION_LEVEL: dict[tuple[str, str], str] = {
    ("hotkv.http", "hotkv.http.server"):
        "h11 is optional (the [dashboard] extra): imported when http-port is set",
    ("hotkv.replication", "hotkv.replication.primary"):
        "a cycle: primary -> persistence.rdbfile -> lua -> replication.replica_gate -> here",
    ("hotkv.tools.cli", "hotkv.tools.cli_tool"):
        "start-up and idle memory: `hotkv serve` does not load hotkv cli's five modules",
    ("hotkv.tools.cli", "hotkv.tools.queues_tui"):
        "rich is optional: `hotkv queues` says how to install it when it is missing",
    ("hotkv.tools.cli", "hotkv.tools.serve"):
        "start-up of `hotkv cli` / `--version`: the entry point loads no server module",
    ("hotkv.tools.cli", "hotkv.tools.checks"):
        "start-up of `hotkv cli`: check-rdb / check-aof load the RDB and AOF readers",
    ("hotkv.pytest_plugin", "hotkv.pytest_fixtures"):
        "every pytest session of a project with hotkv installed imports the plugin: "
        "the servers load when a test asks for a hotkv fixture",
}


def test_function_level_imports_are_few_and_explained():
    edges = _graph()
    found = {(src, dst) for src, targets in edges.items()
             for dst, (_, nested) in targets.items() if nested}
    assert len(FUNCTION_LEVEL) <= 8
    for pair, reason in FUNCTION_LEVEL.items():
        assert reason and pair in found, f"{pair} is no longer a function-level import: drop it"
    unexplained = sorted(found - set(FUNCTION_LEVEL))
    assert not unexplained, ("function-level imports of hotkv modules (move them to the "
                             "module's top, or list them in FUNCTION_LEVEL with the reason):\n"
                             + "\n".join("    %s -> %s" % p for p in unexplained))


# Issue 29's bound: a module a reader can hold at once.  The largest was
# hotkv/lua/engine.py (1,390 lines, split by concern), then
# hotkv/commands/zsets.py (1,075, split as t_zset.c reads: one set / whole sets).
MAX_MODULE_LINES = 1000


def test_no_module_over_1000_lines():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert len(sizes) > 100, "the scan found too few modules"
    big = sorted((n, name) for name, n in sizes.items() if n > MAX_MODULE_LINES)
    assert not big, ("modules over %d lines (split them by concern):\n" % MAX_MODULE_LINES
                     + "\n".join("    %s: %d" % (name, n) for n, name in big))


# Where a transport is touched: hotkv/net (the RESP connections), the
# dashboard's own HTTP protocol and the in-process pipes that stand in for a
# transport.  Anything else asks a Client (on_transport, peer, tls, unsent).
TRANSPORT_OWNERS = ("hotkv.net", "hotkv.http.server", "hotkv.inprocess")


def test_only_net_touches_a_transport():
    found = []
    for name, path in _modules().items():
        if name.startswith(TRANSPORT_OWNERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "transport":
                found.append("%s:%d" % (name, node.lineno))
            elif isinstance(node, ast.Constant) and node.value == "transport":
                found.append("%s:%d (a getattr)" % (name, node.lineno))
    assert not found, ("a transport touched outside hotkv.net (ask the Client: on_transport, "
                       "peer, tls, unsent):\n    " + "\n    ".join(found))


# The floors ARCHITECTURE.md draws, lowest first: a module imports only from
# its own floor or below, except the ties in UPWARD (each with its reason).
# A module belongs to the floor of the longest package name it starts with.
FLOORS = [
    ("ground", ("hotkv.protocol", "hotkv.version")),
    ("data", ("hotkv.types",)),
    ("core", ("hotkv.core", "hotkv.observe")),
    ("clients", ("hotkv.clients",)),
    ("I/O", ("hotkv.net", "hotkv.persistence")),
    ("services", ("hotkv.cluster", "hotkv.lua", "hotkv.replication", "hotkv.http")),
    ("commands", ("hotkv.commands",)),
    ("the owner", ("hotkv.server",)),
    ("tools", ("hotkv.tools", "hotkv.testing")),
    ("entry points", ("hotkv", "hotkv.embedded", "hotkv.inprocess", "hotkv.fake",
                      "hotkv.pytest_plugin", "hotkv.pytest_fixtures", "hotkv.__main__",
                      "hotkv.embedded_cluster")),
]

UPWARD: dict[tuple[str, str], str] = {
    ("hotkv.core.eviction", "hotkv.clients.client_eviction"):
        "maxmemory-clients is evicted from the same memory check as keys",
    ("hotkv.persistence.rdbfile", "hotkv.lua.functions"):
        "an RDB file carries function libraries, which the function registry compiles",
    ("hotkv.testing.timetravel", "hotkv.embedded"):
        "travel(*servers) takes the embedded servers it moves, and finds their Server",
    ("hotkv.testing.timetravel", "hotkv.fake"):
        "travel(*servers) takes fakeredis-style servers too",
}


def _floor(module: str) -> int:
    best = None
    for i, (_, prefixes) in enumerate(FLOORS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (
                    best is None or len(p) > best[1]):
                best = (i, len(p))
    assert best is not None, module
    return best[0]


def test_floors_as_architecture_md_draws_them():
    edges = _graph()
    up = {(src, dst) for src, targets in edges.items() for dst in targets
          if _floor(dst) > _floor(src)}
    unexplained = sorted(up - set(UPWARD))
    assert not unexplained, ("imports from a lower floor to a higher one (ARCHITECTURE.md's "
                             "floors): move the code, or list the tie in UPWARD with why:\n"
                             + "\n".join("    %s (%s) -> %s (%s)" % (
                                 s, FLOORS[_floor(s)][0], d, FLOORS[_floor(d)][0])
                                 for s, d in unexplained))
    gone = sorted(set(UPWARD) - up)
    assert not gone, "no longer an upward tie: drop it from UPWARD: %s" % gone
