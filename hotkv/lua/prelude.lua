-- The Lua side of hotkv's scripting engine (hotkv/lua/engine.py), run once
-- per Lua state as the chunk "=hotkv".
--
-- Owns: the error handler (errh) that positions an error at the user's
-- frame, the redis / server API table, the library tables (cjson, bit,
-- cmsgpack, struct: Lua closures around the Python callables passed in --
-- the host wrappers), the sandbox (removed globals, read-only tables,
-- KEYS / ARGV served by the globals' metatable, loaders that read every
-- chunk as text, unpack's range check), the instruction-count hook of the
-- script timeout, and the raw readers the engine uses on returned tables
-- (classify, errinfo).
--
-- Two modes, by the chunk name the engine passes: EVAL's state
-- ('@user_script': KEYS / ARGV globals) and the functions' state
-- ('@user_function': a library's code runs once, at FUNCTION LOAD, in an
-- environment that shows only the load API -- server.register_function,
-- log, the version fields -- and its callbacks get KEYS / ARGV as their
-- arguments).  The globals live in a hidden table behind an empty _G, so
-- no assignment to a global, an existing one included, gets through.
--
-- Invariants: receives the Python callbacks as its varargs, in the order
-- the engine passes them, and returns compile, run, rawequal, null,
-- classify, errinfo, internals (what the Python side calls back) and load
-- (function mode); no frame of this chunk is ever shown as an error's
-- position (errh skips the source "=hotkv"); a script holds Lua values
-- only -- never a Python object, never lupa's shared metatable -- and
-- cannot change a table it shares with the next script.
local py_call, py_pcall, py_setresp, py_log, py_sha1, py_json_enc, py_json_dec, py_bit,
      py_aclcheck, py_unwrap, py_interrupt, py_mp_pack, py_mp_unpack, py_mp_unpack_one,
      py_mp_unpack_limit, py_struct, chunk, py_load_expired,
      py_register, py_json_cfg, py_ldb_hook, py_ldb_debug, py_ldb_break,
      py_ldb_addr, py_set_repl, py_ldb_error, py_rewrite, py_callv, py_pcallv, FAIL, STATUS,
      ARRAY = ...
-- chunk: '@user_script' (EVAL's state) or '@user_function' (FUNCTION's
-- state: KEYS / ARGV are the callback's arguments, never globals, and a
-- library's code runs once, at load, against the load API only).
local funcmode = chunk == '@user_function'
local killed_text = funcmode and 'ERR Script killed by user with FUNCTION KILL.'
                    or 'ERR Script killed by user with SCRIPT KILL.'
local dbg = debug
local sethook = debug.sethook
local lua_setfenv, lua_next, lower = setfenv, next, string.lower
local error, type, tostring, rawget, rawset, setmetatable, select, xpcall, lua_pcall, rawequal =
      error, type, tostring, rawget, rawset, setmetatable, select, xpcall, pcall, rawequal

local function errh(err)
  local lvl = 2
  local i = dbg.getinfo(lvl, 'nSl')
  if i and i.what == 'C' then lvl = 3; i = dbg.getinfo(lvl, 'nSl') end
  -- (our glue, C functions, and the frame a host wrapper lost to its own
  -- tail call into back(): the user's frame is the first after them)
  while i and (i.source == '=hotkv' or i.what == 'C' or i.what == 'tail') do
    lvl = lvl + 1; i = dbg.getinfo(lvl, 'nSl')
  end
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

-- Host functions.  Every Python callable a script can reach is wrapped in a
-- Lua closure made here, so a script only ever holds Lua values: no lupa
-- userdata, whose metatable is shared by every Python object of the state
-- (a script that set its __call would run in every later script of every
-- user), and whose type, tostring and error texts are not a function's.
-- A callback never raises into Lua (hotkv.lua.sandbox.guard catches what
-- it raises): it returns FAIL, a kind and the error, and the wrapper raises
-- that as a Lua value -- an error table as it is, a library's message
-- positioned and named as luaL_error / luaL_argerror would.  (A Python
-- exception object held by Lua, with a traceback full of Lua references,
-- freed by a later collection, crashed the process.)  A user's "return
-- redis.call(...)" keeps its own frame (for the line an error names)
-- because hotkv.lua.bytecode compiles a tail call to an API function as a
-- plain call.
-- hosted: every function this chunk gives scripts; what Valkey has as C
-- functions, so string.dump and coroutine.create refuse them as they
-- refuse C functions.
local hosted = setmetatable({}, {__mode = 'k'})
local sgsub = string.gsub
-- The name a function was called by, as luaL_argerror names it ('?' when
-- a C function such as pcall called it): level 1 is the function asking.
local function called_as(level)
  local i = dbg.getinfo(level + 1, 'n')
  return i and i.name or '?'
end
-- Raise a callback's error (kind 2: a library's message, else a value).
-- From fail: level 2 is the wrapper, 3 the wrapper's caller.
local function fail(kind, e)
  if kind == 2 then
    -- "bad argument #1 to 'band'": the name the user called it by
    e = sgsub(e, "^(bad argument #%d+ to ')[^']*'", '%1' .. called_as(2) .. "'", 1)
    error(e, 3)
  end
  error(e, 0)
end
-- Most API functions give one value (host), a few none (host0), the
-- unpacking ones many (hostn: passed on by a tail call, as many as Lua's
-- stack takes, like Valkey's C functions).
local function host(f)
  local w = function(...)
    local r, kind, e = f(...)
    if r == FAIL then fail(kind, e) end
    return r
  end
  hosted[w] = true
  return w
end
local function host0(f)
  local w = function(...)
    local r, kind, e = f(...)
    if r == FAIL then fail(kind, e) end
  end
  hosted[w] = true
  return w
end
local lua_unpack = unpack
-- (levels from failn: 2 back, 3 the wrapper back replaced by its tail
-- call, 4 the wrapper's caller.  The name the user called it by is lost
-- with the frame: a "bad argument" text keeps the library's own, or '?'
-- when a C function such as pcall called it, as luaL_argerror says.)
local function failn(kind, e)
  if kind == 2 then
    local i = dbg.getinfo(4, 'S')
    if i and i.what == 'C' then e = sgsub(e, "^(bad argument #%d+ to ')[^']*'", "%1?'", 1) end
    error(e, 4)
  end
  error(e, 0)
end
-- (every value the host function gave back, none when it gave none:
-- cmsgpack.unpack('') gives nothing, as Valkey's)
local function back(...)
  if (...) == FAIL then failn(select(2, ...)) end
  return ...
end
local function hostn(f)
  local w = function(...) return back(f(...)) end
  hosted[w] = true
  return w
end
-- redis.call / redis.pcall: up to LONG arguments as they are; past it one
-- table, as lupa refuses a Python call with more than 7,997 arguments.
-- The reply comes back as a value, or marked (hotkv.lua.calls._command):
-- STATUS and the text, ARRAY and the items -- the table is made here, for
-- a fraction of what a table made from Python costs -- or FAIL, 1 and the
-- error table (redis.call).  The wrapper's tail call into call_reply costs
-- its frame; an error table needs none (errh finds the user's frame).
local LONG = 7000
local function call_reply(r, ...)
  if r == STATUS then return {ok = (...)} end
  if r == ARRAY then return {...} end
  if r == FAIL then
    local _, e = ...
    error(e, 0)
  end
  return r
end
local function host_long(f, fv)
  local w = function(...)
    local n = select('#', ...)
    if n < LONG then return call_reply(f(...)) end
    return call_reply(fv(n, {...}))
  end
  hosted[w] = true
  return w
end
local redis = {}
redis.call = host_long(py_call, py_callv)
redis.pcall = host_long(py_pcall, py_pcallv)
redis.setresp = host0(py_setresp)
redis.log = host0(py_log)
redis.sha1hex = host(py_sha1)
redis.acl_check_cmd = host(py_aclcheck)
if not funcmode then   -- EVAL's API only, as Valkey's
  redis.replicate_commands = function() return true end
end
-- The debugger's functions (hotkv.lua.ldb): no-ops unless the script runs
-- in a SCRIPT DEBUG session (ldb_on, set by run).
local ldb_on, ldb = false, nil     -- ldb: hotkv/lua/ldb.lua's table, once loaded
if not funcmode then   -- (SCRIPT DEBUG debugs EVAL scripts only)
  redis.breakpoint = host(py_ldb_break)
  redis.debug = function(...)
    if ldb_on then ldb.debug(...) end
  end
end
-- An API error as Valkey's luaPushError makes it (the debugger logs it
-- while stepping).
local function api_err(text)
  if ldb_on then py_ldb_error(text) end
  return {err = 'ERR ' .. text}
end
local function single(field, n, v)
  if n ~= 1 or type(v) ~= 'string' then
    return api_err('wrong number or type of arguments')
  end
  return {[field] = v}
end
redis.status_reply = function(...) return single('ok', select('#', ...), ...) end
redis.error_reply = function(...)
  local n, v = select('#', ...), ...
  if n ~= 1 or type(v) ~= 'string' then
    return api_err('wrong number or type of arguments')
  end
  if v:sub(1, 1) == '-' then v = v:sub(2) end
  local sp = v:find(' ', 1, true)
  if sp then return {err = v:sub(1, sp - 1) .. ' ' .. v:sub(sp + 1):gsub('[\r\n]+$', '')} end
  return {err = 'ERR ' .. v:gsub('[\r\n]+$', '')}
end
local set_repl_tonumber, math_floor = tonumber, math.floor
redis.set_repl = function(...)
  local n, f = select('#', ...), ...
  if n ~= 1 then error(api_err('server.set_repl() requires one argument.')) end
  -- Valkey reads the flags as lua_tonumber (0 for what is no number),
  -- made a C int (truncated; NaN and values past an int are none of the
  -- flags)
  f = set_repl_tonumber(f) or 0
  if f ~= f or f >= 2147483648 or f <= -2147483649 then f = -1 end
  f = f >= 0 and math_floor(f) or -math_floor(-f)
  if f < 0 or f > 3 then
    error(api_err('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or '
                  .. 'REPL_NONE.'))
  end
  py_set_repl(f)    -- where the script's next commands propagate (hotkv.lua.engine)
end
redis.REPL_NONE = 0; redis.REPL_AOF = 1; redis.REPL_SLAVE = 2; redis.REPL_REPLICA = 2
redis.REPL_ALL = 3
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
_G.pcall = function(...)
  -- (Valkey's pcall calls whatever is at the top of its stack: with no
  -- argument, its own result placeholder)
  if select('#', ...) == 0 then return false, 'attempt to call a boolean value' end
  return fix_pcall(lua_pcall(...))
end

local cjson = {}
-- Valkey's cjson.null is a NULL light userdata: tostring shows
-- 'userdata: (nil)' (its own __tostring, so tostring stays the native
-- function), getmetatable shows none (see getmetatable below).
cjson.null = newproxy(true)
local null = cjson.null
getmetatable(null).__tostring = function() return 'userdata: (nil)' end
cjson.encode = host(py_json_enc)
cjson.decode = host(py_json_dec)
for _, name in ipairs({'encode_keep_buffer', 'encode_max_depth', 'decode_max_depth',
                       'encode_number_precision', 'encode_sparse_array',
                       'encode_invalid_numbers', 'decode_invalid_numbers'}) do
  cjson[name] = hostn(py_json_cfg(name))
end

local bit = {}
for _, name in ipairs({'tobit', 'bnot', 'band', 'bor', 'bxor', 'lshift', 'rshift',
                       'arshift', 'rol', 'ror', 'bswap', 'tohex'}) do
  bit[name] = host(py_bit(name))
end

local cmsgpack = {_NAME = 'lua-cmsgpack', _VERSION = 'lua-cmsgpack 0.4.0',
                  _COPYRIGHT = 'Copyright (C) 2012, Salvatore Sanfilippo',
                  _DESCRIPTION = 'MessagePack C implementation for Lua'}
cmsgpack.pack = host(py_mp_pack)
cmsgpack.unpack = hostn(py_mp_unpack)
cmsgpack.unpack_one = hostn(py_mp_unpack_one)
cmsgpack.unpack_limit = hostn(py_mp_unpack_limit)

-- The sandbox.
io = nil; package = nil; require = nil; module = nil; dofile = nil; loadfile = nil
print = nil; debug = nil; getfenv = nil; setfenv = nil; newproxy = nil
python = nil   -- lupa's bridge to Python: never reachable from a script
os = {clock = os.clock}
local struct = {pack = host(py_struct('pack')), unpack = hostn(py_struct('unpack')),
                size = host(py_struct('size'))}
_G.cjson = cjson; _G.bit = bit; _G.cmsgpack = cmsgpack; _G.struct = struct

local function ro_error() error('Attempt to modify a readonly table', 2) end
-- Tables no script may change (state must never leak from one script to
-- the next): rawset / setmetatable on them fail as Valkey's read-only
-- tables do.
local protected = setmetatable({}, {__mode = 'k'})
-- proxy -> the table it shows (pairs iterates that one, as Valkey's
-- read-only tables iterate themselves).
local real_of = setmetatable({}, {__mode = 'k'})
local function readonly(t)
  local p = setmetatable({}, {__index = t, __newindex = ro_error, __metatable = false})
  protected[p] = true
  protected[t] = true
  real_of[p] = t
  return p
end
local lua_next_, lua_loadstring, lua_load, lua_select = next, loadstring, load, select
local lua_tostring, sbyte, sdump = tostring, string.byte, string.dump
local co_create, co_wrap = coroutine.create, coroutine.wrap
local function typename(n, v)
  if n == 0 then return 'no value' end
  return type(v)
end
-- No loader runs bytecode.  Valkey's Lua reads every chunk as text, so a
-- binary chunk (string.dump's output, crafted bytecode) fails to parse at
-- its first byte; a space before it gives stock Lua's parser the same
-- text, the same error and the same chunk name.  safe_loadstring is the
-- one text loader of this state: scripts, FUNCTION libraries, loadstring,
-- load and the debugger's eval all go through it.
local function safe_loadstring(s, name)
  if sbyte(s, 1) == 27 then s = ' ' .. s end
  return lua_loadstring(s, name)
end
-- The argument checks below are made here with Lua's texts, positioned at
-- the user's call (a native function's own check would name our glue).
_G.loadstring = function(...)
  local s, name = ...
  local ts = type(s)
  if ts == 'number' then
    s = lua_tostring(s)
  elseif ts ~= 'string' then
    error("bad argument #1 to '" .. called_as(1) .. "' (string expected, got "
          .. typename(lua_select('#', ...), s) .. ")", 2)
  end
  if name == nil then
    name = s
  else
    local tn = type(name)
    if tn == 'number' then
      name = lua_tostring(name)
    elseif tn ~= 'string' then
      error("bad argument #2 to '" .. called_as(1) .. "' (string expected, got " .. tn .. ")", 2)
    end
  end
  return safe_loadstring(s, name)
end
_G.load = function(...)
  local f, name = ...
  local tn = type(name)
  if name ~= nil and tn ~= 'string' and tn ~= 'number' then
    error("bad argument #2 to '" .. called_as(1) .. "' (string expected, got " .. tn .. ")", 2)
  end
  if type(f) ~= 'function' then
    error("bad argument #1 to '" .. called_as(1) .. "' (function expected, got "
          .. typename(lua_select('#', ...), f) .. ")", 2)
  end
  local first = true
  return lua_load(function()
    local piece = f()
    if first then
      first = false
      if type(piece) == 'string' and sbyte(piece, 1) == 27 then return ' ' .. piece end
    end
    return piece
  end, name)
end
-- unpack with the range check Valkey's Lua has (CVE-2025-46817): this
-- Lua computes the count as e - i + 1 in a C int, and a range of 2^31
-- values or more overflowed it and crashed the process.  The bounds are
-- read as luaL_optint reads them (truncated, then wrapped to 32 bits); a
-- range the stack cannot take fails here with the native's text, so the
-- native unpack only ever gets one it can serve.
local mfloor, mceil, huge, lua_tonumber = math.floor, math.ceil, math.huge, tonumber
local function int_arg(v, n, name, default)
  if v == nil then return default end
  local x = lua_tonumber(v)
  if x == nil then
    error("bad argument #" .. n .. " to '" .. name .. "' (number expected, got "
          .. type(v) .. ")", 3)
  end
  if x ~= x or x == huge or x == -huge then return 0 end
  x = (x >= 0 and mfloor(x) or mceil(x)) % 4294967296
  if x >= 2147483648 then x = x - 4294967296 end
  return x
end
_G.unpack = function(...)
  local nargs = lua_select('#', ...)
  local t, i, e = ...
  if type(t) ~= 'table' then
    error("bad argument #1 to '" .. called_as(1) .. "' (table expected, got "
          .. typename(nargs, t) .. ")", 2)
  end
  local name = called_as(1)
  i = int_arg(i, 2, name, 1)
  e = int_arg(e, 3, name, nil)
  if e == nil then e = #t end
  if i > e then return end
  if e - i >= 2147483647 or nargs + (e - i + 1) > 8000 then
    error('too many results to unpack', 2)
  end
  return lua_unpack(...)
end
-- What tells a C function from a Lua one to a script: string.dump and
-- coroutine.create / wrap refuse C functions, and so ours.
local function is_c(f)
  return hosted[f] or dbg.getinfo(f, 'S').what == 'C'
end
string.dump = function(...)
  local f = ...
  if type(f) ~= 'function' then
    error("bad argument #1 to '" .. called_as(1) .. "' (function expected, got "
          .. typename(lua_select('#', ...), f) .. ")", 2)
  end
  if is_c(f) then error('unable to dump given function', 2) end
  return sdump(f)
end
coroutine.create = function(...)
  local f = ...
  if type(f) ~= 'function' or is_c(f) then
    error("bad argument #1 to '" .. called_as(1) .. "' (Lua function expected)", 2)
  end
  return co_create(f)
end
coroutine.wrap = function(...)
  local f = ...
  if type(f) ~= 'function' or is_c(f) then
    error("bad argument #1 to '" .. called_as(1) .. "' (Lua function expected)", 2)
  end
  return co_wrap(f)
end
-- pairs iterates what a read-only proxy shows.  Lua (a Python call each
-- would cost ~1 us in every loop); a tail call to it ("return pairs(nil)")
-- is compiled as a plain call (hotkv.lua.bytecode) so an error keeps the
-- user's line.
local cur_keys, cur_argv   -- the running script's KEYS / ARGV (set by run)
-- rawget reads what a read-only table shows (_G's globals, a library's
-- members), as Valkey's read-only tables are the tables themselves.
local lua_rawget = rawget
_G.rawget = function(...)
  local t, k = ...
  if type(t) ~= 'table' then
    error("bad argument #1 to '" .. called_as(1) .. "' (table expected, got "
          .. typename(lua_select('#', ...), t) .. ")", 2)
  end
  if lua_select('#', ...) < 2 then
    error("bad argument #2 to '" .. called_as(1) .. "' (value expected)", 2)
  end
  if not funcmode and rawequal(t, _G) and (k == 'KEYS' or k == 'ARGV') then
    return k == 'KEYS' and cur_keys or cur_argv      -- (served by R's __index)
  end
  return lua_rawget(real_of[t] or t, k)
end
_G.next = function(...)
  local t, k = ...
  if type(t) ~= 'table' then
    error("bad argument #1 to '" .. called_as(1) .. "' (table expected, got "
          .. typename(lua_select('#', ...), t) .. ")", 2)
  end
  return lua_next_(real_of[t] or t, k)
end
_G.pairs = function(...)
  local t = ...
  if type(t) == 'table' then return lua_next_, real_of[t] or t, nil end
  error("bad argument #1 to '" .. called_as(1) .. "' (table expected, got "
        .. typename(lua_select('#', ...), t) .. ")", 2)
end
for _, name in ipairs({'string', 'math', 'table', 'os', 'coroutine', 'cjson', 'bit',
                       'cmsgpack', 'struct'}) do
  _G[name] = readonly(_G[name])
end
-- ("x"):upper() goes through the string metatable: hide the real table.
local strmeta = getmetatable('')
strmeta.__index = _G.string
protected[strmeta] = true
-- getmetatable shows the string metatable as a read-only view, and no
-- metatable for a read-only proxy (Valkey's read-only tables are a flag on
-- the table, not a metatable); every other value's as stock Lua.
local strmeta_view = readonly(strmeta)
local lua_getmetatable = getmetatable
_G.getmetatable = function(...)
  local v = ...
  if lua_select('#', ...) == 0 then
    error("bad argument #1 to '" .. called_as(1) .. "' (value expected)", 2)
  end
  if type(v) == 'string' then return strmeta_view end
  if (real_of[v] and not rawequal(v, _G)) or rawequal(v, null) then return nil end
  return lua_getmetatable(v)
end
local lua_rawset, lua_setmetatable = rawset, setmetatable
_G.rawset = function(...)
  local n = lua_select('#', ...)
  local t, k, v = ...
  if type(t) ~= 'table' then
    error("bad argument #1 to '" .. called_as(1) .. "' (table expected, got "
          .. typename(n, t) .. ")", 2)
  end
  if n < 3 then
    error("bad argument #" .. (n < 2 and 2 or 3) .. " to '" .. called_as(1)
          .. "' (value expected)", 2)
  end
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return lua_rawset(t, k, v)
end
_G.setmetatable = function(...)
  local n = lua_select('#', ...)
  local t, m = ...
  if type(t) ~= 'table' then
    error("bad argument #1 to '" .. called_as(1) .. "' (table expected, got "
          .. typename(n, t) .. ")", 2)
  end
  if n < 2 or (m ~= nil and type(m) ~= 'table') then
    error("bad argument #2 to '" .. called_as(1) .. "' (nil or table expected)", 2)
  end
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  local old = dbg.getmetatable(t)     -- (raw: getmetatable shows __metatable)
  if old ~= nil and rawget(old, '__metatable') ~= nil then
    error('cannot change a protected metatable', 2)
  end
  return lua_setmetatable(t, m)
end
-- Every Lua function of ours a script can reach stands for one of Valkey's
-- C functions (hosted: see is_c).
for _, t in ipairs({_G, redis, cjson, bit, cmsgpack, struct, string, coroutine, math, table,
                    os}) do
  for _, v in lua_next_, real_of[t] or t do
    if type(v) == 'function' and dbg.getinfo(v, 'S').what == 'Lua' then hosted[v] = true end
  end
end
local api = readonly(redis)
protected[_G] = true
_G.redis = api
_G.server = api
if not funcmode then   -- (EVAL's globals only, as Valkey's)
  _G.__server__err__handler = errh
  _G.__redis__err__handler = errh
end

-- The globals move to a hidden table R and _G stays empty, so that every
-- assignment to a global -- an existing one too ("redis = nil") -- meets
-- _G's __newindex and fails; reads go through __index to R (a table, so
-- no Lua call per read), and R's own __index serves KEYS and ARGV (which
-- stay read-only that way) and refuses unknown names.
local R, G = {}, _G
for k, v in lua_next_, G do R[k] = v end
for k in lua_next_, R do rawset(G, k, nil) end
protected[R] = true
real_of[G] = R
setmetatable(R, {
  __index = function(t, k)
    if not funcmode then
      if k == 'KEYS' then return cur_keys elseif k == 'ARGV' then return cur_argv end
    end
    -- lupa looks debug up (for its tracebacks) from C whenever Python
    -- calls into Lua; a script asking for it gets the error any unknown
    -- name gets.
    if k == 'debug' then
      local i = dbg.getinfo(2, 'S')
      if not i or i.what == 'C' then return nil end
    end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = ro_error,
  __metatable = false,
})
-- getmetatable(_G) shows a read-only table whose __index is a function,
-- as Valkey's read-only globals' metatable.
setmetatable(G, {
  __index = R,
  __newindex = function(t, k, v) error('Attempt to modify a readonly table', 2) end,
  __metatable = readonly({__index = function(t, k) return R[k] end}),
})

local find = string.find
local function loadstring(body, name)
  local f, err = safe_loadstring(body, name)
  -- hotkv.lua.bytecode's rewrite of tail calls to API functions, for the
  -- scripts that may have one (the rewrite costs about twice the compile).
  if f and find(body, 'return', 1, true) then
    local code = py_rewrite(sdump(f))
    if code then f = lua_loadstring(code, name) end
  end
  return f, err
end
local function compile(body) return loadstring(body, chunk) end
-- Every 100000 instructions the hook lets the server answer other clients
-- once the script is over the time limit; after SCRIPT KILL it raises on
-- every line, so a script catching the error with pcall still ends.
local hook
hook = function()
  if py_interrupt() then
    -- Only in the user's code: never in our glue or the error handler.
    local i = dbg.getinfo(2, 'S')
    if i and i.source == chunk then
      sethook(hook, 'l')
      error({err = killed_text})
    end
  end
end
-- keys / argv: the tables, or false and the values after nk (nk keys
-- first): for a few, cheaper than two tables made from Python.
local function run(f, timed, debugging, keys, argv, nk, ...)
  if not keys then
    local all, n = {...}, select('#', ...)
    keys, argv = {}, {}
    for i = 1, nk do keys[i] = all[i] end
    for i = nk + 1, n do argv[i - nk] = all[i] end
  end
  cur_keys, cur_argv = keys, argv
  if debugging then
    ldb_on = true
    sethook(ldb.hook, 'l', 100000)   -- every line of the user's code (hotkv/lua/ldb.lua)
  elseif timed then
    sethook(hook, '', 100000)
  end
  local ok, v
  if funcmode then
    ok, v = xpcall(function() return f(keys, argv) end, errh)
  else
    ok, v = xpcall(f, errh)
  end
  if timed or debugging then sethook() end
  ldb_on = false
  return ok, v
end

-- FUNCTION LOAD (the function state only).  Every library chunk runs in
-- one shared environment: an empty read-only table whose __index is the
-- load API while a library loads and the real globals afterwards, so the
-- callbacks a library registered see the full API when they run and the
-- load sees only server.register_function / log / the version fields.
local load
-- What the Python side calls back (hotkv.lua.engine / hotkv.lua.functions).
local lua_gc = collectgarbage
local internals = {next = lua_next_,
                   real = function(t) return real_of[t] end,
                   kbytes = function() return lua_gc('count') end,
                   gcstep = function(n) lua_gc('step', n) end,
                   gcfull = function() lua_gc('collect') end,
                   pack = function(...) return {...} end}

-- The debugger's Lua half (hotkv/lua/ldb.lua) is compiled by the first
-- SCRIPT DEBUG session only (a fresh state stays small: Valkey's suite holds
-- used_memory_lua under 100 KB); it gets what it needs of this chunk here.
internals.ldb_load = function(body)
  ldb = lua_loadstring(body, '=hotkv')({
    dbg = dbg, chunk = chunk, real_of = real_of, null = null, type = type,
    tostring = tostring, rawequal = rawequal, rawget = rawget, next = lua_next,
    pcall = lua_pcall, loadstring = safe_loadstring, select = select,
    py_unwrap = py_unwrap, py_ldb_hook = py_ldb_hook, py_ldb_debug = py_ldb_debug,
    py_ldb_addr = py_ldb_addr,
    args = function() return cur_keys, cur_argv end,
  })
  internals.ldb_print, internals.ldb_locals = ldb.print, ldb.locals
  internals.ldb_trace, internals.ldb_eval = ldb.trace, ldb.eval
end

if funcmode then
  local function missing(t, k)   -- (called by an __index: level 3 is the user's)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 3)
  end
  local env_mt = {__index = G, __metatable = false,
                  __newindex = function() error('Attempt to modify a readonly table', 2) end}
  local env = setmetatable({}, env_mt)
  protected[env] = true
  local loading, registered = false, nil
  local Fail = {}
  local function fail(msg) error({[Fail] = 'ERR ' .. msg}) end
  local function str(v)
    local t = type(v)
    if t == 'string' then return v elseif t == 'number' then return tostring(v) end
    return nil
  end
  local FLAGS = {['no-writes'] = 1, ['allow-oom'] = 2, ['allow-stale'] = 3,
                 ['no-cluster'] = 4, ['allow-cross-slot-keys'] = 5}
  local register
  -- What server.register_function (a Python callable, hotkv.lua.engine)
  -- runs: nil when registered, else the error text it raises.
  local function register_impl(...)
    local ok, e = lua_pcall(register, ...)
    if ok then return nil end
    if type(e) == 'table' and e[Fail] then return e[Fail] end
    error(e, 0)
  end
  register = function(...)
    if not loading then
      fail('server.register_function can only be called on FUNCTION LOAD command')
    end
    local n = select('#', ...)
    if n < 1 or n > 2 then fail('wrong number of arguments to server.register_function') end
    local name, cb, desc, flags
    if n == 1 then
      local t = ...
      if type(t) ~= 'table' then
        fail('calling server.register_function with a single argument is only applicable to '
             .. 'Lua table (representing named arguments).')
      end
      flags = {}
      for k, v in lua_next, t do
        if type(k) ~= 'string' and type(k) ~= 'number' then
          fail('named argument key given to server.register_function is not a string')
        end
        local key = lower(tostring(k))
        if key == 'function_name' then
          name = str(v)
          if not name then
            fail('function_name argument given to server.register_function must be a string')
          end
        elseif key == 'description' then
          desc = str(v)
          if not desc then
            fail('description argument given to server.register_function must be a string')
          end
        elseif key == 'callback' then
          if type(v) ~= 'function' then
            fail('callback argument given to server.register_function must be a function')
          end
          cb = v
        elseif key == 'flags' then
          if type(v) ~= 'table' then
            fail('flags argument to server.register_function must be a table representing '
                 .. 'function flags')
          end
          local j = 1
          while true do
            local f = v[j]
            if f == nil then break end
            local fs = str(f)
            local bit = fs and FLAGS[lower(fs)]
            if not bit then fail('unknown flag given') end
            flags[bit] = true
            j = j + 1
          end
        else
          fail('unknown argument given to server.register_function')
        end
      end
      if not name then fail('server.register_function must get a function name argument') end
      if not cb then fail('server.register_function must get a callback argument') end
    else
      local a, b = ...
      name = str(a)
      if not name then fail('first argument to server.register_function must be a string') end
      if type(b) ~= 'function' then
        fail('second argument to server.register_function must be a function')
      end
      cb, flags = b, {}
    end
    local fl = {}
    for bit = 1, 5 do if flags[bit] then fl[#fl + 1] = bit end end
    registered[#registered + 1] = {name, cb, desc or false, fl}
  end
  -- The API a library's code sees while it loads.
  internals.register = register_impl
  local lserver = {register_function = host0(py_register), log = redis.log,
                   LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
                   REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
                   REDIS_VERSION = redis.REDIS_VERSION,
                   VALKEY_VERSION_NUM = redis.VALKEY_VERSION_NUM,
                   VALKEY_VERSION = redis.VALKEY_VERSION, SERVER_NAME = redis.SERVER_NAME}
  local lproxy = setmetatable({}, {
    __index = function(t, k)
      local v = rawget(lserver, k)
      if v == nil then missing(t, k) end
      return v
    end,
    __newindex = ro_error, __metatable = false})
  protected[lproxy] = true
  local lapi = setmetatable({}, {
    __index = function(t, k)
      if k == 'server' or k == 'redis' then return lproxy end
      missing(t, k)
    end,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false})
  local lhook
  lhook = function()
    if py_load_expired() then
      local i = dbg.getinfo(2, 'S')
      if i and i.source == chunk then
        sethook(lhook, 'l')
        error({err = 'ERR FUNCTION LOAD timeout'})
      end
    end
  end
  -- (ok, value, registrations): ok nil for a compile error (value: its
  -- text), false for an error while loading (value: the error table).
  load = function(body)
    local f, err = loadstring(body, chunk)
    if not f then return nil, err end
    lua_setfenv(f, env)
    env_mt.__index = lapi
    loading, registered = true, {}
    sethook(lhook, '', 100000)
    local ok, v = xpcall(f, errh)
    sethook()
    env_mt.__index = G
    local regs = registered
    loading, registered = false, nil
    return ok, v, regs
  end
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
return compile, run, rawequal, null, classify, errinfo, internals, load
