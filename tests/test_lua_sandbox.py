"""The Lua sandbox against valkey-server 8.1.8: a script is a guest.

What a script can reach -- globals, every library's members, the metatables
of every value the API hands out, the error objects of every failing call,
``type`` and ``tostring`` of each -- is enumerated on both servers in each
context (EVAL, a FUNCTION library's callback, a library's code while it
loads, the debugger's eval) and hotkv's must be a subset of Valkey's.  The
public Redis/Valkey Lua CVEs are reproduced here where they apply to hotkv's
design (SECURITY.md says which do and why); each is compared with the
reference byte for byte, so hotkv refuses whatever Valkey refuses.

Long differential runs of generated probes: tests/fuzz/fuzz_sandbox.py.
"""
from __future__ import annotations

import re

import pytest
import valkey

from support import RawClient
from test_ldb import transcript

ADDR = re.compile(rb"0x[0-9a-f]+|\(nil\)")

# Walks everything reachable from its roots (keys sorted, so both servers
# name each value by the same path), one line per value: its path, type,
# tostring for functions / userdata / threads (addresses normalised by the
# test) and its metatable's type and fields.
ENUMERATE = r"""
local out, seen = {}, {}
local function keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
  return ks
end
local function walk(path, v, depth)
  local t = type(v)
  local entry = path .. '=' .. t
  if t == 'function' or t == 'userdata' or t == 'thread' then
    entry = entry .. ' ' .. tostring(v)
  end
  out[#out + 1] = entry
  local mt = getmetatable(v)
  if mt ~= nil then
    out[#out + 1] = path .. '#mt=' .. type(mt)
    if type(mt) == 'table' and not seen[mt] then
      seen[mt] = true
      for _, k in ipairs(keys(mt)) do walk(path .. '#mt.' .. tostring(k), mt[k], depth + 1) end
    end
  end
  if t == 'table' and not seen[v] and depth < 5 then
    seen[v] = true
    for _, k in ipairs(keys(v)) do walk(path .. '.' .. tostring(k), v[k], depth + 1) end
  end
end
local function second(_, v) return v end
walk('_G', _G, 0)
walk('strmt', getmetatable(''), 0)
walk('ret.call', redis.call('ping'), 0)
walk('ret.pcall_err', redis.pcall('nosuchcmd'), 0)
walk('ret.status', redis.status_reply('x'), 0)
walk('ret.error', redis.error_reply('x'), 0)
walk('ret.json', cjson.decode('[1,{"a":null,"b":[true]}]'), 0)
walk('ret.msgpack', {cmsgpack.unpack(cmsgpack.pack({1, {a = 2}}, 'x'))}, 0)
walk('ret.struct', {struct.unpack('>I2', 'ab')}, 0)
walk('ret.sha1', redis.sha1hex('x'), 0)
walk('ret.bit', bit.tohex(5), 0)
walk('ret.acl', redis.acl_check_cmd('get', 'x'), 0)
walk('ret.co', coroutine.create(function() end), 0)
walk('ret.wrap', coroutine.wrap(function() end), 0)
walk('ret.load', loadstring('return 1'), 0)
walk('err.call', second(pcall(redis.call, 'nosuchcmd')), 0)
walk('err.json', second(pcall(cjson.decode, '{')), 0)
walk('err.msgpack', second(pcall(cmsgpack.unpack, '\193')), 0)
walk('err.struct', second(pcall(struct.pack, 'q')), 0)
walk('err.bit', second(pcall(bit.band, {})), 0)
walk('err.sha1', second(pcall(redis.sha1hex)), 0)
walk('err.log', second(pcall(redis.log)), 0)
walk('err.setresp', second(pcall(redis.setresp, 9)), 0)
walk('err.acl', second(pcall(redis.acl_check_cmd)), 0)
walk('err.xpcall', second(xpcall(function() redis.call('nosuchcmd') end,
                                 function(e) return e end)), 0)
walk('err.xpcall_json', second(xpcall(function() cjson.decode('{') end,
                                      function(e) return e end)), 0)
walk('err.coroutine', {coroutine.resume(coroutine.create(function()
  redis.call('nosuchcmd') end))}, 0)
walk('err.coroutine_json', {coroutine.resume(coroutine.create(function()
  cjson.decode('{') end))}, 0)
walk('err.load', {load(function() return nil end)}, 0)
return out
"""


