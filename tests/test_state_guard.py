"""A server's state is the server's: no module keeps it in a global (issue 29).

Beside tests/test_layers.py, and read the same way: every module under
hotkv/ with ``ast``, nothing imported or run.

(a) Mutable module-level state -- fails.  A module-level name is *state*
when, at module level (directly or under ``if`` / ``try``), it is bound to

* a container display or comprehension (``{}``, ``[]``, ``{1}``, ``[x for ...]``)
  or a call of ``dict``, ``list``, ``set``, ``defaultdict``, ``OrderedDict``,
  ``deque``, ``Counter``, ``bytearray``, ``itertools.count``, the weak
  containers or ``ChainMap``, and inside a function (a ``def`` or a lambda;
  building it at import is construction, not mutation) the module calls one
  of its mutating methods (``append``, ``add``, ``pop``, ``clear`` ...), assigns
  or deletes an item of it or augments one, or calls ``next`` on it;
* any other call's result (an object) whose attribute a function assigns;

or when a function rebinds it with ``global``.  A constant (never mutated
after import) is not state, whatever its type.  Each name found must be in
``ALLOWED`` with its reason, which must say why it is not a server's: a
table filled once at import (the command registry), a cache of a pure
function (its entries derived from their key alone, or checked against the
value they were derived from), or something the process has once (its
allocator readings, its children, its title, the logging setup).  An entry
that no longer matches fails too, so the list cannot rot.  The check sees a
name mutated in its own module and by its name: a module mutating another's
global through an import (``other.NAME.append``) or through a local alias
(``cal = _cal; cal.at = now``: hotkv.core.stats' allocator readings, which are
the process's) is not seen.

Issue 29 removed three that were a server's: ``hotkv.core.latency._DISCARD``
(latency-tracking off, process-wide), ``hotkv.commands.replication._conf``
(REPLCONF values by client id: two servers' first clients both have id 1)
and ``hotkv.net.connection._ENDED_WHILE_HELD``; the command counters left
``hotkv.core.registry.Command`` (``server.cmdstats``, tests/test_two_servers.py);
then three more: ``hotkv.core.blocking.waiter_seq`` (``server.waiter_seq``),
``hotkv.commands.hll._simd`` (PFDEBUG SIMD, ``server.hll_simd``) and
``hotkv.cluster.state._no_conf`` (a thread-local "build without nodes.conf",
now ``Server(nodes_conf=False)``).
Shown to fail: with ``_conf: dict = {}`` put back at module level in
hotkv/commands/replication.py and ``_conf[1] = {}`` in a function of it,
``test_no_mutable_module_state`` failed naming it; removed again, it passes.

(b) A server's attributes -- failing in every module but those listed.
Outside hotkv/server.py it counts (1) attributes stored on a server object
(``server.x = ...``, ``c.server.x = ...``, ``self.server.x = ...``,
``setattr(server, ...)``) that ``Server`` does not declare (its class body,
``__slots__``, or ``self.x = `` in ``__init__`` / ``_make_subsystems``), and
(2) probing a server for what it may lack (``getattr`` / ``hasattr`` on
one, or its ``__dict__``).  The counts per module are printed (``-s`` shows
them); every module fails when it has any, except those in ``NOT_YET_CLEAN``
(each with what it still does); an entry there that has become clean fails
too, so the list only shrinks.  Issue 29 cleaned hotkv.core.stats,
dispatch, latency and pause first (69 undeclared stores and 95 probes
before, 53 and 86 after), then every other module but those in
``NOT_YET_CLEAN`` (51 stores and 90 probes in 48 modules before, 1 and 20
in 11 after), and then those too (lua, net, the scripting and functions
commands, pytest_plugin, testing.timetravel): none is left, and
``NOT_YET_CLEAN`` stays empty.  ``Server.__init__`` declares each part (a part made later or
off is None, a counter 0, a DEBUG switch its default), ``init_server``
functions return the part the server stores (``client_evictor``,
``loopstats``, ``limits_state``).  Shown to fail: ``server.planted =
getattr(server, "planted", 0) + 1`` in a function of hotkv/core/latency.py
failed ``test_server_attributes_declared`` naming both; removed again, it
passes.  Likewise ``if getattr(server, "planted", None) is None:
server.planted = 1`` in hotkv/observe/queues.py (a module held since the
second step).

(c) One count_call.  Outside hotkv/core/stats.py no module adds to a
command's ``calls``, ``failed_calls``, ``seconds`` or ``rejected_calls``
(``cmdstats[cmd].calls += 1``, or through a name bound to an expression
naming cmdstats: ``st = server.cmdstats[cmd]; st.calls += 1``):
``stats.count_call`` does, for dispatch.call and its script_call,
blocking.unblock, the faults' held reply, the busy gate's SHUTDOWN
(hotkv.lua.busy) and a script's error reply (commands.scripting /
functions), and ``stats.count_rejected`` for a refusal (dispatch.reject, a
cluster redirect, a script's refused call); ``COUNT_CALL_PENDING`` (modules
still to change) is empty.  Shown to fail:
``client.server.cmdstats[cmd].calls += 1`` added in blocking.unblock failed
``test_one_count_call`` naming it; removed again, it passes.  The alias form
was missed until script_call's inlined copy of count_call (issue 33) was
found by review: put back, it fails naming hotkv.core.dispatch.
"""

