"""Lua scripting: the runtime behind EVAL / EVALSHA / SCRIPT (no sockets).

Owns ``Engine`` (one per server, ``server.scripting``, created lazily by
``engine(server)``): a Lua 5.1 state from lupa, the script cache (sha1 hex ->
Script; EVAL-created scripts evicted beyond 500, least recently used first,
SCRIPT LOAD ones kept), the sandbox, the ``redis`` / ``server`` API table,
the libraries, the script timeout, and the conversions between Lua values
and RESP, following Valkey's script_lua.c / eval.c / script.c:

* a script's ``redis.call`` runs through ``hotkv.dispatch.call`` with a fake
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
  functions and our own Lua glue (chunk ``=hotkv``).  The API and library
  functions are Python callables -- C functions to Lua -- so a user's
  ``return redis.call(...)`` is no Lua tail call that would lose its line;
  they raise ``LuaError(error table)`` or ``_LibError(message)``, which the
  handler (and our ``pcall``) unwrap;
* the sandbox: globals are read-only ("Attempt to modify a readonly table"),
  reading an unknown global fails ("Script attempted to access nonexistent
  global variable"), KEYS/ARGV are served by the globals' metatable, the
  library tables are read-only proxies (so ``pairs(string)`` sees nothing),
  lupa's ``python`` global is removed and Python attributes are never
  reachable (``attribute_filter``); io, package, require, dofile, loadfile,
  print, debug, getfenv, setfenv, newproxy and os (but os.clock) are gone.
  Libraries, written in Python: cjson (lua-cjson's output, %.14g numbers,
  escaped '/'), bit (LuaBitOp), cmsgpack (lua-cmsgpack), struct (Lua's
  struct library as Redis ships it: little-endian native, 8-byte long);
  table iteration order (maps, cjson objects) is stock Lua 5.1's, not
  Valkey's (its Lua hashes strings with murmur32);
* script timeout: past ``lua-time-limit`` (busy-reply-threshold) a count
  hook (every 100000 instructions) serves the other clients -- the event
  loop cannot be re-entered, so ``hotkv.net.ServeWhileBlocked`` accepts new
  connections (TCP, unix, TLS), reads every socket and writes the replies
  itself -- and their commands meet a gate installed as
  ``server.pause_check`` for the script's duration, in Valkey's place after
  the AUTH and ACL checks: those without ``allow_busy``, and a SHUTDOWN
  without NOSAVE, get BUSY; SCRIPT KILL ends a script that has not written;
  SHUTDOWN NOSAVE ends any.  A SIGTERM is left to the event loop, so the
  shutdown it asks for happens once the script ends, as in Valkey.

Invariants:
* a script runs to completion inside one ``call``, so it is atomic; blocking
  commands act non-blocking because the fake client cannot block;
* ``engine.run`` is the running script's context exactly while one runs;
* Python exceptions never cross into Lua unasked: callbacks catch their own
  errors and raise only the two error carriers above.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import struct
import time
from collections import OrderedDict

from lupa import lua51

from . import errors
from .client import Client
from .dispatch import call, reject
from .resp import Double, encode, format_double

log = logging.getLogger("hotkv")

_PRELUDE = r"""
local py_call, py_pcall, py_setresp, py_log, py_sha1, py_json_enc, py_json_dec, py_bit,
      py_aclcheck, py_unwrap, py_interrupt, py_mp_pack, py_mp_unpack, py_mp_unpack_one,
      py_mp_unpack_limit, py_struct = ...
local dbg = debug
local sethook = debug.sethook
local error, type, tostring, rawget, rawset, setmetatable, select, xpcall, lua_pcall, rawequal =
      error, type, tostring, rawget, rawset, setmetatable, select, xpcall, pcall, rawequal

local function errh(err)
  local lvl = 2
  local i = dbg.getinfo(lvl, 'nSl')
  if i and i.what == 'C' then lvl = 3; i = dbg.getinfo(lvl, 'nSl') end
  while i and (i.source == '=hotkv' or i.what == 'C') do lvl = lvl + 1; i = dbg.getinfo(lvl, 'nSl') end
  if type(err) == 'userdata' then
    local u, msg = py_unwrap(err)
    if msg and i and i.currentline > 0 then
      -- A library function's error, positioned as luaL_error would.
      err = i.short_src .. ':' .. i.currentline .. ': ' .. u
    elseif u ~= nil then
      err = u
    end
  end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if i then err['source'] = i.source; err['line'] = i.currentline end
  return err
end

-- The API functions are Python callables (C functions to Lua), so a user's
-- "return redis.call(...)" keeps its frame for the error handler's line.
local redis = {}
redis.call = py_call
redis.pcall = py_pcall
redis.setresp = py_setresp
redis.log = py_log
redis.sha1hex = py_sha1
redis.acl_check_cmd = py_aclcheck
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
local function single(field, n, v)
  if n ~= 1 or type(v) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {[field] = v}
end
redis.status_reply = function(...) return single('ok', select('#', ...), ...) end
redis.error_reply = function(...)
  local n, v = select('#', ...), ...
  if n ~= 1 or type(v) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  if v:sub(1, 1) == '-' then v = v:sub(2) end
  local sp = v:find(' ', 1, true)
  if sp then return {err = v:sub(1, sp - 1) .. ' ' .. v:sub(sp + 1):gsub('[\r\n]+$', '')} end
  return {err = 'ERR ' .. v:gsub('[\r\n]+$', '')}
end
redis.set_repl = function(...)
  local n, f = select('#', ...), ...
  if n ~= 1 then error({err = 'ERR server.set_repl() requires one argument.'}) end
  if type(f) ~= 'number' or f < 0 or f > 3 then
    error({err = 'ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.'})
  end
end
redis.REPL_NONE = 0; redis.REPL_AOF = 1; redis.REPL_SLAVE = 2; redis.REPL_REPLICA = 2; redis.REPL_ALL = 3
redis.LOG_DEBUG = 0; redis.LOG_VERBOSE = 1; redis.LOG_NOTICE = 2; redis.LOG_WARNING = 3
redis.REDIS_VERSION_NUM = 459268; redis.REDIS_VERSION = '7.2.4'
redis.VALKEY_VERSION_NUM = 524552; redis.VALKEY_VERSION = '8.1.8'
redis.SERVER_NAME = 'valkey'