def _entries(reply) -> set:
    return {ADDR.sub(b"ADDR", x) for x in reply}


def _library(body: str) -> str:
    return ("#!lua name=audit\nlocal function enum()\n" + body + "\nend\n"
            "server.register_function('audit', function() return enum() end)\n"
            "server.register_function{function_name='audit_ro', callback=function() "
            "return enum() end, flags={'no-writes'}}\n")


def _pair(server, ref_server, protocol=2):
    return [valkey.Valkey(host=server.host, port=server.port, protocol=protocol),
            valkey.Valkey(host=ref_server.host, port=ref_server.port, protocol=protocol)]


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def pair(server, ref_server, request):
    clients = _pair(server, ref_server, request.param)
    for c in clients:
        c.flushall()
        c.function_flush()
        c.script_flush()
    yield clients
    for c in clients:
        c.function_flush()
        c.close()


def _subset(ours: set, theirs: set, context: str):
    extra = sorted(ours - theirs)
    assert not extra, "%s: reachable on hotkv only:\n%s" % (
        context, "\n".join(x.decode("utf-8", "replace") for x in extra))


def test_what_a_script_reaches_is_a_subset_of_valkeys(pair):
    """EVAL, EVAL_RO, a library's callback (FCALL, FCALL_RO): hotkv shows
    nothing Valkey does not, and no value of its is a host object."""
    results = []
    for c in pair:
        c.function_load(_library(ENUMERATE))
        results.append({
            "eval": _entries(c.eval(ENUMERATE, 0)),
            "eval_ro": _entries(c.execute_command("EVAL_RO", ENUMERATE, 0)),
            "fcall": _entries(c.fcall("audit", 0)),
            "fcall_ro": _entries(c.execute_command("FCALL_RO", "audit_ro", 0)),
        })
    ours, theirs = results
    for context in ours:
        assert len(ours[context]) > 200, context      # the walk reached the libraries
        _subset(ours[context], theirs[context], context)
        for entry in ours[context]:
            assert b"python" not in entry.lower() and b"lupa" not in entry.lower(), entry
            assert b"<" not in entry, entry          # no Python repr anywhere


# Every global and API field a library's code might name while it loads:
# what Valkey shows there (server.register_function, server.log, the
# version fields) and the rest of EVAL's globals, which it hides.
LOAD_TIME_NAMES = (
    "server", "redis", "server.register_function", "server.log", "server.LOG_NOTICE",
    "server.REDIS_VERSION", "server.VALKEY_VERSION", "server.SERVER_NAME", "server.call",
    "server.pcall", "server.setresp", "server.sha1hex", "server.error_reply", "redis.call",
    "redis.register_function", "_G", "pairs", "pcall", "error", "type", "tostring", "load",
    "loadstring", "dofile", "loadfile", "require", "module", "io", "os", "debug", "python",
    "newproxy", "getfenv", "setfenv", "string", "table", "math", "cjson", "cmsgpack",
    "struct", "bit", "coroutine", "collectgarbage", "getmetatable", "setmetatable", "rawset",
    "rawget", "unpack", "select", "KEYS", "ARGV", "__redis__err__handler")


def test_what_a_library_reaches_while_it_loads_is_valkeys(pair):
    """A library's code at FUNCTION LOAD: each name read gives the same
    reply on both servers (the load API, or 'nonexistent global')."""
    for name in LOAD_TIME_NAMES:
        code = ("#!lua name=probe\nlocal x = %s\nif x == nil then error('nil') end\n"
                "error('present')\n" % name)
        replies = []
        for c in pair:
            try:
                c.function_load(code, replace=True)
                replies.append("loaded")
            except valkey.ResponseError as e:
                replies.append(str(e))
        assert replies[0] == replies[1], (name, replies)