from __future__ import annotations

import ast
import collections
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hotkv"

_CACHE = "a cache of a pure function: entries derived from their key alone"
_VALUE_CACHE = ("a cache of what a value derives: an entry holds the value and is used only "
                "while it is the same object with the same contents")
_IMPORT_TABLE = "a table filled once, as the modules are imported; read-only afterwards"

# (module, name) -> why it is not a server's state.
ALLOWED: dict[tuple[str, str], str] = {
    ("hotkv.clients.acl_rules", "_CATEGORY_CACHE"):
        _CACHE + " (the command table's size is checked)",
    ("hotkv.clients.acl_rules", "_KEY_FLAGS_CACHE"): _CACHE,
    ("hotkv.tools.logs", "_LOG_TO_STDOUT"): "the process's logging setup (one `hotkv serve`)",
    ("hotkv.commands.debug", "DEBUG_SUBCOMMANDS"): _IMPORT_TABLE,
    ("hotkv.commands.hashes", "_rand_pools"): _VALUE_CACHE,
    ("hotkv.commands.hashes", "_snapshots"): _VALUE_CACHE,
    ("hotkv.commands.info", "INFO_SECTIONS"): _IMPORT_TABLE,
    ("hotkv.commands.keyspace", "_TYPE_REPLIES"): _CACHE,
    ("hotkv.types.codec", "_switch"): "a thread's own (threading.local): rdbcompression for "
                                      "the save running on that thread, never seen by another "
                                      "server's thread (tests/test_two_servers.py)",
    ("hotkv.commands.streams.entries", "_MAXLENS"):
        _CACHE + " (parsed MAXLEN arguments, 64 at most)",
    ("hotkv.core.config", "ALIASES"): _IMPORT_TABLE,
    ("hotkv.core.config", "PARAMS"): _IMPORT_TABLE,
    ("hotkv.core.dispatch", "_security_logged"): "Valkey's function-static: the POST/Host: warning "
                                            "is rate-limited per process",
    ("hotkv.fake", "_files_dir"): "the process's one directory for FakeServers' files "
                                  "(made once, removed at exit)",
    ("hotkv.fake", "_files_seq"): "numbers the FakeServers' file names apart within the "
                                  "process's directory: only their distinctness counts",
    ("hotkv.persistence.forkchild", "_children"): "the process's forked children",
    ("hotkv.persistence.forkchild", "_prctl"): "the libc function, looked up once",
    ("hotkv.protocol.fpconv", "_cache"): _CACHE,
    ("hotkv.lua.engine", "_prelude_stripped"): _CACHE + " (the prelude's text)",
    ("hotkv.core.notify", "_event_bytes"): _CACHE,
    ("hotkv.observe.proctitle", "_state"): "the process's title, set by `hotkv serve`",
    ("hotkv.core.registry", "COMMANDS"): _IMPORT_TABLE + " (the command table)",
    ("hotkv.core.registry", "TABLE"): _IMPORT_TABLE + " (the command table)",
    ("hotkv.core.registry", "_next_bit"): _IMPORT_TABLE + " (the commands' ACL bits)",
    ("hotkv.types.geo", "_SPLIT16"): "a constant table built on first use",
    ("hotkv.types.hll", "_CACHE"): _VALUE_CACHE,
    ("hotkv.types.hll", "_HIST"): _VALUE_CACHE,
    ("hotkv.protocol.util", "_GLOB_CACHE"): _CACHE + " (compiled glob patterns)",
}