local function fix_pcall(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == 'userdata' then
    local u = py_unwrap(e)
    if u ~= nil then e = u end
  end
  if type(e) == 'table' then
    local m = rawget(e, 'err')
    if type(m) == 'string' or type(m) == 'number' then return false, m end
  end
  return false, e
end
_G.pcall = function(...) return fix_pcall(lua_pcall(...)) end

local cjson = {}
cjson.null = newproxy(false)
local null = cjson.null
-- The library functions are Python callables (C functions to Lua, so a
-- user's "return cjson.decode(x)" keeps its frame for the error position).
cjson.encode = py_json_enc
cjson.decode = py_json_dec
cjson.encode_keep_buffer = function() end
cjson.encode_max_depth = function() end
cjson.decode_max_depth = function() end
cjson.encode_number_precision = function() end
cjson.encode_sparse_array = function() end
cjson.encode_invalid_numbers = function() end
cjson.decode_invalid_numbers = function() end

local bit = {}
for _, name in ipairs({'tobit', 'bnot', 'band', 'bor', 'bxor', 'lshift', 'rshift',
                       'arshift', 'rol', 'ror', 'bswap', 'tohex'}) do
  bit[name] = py_bit(name)
end

local cmsgpack = {_NAME = 'lua-cmsgpack', _VERSION = 'lua-cmsgpack 0.4.0',
                  _COPYRIGHT = 'Copyright (C) 2012, Salvatore Sanfilippo',
                  _DESCRIPTION = 'MessagePack C implementation for Lua'}
cmsgpack.pack = py_mp_pack
cmsgpack.unpack = py_mp_unpack
cmsgpack.unpack_one = py_mp_unpack_one
cmsgpack.unpack_limit = py_mp_unpack_limit

-- The sandbox.
io = nil; package = nil; require = nil; module = nil; dofile = nil; loadfile = nil
print = nil; debug = nil; getfenv = nil; setfenv = nil; newproxy = nil
python = nil   -- lupa's bridge to Python: never reachable from a script
os = {clock = os.clock}
local struct = {pack = py_struct('pack'), unpack = py_struct('unpack'),
                size = py_struct('size')}
_G.cjson = cjson; _G.bit = bit; _G.cmsgpack = cmsgpack; _G.struct = struct

local function ro_error() error('Attempt to modify a readonly table', 2) end
-- Tables no script may change (state must never leak from one script to
-- the next): rawset / setmetatable on them fail as Valkey's read-only
-- tables do.
local protected = setmetatable({}, {__mode = 'k'})
local function readonly(t)
  local p = setmetatable({}, {__index = t, __newindex = ro_error, __metatable = false})
  protected[p] = true
  protected[t] = true
  return p
end
for _, name in ipairs({'string', 'math', 'table', 'os', 'coroutine', 'cjson', 'bit',
                       'cmsgpack', 'struct'}) do
  _G[name] = readonly(_G[name])
end
-- ("x"):upper() goes through the string metatable: hide the real table.
local strmeta = getmetatable('')
strmeta.__index = _G.string
protected[strmeta] = true
strmeta.__metatable = readonly(strmeta)
local lua_rawset, lua_setmetatable = rawset, setmetatable
_G.rawset = function(t, k, v)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return lua_rawset(t, k, v)
end
_G.setmetatable = function(t, m)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return lua_setmetatable(t, m)
end
local api = readonly(redis)
protected[_G] = true
_G.redis = api
_G.server = api
_G.__server__err__handler = errh
_G.__redis__err__handler = errh

-- KEYS and ARGV are served by the metatable so that they stay read-only.
local cur_keys, cur_argv
setmetatable(_G, {
  __index = function(t, k)
    if k == 'KEYS' then return cur_keys elseif k == 'ARGV' then return cur_argv end
    -- lupa looks debug up (for tracebacks) from outside any protected call.
    if k == 'debug' then return nil end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = function(t, k, v) error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})

local G = _G
local loadstring = loadstring
local function compile(body) return loadstring(body, '@user_script') end
-- Every 100000 instructions the hook lets the server answer other clients
-- once the script is over the time limit; after SCRIPT KILL it raises on
-- every line, so a script catching the error with pcall still ends.
local hook
hook = function()
  if py_interrupt() then
    -- Only in the user's code: never in our glue or the error handler.
    local i = dbg.getinfo(2, 'S')
    if i and i.source == '@user_script' then
      sethook(hook, 'l')
      error({err = 'ERR Script killed by user with SCRIPT KILL.'})
    end
  end
end
local function run(f, keys, argv, timed)
  cur_keys, cur_argv = keys, argv
  if timed then sethook(hook, '', 100000) end
  local ok, v = xpcall(f, errh)
  if timed then sethook() end
  return ok, v
end
-- Raw reads of a returned table (metamethods never run while replying).
local function classify(t)
  local e = rawget(t, 'err')
  if type(e) == 'string' then return 'err', e, rawget(t, 'ignore_error_stats_update') end
  local ok = rawget(t, 'ok')
  if type(ok) == 'string' then return 'ok', ok end
  local d = rawget(t, 'double')
  if type(d) == 'number' then return 'double', d end
  local b = rawget(t, 'big_number')
  if type(b) == 'string' then return 'big', b end
  local v = rawget(t, 'verbatim_string')
  if type(v) == 'table' then
    local f, s = rawget(v, 'format'), rawget(v, 'string')
    if type(f) == 'string' and type(s) == 'string' then return 'verbatim', s, f end
  end
  local m = rawget(t, 'map')
  if type(m) == 'table' then return 'map', m end
  local st = rawget(t, 'set')
  if type(st) == 'table' then return 'set', st end
  local n = 0
  while rawget(t, n + 1) ~= nil do n = n + 1 end
  return 'array', n
end
local function errinfo(t)
  local ok, e, s, l, ig = lua_pcall(function()
    return t.err, t.source, t.line, t.ignore_error_stats_update
  end)
  if ok then return e, s, l, ig end
  return rawget(t, 'err'), rawget(t, 'source'), rawget(t, 'line'),
         rawget(t, 'ignore_error_stats_update')
end
return compile, run, rawequal, null, classify, errinfo
"""

MAX_REPLY_DEPTH = 200
LRU_LENGTH = 500
BUSY_SCRIPT = ("BUSY Valkey is busy running a script. You can only call SCRIPT KILL or "
               "SHUTDOWN NOSAVE.")
# Valkey's text while a function (FCALL) is busy: a RunCtx's busy_error when
# functions come.
BUSY_FUNCTION = ("BUSY Valkey is busy running a script. You can only call FUNCTION KILL or "
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


# C's (long long) cast of a double on x86: out of range and NaN give INT64_MIN.
_INT64_MIN = -(1 << 63)


def _truncate(n) -> int:
    if type(n) is int:
        if -(1 << 63) <= n < (1 << 63):
            return n
        return _INT64_MIN
    if n != n or n >= 9.2233720368547758e18 or n < -9.2233720368547758e18:
        return _INT64_MIN
    return int(n)


def _number_arg(n) -> bytes:
    """A Lua number as a command argument: integral values in full, others as
    the shortest round-trip form (Valkey's double2ll / fpconv_dtoa)."""
    if type(n) is int:
        return b"%d" % n
    if n == n and -9.2233720368547758e18 < n < 9.2233720368547758e18 and n == int(n):
        return b"%d" % int(n)
    return format_double(n)


SHEBANG_FLAGS = {
    b"no-writes": "no_writes", b"allow-oom": "allow_oom", b"allow-stale": "allow_stale",
    b"no-cluster": "no_cluster", b"allow-cross-slot-keys": "allow_cross_slot",
}


def parse_shebang(body: bytes):
    """(flags or None for compat mode, shebang length); raises ValueError(text)."""
    if not body.startswith(b"#!"):
        return None, 0
    end = body.find(b"\n")
    if end < 0:
        raise ValueError("Invalid script shebang")
    parts = body[:end].split()
    if not parts:
        raise ValueError("Invalid engine in script shebang")
    if parts[0] != b"#!lua":
        raise ValueError("Could not find scripting engine '%s'"
                         % parts[0][2:].decode("utf-8", "surrogateescape"))
    flags = set()
    for part in parts[1:]:
        if part.startswith(b"flags="):
            for f in part[6:].split(b","):
                if f not in SHEBANG_FLAGS:
                    raise ValueError("Unexpected flag in script shebang: %s"
                                     % f.decode("utf-8", "surrogateescape"))
                flags.add(SHEBANG_FLAGS[f])
        else:
            raise ValueError("Unknown lua shebang option: %s"
                             % part.decode("utf-8", "surrogateescape"))
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
                 "busy_error", "serving")

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
        self.serving = None     # hotkv.net.ServeWhileBlocked while busy


class Script:
    __slots__ = ("body", "func", "flags")

    def __init__(self, body, func, flags):
        self.body = body
        self.func = func
        self.flags = flags


class Engine:
    def __init__(self, server):
        self.server = server
        self.scripts: dict[bytes, Script] = {}
        # Scripts EVAL created (not SCRIPT LOAD), oldest first: beyond
        # LRU_LENGTH the oldest is dropped, as Valkey does.
        self.lru: OrderedDict[bytes, None] = OrderedDict()
        self.evicted = 0
        self.run: RunCtx | None = None
        self.fake = None
        self._init_lua()

    # ------------------------------------------------------------------
    def _init_lua(self):
        self.lua = lua = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True,
                                          register_eval=False, register_builtins=False,
                                          attribute_filter=_no_attributes)
        self.lua_type = lua51.lua_type
        prelude = lua.execute("return loadstring(...)", _PRELUDE.encode(), b"=hotkv")
        if not callable(prelude):
            raise RuntimeError("scripting prelude failed to compile")
        self._null = None
        self._compile, self._run, self._rawequal, self._null, self._classify, \
            self._errinfo = prelude(
            self._lua_call, self._lua_pcall, self._py_setresp, self._py_log, self._py_sha1,
            _lib(lambda v: self._py_json_encode(v, self._null)),
            _lib(lambda s: self._py_json_decode(s, self._null)),
            lambda name: _lib(lambda *a: self._py_bit(name, len(a), *a)),
            self._py_aclcheck, _unwrap, self._py_interrupt,
            self._lua_mp_pack,
            _lib(lambda s=None: self._py_mp_unpack(s, 0, 0, False), multi=True),
            _lib(lambda s=None, offset=0: self._py_mp_unpack(s, offset, 1, True), multi=True),
            _lib(lambda s=None, limit=0, offset=0: self._py_mp_unpack(s, offset, limit, True),
                 multi=True),
            lambda name: _struct_fn(name.decode()))
        self._table = lua.table

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
            if "no_writes" not in flags:
                if server.disk_error is not None:
                    raise ScriptError(
                        "MISCONF Valkey is configured to persist data to AOF, but it's currently "
                        "unable to persist to disk. Writable scripts are blocked. Use 'no-writes' "
                        "flag for read only scripts. AOF error: "
                        + server.disk_error.split("AOF error: ")[-1])
                if ro:
                    raise ScriptError(
                        "ERR Can not execute a script with write flag using *_ro command.")
                if server.maxmemory and "allow_oom" not in flags and server.over_maxmemory():
                    raise ScriptError("OOM allow-oom flag is not set on the script, can not "
                                      "run it when used memory > 'maxmemory'")
            else:
                readonly = True
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
        run.prop_mark = len(server.prop_pending)
        self.run = run
        try:
            lua = self.lua
            kt = lua.table_from(keys) if keys else lua.table()
            at = lua.table_from(args) if args else lua.table()
            res = self._run(script.func, kt, at, server.config.values["lua-time-limit"] > 0)
        finally:
            self.run = None
            if run.busy:
                self._leave_busy(run)
            if run.shutdown:
                # SHUTDOWN NOSAVE during the script: its effects are never
                # logged, and its caller gets no reply (Valkey's process exits).
                del server.prop_pending[run.prop_mark:]
                c.skip_this = True
        if type(res) is tuple:
            ok = res[0]
            value = res[1] if len(res) > 1 else None
        else:
            ok, value = res, None
        if not ok:
            raise self._error_from(value, sha)
        out: list = []
        self._reply(value, out, c.resp3, fake.resp3)
        return out

    def _error_from(self, err, sha: bytes) -> ScriptError:
        if self.lua_type(err) != "table":
            text = err.decode("utf-8", "surrogateescape") if isinstance(err, bytes) else \
                ("execution failure" if err is None else str(err))
            return ScriptError("ERR Error running script f_%s, %.100s" % (sha.decode(), text))
        msg, source, line, ignore = self._errinfo(err)
        counted = not ignore
        if isinstance(msg, bytes):
            text = msg.decode("utf-8", "surrogateescape")
        elif isinstance(msg, (int, float)) and not isinstance(msg, bool):
            text = _lua_num_str(msg)
        else:
            text = "ERR unknown error"
        if isinstance(source, bytes) and line is not None and not isinstance(line, bool):
            text += " script: %s, on %s:%s." % (
                sha.decode(), source.decode("utf-8", "surrogateescape"),
                _lua_num_str(line) if not isinstance(line, bytes) else line.decode())
        return ScriptError(text, counted)

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
        from .net import ServeWhileBlocked
        server = self.server
        run.busy = True
        log.warning("Slow script detected: still in execution after %d milliseconds. "
                    "You can try killing the script using the SCRIPT KILL command. "
                    "Script name is: %s.", int((time.monotonic() - run.start) * 1000),
                    run.sha.decode())
        prev = server.pause_check
        busy_error = run.busy_error

        def busy_gate(client, cmd, argv):
            if "allow_busy" not in cmd.flags:
                reject(client, busy_error, cmd)
                return True
            if cmd.name == "shutdown" and _shutdown_saves(argv):
                # Valkey refuses it inside the command (before any save):
                # counted as a call that failed, not as a rejected one.
                cmd.calls += 1
                cmd.failed_calls += 1
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
        processEventsWhileBlocked): see hotkv.net.ServeWhileBlocked."""
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
            out.append(b":%d\r\n" % _truncate(v))
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
                self.server.count_error(err.decode("utf-8", "surrogateescape"))
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
        try:
            return self._command(raise_error, args)
        except Exception as e:   # a bug costs one error reply, never the server
            log.exception("scripting: redis.call failed")
            return False, self._err_table("ERR internal error in script call: %s"
                                          % type(e).__name__)

    def _lua_call(self, *args):
        ok, v = self._py_call(True, *args)
        if not ok:
            raise lua51.LuaError(v)
        return v

    def _lua_pcall(self, *args):
        return self._py_call(False, *args)[1]

    def _err_table(self, text: str, ignore_stats: bool = False):
        t = self._table()
        t[b"err"] = text.encode("utf-8", "surrogateescape")
        if ignore_stats:
            t[b"ignore_error_stats_update"] = True
        return t

    def _rejected(self, text, cmd=None):
        """A command the script may not run: counted as Valkey counts it."""
        message = "ERR " + text
        self.server.count_error(message)
        if cmd is not None:
            cmd.rejected_calls += 1
        return False, self._err_table(message, True)

    def _command(self, raise_error, args):
        run = self.run
        server = self.server
        if run is None:
            return False, self._err_table("ERR redis.call is only valid inside a script")
        if not args:
            return False, self._err_table("ERR Please specify at least one argument for this call")
        argv = []
        for a in args:
            t = type(a)
            if t is bytes:
                argv.append(a)
            elif (t is int or t is float):
                argv.append(_number_arg(a))
            else:
                return False, self._err_table("ERR Command arguments must be strings or integers")
        fake = run.fake

        cmd = server.command_table.get(argv[0])
        if cmd is None:
            cmd = server.command_table.get(argv[0].lower())
        if cmd is not None and cmd.subcommands is not None:
            if len(argv) >= 2:
                sub = cmd.subcommands.get(argv[1]) or cmd.subcommands.get(argv[1].lower())
                cmd = sub
        if cmd is None:
            return self._rejected("Unknown command called from script")
        n = len(argv)
        if (cmd.arity > 0 and n != cmd.arity) or n < -cmd.arity:
            return self._rejected("Wrong number of args calling command from script", cmd)
        if "noscript" in cmd.flags:
            return self._rejected("This Redis command is not allowed from script", cmd)
        if server.acl_check is not None:
            denied = server.acl_check(fake, cmd, argv)
            if denied is not None:
                if denied.startswith("NOPERM "):
                    denied = denied[7:]
                return self._rejected("ACL failure in script: " + denied, cmd)
        if run.readonly and (cmd.write or "may_replicate" in cmd.flags):
            return self._rejected("Write commands are not allowed from read-only scripts.", cmd)
        if cmd.write and not run.write_dirty and server.disk_error is not None:
            message = server.disk_error
            server.count_error(message)
            cmd.rejected_calls += 1
            return False, self._err_table(message, True)
        if server.maxmemory and cmd.denyoom and not run.write_dirty and \
                (run.flags is None or "allow_oom" not in run.flags) and server.over_maxmemory():
            server.count_error(errors.OOM)
            cmd.rejected_calls += 1
            return False, self._err_table(errors.OOM, True)
        if cmd.write:
            run.write_dirty = True
        fake.out = []
        call(fake, cmd, argv)
        if server.monitors and not cmd.admin and "skip_monitor" not in cmd.flags:
            feed_monitors(server, fake.db.index, b"lua", cmd, argv)
        data = b"".join(fake.out)
        fake.out = []
        if not data:    # the command replied nothing (CLIENT REPLY OFF, say)
            return True, None
        value, _ = self._parse(data, 0)
        if raise_error and data[:1] == b"-":
            return False, value
        return True, value

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
            t = self._table()
            for i in range(1, n + 1):
                v, pos = self._parse(data, pos)
                t[i] = v
            return t, pos
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
            raise lua51.LuaError(self._err_table("ERR server.setresp() requires one argument."))
        v = args[0]
        try:
            resp = _truncate(_lua_tonumber(v))
        except (TypeError, ValueError):
            resp = 0
        if resp not in (2, 3):
            raise lua51.LuaError(self._err_table("ERR RESP version must be 2 or 3."))
        if self.run is not None:
            self.run.fake.resp3 = resp == 3
        return None

    def _py_log(self, *args):
        n = len(args)
        if n < 2:
            raise lua51.LuaError(self._err_table(
                "ERR server.log() requires two arguments or more."))
        try:
            level = _truncate(_lua_tonumber(args[0]))
        except (TypeError, ValueError):
            raise lua51.LuaError(self._err_table(
                "ERR First argument must be a number (log level)."))
        if level < 0 or level > 3:
            raise lua51.LuaError(self._err_table("ERR Invalid log level."))
        parts = []
        for a in args[1:]:
            if type(a) is bytes:
                parts.append(a.decode("utf-8", "surrogateescape"))
            elif type(a) in (int, float):
                parts.append(_lua_num_str(a))
        log.log((logging.DEBUG, logging.INFO, logging.INFO, logging.WARNING)[level],
                "%s", " ".join(parts))
        return None

    def _py_sha1(self, *args):
        n = len(args)
        if n != 1:
            raise lua51.LuaError(self._err_table("ERR wrong number of arguments"))
        v = args[0]
        if type(v) in (int, float):
            v = _lua_num_str(v).encode()
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
                raise lua51.LuaError(self._err_table(
                    "ERR Command arguments must be strings or integers"))
        if not argv:
            raise lua51.LuaError(self._err_table(
                "ERR Please specify at least one argument for this call"))
        from .registry import lookup
        cmd = lookup(argv[0])
        if cmd is not None and cmd.subcommands is not None and len(argv) >= 2:
            cmd = cmd.subcommands.get(argv[1]) or cmd.subcommands.get(argv[1].lower())
        if cmd is None:
            raise lua51.LuaError(self._err_table(
                "ERR Invalid command passed to server.acl_check_cmd()"))
        server = self.server
        if server.acl_check is None or run is None:
            return True
        return server.acl_check(run.fake, cmd, argv) is None

    # cjson -------------------------------------------------------------
    def _py_json_encode(self, v, null):
        try:
            out: list = []
            self._jenc(v, null, out, 0)
            return True, "".join(out).encode("utf-8", "surrogateescape")
        except _JsonError as e:
            return False, str(e).encode()

    def _jenc(self, v, null, out, depth):
        t = type(v)
        if v is None:
            out.append("null")
        elif t is bool:
            out.append("true" if v else "false")
        elif t is int or t is float:
            if t is float and (v != v or v in (math.inf, -math.inf)):
                raise _JsonError("Cannot serialise number: must not be NaN or Inf")
            out.append(_lua_num_str(v))
        elif t is bytes:
            out.append(_json_str(v))
        elif self.lua_type(v) == "table":
            if depth >= 1000:
                raise _JsonError("Cannot serialise, excessive nesting (1001)")
            items = list(v.items())
            maxi = 0
            is_array = True
            for k, _ in items:
                if type(k) in (int, float) and not isinstance(k, bool) and k >= 1 and k == int(k):
                    maxi = max(maxi, int(k))
                else:
                    is_array = False
                    break
            if is_array and items:
                if maxi > 10 and maxi > 2 * len(items):
                    raise _JsonError("Cannot serialise table: excessively sparse array")
                out.append("[")
                for i in range(1, maxi + 1):
                    if i > 1:
                        out.append(",")
                    self._jenc(v[i], null, out, depth + 1)
                out.append("]")
            else:
                out.append("{")
                first = True
                for k, val in items:
                    if not first:
                        out.append(",")
                    first = False
                    if type(k) is bytes:
                        out.append(_json_str(k))
                    elif type(k) in (int, float) and not isinstance(k, bool):
                        out.append('"' + _lua_num_str(k) + '"')
                    else:
                        raise _JsonError("Cannot serialise %s: table key must be a number or "
                                         "string" % self.lua_type(k))
                    out.append(":")
                    self._jenc(val, null, out, depth + 1)
                out.append("}")
        elif self._rawequal(v, null):
            out.append("null")
        else:
            raise _JsonError("Cannot serialise %s: type not supported" % self.lua_type(v))

    def _py_json_decode(self, s, null):
        if type(s) in (int, float):
            s = _lua_num_str(s).encode()
        if type(s) is not bytes:
            return False, b"bad argument #1 to 'decode' (string expected)"
        doc = s.decode("utf-8", "surrogateescape")
        try:
            value = json.loads(doc, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as e:
            # lua-cjson's wording; Python's parser finds the same position.
            pos = getattr(e, "pos", 0) or 0
            found = b"T_END" if pos >= len(doc.rstrip()) else b"invalid token"
            return False, b"Expected value but found %s at character %d" % (found, pos + 1)
        return True, self._jdec(value, null)

    def _jdec(self, v, null):
        if v is None:
            return null
        if isinstance(v, str):
            return v.encode("utf-8", "surrogateescape")
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return float(v) if abs(v) >= 1 << 53 else v
        if isinstance(v, list):
            t = self._table()
            for i, x in enumerate(v, 1):
                t[i] = self._jdec(x, null)
            return t
        if isinstance(v, dict):
            t = self._table()
            for k, x in v.items():
                t[k.encode("utf-8", "surrogateescape")] = self._jdec(x, null)
            return t
        return v

    # cmsgpack ----------------------------------------------------------
    def _lua_mp_pack(self, *args):
        if not args:
            raise _LibError(b"bad argument #0 to 'pack' (MessagePack pack needs input.)")
        return self._py_mp_pack(*args)

    def _py_mp_pack(self, *args):
        out = bytearray()
        for v in args:
            self._mp_enc(v, out, 0)
        return bytes(out)

    def _mp_enc(self, v, out: bytearray, depth: int):
        t = type(v)
        if v is None:
            out.append(0xC0)
        elif t is bool:
            out.append(0xC3 if v else 0xC2)
        elif t is int or t is float:
            if t is float and (v != v or v in (math.inf, -math.inf) or v != int(v)
                               or not -(1 << 63) <= v < (1 << 63)):
                f32 = struct.unpack("<f", struct.pack("<f", v))[0] \
                    if abs(v) < 3.5e38 or v != v or v in (math.inf, -math.inf) else None
                if f32 is not None and (f32 == v or (v != v and f32 != f32)):
                    out += b"\xca" + struct.pack(">f", v)
                else:
                    out += b"\xcb" + struct.pack(">d", v)
            else:
                _mp_int(int(v), out)
        elif t is bytes:
            n = len(v)
            if n < 32:
                out.append(0xA0 | n)
            elif n < 256:
                out += b"\xd9" + bytes([n])
            elif n < 65536:
                out += b"\xda" + struct.pack(">H", n)
            else:
                out += b"\xdb" + struct.pack(">I", n)
            out += v
        elif self.lua_type(v) == "table":
            if depth >= 16:     # lua-cmsgpack's nesting limit: deeper tables are nil
                out.append(0xC0)
                return
            items = list(v.items())
            n = len(items)
            is_array = all(type(k) in (int, float) and not isinstance(k, bool) and k >= 1
                           and k == int(k) for k, _ in items) and \
                (not items or max(int(k) for k, _ in items) == n)
            if is_array:
                if n < 16:
                    out.append(0x90 | n)
                elif n < 65536:
                    out += b"\xdc" + struct.pack(">H", n)
                else:
                    out += b"\xdd" + struct.pack(">I", n)
                for i in range(1, n + 1):
                    self._mp_enc(v[i], out, depth + 1)
            else:
                if n < 16:
                    out.append(0x80 | n)
                elif n < 65536:
                    out += b"\xde" + struct.pack(">H", n)
                else:
                    out += b"\xdf" + struct.pack(">I", n)
                for k, x in items:
                    self._mp_enc(k, out, depth + 1)
                    self._mp_enc(x, out, depth + 1)
        else:
            out.append(0xC0)

    def _py_mp_unpack(self, s, offset, limit, with_offset):
        if type(s) in (int, float):
            s = _lua_num_str(s).encode()
        if type(s) is not bytes:
            return False, b"bad argument #1 to 'unpack' (string expected)"
        try:
            offset = int(_lua_tonumber(offset))
            limit = int(_lua_tonumber(limit))
        except (TypeError, ValueError):
            return False, b"bad argument #2 to 'unpack' (number expected)"
        if offset < 0 or offset > len(s):
            return False, (b"Start offset %d greater than input length %d."
                           % (offset, len(s)))
        values = []
        pos = offset
        try:
            while pos < len(s) and (limit <= 0 or len(values) < limit):
                v, pos = self._mp_dec(s, pos)
                values.append(v)
        except (IndexError, struct.error, _MsgpackError):
            return False, b"Bad data format in input."
        if with_offset:
            values.insert(0, -1 if pos >= len(s) else pos)
        return (True, len(values), *values)

    def _mp_dec(self, s: bytes, pos: int):
        b = s[pos]
        pos += 1
        if b <= 0x7F:
            return b, pos
        if b >= 0xE0:
            return b - 256, pos
        if 0xA0 <= b <= 0xBF:
            n = b & 0x1F
            if pos + n > len(s):
                raise _MsgpackError()
            return s[pos:pos + n], pos + n
        if 0x90 <= b <= 0x9F:
            return self._mp_array(s, pos, b & 0x0F)
        if 0x80 <= b <= 0x8F:
            return self._mp_map(s, pos, b & 0x0F)
        if b == 0xC0:
            return None, pos
        if b == 0xC2:
            return False, pos
        if b == 0xC3:
            return True, pos
        fixed = _MP_FIXED.get(b)
        if fixed is not None:
            fmt, size = fixed
            if pos + size > len(s):
                raise _MsgpackError()
            v = struct.unpack(fmt, s[pos:pos + size])[0]
            if b in (0xCF, 0xD3) and not -(1 << 53) <= v <= (1 << 53):
                v = float(v)      # a Lua 5.1 number is a double
            return v, pos + size
        if b in (0xC4, 0xC5, 0xC6, 0xD9, 0xDA, 0xDB):
            size = {0xC4: 1, 0xD9: 1, 0xC5: 2, 0xDA: 2, 0xC6: 4, 0xDB: 4}[b]
            n = int.from_bytes(s[pos:pos + size], "big")
            pos += size
            if pos + n > len(s) or len(s[pos - size:pos]) != size:
                raise _MsgpackError()
            return s[pos:pos + n], pos + n
        if b in (0xDC, 0xDD):
            size = 2 if b == 0xDC else 4
            n = int.from_bytes(s[pos:pos + size], "big")
            return self._mp_array(s, pos + size, n)
        if b in (0xDE, 0xDF):
            size = 2 if b == 0xDE else 4
            n = int.from_bytes(s[pos:pos + size], "big")
            return self._mp_map(s, pos + size, n)
        raise _MsgpackError()

    def _mp_array(self, s, pos, n):
        t = self._table()
        for i in range(1, n + 1):
            v, pos = self._mp_dec(s, pos)
            if v is not None:
                t[i] = v
        return t, pos

    def _mp_map(self, s, pos, n):
        t = self._table()
        for _ in range(n):
            k, pos = self._mp_dec(s, pos)
            v, pos = self._mp_dec(s, pos)
            if k is not None and v is not None:
                t[k] = v
        return t, pos

    # bit ---------------------------------------------------------------
    def _py_bit(self, name, n, *args):
        name = name.decode() if isinstance(name, bytes) else name
        nums = []
        for i, a in enumerate(args, 1):
            try:
                nums.append(_tobit(_lua_tonumber(a)))
            except (TypeError, ValueError):
                return False, ("bad argument #%d to '%s' (number expected, got %s)"
                               % (i, name, _lua_type_name(a))).encode()
        if not nums:
            return False, ("bad argument #1 to '%s' (number expected, got no value)"
                           % name).encode()
        x = nums[0]
        u = x & 0xFFFFFFFF
        if name == "tobit":
            r = x
        elif name == "bnot":
            r = ~x
        elif name in ("band", "bor", "bxor"):
            r = x
            for y in nums[1:]:
                r = r & y if name == "band" else (r | y if name == "bor" else r ^ y)
        elif name == "bswap":
            r = int.from_bytes(u.to_bytes(4, "little"), "big")
        elif name == "tohex":
            w = nums[1] if len(nums) > 1 else 8
            digits = "0123456789abcdef"
            if w < 0:
                w = -w
                digits = digits.upper()
            w = min(w, 8)
            s = ""
            for _ in range(w):
                s = digits[u & 15] + s
                u >>= 4
            return True, s.encode()
        else:
            if len(nums) < 2:
                return False, ("bad argument #2 to '%s' (number expected, got no value)"
                               % name).encode()
            sh = nums[1] & 31
            if name == "lshift":
                r = u << sh
            elif name == "rshift":
                r = u >> sh
            elif name == "arshift":
                r = _signed(u) >> sh
            elif name == "rol":
                r = (u << sh) | (u >> (32 - sh)) if sh else u
            else:  # ror
                r = (u >> sh) | (u << (32 - sh)) if sh else u
        return True, _signed(r & 0xFFFFFFFF)


def _no_attributes(obj, name, setting):
    # Scripts get Python callables; none of their attributes (no escape hatch).
    raise AttributeError("access denied")


class _LibError(Exception):
    """A library function's error message (cjson, bit, cmsgpack): the Lua
    error handler prefixes the user's position, as luaL_error does."""

    def __init__(self, message: bytes):
        super().__init__(message)
        self.message = message


