-- The Lua half of the debugger (SCRIPT DEBUG, hotkv/lua/ldb.py), compiled
-- by the first debugging session of a Lua state (prelude.lua's
-- internals.ldb_load, chunk "=hotkv", so no error is ever placed here).
--
-- Owns: the line hook of a debugged script, the debugger's view of a value
-- (Valkey's ldbCatStackValue: strings quoted as sdscatrepr does, numbers as
-- %g, tables as {a; b} or {[k]=v; ...} nested at most 10 deep, functions as
-- "function@0x..."), and its views of the stack: print, print <var>, trace,
-- and eval.
--
-- Invariants: gets everything from the table it is called with (the
-- script's globals are a sandbox, never read here); the stack helpers count
-- levels from themselves -- level 1 is the helper, then the Python callback
-- and the hook, then the user's frames (source == chunk): our glue's frames
-- (source "=hotkv") are never shown.
local env = ...
local dbg, chunk, real_of, null = env.dbg, env.chunk, env.real_of, env.null
local type, tostring, rawequal, rawget, next, pcall, loadstring, select =
      env.type, env.tostring, env.rawequal, env.rawget, env.next, env.pcall, env.loadstring,
      env.select
local py_unwrap, py_ldb_hook, py_ldb_debug, py_ldb_addr =
      env.py_unwrap, env.py_ldb_hook, env.py_ldb_debug, env.py_ldb_addr
local args = env.args
local sformat, sgsub, sbyte, sfind = string.format, string.gsub, string.byte, string.find
local tconcat = table.concat

local ESC = {['\\'] = '\\\\', ['"'] = '\\"', ['\n'] = '\\n', ['\r'] = '\\r',
             ['\t'] = '\\t', ['\a'] = '\\a', ['\b'] = '\\b'}
local function esc(ch) return ESC[ch] or sformat('\\x%02x', sbyte(ch)) end

local function repr(v, level)
  if level == 10 then return '<max recursion level reached! Nested table?>' end
  level = level + 1
  local t = type(v)
  if t == 'string' then
    return '"' .. sgsub(v, '[%z\1-\31\127-\255"\\]', esc) .. '"'
  elseif t == 'number' then return sformat('%g', v)
  elseif t == 'boolean' then return v and 'true' or 'false'
  elseif t == 'nil' then return 'nil'
  elseif t == 'table' then
    v = real_of[v] or v        -- a read-only proxy shows the table behind it
    local arr, full, is_array, expected = {}, {}, true, 1
    for k, val in next, v do
      if is_array and (type(k) ~= 'number' or k ~= expected) then is_array = false end
      local r = repr(val, level)
      arr[#arr + 1] = r
      full[#full + 1] = '[' .. repr(k, level) .. ']=' .. r
      expected = expected + 1
    end
    return '{' .. tconcat(is_array and arr or full, '; ') .. '}'
  elseif rawequal(v, null) then
    return '"light-userdata@(nil)"'     -- Valkey's cjson.null is a NULL light userdata
  elseif t == 'userdata' then
    return '"' .. py_ldb_addr(v) .. '"'   -- the API's Python callables: C functions
  end
  return '"' .. sgsub(tostring(v), ': ', '@', 1) .. '"'   -- "function: 0x55..."
end

local M = {}

-- Every line of the user's code, and every 100000 instructions (the
-- timeout check), goes to the Python side; lines of our glue never do.
M.hook = function(ev)
  local i = dbg.getinfo(2, 'Sl')
  if i and i.source == chunk then
    local stop = py_ldb_hook(ev == 'count', i.currentline)
    if stop ~= nil then error(stop, 0) end   -- the session ends the script
  end
end

-- redis.debug(...): its arguments as the debugger shows values.
M.debug = function(...)
  local parts = {}
  for j = 1, select('#', ...) do parts[j] = repr((select(j, ...)), 0) end
  py_ldb_debug(tconcat(parts, ', '))
end

-- print <name>: the first local of that name from the innermost user frame
-- outwards, then the globals KEYS and ARGV; nil when there is none.
M.print = function(name)
  local lvl = 2
  while true do
    local i = dbg.getinfo(lvl, 'S')
    if not i then break end
    if i.source == chunk then
      local n = 1
      while true do
        local k, v = dbg.getlocal(lvl, n)
        if k == nil then break end
        if k == name then return repr(v, 0) end
        n = n + 1
      end
    end
    lvl = lvl + 1
  end
  local keys, argv = args()
  if name == 'KEYS' then return repr(keys, 0) end
  if name == 'ARGV' then return repr(argv, 0) end
  return nil
end

-- print: "name = value" for every local of the innermost user frame.
M.locals = function()
  local out, lvl = {}, 2
  while true do
    local i = dbg.getinfo(lvl, 'S')
    if not i then return out end
    if i.source == chunk then break end
    lvl = lvl + 1
  end
  local n = 1
  while true do
    local k, v = dbg.getlocal(lvl, n)
    if k == nil then break end
    if not sfind(k, '(*temporary)', 1, true) then out[#out + 1] = k .. ' = ' .. repr(v, 0) end
    n = n + 1
  end
  return out
end

-- trace: {name or false, current line} per user frame, innermost first.
M.trace = function()
  local out, lvl = {}, 2
  while true do
    local i = dbg.getinfo(lvl, 'Snl')
    if not i then return out end
    if i.source == chunk then out[#out + 1] = {i.name or false, i.currentline} end
    lvl = lvl + 1
  end
end

-- eval <code>: as an expression first, else as statements, in a chunk of
-- its own ("@ldb_eval") over the script's globals; (true, the value's view)
-- or (false, the error).
M.eval = function(code)
  local f, err = loadstring('return ' .. code, '@ldb_eval')
  if not f then
    f, err = loadstring(code, '@ldb_eval')
    if not f then return false, err end
  end
  local ok, v = pcall(f)
  if ok then return true, repr(v, 0) end
  if type(v) == 'userdata' then
    local u = py_unwrap(v)
    if u ~= nil then v = u end
  end
  if type(v) == 'table' then v = rawget(v, 'err') end
  return false, tostring(v)
end

return M