# The modules where (b) does not fail yet, and what they still do; every
# other module has no undeclared server attribute and no probing.
NOT_YET_CLEAN: dict[str, str] = {}

_CONTAINERS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter",
                         "bytearray", "count", "WeakKeyDictionary", "WeakValueDictionary",
                         "WeakSet", "ChainMap"})
_MUTATORS = frozenset({"append", "add", "update", "pop", "popitem", "clear", "setdefault",
                       "extend", "insert", "remove", "discard", "appendleft", "popleft",
                       "extendleft", "rotate", "sort", "reverse", "difference_update",
                       "intersection_update", "symmetric_difference_update", "__setitem__",
                       "__delitem__"})


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _call_name(node) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return None


def _module_names(body, out: dict):
    """Module-level bindings: name -> "container" | "object" | "other"."""
    for node in body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            v = node.value
            kind = "other"
            if isinstance(v, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp,
                              ast.SetComp)) or _call_name(v) in _CONTAINERS:
                kind = "container"
            elif _call_name(v) is not None:
                kind = "object"
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = kind
        elif isinstance(node, ast.If):
            _module_names(node.body, out)
            _module_names(node.orelse, out)
        elif isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                _module_names(part, out)


def _mutated(tree, names: dict) -> set:
    """Names of ``names`` a function mutates (see the docstring's rule)."""
    found = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.Global):
                found.update(g for g in n.names if g in names)
                continue
            hit = None
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                        and f.attr in _MUTATORS:
                    hit = f.value.id
                elif isinstance(f, ast.Name) and f.id == "next" and n.args \
                        and isinstance(n.args[0], ast.Name):
                    hit = n.args[0].id
                if hit is not None and names.get(hit) != "container":
                    hit = None
            elif isinstance(n, (ast.Assign, ast.AugAssign, ast.Delete)):
                targets = n.targets if not isinstance(n, ast.AugAssign) else [n.target]
                for t in targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                            and names.get(t.value.id) == "container":
                        hit = t.value.id
                    elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                            and names.get(t.value.id) == "object":
                        hit = t.value.id
            if hit is not None:
                found.add(hit)
    return found


def module_state() -> dict[tuple[str, str], int]:
    """(module, name) -> line of every piece of mutable module-level state."""
    out = {}
    for mod, path in _modules().items():
        tree = ast.parse(path.read_text(), str(path))
        names: dict = {}
        _module_names(tree.body, names)
        lines = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in names:
                lines.setdefault(node.id, node.lineno)
        for name in _mutated(tree, names):
            out[(mod, name)] = lines.get(name, 0)
    return out


def test_no_mutable_module_state():
    found = module_state()
    new = sorted(k for k in found if k not in ALLOWED)
    assert not new, "module-level state (a server's belongs on the server; else add it to " \
        "ALLOWED with its reason):\n" + "\n".join(
            "  %s.%s (line %d)" % (m, n, found[(m, n)]) for m, n in new)
    stale = sorted(k for k in ALLOWED if k not in found)
    assert not stale, "ALLOWED entries that no longer match: %s" % stale


def test_allowed_reasons_are_given():
    assert all(len(reason) > 20 for reason in ALLOWED.values())


# -- (b) a server's attributes ----------------------------------------------

def _declared() -> set:
    tree = ast.parse((ROOT / "server.py").read_text())
    out = set()
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Server")
    for node in cls.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.add(t.id)
                    if t.id == "__slots__":
                        out.update(ast.literal_eval(node.value))
        elif isinstance(node, ast.FunctionDef):
            out.add(node.name)
            if node.name in ("__init__", "_make_subsystems"):
                for n in ast.walk(node):
                    if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) \
                            and isinstance(n.value, ast.Name) and n.value.id == "self":
                        out.add(n.attr)
    return out


def _is_server(node, aliases=frozenset()) -> bool:
    return (isinstance(node, ast.Name) and (node.id == "server" or node.id in aliases)) or (
        isinstance(node, ast.Attribute) and node.attr == "server")


def _server_aliases(scope) -> frozenset:
    """Names a function binds to a server (``srv = c.server``, ``s = server``)."""
    return frozenset(t.id for n in ast.walk(scope) if isinstance(n, ast.Assign)
                     and _is_server(n.value) for t in n.targets if isinstance(t, ast.Name))