def _lib(fn, multi: bool = False):
    """A Python implementation of a Lua library function: fn returns
    (True, value) or (False, message); multi: (True, n, values...)."""
    def call(*args):
        res = fn(*args)
        if not res[0]:
            raise _LibError(res[1])
        if multi:
            return res[2:2 + res[1]] if res[1] != 1 else res[2]
        return res[1]
    return call


def _unwrap(err):
    """What a Python callback raised (lupa hands Lua the exception): an error
    table, or (message, True) for a library error."""
    if isinstance(err, _LibError):
        return err.message, True
    if isinstance(err, lua51.LuaError) and err.args and lua51.lua_type(err.args[0]) == "table":
        return err.args[0]
    return None


# -- struct (the Lua "struct" library Redis ships: pack / unpack / size) --
_STRUCT_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "f": 4, "d": 8,
                 "x": 1}
_STRUCT_MAXINT = 32
_STRUCT_MAXALIGN = 8


def _struct_items(fmt: bytes, fname: str):
    """Parse a struct format: yields (option, size, little_endian, padding
    before it given the position so far) as the library lays them out."""
    text = fmt.decode("latin-1")
    i = 0
    little, align = True, 1

    def number(default):
        nonlocal i
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        if j == i:
            return default
        v = int(text[i:j])
        i = j
        if v > 2 ** 31 - 1:
            raise _LibError(b"integral size overflow")
        return v
    while i < len(text):
        opt = text[i]
        i += 1
        if opt in _STRUCT_SIZES:
            size = _STRUCT_SIZES[opt]
        elif opt == "c":
            size = number(1)
        elif opt in "iI":
            size = number(4)
            if size > _STRUCT_MAXINT:
                raise _LibError(b"integral size %d is larger than limit of %d"
                                % (size, _STRUCT_MAXINT))
        elif opt == "s":
            size = 0
        elif opt == " ":
            continue
        elif opt in "<>":
            little = opt == "<"
            continue
        elif opt == "!":
            a = number(_STRUCT_MAXALIGN)
            if a <= 0 or a & (a - 1):
                raise _LibError(b"alignment %d is not a power of 2" % a)
            align = a
            continue
        else:
            raise _LibError(("bad argument #1 to '%s' (invalid format option '%s')"
                             % (fname, opt)).encode("latin-1"))
        yield opt, size, little, align