BYTECODE = {
    # CVE-2015-4335: a script that loads bytecode reads and writes the
    # interpreter's memory.  Valkey's Lua reads every chunk as text.
    "load-reader": "local d = false local f = load(function() if d then return nil end d = true "
                   "return string.dump(function() return 'bytecode-ran' end) end) return f()",
    "load-reader-result": "local d = false return {load(function() if d then return nil end "
                          "d = true return string.dump(function() return 1 end) end, '=x')}",
    "load-pieces": "local parts = {string.char(27), string.dump(function() return 1 end):sub(2)} "
                   "local i = 0 return {load(function() i = i + 1 return parts[i] end)}",
    "loadstring": "return {loadstring(string.dump(function() return 'bytecode-ran' end))}",
    "loadstring-named": "return {loadstring(string.dump(function() return 1 end), '@evil')}",
    "loadstring-pcall": "return {pcall(loadstring, string.dump(function() return 1 end))}",
    "dump-api": "return {pcall(string.dump, redis.call)}",
    "dump-native": "return {pcall(string.dump, print or tostring)}",
    "load-text": "return {load(function() return nil end)}",
    "load-errors": "return {pcall(load), pcall(load, 1), pcall(load, function() end, {})}",
}


@pytest.mark.parametrize("name", sorted(BYTECODE))
def test_no_loader_runs_bytecode(diff, name):
    reply = diff("EVAL", BYTECODE[name], "0")
    assert b"bytecode-ran" not in reply


def test_no_library_callback_runs_bytecode(pair):
    lib = ("#!lua name=bc\n"
           "server.register_function('viaload', function() local d = false "
           "local f = load(function() if d then return nil end d = true "
           "return string.dump(function() return 'bytecode-ran' end) end) "
           "return {tostring(f), type(f)} end)\n"
           "server.register_function('vialoadstring', function() "
           "return {loadstring(string.dump(function() return 'bytecode-ran' end))} end)\n")
    replies = []
    for c in pair:
        c.function_load(lib)
        replies.append([c.fcall("viaload", 0), c.fcall("vialoadstring", 0)])
    assert replies[0] == replies[1]
    assert b"bytecode-ran" not in repr(replies[0]).encode()


def test_debugger_eval_refuses_bytecode(server, ref_server):
    """SCRIPT DEBUG's eval compiles with the same text-only loader."""
    commands = [("e", "loadstring(string.dump(function() return 'bytecode-ran' end))"),
                ("e", "string.dump(function() return 1 end)"),
                ("e", "load(function() return nil end)"),
                ("e", "getmetatable(redis.call)"), ("e", "type(redis.call)"), ("c",)]
    ours = transcript(server.host, server.port, "SYNC", "local x = 1\nreturn x\n", commands)
    theirs = transcript(ref_server.host, ref_server.port, "SYNC", "local x = 1\nreturn x\n",
                        commands)
    assert ours == theirs
    assert not any(b"bytecode-ran" in x for x in ours)


API_FUNCTIONS = ("redis.call", "redis.pcall", "redis.setresp", "redis.log", "redis.sha1hex",
                 "redis.acl_check_cmd", "redis.error_reply", "redis.status_reply",
                 "redis.set_repl", "server.call", "cjson.encode", "cjson.decode",
                 "cjson.encode_keep_buffer", "bit.band", "bit.tohex", "cmsgpack.pack",
                 "cmsgpack.unpack", "cmsgpack.unpack_one", "struct.pack", "struct.unpack",
                 "struct.size", "loadstring", "load", "pairs", "pcall", "tostring", "unpack",
                 "getmetatable", "setmetatable", "rawset", "string.dump", "coroutine.create",
                 "coroutine.wrap")


