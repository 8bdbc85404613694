"""The Lua engine: the runtime behind EVAL / EVALSHA / SCRIPT (no sockets),
and, in function mode, behind FCALL (hotkv.lua.functions.FunctionEngine:
its own Lua state, chunk ``@user_function``, FUNCTION KILL's texts).

Owns ``Engine`` (one per server, ``server.scripting``, created lazily by
``engine(server)``): a Lua 5.1 state from lupa, the script cache (sha1 hex ->
Script; EVAL-created scripts evicted beyond 500, least recently used first,
SCRIPT LOAD ones kept), the Python side of the ``redis`` / ``server`` API,
the script timeout, and the conversions between Lua values and RESP,
following Valkey's script_lua.c / eval.c / script.c.  Its Lua side -- the
API table, the sandbox, the error handler, the timeout hook -- is
``prelude.lua`` (run once per Lua state); the libraries are ``hotkv.lua.libs``:

* a script's ``redis.call`` runs through ``hotkv.core.dispatch.call`` with a fake
  client (the caller's db and user, RESP2 unless ``redis.setresp(3)``), so a
  command behaves exactly as when a client sends it (WATCH, blocked clients,
  keyspace events, effects propagation); its encoded reply is parsed back
  into Lua values (status -> {ok=}, error -> {err=}, nil -> false in RESP2,
  maps/sets/doubles/big numbers as tables in RESP3).  Arity, noscript, ACL,
  read-only (EVAL_RO, ``#!lua flags=no-writes``), MISCONF and OOM checks are
  made here with Valkey's script texts;
* the script's return value is encoded straight to RESP for the caller
  (numbers truncated to integers, arrays stop at the first nil, true -> 1 /
  false -> nil in RESP2 ...);
* errors carry Valkey's texts: ``ERR user_script:1: ... script: <sha>, on
  @user_script:1.``; the error handler finds the user's frame skipping C
  functions and our own Lua glue (chunk ``=hotkv``).  A user's ``return
  redis.call(...)`` keeps its frame because ``hotkv.lua.bytecode`` compiles
  a tail call to an API function as a plain call;
* the sandbox (SECURITY.md): a script only ever holds Lua values.  Every
  Python callable it can reach is wrapped in a Lua closure of the prelude
  and never raises into Lua: ``_guard`` turns what it raises into
  ``FAIL, kind, error`` and the wrapper raises that as a Lua value (an
  error table; a library's ``LibError`` message positioned as luaL_error
  would).  lupa would hand Lua the exception object, with a traceback
  full of Lua references; freed by a later collection after its runtime
  was replaced, one crashed the process.  Globals are read-only ("Attempt
  to modify a readonly table"), reading an unknown global fails ("Script
  attempted to access nonexistent global variable"), KEYS/ARGV are served
  by the globals' metatable, the library tables are read-only proxies
  (``pairs``/``next`` and the encoders see what they show), no loader runs
  bytecode, lupa's ``python`` global is removed and Python attributes are
  never reachable (``attribute_filter``); io, package, require, dofile,
  loadfile, print, debug, getfenv, setfenv, newproxy and os (but os.clock)
  are gone.  tests/test_lua_sandbox.py holds the audit against Valkey.
  The libraries (cjson, bit, cmsgpack, struct, in ``hotkv.lua.libs``)
  get their tables built in the prelude from callables made here; table
  iteration order (maps, cjson objects) is stock Lua 5.1's, not Valkey's
  (its Lua hashes strings with murmur32);
* script timeout: past ``lua-time-limit`` (busy-reply-threshold) a count
  hook (every 100000 instructions) serves the other clients -- the event
  loop cannot be re-entered, so ``hotkv.net.busy.ServeWhileBlocked`` accepts new
  connections (TCP, unix, TLS), reads every socket and writes the replies
  itself -- and their commands meet a gate installed as
  ``server.pause_check`` for the script's duration, in Valkey's place after
  the AUTH and ACL checks: those without ``allow_busy``, and a SHUTDOWN
  without NOSAVE, get BUSY; SCRIPT KILL ends a script that has not written;
  SHUTDOWN NOSAVE ends any.  A SIGTERM is left to the event loop, so the
  shutdown it asks for happens once the script ends, as in Valkey.

* the debugger (SCRIPT DEBUG, ``hotkv.lua.ldb``): ``Engine.ldb`` is the
  session while a debugged EVAL runs; its line hook replaces the timeout
  hook, redis.debug / redis.breakpoint and the calls' <command> / <reply> /
  <error> logs go to it;
* redis.set_repl: after REPL_NONE / REPL_AOF / REPL_REPLICA a script's
  commands propagate nowhere / to the AOF / to the replicas only; a script
  that narrowed some feeds its commands itself at its end, each to its sinks.

Invariants:
* a script runs to completion inside one ``call``, so it is atomic; blocking
  commands act non-blocking because the fake client cannot block;
* ``engine.run`` is the running script's context exactly while one runs;
* no Python exception ever enters Lua: the API's callables are guarded
  (``_guard``), the internal ones (hooks) catch their own errors.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import time
from collections import OrderedDict
from importlib import resources

import hiredis
from lupa import lua51

from ..clients.client import Client
from ..core.dispatch import call, reject
from ..core.registry import lookup
from ..protocol import errors
from ..protocol.replies import quoted, redacted
from ..protocol.resp import Double, encode, format_double, split_inline_args
from ..replication import replica_gate as replica
from . import bytecode
from .libs import LibError, bit, cjson, cmsgpack, lib, struct as lua_struct
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

MAX_REPLY_DEPTH = 200
_INT64 = 1 << 63
_BYTES = itertools.repeat(bytes)
LRU_LENGTH = 500
BUSY_SCRIPT = ("BUSY Valkey is busy running a script. You can only call SCRIPT KILL or "
               "SHUTDOWN NOSAVE.")

_SHUTDOWN_OPTIONS = {b"nosave", b"save", b"now", b"force", b"abort"}


def _shutdown_saves(argv) -> bool:
    """A well-formed SHUTDOWN that is neither NOSAVE nor ABORT: refused BUSY
    while a script is busy (Valkey checks after the syntax and ABORT, so
    those still get the command's own replies)."""
    opts = {a.lower() for a in argv[1:]}
    if not opts <= _SHUTDOWN_OPTIONS or b"abort" in opts:
        return False
    return b"nosave" not in opts


def _number_arg(n) -> bytes:
    """A Lua number as a command argument: integral values in full, others as
    the shortest round-trip form (Valkey's double2ll / fpconv_dtoa)."""
    if type(n) is int:
        return b"%d" % n
    if n == n and -9.2233720368547758e18 < n < 9.2233720368547758e18 and n == int(n):
        return b"%d" % int(n)
    return format_double(n)


NOREPLICAS = "NOREPLICAS Not enough good replicas to write."


def no_good_replicas(server) -> bool:
    """min-replicas-to-write is set (with a max lag) and not met: Valkey's
    checkGoodReplicasStatus failing (hotkv.replication keeps the gate)."""
    return server.repl_refuse


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

    def __init__(self, caller, fake, sha, readonly, flags):
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
        self.prop_mark = 0
        self.busy_error = BUSY_SCRIPT
        self.serving = None     # hotkv.net.busy.ServeWhileBlocked while busy
        self.time_us = 0        # TIME's answer in this run (set at its start)
        self.repl = 3           # redis.set_repl: 1 AOF, 2 replicas, 3 both, 0 neither
        self.targets = None     # {index in prop_pending: 1 or 2} once set_repl narrowed it
        # No replica link, disk error, min-replicas gate or cluster: the
        # checks a script's call makes for those are skipped (none of them
        # can start while the script runs).
        self.plain = False
        # The quick path's commands by name (Engine._lua_call), or None: the
        # engine's for this run's mode (read-only or not) while no per-call
        # check but the dispatcher's gates can refuse a command.
        self.quick = None


class Script:
    __slots__ = ("body", "func", "flags")

    def __init__(self, body, func, flags):
        self.body = body
        self.func = func
        self.flags = flags




class Engine:
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
                                          attribute_filter=_no_attributes)
        self.lua_type = lua51.lua_type
        prelude = lua.execute("return loadstring(...)", _prelude_code(lua), b"=hotkv")
        json_cfg = cjson.Config()     # this state's cjson settings
        if not callable(prelude):
            raise RuntimeError("scripting prelude failed to compile")
        self._null = None
        # What a callback returns first when it fails (the prelude's host
        # wrappers raise the error in Lua): no Python exception ever enters
        # the Lua state (see _guard).
        self._fail = fail = lua.table()
        # What redis.call's reply is marked with when the wrapper builds its
        # table in Lua (see _command).
        self._status, self._array = lua.table(), lua.table()
        self._reader = hiredis.Reader()     # (the quick path's RESP2 arrays)
        g = _guard(fail)
        self._compile, self._run, self._rawequal, self._null, self._classify, \
            self._errinfo, *extra = prelude(
            self._lua_call, self._lua_pcall, g(self._py_setresp), g(self._py_log),
            g(self._py_sha1),
            # (the lambdas read self._null / self._table when called: both
            # exist only once the prelude has run)
            g(lib(_one_arg("encode",
                           lambda v: cjson.encode(v, self._null, self._rawequal, json_cfg,
                                                        self._internals.real)))),
            g(lib(_one_arg("decode",
                           lambda s: cjson.decode(s, self._null, self._table, json_cfg)))),
            lambda name: g(lib(lambda *a: bit.op(name, *a))),
            g(self._py_aclcheck), _unwrap, self._py_interrupt,
            g(lambda *a: cmsgpack.pack(*a, real=self._internals.real)),
            # (extra arguments are ignored, as lua-cmsgpack's)
            g(lib(lambda s=cmsgpack.MISSING, *_:
                  cmsgpack.unpack(s, 0, 0, False, self._table), multi=True)),
            g(lib(lambda s=cmsgpack.MISSING, offset=0, *_:
                  cmsgpack.unpack(s, offset, 1, True, self._table), multi=True)),
            g(lib(lambda s=cmsgpack.MISSING, limit=0, offset=0, *_:
                  cmsgpack.unpack(s, offset, limit, True, self._table), multi=True)),
            lambda name: g(lua_struct.fn(name.decode())), self.CHUNK, self._py_load_expired,
            g(self._py_register),
            lambda name: g(lib(lambda *a: _json_setting(json_cfg, name.decode(), *a),
                               multi=True)),
            self._ldb_hook, self._ldb_debug, g(self._ldb_break), _ldb_addr, self._py_set_repl,
            self._ldb_error, bytecode.rewrite,
            lambda n, t: self._lua_call(*[t[i] for i in range(1, n + 1)]),
            lambda n, t: self._lua_pcall(*[t[i] for i in range(1, n + 1)]), fail,
            self._status, self._array)
        self._internals = extra[0]
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
        run = RunCtx(c, fake, sha, readonly, flags)
        run.busy_error = self.BUSY
        run.prop_mark = len(server.prop_pending)
        run.time_us = server.clock.us()   # TIME's frozen instant: the script's start
        run.plain = (server.replica_link is None and server.disk_error is None
                     and server.cluster is None and not server.repl_refuse)
        if run.plain and self.ldb is None and self.quick_calls:
            if self._quick_table is not server.command_table:
                self._quick_table = server.command_table
                self._quick_rw, self._quick_ro = {}, {}
            run.quick = self._quick_ro if readonly else self._quick_rw
        self.run = run
        try:
            debugging = self.ldb is not None
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
                _feed_targeted(server, run)
        # A GC step every 50 runs, as Valkey (LUA_GC_CYCLE_PERIOD): the
        # garbage of many small scripts does not pile up to Lua's own pause.
        self.gc_count += 1
        if self.gc_count >= 50:
            self.gc_count = 0
            self._internals.gcstep(50)
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
            # Lua hook (no exception object enters Lua: see _guard).
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

    # Script timeout ----------------------------------------------------
    def _py_interrupt(self):
        run = self.run
        if run is None:
            return False
        try:
            if not run.busy:
                limit = self.server.config.values["lua-time-limit"]
                if limit <= 0 or (time.monotonic() - run.start) * 1000 < limit:
                    return False
                self._enter_busy(run)
            self._process_events(run)
        except Exception:   # the hook must never raise a Python error into Lua
            log.exception("scripting: busy-script event processing failed")
        return run.killed

    def _enter_busy(self, run):
        """Past the time limit: from now on other clients are served from the
        interrupt hook and answered BUSY, except for the commands flagged
        allow_busy (SCRIPT KILL, SHUTDOWN NOSAVE, AUTH, MULTI...)."""
        # (at call time: net is the event loop's side, and whether it leads
        # back to the command modules is its own business)
        from ..net.busy import ServeWhileBlocked
        server = self.server
        run.busy = True
        server.yielding = True     # blocked clients wait for the script's end (dispatch)
        log.warning("Slow script detected: still in execution after %d milliseconds. "
                    "You can try killing the script using the %s command. "
                    "Script name is: %s.", int((time.monotonic() - run.start) * 1000),
                    self.KILL, run.sha.decode())
        prev = server.pause_check
        busy_error = run.busy_error

        def busy_gate(client, cmd, argv):
            if "allow_busy" not in cmd.flags:
                reject(client, busy_error, cmd)
                return True
            if cmd.name == "shutdown" and _shutdown_saves(argv):
                # Valkey refuses it inside the command (before any save):
                # counted as a call that failed, not as a rejected one.
                server.cmdstats[cmd].calls += 1
                server.cmdstats[cmd].failed_calls += 1
                server.stat_numcommands += 1
                client.ncmds += 1
                client.last_cmd = cmd.name
                server.count_error(busy_error)
                client.add_error(busy_error)
                return True
            return prev(client, cmd, argv) if prev is not None else False
        run.prev_gate = (prev, busy_gate)
        server.pause_check = busy_gate
        # SHUTDOWN NOSAVE ends the script even if it wrote, as the process
        # exit does in Valkey.
        down = server.shutdown_cb
        if down is not None:
            def shutdown_gate():
                run.killed = run.shutdown = True
                down()
            run.prev_shutdown = (down, shutdown_gate)
            server.shutdown_cb = shutdown_gate
        run.serving = ServeWhileBlocked(server)

    def _leave_busy(self, run):
        server = self.server
        server.yielding = False
        prev, gate = run.prev_gate
        if server.pause_check is gate:
            server.pause_check = prev
        if run.prev_shutdown is not None:
            down, gate = run.prev_shutdown
            if server.shutdown_cb is gate:
                server.shutdown_cb = down
        if run.serving is not None:
            serving, run.serving = run.serving, None
            serving.stop()   # new connections join the event loop

    def _process_events(self, run):
        """Serve the other clients while the script runs (Valkey's
        processEventsWhileBlocked): see hotkv.net.busy.ServeWhileBlocked."""
        run.serving.pump(skip=run.caller)

    # Lua -> RESP -------------------------------------------------------
    def _reply(self, v, out: list, resp3: bool, script_resp3: bool, depth: int = 0):
        t = type(v)
        if t is bytes:
            encode(v, out, resp3)
        elif t is bool:
            if not script_resp3:
                out.append(b":1\r\n" if v else (b"_\r\n" if resp3 else b"$-1\r\n"))
            elif resp3:
                out.append(b"#t\r\n" if v else b"#f\r\n")
            else:
                out.append(b":1\r\n" if v else b":0\r\n")
        elif t is int or t is float:
            out.append(b":%d\r\n" % truncate(v))
        elif self.lua_type(v) == "table":
            if depth >= MAX_REPLY_DEPTH:
                # Valkey nests until the Lua C stack is full (~8000 levels);
                # we stop earlier, with its error text.
                out.append(b"-ERR reached lua stack limit\r\n")
                return
            self._reply_table(v, out, resp3, script_resp3, depth + 1)
        else:
            out.append(b"_\r\n" if resp3 else b"$-1\r\n")

    def _reply_table(self, v, out, resp3, script_resp3, depth):
        res = self._classify(v)
        kind = res[0]
        if kind == b"array":
            n = res[1]
            out.append(b"*%d\r\n" % n)
            for i in range(1, n + 1):
                self._reply(v[i], out, resp3, script_resp3, depth)
        elif kind == b"err":
            err = res[1]
            if not res[2]:
                self.server.count_error(err.decode("utf-8", "surrogateescape"), True)
            out.append(b"-" + err.replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n")
        elif kind == b"ok":
            out.append(b"+" + res[1].replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n")
        elif kind == b"double":
            encode(Double(res[1]), out, resp3)
        elif kind == b"big":
            big = res[1].replace(b"\r", b" ").replace(b"\n", b" ")
            if resp3:
                out.append(b"(" + big + b"\r\n")
            else:
                out.append(b"$%d\r\n%b\r\n" % (len(big), big))
        elif kind == b"verbatim":
            s, fmt = res[1], res[2]
            if resp3:
                out.append(b"=%d\r\n%b:%b\r\n" % (len(s) + 4, fmt[:3], s))
            else:
                out.append(b"$%d\r\n%b\r\n" % (len(s), s))
        elif kind == b"map":
            items = list(res[1].items())
            out.append((b"%%%d\r\n" if resp3 else b"*%d\r\n") % (len(items) * (1 if resp3 else 2)))
            for k, val in items:
                self._reply(k, out, resp3, script_resp3, depth)
                self._reply(val, out, resp3, script_resp3, depth)
        else:   # set
            keys = list(res[1].keys())
            out.append((b"~%d\r\n" if resp3 else b"*%d\r\n") % len(keys))
            for k in keys:
                self._reply(k, out, resp3, script_resp3, depth)

    # ------------------------------------------------------------------
    # Callbacks from Lua: each returns (ok, value), never raises
    # ------------------------------------------------------------------
    def _py_call(self, raise_error, *args):
        """(ok, value) of one call (the debugger's redis command)."""
        try:
            return self._command(raise_error, args)
        except Exception as e:   # a bug costs one error reply, never the server
            log.exception("scripting: redis.call failed")
            return False, self._err_table("ERR internal error in script call: %s"
                                          % type(e).__name__)

    def _lua_call(self, *args):
        """redis.call: its reply as the prelude's wrapper takes it (see
        _command); an error table goes back after FAIL and the wrapper raises
        it -- no exception on this path (see _guard).

        The quick path: a run where none of the per-call checks can refuse
        (``run.quick``: no debugger, no replica link, disk error, cluster
        or min-replicas gate, set_repl untouched), no dispatcher gate on
        (``server.gated``: no ACL restriction, maxmemory, pause, busy gate),
        a command already seen by name that needs no script-side check
        (``_quick_cmds``: no subcommands, not noscript; for a read-only
        run no write or may_replicate), its arity right and every argument
        a string or a number: the command runs, and an integer, bulk string or status
        reply goes straight back; anything else takes the general path,
        which makes every check."""
        run = self.run
        if run is not None and run.quick is not None and not self.server.gated:
            if all(map(isinstance, args, _BYTES)):     # (every argument a string)
                argv = list(args)
            else:
                argv = _quick_argv(list(args))
            cmd = run.quick.get(argv[0]) if argv else None
            if cmd is not None:
                arity = cmd.arity
                if (n := len(argv)) == arity or (arity < 0 and n >= -arity):
                    try:
                        # (_command's end, its checks passed)
                        fake = run.fake
                        if cmd.write:
                            run.write_dirty = True
                        call(fake, cmd, argv)
                        server = self.server
                        if server.monitors and not cmd.admin and \
                                "skip_monitor" not in cmd.flags:
                            feed_monitors(server, fake.db.index, b"lua", cmd, argv)
                        out = fake.out
                        if not out:     # no reply (CLIENT REPLY OFF, say)
                            return None
                        data = out[0] if len(out) == 1 else b"".join(out)
                        fake.out = []
                        return self._quick_value(data, fake.resp3) if data else None
                    except Exception as e:   # a bug costs one error reply, never the server
                        log.exception("scripting: redis.call failed")
                        return self._fail, 1, self._err_table(
                            "ERR internal error in script call: %s" % type(e).__name__)
        try:
            ok, v = self._command(True, args)
        except Exception as e:   # a bug costs one error reply, never the server
            log.exception("scripting: redis.call failed")
            return self._fail, 1, self._err_table("ERR internal error in script call: %s"
                                                  % type(e).__name__)
        if not ok:
            return self._fail, 1, v
        return v

    def _quick_value(self, data: bytes, resp3: bool):
        """The quick path's reply as redis.call's wrapper takes it: the
        commonest shapes decoded here, the rest as _command decodes them
        (an error after FAIL, for the wrapper to raise)."""
        kind = data[0]
        if kind == 58:                      # ':'
            return int(data[1:-2])
        if kind == 36:                      # '$'
            if data[1] == 45:               # '$-1'
                return False
            return data[data.index(b"\r\n") + 2:-2]
        if kind == 43:                      # '+'
            return self._status, data[1:-2]
        if kind != 45:                      # '-': the general path's error table
            value = self._quick_reply(data, resp3)
            if value is not None:
                return value
        value, _ = self._parse(data, 0)
        if kind == 45:
            return self._fail, 1, value
        return value

    def _lua_pcall(self, *args):
        """redis.pcall: the same, an error table returned as a value."""
        try:
            return self._command(False, args)[1]
        except Exception as e:
            log.exception("scripting: redis.pcall failed")
            return self._err_table("ERR internal error in script call: %s" % type(e).__name__)

    def _err_table(self, text: str, ignore_stats: bool = False):
        t = self._table()
        t[b"err"] = text.encode("utf-8", "surrogateescape")
        if ignore_stats:
            t[b"ignore_error_stats_update"] = True
        return t

    def _rejected(self, text, cmd=None):
        """A command the script may not run: counted as Valkey counts it."""
        self._ldb_error(text)
        message = "ERR " + text
        self.server.count_error(message)
        if cmd is not None:
            self.server.cmdstats[cmd].rejected_calls += 1
        return False, self._err_table(message, True)

    def _rejected_as_is(self, message, cmd):
        """A command the script may not run, refused with the server's own text."""
        self._ldb_error("-" + message + "\r\n")
        self.server.count_error(message)
        self.server.cmdstats[cmd].rejected_calls += 1
        return False, self._err_table(message, True)

    def _lookup(self, run, argv):
        """The command a script's call names (a subcommand's own), or None;
        noted for the quick path (_lua_call) when none of _command's checks
        but arity and the dispatcher's gates can refuse it in this run's
        mode."""
        table = self.server.command_table
        cmd = table.get(argv[0])
        if cmd is None:
            cmd = table.get(argv[0].lower())
            if cmd is None:
                return None
        if cmd.subcommands is not None:
            if len(argv) < 2:
                return cmd      # (its arity refuses it)
            return cmd.subcommands.get(argv[1]) or cmd.subcommands.get(argv[1].lower())
        if run.quick is not None and "noscript" not in cmd.flags \
                and not (run.readonly and (cmd.write or "may_replicate" in cmd.flags)):
            run.quick[argv[0]] = cmd
        return cmd

    def _command(self, raise_error, args):
        run = self.run
        server = self.server
        if run is None:
            return False, self._err_table("ERR redis.call is only valid inside a script")
        argv = self._argv(args)
        if type(argv) is tuple:
            return argv
        fake = run.fake
        ldb = self.ldb
        if ldb is not None:     # the debugger logs the call when stepping
            ldb.log_command(argv)

        cmd = self._lookup(run, argv)
        if cmd is None:
            return self._rejected("Unknown command called from script")
        n = len(argv)
        if (cmd.arity > 0 and n != cmd.arity) or n < -cmd.arity:
            return self._rejected("Wrong number of args calling command from script", cmd)
        if "noscript" in cmd.flags and not getattr(server, "script_disable_deny_script", False):
            # DEBUG SET-DISABLE-DENY-SCRIPTS 1 lifts this (Valkey's tests use it)
            return self._rejected("This Redis command is not allowed from script", cmd)
        plain = run.plain
        if not plain and server.replica_link is not None and "stale" not in cmd.flags \
                and replica.running_stale(server):
            return self._rejected("Can not execute the command on a stale replica", cmd)
        if server.acl_check is not None:
            denied = server.acl_check(fake, cmd, argv)
            if denied is not None:
                if denied.startswith("NOPERM "):
                    denied = denied[7:]
                return self._rejected("ACL failure in script: " + denied, cmd)
        if run.readonly and (cmd.write or "may_replicate" in cmd.flags):
            return self._rejected("Write commands are not allowed from read-only scripts.", cmd)
        if not plain and cmd.write and not run.write_dirty:
            if server.replica_link is not None and replica.refuses_writes(server, run.caller):
                return self._rejected_as_is(replica.READONLY, cmd)
            if server.disk_error is not None:
                message = server.disk_error
                server.count_error(message)
                server.cmdstats[cmd].rejected_calls += 1
                return False, self._err_table(message, True)
            if no_good_replicas(server):
                return self._rejected_as_is(NOREPLICAS, cmd)
        if server.maxmemory and cmd.denyoom and not run.write_dirty and \
                (run.flags is None or "allow_oom" not in run.flags) and server.over_maxmemory():
            self._ldb_error("-" + errors.OOM + "\r\n")
            server.count_error(errors.OOM)
            server.cmdstats[cmd].rejected_calls += 1
            return False, self._err_table(errors.OOM, True)
        if cmd.write:
            run.write_dirty = True
        if not plain and server.cluster is not None:   # scriptVerifyClusterState
            message = server.cluster.script_check(run, cmd, argv)    # (hotkv.cluster.state)
            if message is not None:
                return self._rejected(message, cmd)
        fake.out = []
        # (_call_retargeted: redis.set_repl narrowed where the effects go)
        (call if run.repl == 3 else self._call_retargeted)(fake, cmd, argv)
        if server.monitors and not cmd.admin and "skip_monitor" not in cmd.flags:
            feed_monitors(server, fake.db.index, b"lua", cmd, argv)
        out = fake.out
        data = out[0] if len(out) == 1 else b"".join(out)
        fake.out = []
        if not data:    # the command replied nothing (CLIENT REPLY OFF, say)
            return True, None
        if ldb is None:
            value = self._quick_reply(data, fake.resp3)
            if value is not None:
                return True, value
        value, _ = self._parse(data, 0)
        if ldb is not None:
            ldb.log_reply(data)
        if raise_error and data[0] == 45:       # '-'
            return False, value
        return True, value

    def _argv(self, args):
        """A call's arguments as a command's argv, or (False, error table)."""
        if not args:
            self._ldb_error("Please specify at least one argument for this call")
            return False, self._err_table("ERR Please specify at least one argument for this call")
        argv = []
        for a in args:
            t = type(a)
            if t is bytes:
                argv.append(a)
            elif (t is int or t is float):
                argv.append(_number_arg(a))
            else:
                self._ldb_error("Command arguments must be strings or integers")
                return False, self._err_table("ERR Command arguments must be strings or integers")
        return argv

    def _quick_reply(self, data: bytes, resp3: bool):
        """The common replies as the prelude's wrapper takes them, or None:
        an integer or a bulk string as it is (false for a nil), STATUS and
        the text ({ok = text}), ARRAY and the items of a flat array ({...}):
        the wrapper makes the table in Lua, for a fraction of the cost of a
        table made from Python."""
        kind = data[0]
        if kind == 58:                      # ':'
            return int(data[1:-2])
        if kind == 36:                      # '$'
            if data[1] == 45:               # '$-1'
                return False
            return data[data.index(b"\r\n") + 2:-2]
        if kind == 43:                      # '+'
            return self._status, data[1:-2]
        if kind == 42:                      # '*'
            if resp3:
                items = _flat_array(data)
            elif b"\r\n+" in data:       # (a status item: hiredis reads it as a string)
                return None
            else:                           # RESP2: hiredis reads it, C-fast
                reader = self._reader
                reader.feed(data)
                items = reader.gets()
                if type(items) is not list or len(items) > _FLAT_MAX or \
                        not set(map(type, items)) <= _FLAT_TYPES:
                    return None
                if None in items:           # a nil bulk: false, as Valkey's Lua gets it
                    items = [False if x is None else x for x in items]
            if items is not None:
                return (self._array, *items)
        return None

    def _call_retargeted(self, fake, cmd, argv):
        """Run a script's command; what it appends to ``prop_pending`` goes
        where redis.set_repl says: nowhere (dropped), or to the AOF or the
        replicas only (noted in ``run.targets``)."""
        server = self.server
        run = self.run
        mark = len(server.prop_pending)
        call(fake, cmd, argv)
        pending = server.prop_pending
        if len(pending) <= mark:
            return
        if run.repl == 0:
            del pending[mark:]
            return
        if run.targets is None:
            run.targets = {}
        for i in range(mark, len(pending)):
            run.targets[i] = run.repl

    # RESP -> Lua -------------------------------------------------------
    def _parse(self, data: bytes, pos: int):
        end = data.index(b"\r\n", pos)
        kind = data[pos:pos + 1]
        line = data[pos + 1:end]
        pos = end + 2
        if kind == b"$":
            n = int(line)
            if n < 0:
                return False, pos
            return data[pos:pos + n], pos + n + 2
        if kind == b":":
            return int(line), pos
        if kind == b"+":
            t = self._table()
            t[b"ok"] = line
            return t, pos
        if kind == b"-":
            if self.ldb is not None:
                self._ldb_error(data[pos - len(line) - 3:pos - 2])
            text = line
            sp = text.find(b" ")
            if sp < 0:
                text = b"ERR " + text
            t = self._table()
            t[b"err"] = text.rstrip(b"\r\n")
            t[b"ignore_error_stats_update"] = True
            return t, pos
        if kind == b"*" or kind == b">":
            n = int(line)
            if n < 0:
                return False, pos
            items = []
            for _ in range(n):
                v, pos = self._parse(data, pos)
                items.append(v)
            if n <= _FLAT_MAX:
                # made in Lua ({...}): its array part holds a nil item as
                # Valkey's lua_createtable(n) does, so # counts the same
                return self._internals.pack(*items), pos
            return self._table_from(items), pos
        if kind == b"%":
            n = int(line)
            inner = self._table()
            for _ in range(n):
                k, pos = self._parse(data, pos)
                v, pos = self._parse(data, pos)
                if k is not None:
                    inner[k] = v
            t = self._table()
            t[b"map"] = inner
            return t, pos
        if kind == b"~":
            n = int(line)
            inner = self._table()
            for _ in range(n):
                k, pos = self._parse(data, pos)
                if k is not None:
                    inner[k] = True
            t = self._table()
            t[b"set"] = inner
            return t, pos
        if kind == b"_":
            return None, pos
        if kind == b"#":
            return line == b"t", pos
        if kind == b",":
            t = self._table()
            t[b"double"] = _parse_double(line)
            return t, pos
        if kind == b"(":
            t = self._table()
            t[b"big_number"] = line
            return t, pos
        if kind == b"=":
            n = int(line)
            raw = data[pos:pos + n]
            inner = self._table()
            inner[b"string"] = raw[4:]
            inner[b"format"] = raw[:3]
            t = self._table()
            t[b"verbatim_string"] = inner
            return t, pos + n + 2
        if kind == b"|":
            n = int(line)
            for _ in range(2 * n):
                _, pos = self._parse(data, pos)
            return self._parse(data, pos)
        raise ValueError("unexpected reply type %r" % kind)

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
                argv.append(_number_arg(a))
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


def _feed_targeted(server, run):
    """At the script's end, when set_repl narrowed some of its commands:
    its propagated commands go out now, each to its sinks (the AOF writer,
    the replicas' stream), in order, as one unit per sink (a MULTI/EXEC when
    more than one), as Valkey's propagatePendingCommands feeds each op to
    its targets."""
    pending = server.prop_pending
    mark = run.prop_mark
    entries = pending[mark:]
    del pending[mark:]
    targets = run.targets
    run.targets = None
    sink = server.aof
    if sink is None or not entries:
        return
    aof_part = [e for i, e in enumerate(entries, mark) if targets.get(i, 3) & 1]
    repl_part = [e for i, e in enumerate(entries, mark) if targets.get(i, 3) & 2]
    writer = server.aof_writer
    if sink is writer:                          # a replica: its own AOF only
        feeds = ((writer, aof_part),)
    elif hasattr(sink, "first") and hasattr(sink, "second"):   # server._Tee
        feeds = ((sink.first, aof_part), (sink.second, repl_part))
    elif hasattr(sink, "writer") and hasattr(sink, "repl"):    # replication.CountedAOF
        feeds = ((sink.writer, aof_part),)
        if repl_part:
            n = len(repl_part)
            sink.repl.master_repl_offset += 1 if n == 1 else n + 2
    else:                                       # the replicas' stream only
        feeds = ((sink, repl_part),)
    for target, part in feeds:
        if part:
            target.feed(part)
    run.caller.woff = server.repl.master_repl_offset   # what WAIT waits for


def _ldb_addr(v) -> bytes:
    """How the debugger names one of the API's Python callables (a C
    function to Valkey's Lua): "function@0x..."."""
    return b"function@0x%x" % id(v)


def _json_setting(cfg, name: str, *args):
    """cjson's configuration functions, in lib(multi=True)'s shape."""
    ok, res = cjson.setting(cfg, name, *args)
    if not ok:
        return False, res
    return (True, len(res)) + tuple(res)


def _no_attributes(obj, name, setting):
    # Scripts get Python callables; none of their attributes (no escape hatch).
    raise AttributeError("access denied")


def _guard(fail):
    """A decorator for the Python callables a script can reach: what the
    callable raises comes back as ``fail, kind, error`` -- kind 1 an error
    value to raise as it is (an error table), 2 a library's message (the
    prelude positions it at the user's call) -- so no exception, and no
    traceback holding Lua references, ever enters the Lua state.  lupa
    would hand Lua the exception object and keep it as the runtime's last
    error; freed by a later collection, after its runtime was replaced,
    it crashed the process."""
    def guard(fn):
        def call(*args):
            try:
                return fn(*args)
            except LibError as e:
                return fail, 2, e.message
            except lua51.LuaError as e:
                if e.args and lua51.lua_type(e.args[0]) == "table":
                    return fail, 1, e.args[0]
                return _failure(fail, e)
            except Exception as e:
                return _failure(fail, e)
        return call
    return guard


def _one_arg(name: str, fn):
    """cjson.encode / decode: exactly one argument, as lua-cjson checks."""
    message = b"bad argument #1 to '%s' (expected 1 argument)" % name.encode()

    def call(*args):
        if len(args) != 1:
            return False, message
        return fn(args[0])
    return call


def _failure(fail, e):
    log.error("scripting: a server function failed: %r", e)
    return fail, 1, ("%s: %s" % (type(e).__name__, e)).encode("utf-8", "surrogateescape")


def _unwrap(err):
    """What a Python callback raised (lupa hands Lua the exception; the
    prelude's host wrappers turn it into a Lua value at once): an error
    table, (message, True) for a library error, the text of any other
    exception (a fault of ours: never the object), None for a value that
    is no Python exception."""
    if isinstance(err, LibError):
        return err.message, True
    if isinstance(err, lua51.LuaError) and err.args and lua51.lua_type(err.args[0]) == "table":
        return err.args[0]
    if isinstance(err, BaseException):
        log.error("scripting: a server function failed: %r", err)
        return ("%s: %s" % (type(err).__name__, err)).encode("utf-8", "surrogateescape")
    return None


def _quick_argv(argv):
    """The quick path's argv when some arguments are numbers (converted as
    _number_arg does), or [] when one is neither a string nor a number."""
    for i, a in enumerate(argv):
        t = type(a)
        if t is not bytes:
            if t is int or t is float:
                argv[i] = _number_arg(a)
            else:
                return []
    return argv


_FLAT_MAX = 7000       # items a reply passes to Lua as values (its stack takes 8,000)
_FLAT_TYPES = frozenset((bytes, int, type(None)))


def _flat_array(data: bytes):
    """The items of a RESP array of bulk strings, integers and RESP3 nulls
    (a nil bulk is false, as Valkey's Lua gets it; a null is nil), or None
    for any other array (nested, other RESP3 types, a null array, more than
    _FLAT_MAX items)."""
    end = data.index(b"\r\n")
    n = int(data[1:end])
    if n < 0 or n > _FLAT_MAX:
        return None
    items = []
    append = items.append
    pos = end + 2
    index = data.index
    for _ in range(n):
        kind = data[pos]
        end = index(b"\r\n", pos)
        if kind == 36:                  # '$'
            size = int(data[pos + 1:end])
            if size < 0:
                append(False)
                pos = end + 2
            else:
                pos = end + 2 + size
                append(data[end + 2:pos])
                pos += 2
        elif kind == 58:                # ':'
            append(int(data[pos + 1:end]))
            pos = end + 2
        elif kind == 95:                # '_': RESP3's null, nil in Lua
            append(None)
            pos = end + 2
        else:
            return None
    return items


def _parse_double(line: bytes) -> float:
    s = line.decode()
    if s in ("inf", "+inf"):
        return math.inf
    if s == "-inf":
        return -math.inf
    return float(s)


def feed_monitors(server, dbindex: int, origin: bytes, cmd, argv):
    """MONITOR lines the dispatcher does not write: the EVAL itself (flagged
    skip_monitor, shown before it runs, as Valkey does) and the script's
    commands, shown as coming from "lua"."""
    line = b"+%.6f [%d %s] %s\r\n" % (server.clock.time(), dbindex, origin,
                                        b" ".join([quoted(a) for a in redacted(cmd, argv)]))
    for mon in list(server.monitors):
        if not mon.closed:
            mon.add_raw(line)
            mon.schedule_flush()


def engine(server) -> Engine:
    eng = getattr(server, "scripting", None)
    if eng is None:
        eng = Engine(server)
        server.scripting = eng
    return eng