def _struct_pad(pos: int, opt: str, size: int, align: int) -> int:
    if size == 0 or opt == "c":
        return 0
    size = min(size, align)
    return (size - (pos & (size - 1))) & (size - 1)


_MISSING = object()


def _arg_type(v) -> bytes:
    return b"no value" if v is _MISSING else _lua_type_name(v).encode()


def _struct_pack(fmt=_MISSING, *args):
    if type(fmt) is not bytes:
        raise _LibError(b"bad argument #1 to 'pack' (string expected, got %s)"
                        % _arg_type(fmt))
    out = bytearray()
    arg = 0
    for opt, size, little, align in _struct_items(fmt, "pack"):
        out += b"\0" * _struct_pad(len(out), opt, size, align)
        if opt == "x":
            out.append(0)
            continue
        if arg >= len(args) or (opt != "c" and opt != "s" and
                                not _is_lua_number(args[arg])):
            # (the library's own stack slot makes a missing argument "nil")
            got = "nil" if arg >= len(args) else _lua_type_name(args[arg])
            want = "string" if opt in "cs" else "number"
            raise _LibError(("bad argument #%d to 'pack' (%s expected, got %s)"
                             % (arg + 2, want, got)).encode())
        v = args[arg]
        arg += 1
        if opt in "cs":
            if type(v) in (int, float):
                v = _lua_num_str(v).encode()
            elif type(v) is not bytes:
                raise _LibError(("bad argument #%d to 'pack' (string expected, got %s)"
                                 % (arg + 1, _lua_type_name(v))).encode())
            n = size or len(v)
            if len(v) < n:
                raise _LibError(b"bad argument #%d to 'pack' (string too short)" % (arg + 2))
            out += v[:n]
            if opt == "s":
                out.append(0)
            continue
        num = float(_lua_tonumber(v))
        if opt == "f":
            out += struct.pack("<f" if little else ">f", num)
        elif opt == "d":
            out += struct.pack("<d" if little else ">d", num)
        else:
            value = _truncate(num) & 0xFFFFFFFFFFFFFFFF
            raw = value.to_bytes(8, "little")[:size].ljust(size, b"\0")
            out += raw if little else raw[::-1]
    return bytes(out)