@pytest.mark.parametrize("fn", API_FUNCTIONS)
def test_api_functions_behave_as_c_functions(diff, fn):
    """Each function a script is given is a function to Lua, with no
    metatable, and the operations that tell a C function from a Lua one
    (string.dump, coroutine.create) or misuse it fail with Valkey's texts."""
    diff("EVAL", "local f = %s return {type(f), tostring(getmetatable(f)), "
                 "tostring(f):match('^function: ') ~= nil}" % fn, "0")
    for probe in ("return {pcall(string.dump, %s)}", "return {pcall(coroutine.create, %s)}",
                  "return {pcall(coroutine.wrap, %s)}", "return %s.x", "return %s .. 'x'",
                  "return #%s", "return %s + 1", "return %s < 1", "%s.x = 1",
                  "return {pcall(setmetatable, %s, {})}", "return {pcall(rawset, %s, 1, 1)}",
                  "return {pcall(rawget, %s, 1)}", "return {pcall(next, %s)}",
                  "return {pcall(ipairs, %s)}", "return {pcall(string.format, '%%s', %s)}",
                  "return {pcall(table.concat, {%s})}"):
        diff("EVAL", probe % fn, "0")


# CVE-2022-24735 / CVE-2025-46818: a low-privileged user's script changes
# a table or metatable every script shares, so code of its choosing runs in
# the next script of another user, with that user's rights.  Each attempt
# must fail as on Valkey, and the next script, run by the administrator,
# must see nothing of it.
INJECTIONS = (
    "getmetatable(redis.call).__call = function() return 'hijacked' end",
    "getmetatable(redis.call).__index = function() return 'hijacked' end",
    "rawset(getmetatable(redis.call), '__call', function() return 'hijacked' end)",
    "setmetatable(getmetatable(redis.call), {__index = function() return 'hijacked' end})",
    "getmetatable('').__index = {upper = function() return 'hijacked' end}",
    "rawset(getmetatable(''), '__index', {upper = function() return 'hijacked' end})",
    "getmetatable('').__index.upper = function() return 'hijacked' end",
    "string.upper = function() return 'hijacked' end",
    "rawset(string, 'upper', function() return 'hijacked' end)",
    "redis.call = function() return 'hijacked' end",
    "rawset(redis, 'call', function() return 'hijacked' end)",
    "rawset(server, 'call', function() return 'hijacked' end)",
    "cjson.encode = function() return 'hijacked' end",
    "getmetatable(_G).__index = function() return 'hijacked' end",
    "rawset(getmetatable(_G), '__index', function() return 'hijacked' end)",
    "setmetatable(_G, {})",
    "_G.tostring = function() return 'hijacked' end",
    "rawset(_G, 'tostring', function() return 'hijacked' end)",
    "getmetatable(cjson.null).__tostring = function() return 'hijacked' end",
    "local mt = getmetatable(redis.status_reply('x')) mt.__index = function() "
    "return 'hijacked' end",
    "local t = redis.call('ping') setmetatable(t, {__index = function() return 'hijacked' end})",
)
VICTIM = ("return {redis.call('set', 'victim', 'v'), ('a'):upper(), tostring(1), "
          "cjson.encode({1}), redis.status_reply('x'), type(redis.call('get', 'victim')), "
          "redis.call('get', 'nosuchkey'), redis.sha1hex('')}")


def test_no_script_changes_what_another_users_script_sees(server, ref_server):
    replies = []
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        admin = RawClient(host, port)
        admin.call("FLUSHALL")
        admin.call("SCRIPT", "FLUSH")
        admin.call("ACL", "SETUSER", "low", "on", ">lowpass", "~q:*", "+eval", "+evalsha")
        low = RawClient(host, port)
        assert low.call("AUTH", "low", "lowpass") == b"+OK\r\n"
        got = [low.call("EVAL", attack, "0") for attack in INJECTIONS]
        got.append(admin.call("EVAL", VICTIM, "0"))
        got.append(low.call("EVAL", VICTIM.replace("victim", "q:victim"), "0"))
        admin.call("ACL", "DELUSER", "low")
        low.close()
        admin.close()
        replies.append(got)
    ours, theirs = replies
    for attack, a, b in zip(INJECTIONS + ("victim", "low victim"), ours, theirs):
        assert a == b, (attack, a, b)
    assert b"hijacked" not in b"".join(ours)