def server_attributes() -> dict[str, list]:
    """module -> [(line, what)] for undeclared stores and probes (see the docstring)."""
    declared = _declared()
    out = collections.defaultdict(set)
    for mod, path in _modules().items():
        if mod == "hotkv.server":
            continue
        tree = ast.parse(path.read_text(), str(path))
        scopes = [(tree, frozenset())] + [
            (f, _server_aliases(f)) for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope, aliases in scopes:
            for n in ast.walk(scope):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) \
                        and _is_server(n.value, aliases) and n.attr not in declared:
                    out[mod].add((n.lineno, "undeclared server." + n.attr))
                elif isinstance(n, ast.Attribute) and n.attr == "__dict__" \
                        and _is_server(n.value, aliases):
                    out[mod].add((n.lineno, "probe __dict__"))
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.args \
                        and n.func.id in ("getattr", "hasattr", "setattr") \
                        and _is_server(n.args[0], aliases):
                    what = "setattr" if n.func.id == "setattr" else "probe " + n.func.id
                    out[mod].add((n.lineno, what))
    return {m: sorted(v) for m, v in out.items()}


def _listed(mod: str, entries) -> str | None:
    """The entry of ``entries`` naming mod or a package holding it."""
    for name in entries:
        if mod == name or mod.startswith(name + "."):
            return name
    return None


def test_server_attributes_declared():
    found = server_attributes()
    stores = sum(1 for v in found.values() for _, w in v if not w.startswith("probe"))
    probes = sum(1 for v in found.values() for _, w in v if w.startswith("probe"))
    print("\nserver attributes outside server.py: %d undeclared stores, %d probes, in %d modules"
          % (stores, probes, len(found)))
    for mod in sorted(found):
        print("  %-32s %s" % (mod, ", ".join("%d %s" % f for f in found[mod])))
    dirty = {m: found[m] for m in found if _listed(m, NOT_YET_CLEAN) is None}
    assert not dirty, "undeclared server attributes or probes (declare the attribute in " \
        "Server.__init__ and read it): %s" % dirty
    cleaned = sorted(set(NOT_YET_CLEAN) - {_listed(m, NOT_YET_CLEAN) for m in found})
    assert not cleaned, "clean now: remove from NOT_YET_CLEAN: %s" % cleaned


# -- (c) one count_call -------------------------------------------------------

_COUNTERS = frozenset({"calls", "failed_calls", "seconds", "rejected_calls"})

# Modules that still add to a command's counters themselves (their owners' to change).
COUNT_CALL_PENDING: dict[str, str] = {}


def _counter_target(target, aliases) -> bool:
    """``target`` is a command's counter: ``...cmdstats[cmd].calls`` or
    ``st.calls`` where ``st`` was bound to an expression naming cmdstats."""
    if not (isinstance(target, ast.Attribute) and target.attr in _COUNTERS):
        return False
    value = target.value
    return "cmdstats" in ast.unparse(value) or (isinstance(value, ast.Name) and value.id in aliases)


def counter_adds() -> dict[str, list]:
    """module -> lines adding to (or setting) a command's calls / failed_calls /
    seconds / rejected_calls, directly or through a local alias of its entry."""
    out = collections.defaultdict(list)
    for mod, path in _modules().items():
        if mod == "hotkv.core.stats":
            continue
        tree = ast.parse(path.read_text(), str(path))
        scopes = [tree] + [n for n in ast.walk(tree)
                           if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            aliases = {t.id for n in ast.walk(scope) if isinstance(n, ast.Assign)
                       and "cmdstats" in ast.unparse(n.value)
                       for t in n.targets if isinstance(t, ast.Name)}
            for n in ast.walk(scope):
                if isinstance(n, ast.AugAssign) and _counter_target(n.target, aliases):
                    out[mod].append(n.lineno)
                elif isinstance(n, ast.Assign) and any(
                        _counter_target(t, aliases) for t in n.targets):
                    out[mod].append(n.lineno)
    return {m: sorted(set(lines)) for m, lines in out.items()}


def test_one_count_call():
    found = counter_adds()
    new = {m: lines for m, lines in found.items() if _listed(m, COUNT_CALL_PENDING) is None}
    assert not new, "command counters added to outside hotkv.core.stats.count_call: %s" % new
    done = sorted(set(COUNT_CALL_PENDING) - {_listed(m, COUNT_CALL_PENDING) for m in found})
    assert not done, "count_call used now: remove from COUNT_CALL_PENDING: %s" % done