def _struct_unpack(fmt=_MISSING, data=_MISSING, pos=1):
    if type(fmt) is not bytes:
        raise _LibError(b"bad argument #1 to 'unpack' (string expected, got %s)"
                        % _arg_type(fmt))
    if type(data) is not bytes:
        raise _LibError(b"bad argument #2 to 'unpack' (string expected, got %s)"
                        % _arg_type(data))
    try:
        pos = int(_lua_tonumber(pos if pos is not None else 1))
    except (TypeError, ValueError):
        raise _LibError(b"bad argument #3 to 'unpack' (number expected)")
    if pos <= 0:
        raise _LibError(b"bad argument #3 to 'unpack' (offset must be 1 or greater)")
    pos -= 1
    n = len(data)
    values: list = []
    for opt, size, little, align in _struct_items(fmt, "unpack"):
        pos += _struct_pad(pos, opt, size, align)
        if size > n or pos > n - size:
            raise _LibError(b"bad argument #2 to 'unpack' (data string too short)")
        chunk = data[pos:pos + size]
        if opt == "x":
            pass
        elif opt == "f":
            values.append(struct.unpack("<f" if little else ">f", chunk)[0])
        elif opt == "d":
            values.append(struct.unpack("<d" if little else ">d", chunk)[0])
        elif opt == "c":
            if size == 0:
                if not values or not _is_lua_number(values[-1]):
                    raise _LibError(b"format 'c0' needs a previous size")
                size = int(values.pop())
                if size > n or pos > n - size:
                    raise _LibError(b"bad argument #2 to 'unpack' (data string too short)")
            values.append(data[pos:pos + size])
        elif opt == "s":
            end = data.find(b"\0", pos)
            if end < 0:
                raise _LibError(b"unfinished string in data")
            values.append(data[pos:end])
            size = end - pos + 1
        else:
            raw = chunk if not little else chunk[::-1]
            value = int.from_bytes(raw[-8:] if size > 8 else raw, "big")
            if opt.islower() and size:
                bits = min(size, 8) * 8
                if value & (1 << (bits - 1)):
                    value -= 1 << bits
            values.append(value if -(1 << 53) <= value <= (1 << 53) else float(value))
        pos += size
    values.append(pos + 1)
    return tuple(values)