# The rest of the public Lua CVEs, each as the reference answers it:
# CVE-2025-46817 (unpack's count overflows a C int: this Lua crashed the
# whole process before hotkv's prelude checked the range), CVE-2018-11218 /
# CVE-2018-11219 / CVE-2020-14147 (cmsgpack and struct sizes and counts),
# CVE-2021-32626 (results past the Lua stack), CVE-2024-46981 (garbage
# collection across SCRIPT FLUSH), CVE-2025-49844 / CVE-2025-46819 (the
# parser on hostile text, with the collector as eager as a script can make
# it).
CVE_SCRIPTS = {
    "46817-full-range": "return {pcall(unpack, {}, -2147483648, 2147483647)}",
    "46817-from-zero": "return {pcall(unpack, {}, 0, 2147483647)}",
    "46817-wrapped": "return {pcall(unpack, {}, 1, 2^32 + 3)}",
    "46817-stack": "local t = {} for i = 1, 8000 do t[i] = i end "
                   "return {pcall(function() return #{unpack(t)} end)}",
    "46817-fits": "local t = {} for i = 1, 7999 do t[i] = i end return #{unpack(t)}",
    "46817-args": "return {pcall(unpack, {1, 2, 3}, 'x'), pcall(unpack), "
                  "pcall(unpack, {1, 2}, 1.9, '2.7')}",
    "11218-pack-args": "local t = {} for i = 1, 5000 do t[i] = i end "
                       "return {pcall(cmsgpack.pack, unpack(t, 1, 4001))}",
    "11218-pack-args-fit": "local t = {} for i = 1, 5000 do t[i] = i end "
                           "return #cmsgpack.pack(unpack(t, 1, 4000))",
    "11218-pack-deep": "local t = {} local c = t for i = 1, 2000 do c[1] = {} c = c[1] end "
                       "return #cmsgpack.pack(t)",
    "11218-unpack-huge-array": "return {pcall(cmsgpack.unpack, '\\221\\255\\255\\255\\255')}",
    "11218-unpack-huge-map": "return {pcall(cmsgpack.unpack, '\\223\\255\\255\\255\\255')}",
    "11218-unpack-truncated": "return {pcall(cmsgpack.unpack, '\\218\\0\\5ab')}",
    "11218-unpack-limit": "return {pcall(cmsgpack.unpack_limit, '\\1\\2\\3', -1), "
                          "pcall(cmsgpack.unpack_one, '\\1\\2\\3', 100)}",
    "11219-struct-size": "return {pcall(struct.pack, 'i99999999999', 1), "
                         "pcall(struct.size, 'c999999999999')}",
    "11219-struct-align": "return {pcall(struct.pack, '!17i', 1), pcall(struct.unpack, 'i17', "
                          "'x')}",
    "14147-struct-getnum": "return {pcall(struct.pack, '>I2147483648', 1), "
                           "pcall(struct.unpack, 'c' .. string.rep('9', 30), 'x')}",
    "14147-struct-offset": "return {pcall(struct.unpack, 'b', 'a', -2^31), "
                           "pcall(struct.unpack, 'b', 'a', 0), pcall(struct.unpack, 'b', 'a', "
                           "2^31)}",
    "14147-struct-results": "return {pcall(struct.unpack, string.rep('b', 7997), "
                            "string.rep('a', 9000))}",
    "32626-many-results": "local t = {} for i = 1, 200000 do t[i] = i end return t",
    "32626-deep-reply": "local t = {} local c = t for i = 1, 150 do c[1] = {} c = c[1] end "
                        "return {pcall(function() return t end)}",
    "32626-varargs": "local f = function(...) return select('#', ...) end "
                     "return {pcall(function() return f(unpack({}, 1, 7999)) end)}",
    "32626-recursion": "local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) "
                       "end return {pcall(f, 100000)}",
    "46819-long-bracket": "return {loadstring('[=['), loadstring('[==[ x ]=]'), "
                          "loadstring('--[==[ x'), loadstring('return [=[' .. "
                          "string.rep('a', 100) .. ']]')}",
    "49844-parser": "collectgarbage('setpause', 1) collectgarbage('setstepmul', 10000) "
                    "local n = 0 for i = 1, 200 do local f = loadstring('local a' .. i .. "
                    "' = \"' .. string.rep('x', i) .. '\" return a' .. i) "
                    "if f and f() then n = n + 1 end end collectgarbage('setpause', 200) "
                    "collectgarbage('setstepmul', 200) return n",
    "49844-nesting": "return {loadstring(string.rep('(', 300) .. '1' .. string.rep(')', 300)), "
                     "loadstring('return ' .. string.rep('{', 300) .. string.rep('}', 300))}",
}


