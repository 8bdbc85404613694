"""The Lua engine: the runtime behind EVAL / EVALSHA / SCRIPT (no sockets),
and, in function mode, behind FCALL (hotkv.lua.functions.FunctionEngine:
its own Lua state, chunk ``@user_function``, FUNCTION KILL's texts).

Owns ``Engine`` (one per server, ``server.scripting``, created lazily by
``engine(server)``): a Lua 5.1 state from lupa with the prelude run in it,
the script cache (sha1 hex -> Script; EVAL-created scripts evicted beyond
500, least recently used first, SCRIPT LOAD ones kept), a script's run
(``execute``: the script's flags checked as Valkey's evalGenericCommand /
scriptPrepareForRun do, the fake client set up, ``RunCtx``, the error
texts), the API callbacks other than redis.call (setresp, set_repl, log,
sha1hex, acl_check_cmd, register_function) and the debugger's hooks;
also ``parse_shebang``, ``ScriptError``, ``Script``.  The engine is put
together from its halves, one module each:

* ``hotkv.lua.calls`` (``CallPath``): redis.call / redis.pcall -- the
  command through ``hotkv.core.dispatch.call`` with the fake client (the
  caller's db and user, RESP2 unless ``redis.setresp(3)``), so it behaves
  exactly as when a client sends it; the script-side checks with Valkey's
  texts; the reply into Lua values; the quick path; set_repl's targets;
* ``hotkv.lua.replies`` (``ReplyWriter``): the script's return value as
  RESP for the caller;
* ``hotkv.lua.busy`` (``BusyScript``): past ``lua-time-limit``, the other
  clients served from the count hook and answered BUSY;
* ``hotkv.lua.sandbox``: the guard every Python callable a script can
  reach goes through (SECURITY.md), lupa's attribute filter;
* ``prelude.lua``: the Lua half -- the API table, the sandbox, the error
  handler, the timeout hook (run once per Lua state); the libraries
  (cjson, bit, cmsgpack, struct) are ``hotkv.lua.libs``; the debugger
  (SCRIPT DEBUG) is ``hotkv.lua.ldb``: ``Engine.ldb`` is the session while
  a debugged EVAL runs.

Errors carry Valkey's texts: ``ERR user_script:1: ... script: <sha>, on
@user_script:1.``; the prelude's error handler finds the user's frame
skipping C functions and our own Lua glue (chunk ``=hotkv``).  A user's
``return redis.call(...)`` keeps its frame because ``hotkv.lua.bytecode``
compiles a tail call to an API function as a plain call.

Invariants:
* a script runs to completion inside one ``call``, so it is atomic; blocking
  commands act non-blocking because the fake client cannot block;
* ``engine.run`` is the running script's context exactly while one runs;
* a script only ever holds Lua values, and no Python exception ever enters
  Lua: the API's callables are guarded (``hotkv.lua.sandbox.guard``), the
  internal ones (hooks) catch their own errors; lupa's ``python`` global is
  removed and no attribute of a Python object is reachable;
* a script's effects propagate command by command as its calls run; after
  redis.set_repl narrowed them, at its end, each to its sinks.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from importlib import resources

import hiredis
from lupa import lua51

from ..clients.client import Client
from ..core.registry import lookup
from ..protocol.resp import split_inline_args
from ..replication import replica_gate as replica
from . import bytecode
from .busy import BUSY_SCRIPT, BusyScript
from .calls import NOREPLICAS, CallPath, feed_targeted, no_good_replicas, number_arg
from .libs import LibError, bit, cjson, cmsgpack, lib, struct as lua_struct
from .replies import ReplyWriter
from .sandbox import guard, json_setting, ldb_addr, no_attributes, one_arg, unwrap
from .values import lua_num_str, lua_tonumber, truncate

log = logging.getLogger("hotkv")

# The Lua half of the engine (package data next to this module).
_PRELUDE = resources.files(__package__).joinpath("prelude.lua").read_bytes()
_prelude_stripped: list = []


def _prelude_code(lua) -> bytes:
    """The prelude compiled once per process without its debug information
    (hotkv.lua.bytecode.strip: every function of it lives in each Lua
    state, and Valkey's suite holds a fresh state under 100 KB), or its
    source when the compiled form cannot be read."""
    if not _prelude_stripped:
        dumped = lua.execute("local f = loadstring(...) return f and string.dump(f)",
                             _PRELUDE, b"=hotkv")
        code = bytecode.strip(dumped) if isinstance(dumped, bytes) else None
        _prelude_stripped.append(code or _PRELUDE)
    return _prelude_stripped[0]


_INT64 = 1 << 63
LRU_LENGTH = 500


def _unpacking(fn, fail):
    """cmsgpack's unpack functions as lib(fn, multi=True) makes a library
    function, and (None, message) -- lua_settable's error, which names no
    position -- raised as it is (the prelude's wrapper raises FAIL, 1, e
    with error(e, 0))."""
    def call(*args):
        res = fn(*args)
        ok = res[0]
        if ok:
            return res[2:2 + res[1]] if res[1] != 1 else res[2]
        if ok is None:
            return fail, 1, res[1]
        raise LibError(res[1])
    return call


SHEBANG_FLAGS = {
    b"no-writes": "no_writes", b"allow-oom": "allow_oom", b"allow-stale": "allow_stale",
    b"no-cluster": "no_cluster", b"allow-cross-slot-keys": "allow_cross_slot",
}


def parse_shebang(body: bytes):
    """(flags or None for compat mode, shebang length); raises ValueError(text).
    As Valkey 8.1: the line is split as sdssplitargs does (quotes), the
    options are checked before the engine's name (matched without case)."""
    if not body.startswith(b"#!"):
        return None, 0
    end = body.find(b"\n")
    if end < 0:
        raise ValueError("Invalid script shebang")
    parts = split_inline_args(body[:end])
    if not parts:
        raise ValueError("Invalid engine in script shebang")
    flags = set()
    for part in parts[1:]:
        if part.startswith(b"flags="):
            value = part[6:]
            for f in value.split(b",") if value else ():
                if f not in SHEBANG_FLAGS:
                    raise ValueError("Unexpected flag in script shebang: %s"
                                     % f.decode("utf-8", "surrogateescape"))
                flags.add(SHEBANG_FLAGS[f])
        else:
            raise ValueError("Unknown lua shebang option: %s"
                             % part.decode("utf-8", "surrogateescape"))
    engine_name = parts[0][2:]
    if engine_name.lower() != b"lua":
        raise ValueError("Could not find scripting engine '%s'"
                         % engine_name.decode("utf-8", "surrogateescape"))
    return flags, end


class ScriptError(Exception):
    """An error reply for the caller; ``counted`` False when the error was
    already counted in the error stats (the command inside the script)."""

    def __init__(self, message: str, counted: bool = True):
        super().__init__(message)
        self.message = message
        self.counted = counted


class RunCtx:
    __slots__ = ("caller", "fake", "sha", "readonly", "write_dirty", "flags", "killed",
                 "start", "busy", "prev_gate", "prev_shutdown", "shutdown", "prop_mark",
                 "busy_error", "serving", "time_us", "repl", "targets", "plain",
                 "quick")

    def __init__(self, caller, fake, sha, readonly, flags, busy_error=BUSY_SCRIPT,
                 prop_mark=0, time_us=0, plain=False, quick=None):
        self.caller = caller
        self.fake = fake
        self.sha = sha
        self.readonly = readonly
        self.write_dirty = False
        self.flags = flags
        self.killed = False
        self.start = time.monotonic()
        self.busy = False
        self.prev_gate = None
        self.prev_shutdown = None
        self.shutdown = False
        self.prop_mark = prop_mark      # len(prop_pending) at the start
        self.busy_error = busy_error
        self.serving = None     # hotkv.net.busy.ServeWhileBlocked while busy
        self.time_us = time_us  # TIME's answer in this run (its start)
        self.repl = 3           # redis.set_repl: 1 AOF, 2 replicas, 3 both, 0 neither
        self.targets = None     # {index in prop_pending: 1 or 2} once set_repl narrowed it
        # No replica link, disk error, min-replicas gate or cluster: the
        # checks a script's call makes for those are skipped (none of them
        # can start while the script runs).
        self.plain = plain
        # The quick path's commands by name (Engine._lua_call), or None: the
        # engine's for this run's mode (read-only or not) while no per-call
        # check but the dispatcher's gates can refuse a command.
        self.quick = quick


class Script:
    __slots__ = ("body", "func", "flags")

    def __init__(self, body, func, flags):
        self.body = body
        self.func = func
        self.flags = flags


class Engine(CallPath, ReplyWriter, BusyScript):
    # The chunk name scripts compile under (errors say "user_script:1:").
    CHUNK = b"@user_script"
    # What the other clients get while a script of this engine is busy.
    BUSY = BUSY_SCRIPT
    KILL = "SCRIPT KILL"        # the command the slow-script log line suggests
    # redis.call's quick path (see _lua_call); off, every call takes the
    # general path (tests/test_lua_quick.py compares the two).
    quick_calls = True

    def __init__(self, server):
        self.server = server
        self.scripts: dict[bytes, Script] = {}
        # Scripts EVAL created (not SCRIPT LOAD), oldest first: beyond
        # LRU_LENGTH the oldest is dropped, as Valkey does.
        self.lru: OrderedDict[bytes, None] = OrderedDict()
        self.evicted = 0
        self.run: RunCtx | None = None
        self.fake = None
        # The Lua debugger (hotkv.lua.ldb): the session while a debugged
        # EVAL runs, SCRIPT DEBUG's mode per client id, forked sessions.
        self.ldb = None
        self.ldb_clients: dict[int, bytes] = {}
        self.ldb_children: set[int] = set()
        # The quick path's commands (see _lua_call), for this command table.
        self._quick_table = None
        self._quick_rw: dict = {}
        self._quick_ro: dict = {}
        self._init_lua()

    # ------------------------------------------------------------------
    def _init_lua(self):
        self.lua = lua = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True,
                                          register_eval=False, register_builtins=False,
                                          attribute_filter=no_attributes)
        self.lua_type = lua51.lua_type
        # (ReplyWriter: an array's items in one call -- Lua's own unpack,
        # raw reads -- made before the prelude hides the globals)
        self._items = lua.execute("local unpack = unpack "
                                  "return function(t, n) return unpack(t, 1, n) end")
        prelude = lua.execute("return loadstring(...)", _prelude_code(lua), b"=hotkv")
        json_cfg = cjson.Config()     # this state's cjson settings
        if not callable(prelude):
            raise RuntimeError("scripting prelude failed to compile")
        self._null = None
        # What a callback returns first when it fails (the prelude's host
        # wrappers raise the error in Lua): no Python exception ever enters
        # the Lua state (see guard).
        self._fail = fail = lua.table()
        # What redis.call's reply is marked with when the wrapper builds its
        # table in Lua (see _command).
        self._status, self._array = lua.table(), lua.table()
        self._reader = hiredis.Reader()     # (the quick path's RESP2 arrays)
        g = guard(fail)
        self._compile, self._run, self._rawequal, self._null, self._classify, \
            self._errinfo, *extra = prelude(
            self._lua_call, self._lua_pcall, g(self._py_setresp), g(self._py_log),
            g(self._py_sha1),
            # (the lambdas read self._null / self._table when called: both
            # exist only once the prelude has run)
            g(lib(one_arg("encode",
                           lambda v: cjson.encode(v, self._null, self._rawequal, json_cfg,
                                                  self._real)))),
            g(lib(one_arg("decode",
                           lambda s: cjson.decode(s, self._null, self._table, json_cfg)))),
            lambda name: g(lib(lambda *a: bit.op(name, *a))),
            g(self._py_aclcheck), unwrap, self._py_interrupt,
            g(lambda *a: cmsgpack.pack(*a, real=self._real)),
            # (extra arguments are ignored, as lua-cmsgpack's)
            g(_unpacking(lambda s=cmsgpack.MISSING, *_:
                         cmsgpack.unpack(s, 0, 0, False, self._table), fail)),
            g(_unpacking(lambda s=cmsgpack.MISSING, offset=0, *_:
                         cmsgpack.unpack(s, offset, 1, True, self._table), fail)),
            g(_unpacking(lambda s=cmsgpack.MISSING, limit=0, offset=0, *_:
                         cmsgpack.unpack(s, offset, limit, True, self._table), fail)),
            lambda name: g(lua_struct.fn(name.decode())), self.CHUNK, self._py_load_expired,
            g(self._py_register),
            lambda name: g(lib(lambda *a: json_setting(json_cfg, name.decode(), *a),
                               multi=True)),
            self._ldb_hook, self._ldb_debug, g(self._ldb_break), ldb_addr, self._py_set_repl,
            self._ldb_error, bytecode.rewrite,
            lambda n, t: self._lua_call(*[t[i] for i in range(1, n + 1)]),
            lambda n, t: self._lua_pcall(*[t[i] for i in range(1, n + 1)]), fail,
            self._status, self._array)
        self._internals = extra[0]
        # (an attribute of a Lua table read from Python costs a lookup and a
        # new wrapper, ~1 us: the callables used per call are read once)
        self._real = self._internals.real
        self._gcstep = self._internals.gcstep
        self._pack = self._internals.pack    # (for hotkv.lua.calls' array replies)
        self.ldb_loaded = False      # hotkv/lua/ldb.lua compiled in this state (ldb.py)
        self._load = extra[1] if len(extra) > 1 else None
        # The prelude's garbage, its own main chunk included (our reference
        # to it goes first): a fresh state is small.
        del prelude
        self._internals.gcfull()
        self.gc_count = 0
        self._table = lua.table
        self._table_from = lua.table_from

    def flush(self):
        """SCRIPT FLUSH: a new Lua state and an empty cache."""
        self.scripts = {}
        self.lru = OrderedDict()
        self._init_lua()

    # ------------------------------------------------------------------
    # The cache
    # ------------------------------------------------------------------
    def create(self, body: bytes, load: bool = False) -> bytes:
        """Compile and cache ``body`` (once); returns its sha1 hex.  Raises
        ScriptError with Valkey's text when it does not compile.  A script
        EVAL creates may be evicted later; one SCRIPT LOAD created (or
        loaded again) stays until SCRIPT FLUSH."""
        sha = hashlib.sha1(body).hexdigest().encode()
        if sha in self.scripts:
            if load:
                self.lru.pop(sha, None)
            return sha
        try:
            flags, skip = parse_shebang(body)
        except ValueError as e:
            raise ScriptError("ERR " + str(e))
        res = self._compile(body[skip:] if skip else body)
        if isinstance(res, tuple):
            func, err = res[0], res[1] if len(res) > 1 else b""
        else:
            func, err = res, b""
        if func is None:
            text = err.decode("utf-8", "surrogateescape") if isinstance(err, bytes) else str(err)
            raise ScriptError("ERR Error compiling script (new function): " + text)
        if not load:
            lru = self.lru
            while len(lru) >= LRU_LENGTH:
                old, _ = lru.popitem(last=False)
                del self.scripts[old]
                self.evicted += 1
            lru[sha] = None
        self.scripts[sha] = Script(body, func, flags)
        return sha

    def touch(self, sha: bytes):
        if sha in self.lru:
            self.lru.move_to_end(sha)

    # ------------------------------------------------------------------
    # Running
    # ------------------------------------------------------------------
    def execute(self, c, script: Script, sha: bytes, keys, args, ro: bool):
        """Run a cached script for client c; returns the encoded reply chunks."""
        flags = script.flags
        server = self.server
        readonly = ro
        if flags is not None:
            if "no_cluster" in flags and server.cluster is not None:
                raise ScriptError("ERR Can not run script on cluster, 'no-cluster' flag is set.")
            if server.replica_link is not None:
                # What processCommand refuses once the script's flags made EVAL
                # or FCALL a write (READONLY) and took its stale flag away.
                if "no_writes" not in flags and replica.refuses_writes(server, c):
                    raise ScriptError(replica.READONLY)
                if "allow_stale" not in flags and replica.running_stale(server):
                    raise ScriptError(replica.MASTERDOWN)
            if "no_writes" not in flags:
                if server.disk_error is not None:
                    raise ScriptError(
                        "MISCONF Valkey is configured to persist data to AOF, but it's currently "
                        "unable to persist to disk. Writable scripts are blocked. Use 'no-writes' "
                        "flag for read only scripts. AOF error: "
                        + server.disk_error.split("AOF error: ")[-1])
                if no_good_replicas(server):
                    raise ScriptError(NOREPLICAS)
                if ro:
                    raise ScriptError(
                        "ERR Can not execute a script with write flag using *_ro command.")
                if server.maxmemory and "allow_oom" not in flags and server.over_maxmemory():
                    raise ScriptError("OOM allow-oom flag is not set on the script, can not "
                                      "run it when used memory > 'maxmemory'")
            else:
                readonly = True
        elif server.replica_link is not None and replica.running_stale(server):
            raise ScriptError(replica.MASTERDOWN)
        fake = self.fake
        if fake is None:
            fake = self.fake = Client(server, fake=True)
            fake.kind = "lua"
        fake.db = c.db
        fake.user = c.user
        fake.authenticated = True
        fake.resp3 = False
        fake.reply_mode = 0
        fake.skip_this = False
        fake.out = []
        # (server.gated is off unless a gate -- the disk error's, repl_refuse's
        # among them -- is on)
        plain = (server.replica_link is None and server.cluster is None
                 and (not server.gated
                      or (server.disk_error is None and not server.repl_refuse)))
        quick = None
        debugging = self.ldb is not None
        if plain and not debugging and self.quick_calls:
            if self._quick_table is not server.command_table:
                self._quick_table = server.command_table
                self._quick_rw, self._quick_ro = {}, {}
            quick = self._quick_ro if readonly else self._quick_rw
        # (TIME's frozen instant: the script's start)
        self.run = run = RunCtx(c, fake, sha, readonly, flags, self.BUSY,
                                len(server.prop_pending), server.clock.us(), plain, quick)
        try:
            timed = not debugging and server.config.values["lua-time-limit"] > 0
            if len(keys) + len(args) <= 64:     # KEYS / ARGV made in Lua
                res = self._run(script.func, timed, debugging, False, False, len(keys),
                                *keys, *args)
            else:
                table_from = self.lua.table_from
                res = self._run(script.func, timed, debugging, table_from(keys),
                                table_from(args), 0)
        finally:
            self.run = None
            if run.busy:
                self._leave_busy(run)
            if run.shutdown:
                # SHUTDOWN NOSAVE during the script: its effects are never
                # logged, and its caller gets no reply (Valkey's process exits).
                del server.prop_pending[run.prop_mark:]
                c.skip_this = True
            elif run.targets is not None:
                feed_targeted(server, run)
        # A GC step every 50 runs, as Valkey (LUA_GC_CYCLE_PERIOD): the
        # garbage of many small scripts does not pile up to Lua's own pause.
        self.gc_count += 1
        if self.gc_count >= 50:
            self.gc_count = 0
            self._gcstep(50)
        if type(res) is tuple:
            ok = res[0]
            value = res[1] if len(res) > 1 else None
        else:
            ok, value = res, None
        if not ok:
            raise self._error_from(value, sha)
        if type(value) is int and -_INT64 <= value < _INT64:     # (the commonest reply)
            return [b":%d\r\n" % value]
        out: list = []
        self._reply(value, out, c.resp3, fake.resp3)
        return out

    def _error_from(self, err, sha: bytes) -> ScriptError:
        if self.lua_type(err) != "table":
            text = err.decode("utf-8", "surrogateescape") if isinstance(err, bytes) else \
                ("execution failure" if err is None else str(err))
            return ScriptError("ERR Error running script %s, %.100s"
                               % (self.funcname(sha), text))
        msg, source, line, ignore = self._errinfo(err)
        counted = not ignore
        if isinstance(msg, bytes):
            text = msg.decode("utf-8", "surrogateescape")
        elif isinstance(msg, (int, float)) and not isinstance(msg, bool):
            text = lua_num_str(msg)
        else:
            text = "ERR unknown error"
        if isinstance(source, bytes) and line is not None and not isinstance(line, bool):
            text += " script: %s, on %s:%s." % (
                self.label(sha),
                source.decode("utf-8", "surrogateescape"),
                lua_num_str(line) if not isinstance(line, bytes) else line.decode())
        return ScriptError(text, counted)

    def vm_memory(self) -> int:
        """Bytes the Lua state holds (INFO's used_memory_vm_*)."""
        return int(self._internals.kbytes() * 1024)

    def funcname(self, sha: bytes) -> str:
        """The script's name in "Error running script <name>" (Valkey's funcname)."""
        return "f_" + sha.decode()

    def label(self, sha: bytes) -> str:
        """The script's name in an error's "script: <name>, on ..." suffix."""
        return sha.decode()

    def _py_load_expired(self):
        """The function state's load timeout (hotkv.lua.functions)."""
        return False

    def _py_register(self, *args):
        """server.register_function while a library loads (function state)."""
        err = self._internals.register(*args)
        if err is not None:
            raise lua51.LuaError(self._err_table(
                err.decode("utf-8", "surrogateescape") if isinstance(err, bytes) else str(err)))
        return None

    # The debugger (hotkv.lua.ldb) ----------------------------------------
    def _ldb_hook(self, is_count, line):
        """Every line of a debugged script (prelude's ldbhook)."""
        session = self.ldb
        if session is None:
            return None
        try:
            session.line_hook(bool(is_count), int(line))
        except lua51.LuaError as e:
            # The session ends the script: its error table, raised by the
            # Lua hook (no exception object enters Lua: see guard).
            return e.args[0] if e.args else None
        except Exception:   # the hook must never raise a Python error into Lua
            log.exception("scripting: debugger hook failed")
        return None

    def _ldb_debug(self, text):
        """redis.debug(...): its arguments, shown as the debugger shows values."""
        session = self.ldb
        if session is not None:
            session.log(b"<debug> line %d: " % session.currentline + text)
        return None

    def _ldb_break(self, *args):
        """redis.breakpoint(): stop at the next line when debugging."""
        session = self.ldb
        if session is None:
            return False
        session.luabp = True
        return True

    def _api_error(self, text: str):
        """The error an API function raises (Valkey's luaPushError: the
        debugger logs it while stepping)."""
        self._ldb_error(text)
        return lua51.LuaError(self._err_table("ERR " + text))

    def _ldb_error(self, text):
        """An error of a script's call while the debugger steps (Valkey logs
        the error's text as its luaPushError gets it)."""
        session = self.ldb
        if session is not None and session.step:
            session.log(b"<error> " + (text.encode("utf-8", "surrogateescape")
                                        if isinstance(text, str) else text))

    # ------------------------------------------------------------------
    def _py_setresp(self, *args):
        n = len(args)
        if n != 1:
            raise self._api_error("server.setresp() requires one argument.")
        v = args[0]
        try:
            resp = truncate(lua_tonumber(v))
        except (TypeError, ValueError):
            resp = 0
        if resp not in (2, 3):
            raise self._api_error("RESP version must be 2 or 3.")
        if self.run is not None:
            self.run.fake.resp3 = resp == 3
        return None

    def _py_set_repl(self, flags):
        """redis.set_repl (validated by the prelude): where the script's
        next commands propagate, as Valkey's run_ctx->repl_flags."""
        if self.run is not None:
            self.run.repl = int(flags) & 3
            if self.run.repl != 3:
                self.run.quick = None    # (the general path retargets the effects)
        return None

    def _py_log(self, *args):
        n = len(args)
        if n < 2:
            raise self._api_error("server.log() requires two arguments or more.")
        try:
            level = truncate(lua_tonumber(args[0]))
        except (TypeError, ValueError):
            raise self._api_error("First argument must be a number (log level).")
        if level < 0 or level > 3:
            raise self._api_error("Invalid log level.")
        parts = []
        for a in args[1:]:
            if type(a) is bytes:
                parts.append(a.decode("utf-8", "surrogateescape"))
            elif type(a) in (int, float):
                parts.append(lua_num_str(a))
        log.log((logging.DEBUG, logging.INFO, logging.INFO, logging.WARNING)[level],
                "%s", " ".join(parts))
        return None

    def _py_sha1(self, *args):
        n = len(args)
        if n != 1:
            raise self._api_error("wrong number of arguments")
        v = args[0]
        if type(v) in (int, float):
            v = lua_num_str(v).encode()
        elif type(v) is not bytes:
            v = b""
        return hashlib.sha1(v).hexdigest().encode()

    def _py_aclcheck(self, *args):
        run = self.run
        argv = []
        for a in args:
            if type(a) is bytes:
                argv.append(a)
            elif type(a) in (int, float):
                argv.append(number_arg(a))
            else:
                raise self._api_error("Command arguments must be strings or integers")
        if not argv:
            raise self._api_error("Please specify at least one argument for this call")
        cmd = lookup(argv[0])
        if cmd is not None and cmd.subcommands is not None and len(argv) >= 2:
            cmd = cmd.subcommands.get(argv[1]) or cmd.subcommands.get(argv[1].lower())
        if cmd is None:
            raise self._api_error("Invalid command passed to server.acl_check_cmd()")
        server = self.server
        if server.acl_check is None or run is None:
            return True
        return server.acl_check(run.fake, cmd, argv) is None


def engine(server) -> Engine:
    eng = server.scripting
    if eng is None:
        eng = Engine(server)
        server.scripting = eng
    return eng