def _struct_size(fmt=_MISSING):
    if type(fmt) is not bytes:
        raise _LibError(b"bad argument #1 to 'size' (string expected, got %s)"
                        % _arg_type(fmt))
    pos = 0
    for opt, size, little, align in _struct_items(fmt, "size"):
        pos += _struct_pad(pos, opt, size, align)
        if opt == "s":
            raise _LibError(b"bad argument #1 to 'size' (option 's' has no fixed size)")
        if opt == "c" and size == 0:
            raise _LibError(b"bad argument #1 to 'size' (option 'c0' has no fixed size)")
        pos += size
    return pos


def _struct_fn(name: str):
    return {"pack": _struct_pack, "unpack": _struct_unpack, "size": _struct_size}[name]


def _is_lua_number(v) -> bool:
    try:
        _lua_tonumber(v)
        return True
    except (TypeError, ValueError):
        return False


class _MsgpackError(Exception):
    pass


_MP_FIXED = {0xCA: (">f", 4), 0xCB: (">d", 8), 0xCC: (">B", 1), 0xCD: (">H", 2),
             0xCE: (">I", 4), 0xCF: (">Q", 8), 0xD0: (">b", 1), 0xD1: (">h", 2),
             0xD2: (">i", 4), 0xD3: (">q", 8)}