@pytest.mark.parametrize("name", sorted(CVE_SCRIPTS))
def test_lua_cves_answer_as_valkey(diff, name):
    diff("EVAL", CVE_SCRIPTS[name], "0")
    diff("PING")            # the server is still there


def test_script_flush_during_garbage_leaves_a_working_state(diff):
    """CVE-2024-46981: SCRIPT FLUSH closes a Lua state that holds garbage
    and live references; the next scripts run in a fresh one."""
    for i in range(20):
        diff("EVAL", "local t = {} for i = 1, 1000 do t[i] = {tostring(i)} end "
                     "collectgarbage('step', 1) return #t + %d" % i, "0")
        diff("SCRIPT", "FLUSH")
    diff("EVAL", "return {type(redis.call), tostring(getmetatable(redis.call))}", "0")


def test_errors_scripts_catch_leave_nothing_of_the_host_behind():
    """Scripts that catch their API calls' errors (the enumeration above
    does, in EVAL and FCALL), then SCRIPT FLUSH and FUNCTION FLUSH replacing
    the Lua states, and library loads that fail: the server stays up.  lupa
    used to hand Lua the Python exception of each failing call; held by the
    state and freed by a later collection after its runtime was replaced,
    one crashed the process (SIGSEGV in luaL_unref, seen in 1 round of 3
    of this sequence).  In a child process, so a crash fails this test
    only."""
    from jobcount import HotkvProcess
    proc = HotkvProcess().start()
    try:
        for _ in range(3):
            for protocol in (2, 3):
                c = valkey.Valkey(host=proc.host, port=proc.port, protocol=protocol)
                c.function_flush()
                c.script_flush()
                c.function_load(_library(ENUMERATE))
                assert len(c.eval(ENUMERATE, 0)) > 200
                assert len(c.execute_command("EVAL_RO", ENUMERATE, 0)) > 200
                assert len(c.fcall("audit", 0)) > 200
                assert len(c.execute_command("FCALL_RO", "audit_ro", 0)) > 200
                c.function_flush()
                c.close()
            for protocol in (2, 3):
                c = valkey.Valkey(host=proc.host, port=proc.port, protocol=protocol)
                c.function_flush()
                c.script_flush()
                for name in LOAD_TIME_NAMES:
                    with pytest.raises(valkey.ResponseError):
                        c.function_load("#!lua name=probe\nlocal x = %s\n"
                                        "if x == nil then error('nil') end\n"
                                        "error('present')\n" % name, replace=True)
                c.function_flush()
                c.close()
        c = RawClient(proc.host, proc.port)
        assert c.call("PING") == b"+PONG\r\n"
        c.close()
    finally:
        assert proc.proc.poll() is None, "hotkv serve died: %r" % proc.proc.returncode
        proc.stop()


def test_raw_reads_of_read_only_tables_as_valkey(diff):
    """rawget / next on _G and the library tables see what they hold, as
    Valkey's read-only tables are the tables themselves (hotkv's are empty
    proxies; fakeredis's test_server_alias_not_available_in_redis_mode)."""
    diff("EVAL", "return {tostring(rawget(_G, 'server') == nil), "
                 "tostring(rawget(string, 'upper') == nil), tostring(rawget(_G, 'KEYS') == nil), "
                 "type(rawget(redis, 'call')), type(next(cjson)), tostring(rawget(_G, 'no'))}",
         "1", "k")
    for probe in ("rawget()", "rawget(5)", "rawget({})", "rawget({a = 1}, 'a')"):
        diff("EVAL", "return {pcall(function() return %s end)}" % probe, "0")