def _mp_int(n: int, out: bytearray):
    if n >= 0:
        if n < 128:
            out.append(n)
        elif n < 256:
            out += b"\xcc" + bytes([n])
        elif n < 65536:
            out += b"\xcd" + struct.pack(">H", n)
        elif n < (1 << 32):
            out += b"\xce" + struct.pack(">I", n)
        else:
            out += b"\xcf" + struct.pack(">Q", n)
    elif n >= -32:
        out.append(n + 256)
    elif n >= -128:
        out += b"\xd0" + struct.pack(">b", n)
    elif n >= -32768:
        out += b"\xd1" + struct.pack(">h", n)
    elif n >= -(1 << 31):
        out += b"\xd2" + struct.pack(">i", n)
    else:
        out += b"\xd3" + struct.pack(">q", n)


class _JsonError(Exception):
    pass


def _reject_constant(name):
    raise ValueError("invalid constant " + name)


def _signed(u: int) -> int:
    return u - (1 << 32) if u & 0x80000000 else u


def _tobit(n) -> int:
    # LuaBitOp: the number normalised modulo 2^32 (via the 2^52+2^51 trick).
    if type(n) is float:
        if n != n or n in (math.inf, -math.inf):
            return 0
        n = math.floor(n + 0.5) if n - math.floor(n) == 0.5 else round(n)
    return _signed(int(n) & 0xFFFFFFFF)


def _lua_type_name(v) -> str:
    if v is None:
        return "nil"
    if type(v) is bool:
        return "boolean"
    if type(v) is bytes:
        return "string"
    t = lua51.lua_type(v)
    return t.decode() if isinstance(t, bytes) else (t or "userdata")


def _lua_tonumber(v):
    if type(v) in (int, float) and type(v) is not bool:
        return v
    if type(v) is bytes:
        s = v.strip()
        try:
            return int(s, 16) if s.lower().startswith(b"0x") else float(s)
        except ValueError:
            pass
    raise TypeError("not a number")


def _lua_num_str(n) -> str:
    """Lua 5.1's number-to-string (%.14g)."""
    if type(n) is int and -(10 ** 14) < n < 10 ** 14:
        return str(n)
    f = float(n)
    if f != f:
        return "nan" if math.copysign(1, f) > 0 else "-nan"
    if f in (math.inf, -math.inf):
        return "inf" if f > 0 else "-inf"
    return "%.14g" % f


_JSON_ESC = {0x22: '\\"', 0x5C: "\\\\", 0x2F: "\\/", 0x08: "\\b", 0x0C: "\\f",
             0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def _json_str(b: bytes) -> str:
    out = ['"']
    for ch in b:
        e = _JSON_ESC.get(ch)
        if e is not None:
            out.append(e)
        elif ch < 0x20 or ch == 0x7F:
            out.append("\\u%04x" % ch)
        else:
            out.append(chr(ch) if ch < 0x80 else bytes([ch]).decode("latin-1"))
    out.append('"')
    s = "".join(out)
    # Non-ASCII bytes pass through unchanged (as lua-cjson): re-map latin-1 back.
    return s.encode("latin-1").decode("utf-8", "surrogateescape")


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
    from .commands.server_cmds import _redacted, quoted
    line = b"+%.6f [%d %s] %s\r\n" % (time.time(), dbindex, origin,
                                        b" ".join([quoted(a) for a in _redacted(cmd, argv)]))
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
