"""Lua scripting (EVAL / EVALSHA / EVAL_RO / SCRIPT): conversions, errors and
the sandbox byte for byte against Valkey in RESP2 and RESP3; atomicity,
effects propagation to the AOF, WATCH and blocked clients; valkey-py's
register_script and a BullMQ-like atomic dequeue."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest

from support import RawClient, aof_commands, start_aof_server, wait_for

# Every conversion Lua -> RESP and RESP -> Lua, and every error path.
CASES = [
    ("EVAL", "return 1", "0"),
    ("EVAL", "return 'x'", "0"),
    ("EVAL", "return {1,2,nil,3}", "0"),
    ("EVAL", "return {1.9,-2.5,true,false,'x'}", "0"),
    ("EVAL", "return 3.99", "0"),
    ("EVAL", "return -0.5", "0"),
    ("EVAL", "return 1e30", "0"),
    ("EVAL", "return 0/0", "0"),
    ("EVAL", "return nil", "0"),
    ("EVAL", "return true", "0"),
    ("EVAL", "return false", "0"),
    ("EVAL", "return function() end", "0"),
    ("EVAL", "return {ok=1}", "0"),
    ("EVAL", "return {err=1}", "0"),
    ("EVAL", "return {err='MY boom'}", "0"),
    ("EVAL", "return {err='boom'}", "0"),
    ("EVAL", "return {1,{err='E x'},{ok='fine\\r\\nx'}}", "0"),
    ("EVAL", "return {double=1.5}", "0"),
    ("EVAL", "return {double=1/0}", "0"),
    ("EVAL", "return {big_number='123456789012345678901234567890'}", "0"),
    ("EVAL", "return {verbatim_string={format='txt', string='hello'}}", "0"),
    ("EVAL", "return {map={a=1}}", "0"),
    ("EVAL", "return {map={a={1,2}}}", "0"),
    ("EVAL", "return {set={a=true}}", "0"),
    ("EVAL", "redis.setresp(3); return {1, 'a', true, false}", "0"),
    ("EVAL", "return KEYS[1]..ARGV[1]", "1", "k", "v"),
    ("EVAL", "return #KEYS + #ARGV", "2", "a", "b", "c"),
    ("EVAL", "return ARGV", "0", "a", "b", "c"),
    ("EVAL", "return redis.status_reply('fine')", "0"),
    ("EVAL", "return redis.error_reply('boom')", "0"),
    ("EVAL", "return redis.error_reply('-X boom')", "0"),
    ("EVAL", "return redis.error_reply(1)", "0"),
    ("EVAL", "return redis.status_reply()", "0"),
    ("EVAL", "return redis.sha1hex('')", "0"),
    ("EVAL", "return redis.sha1hex()", "0"),
    ("EVAL", "return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM, redis.SERVER_NAME}", "0"),
    ("EVAL", "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
     "0"),
    ("EVAL", "redis.log(redis.LOG_DEBUG, 'hello') return 1", "0"),
    ("EVAL", "return redis.log(1)", "0"),
    ("EVAL", "return redis.log('x', 'y')", "0"),
    ("EVAL", "return redis.log(9, 'y')", "0"),
    ("EVAL", "return redis.setresp(4)", "0"),
    ("EVAL", "return redis.setresp()", "0"),
    ("EVAL", "return type(server)", "0"),
    # redis.call / redis.pcall
    ("EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", "k", "v"),
    ("EVAL", "return redis.call('get', KEYS[1])", "1", "k"),
    ("EVAL", "return redis.call('get', 'nokey')", "0"),
    ("EVAL", "return redis.call('type', 'k')", "0"),
    ("EVAL", "return redis.call('type', 'k').ok", "0"),
    ("EVAL", "return redis.call('lpush', 'l', 'a', 'b')", "0"),
    ("EVAL", "return redis.call('lrange', 'l', 0, -1)", "0"),
    ("EVAL", "return redis.call('blpop', 'nolist', 0)", "0"),
    ("EVAL", "return redis.call('lpop', 'nolist', 2)", "0"),
    ("EVAL", "return redis.call('nosuch')", "0"),
    ("EVAL", "return redis.call('get')", "0"),
    ("EVAL", "return redis.call('incr', 'x', 'y')", "0"),
    ("EVAL", "return redis.call('config', 'nosuch')", "0"),
    ("EVAL", "return redis.call('multi')", "0"),
    ("EVAL", "return redis.call('eval', 'return 1', 0)", "0"),
    ("EVAL", "return redis.call('subscribe', 'x')", "0"),
    ("EVAL", "return redis.call()", "0"),
    ("EVAL", "return redis.call({})", "0"),
    ("EVAL", "return redis.call('set', 'a', {})", "0"),
    ("EVAL", "return redis.call('lpush', 'k', 'x')", "0"),
    ("EVAL", "return redis.pcall('lpush', 'k', 'x')", "0"),
    ("EVAL", "return {1, redis.pcall('lpush', 'k', 'x'), 3}", "0"),
    ("EVAL", "return redis.pcall('nosuch')", "0"),
    ("EVAL", "local t = redis.pcall('nosuch') return t.err", "0"),
    ("EVAL", "local ok, e = pcall(redis.call, 'nosuch') return e", "0"),
    ("EVAL", "local ok, e = pcall(error, {err='X y'}) return e", "0"),
    ("EVAL", "local function f() return redis.call('nosuch') end\nreturn f()", "0"),
    ("EVAL", "redis.call('set', 'f', 1.5) redis.call('set', 'g', 1e20) "
             "redis.call('set', 'h', 3.0) return redis.call('mget', 'f', 'g', 'h')", "0"),
    ("EVAL", "return redis.call('set', 'n', 2^53) and redis.call('get', 'n')", "0"),
    ("EVAL", "return redis.call('set', 'n', 0.1) and redis.call('get', 'n')", "0"),
    ("EVAL", "return redis.call('select', 1) and redis.call('set', 'db1key', 'v')", "0"),
    ("EXISTS", "db1key"),
    # errors raised by the script
    ("EVAL", "return error('boom')", "0"),
    ("EVAL", "return error({err='MY boom'})", "0"),
    ("EVAL", "return error(12)", "0"),
    ("EVAL", "return error()", "0"),
    ("EVAL", "return error({})", "0"),
    ("EVAL", "return error({err=1})", "0"),
    ("EVAL", "return nil+1", "0"),
    ("EVAL", "\nreturn nil + 1", "0"),
    ("EVAL", "return (", "0"),
    # argument checks
    ("EVAL", "return 1", "-1"),
    ("EVAL", "return 1", "2", "a"),
    ("EVAL", "return 1", "x"),
    ("EVAL", "return 1"),
    ("EVALSHA", "abc", "0"),
    ("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"),
    # read-only scripts
    ("EVAL_RO", "return redis.call('set', 'a', 'b')", "0"),
    ("EVAL_RO", "return redis.call('publish', 'a', 'b')", "0"),
    ("EVAL_RO", "return redis.call('get', 'a')", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'a')", "0"),
    ("EVAL", "#!lua flags=bogus\nreturn 1", "0"),
    ("EVAL", "#!python\nreturn 1", "0"),
    ("EVAL", "#!lua foo=bar\nreturn 1", "0"),
    ("EVAL", "#!lua", "0"),
    ("EVAL_RO", "#!lua\nreturn 1", "0"),
    ("EVAL", "#!lua\nreturn error('x')", "0"),
    # the sandbox
    ("EVAL", "a=1", "0"),
    ("EVAL", "return a", "0"),
    ("EVAL", "KEYS = 1", "0"),
    ("EVAL", "string.foo = 1", "0"),
    ("EVAL", "redis.call = 1", "0"),
    ("EVAL", "return _G.x", "0"),
    ("EVAL", "print('x')", "0"),
    ("EVAL", "return getfenv and 1", "0"),
    ("EVAL", "return type(io)", "0"),
    ("EVAL", "return type(require)", "0"),
    ("EVAL", "return tostring(os.time)", "0"),
    ("EVAL", "return type(os.clock)", "0"),
    ("EVAL", "local t = {} t.x = 1 return t.x", "0"),
    ("EVAL", "return loadstring('return 1')()", "0"),
    ("EVAL", "return string.format('%d', 3)", "0"),
    ("EVAL", "return table.concat({'a', 'b'}, ',')", "0"),
    ("EVAL", "rawset(_G, 'zz', 1) return 1", "0"),
    ("EVAL", "return zz", "0"),
    ("EVAL", "rawset(string, 'zz', 1) return 1", "0"),
    ("EVAL", "getmetatable('').__index = {} return 1", "0"),
    ("EVAL", "return ('x'):upper()", "0"),
    ("EVAL", "setmetatable(_G, nil) return 1", "0"),
    ("EVAL", "local function f(n) return 1 + f(n) end return f(1)", "0"),
    ("EVAL", "local co = coroutine.wrap(function() coroutine.yield(redis.call('ping')) end) "
             "return co()", "0"),
    ("EVAL", "return setmetatable({}, {__index = function(t, k) return k end})", "0"),
    ("EVAL", "return {1, 2, setmetatable({}, {__index = function() error('x') end})}", "0"),
    ("EVAL", "return error(setmetatable({}, {__index = function() return 'E x' end}))", "0"),
    ("EVAL", "return error('a\\nb')", "0"),
    ("EVAL", "return {err='a\\r\\nb'}", "0"),
    ("EVAL", "return redis.status_reply('a\\r\\nb')", "0"),
    ("EVAL", "return {2^63, 9007199254740993, math.huge, -math.huge}", "0"),
    # libraries
    ("EVAL", "return cjson.encode({1,2,{a=3}})", "0"),
    ("EVAL", "return cjson.encode({1,2,nil,4})", "0"),
    ("EVAL", "return cjson.encode({a='x/y'})", "0"),
    ("EVAL", "return cjson.encode(0.1)", "0"),
    ("EVAL", "return cjson.encode(12345678901234)", "0"),
    ("EVAL", "return cjson.encode('\\n\\1\"')", "0"),
    ("EVAL", "return cjson.encode({d=cjson.null})", "0"),
    ("EVAL", "return cjson.decode('[1,2,3]')", "0"),
    ("EVAL", "return cjson.decode('{\"a\":1}').a", "0"),
    ("EVAL", "local t = cjson.decode('{\"a\":[1,2.5,null,\"s\"],\"b\":{}}') "
             "return {t.a[1], t.a[2], t.a[4], type(t.b)}", "0"),
    ("EVAL", "return {bit.bnot(0), bit.lshift(1,31), bit.rshift(-1, 28), bit.arshift(-256, 4), "
             "bit.bxor(5,3), bit.bor(1,2,4), bit.tobit(2^32+5), bit.rol(1,33), bit.ror(1,1)}", "0"),
    ("EVAL", "return bit.tohex(-1, -4)", "0"),
    # LuaBitOp takes the low 32 bits of n + 2^52 + 2^51: halves round to even,
    # numbers past 2^51 keep what the double's mantissa holds.
    ("EVAL", "return {bit.tobit(0.5), bit.tobit(2.5), bit.tobit(-2.5), bit.tobit(3.5), "
             "bit.band(2.5, 7), bit.tobit(2^31 + 0.5), bit.tobit(2^60 + 4096), "
             "bit.tobit(1e20), bit.tobit(-1e20), bit.tobit(1e300), bit.tohex(2^53 + 2)}", "0"),
    ("EVAL", "return bit.band()", "0"),
    ("EVAL", "return bit.band('x')", "0"),
    ("EVAL", "return cjson.decode('[')", "0"),
    ("EVAL", "return cjson.encode(function() end)", "0"),
    ("EVAL", "local ok, e = pcall(cjson.decode, '[') return e", "0"),
    ("EVAL", "return cmsgpack.pack(1, -1, 1.5, 0.1, 2^40, -2^40, 'abc', true, false, nil, "
             "{1,2}, {a=1}, {})", "0"),
    ("EVAL", "return cmsgpack.pack(300, 70000, -200, -40000, 127, 128, -32, -33, 2^31, 2^32, "
             "2^63, 1e300)", "0"),
    ("EVAL", "return cmsgpack.pack(string.rep('x', 40), string.rep('y', 300))", "0"),
    ("EVAL", "local t = {} for i = 1, 20 do t[i] = i end return cmsgpack.pack(t)", "0"),
    ("EVAL", "return {cmsgpack.unpack(cmsgpack.pack(1, 'a', {1,2,{x='y'}}, true, 1.5))}", "0"),
    ("EVAL", "return {cmsgpack.unpack(cmsgpack.pack(-1, -100, -1000, -100000, 255, 65535))}",
     "0"),
    ("EVAL", "local t = cmsgpack.unpack(cmsgpack.pack({x='y'})) return t.x", "0"),
    ("EVAL", "return cmsgpack.unpack('')", "0"),
    ("EVAL", "return cmsgpack.unpack('\\193')", "0"),
    ("EVAL", "return cmsgpack.pack()", "0"),
    ("EVAL", "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2))}", "0"),
    ("EVAL", "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2), 1)}", "0"),
    ("EVAL", "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}", "0"),
    ("EVAL", "return bit.tohex(255)", "0"),
    # struct
    ('EVAL', "return struct.pack('>I4', 1)", '0'),
    ('EVAL', "return struct.pack('<i2h', -2, 300)", '0'),
    ('EVAL', "return struct.pack('!4bi', 1, 2)", '0'),
    ('EVAL', "return struct.pack('c3s', 'abcd', 'xy')", '0'),
    ('EVAL', "return struct.pack('c0', 'abcd')", '0'),
    ('EVAL', "return struct.pack('>d<f', 1.5, 2.5)", '0'),
    ('EVAL', "return struct.pack('BxHLlT', 255, 65535, 1, -1, 7)", '0'),
    ('EVAL', "return struct.pack('i16', -1)", '0'),
    ('EVAL', "return {struct.unpack('>I4', struct.pack('>I4', 123456))}", '0'),
    ('EVAL', "return {struct.unpack('<i2h', struct.pack('<i2h', -2, 300))}", '0'),
    ('EVAL', "return {struct.unpack('bc0', struct.pack('bc0', 3, 'abc'))}", '0'),
    ('EVAL', "return {struct.unpack('s', 'hello\\0rest')}", '0'),
    ('EVAL', "return {struct.unpack('>d', struct.pack('>d', 1.5))}", '0'),
    ('EVAL', "return {struct.unpack('B', 'abc', 2)}", '0'),
    ('EVAL', "return struct.size('!4bi')", '0'),
    ('EVAL', "return struct.size('>I4hc10')", '0'),
    ('EVAL', "return struct.size('s')", '0'),
    ('EVAL', "return struct.pack('z', 1)", '0'),
    ('EVAL', "return struct.pack('i')", '0'),
    ('EVAL', "return struct.pack('i', 'x')", '0'),
    ('EVAL', "return struct.pack('c5', 'ab')", '0'),
    ('EVAL', "return struct.unpack('I4', 'ab')", '0'),
    ('EVAL', "return struct.unpack('s', 'ab')", '0'),
    ('EVAL', "return struct.unpack('c0', 'ab')", '0'),
    ('EVAL', "return struct.unpack('B', 'abc', 0)", '0'),
    ('EVAL', "return struct.pack('i33', 1)", '0'),
    ('EVAL', "return struct.pack('!3i', 1)", '0'),
    ('EVAL', 'return struct.pack()', '0'),
    ('EVAL', "return {struct.unpack('i16', struct.pack('i16', -5))}", '0'),
    ('EVAL', 'return struct.unpack()', '0'),
    ('EVAL', 'return struct.unpack("b")', '0'),
    ('EVAL', 'return struct.size()', '0'),
    # SCRIPT
    ("SCRIPT", "LOAD", "return 1"),
    ("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"),
    ("EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"),
    ("EVALSHA_RO", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"),
    ("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "ffff"),
    ("SCRIPT", "SHOW", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"),
    ("SCRIPT", "SHOW", "nope"),
    ("SCRIPT", "LOAD", "return ("),
    ("SCRIPT", "LOAD"),
    ("SCRIPT", "FLUSH", "x"),
    ("SCRIPT", "KILL"),
    ("SCRIPT", "HELP"),
    ("SCRIPT", "FOO"),
    ("SCRIPT",),
]


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_conversions_and_errors_match_valkey(diff, resp3):
    if resp3:
        diff.resp3()
    diff("HSET", "h", "a", "1")
    diff("SET", "k", "x")
    for case in CASES:
        diff(*case)


RESP3_CASES = [
    ("EVAL", "redis.setresp(3); return redis.call('hgetall', 'h')", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('hgetall', 'h')['map']['a']", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('smembers', 's')", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('smembers', 's')['set']['x']", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('zscore', 'z', 'm')", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('zscore', 'z', 'm')['double']", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('get', 'nokey')", "0"),
    ("EVAL", "redis.setresp(3); return {redis.call('get', 'nokey')}", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('lpop', 'nolist', 2)", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('zrange', 'z', 0, -1, 'withscores')", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('hello')['map']['proto']", "0"),
    ("EVAL", "redis.setresp(3); return {redis.call('exists', 'h') == 1}", "0"),
    ("EVAL", "redis.setresp(3); return redis.call('hgetall', 'nokey')", "0"),
]


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_resp3_inside_scripts_match_valkey(diff, resp3):
    if resp3:
        diff.resp3()
    diff("HSET", "h", "a", "1")
    diff("SADD", "s", "x")
    diff("ZADD", "z", "1.5", "m")
    for case in RESP3_CASES:
        diff(*case)


# Calls whose argument list ends in unpack(...) or ...: up to 8,001 arguments
# reach the command (Valkey's C redis.call); errors keep the user's line in a
# tail call; a user's own tail recursion and look-alike tables are untouched.
_MANY = "local a = {} for i = 1, %d do a[i] = 'x' end\n"
VARARG_CASES = [
    ("EVAL", _MANY % 7999 + "return redis.call('rpush', KEYS[1], unpack(a))", "1", "l"),
    ("EVAL", _MANY % 7999 + "return server.pcall('rpush', KEYS[1], unpack(a))", "1", "l"),
    ("EVAL", _MANY % 7997 + "local n = redis.call('sadd', KEYS[1], 'y', unpack(a))\n"
     "return {n, redis.call('scard', KEYS[1])}", "1", "s"),
    ("EVAL", _MANY % 7999 + "return redis.call('nosuch', unpack(a))", "0"),
    ("EVAL", _MANY % 7999 + "return redis.call('set', unpack(a))", "0"),
    ("EVAL", _MANY % 7999 + "return redis.pcall('set', unpack(a))", "0"),
    ("EVAL", _MANY % 7999 + "local ok, e = pcall(redis.call, 'rpush', 'l2', unpack(a))\n"
     "return {ok and 1 or 0, e}", "0"),
    ("EVAL", _MANY % 7999 + "local ok, e = pcall(redis.call, 'set', unpack(a))\n"
     "return {ok and 1 or 0, tostring(e)}", "0"),
    ("EVAL", _MANY % 8000 + "return redis.call('rpush', 'l3', unpack(a))", "0"),
    # either side of the wrappers' switch to one table (7,000 arguments)
    ("EVAL", _MANY % 6997 + "return redis.call('rpush', 'l4', unpack(a))", "0"),
    ("EVAL", _MANY % 6998 + "return redis.call('rpush', 'l5', unpack(a))", "0"),
    ("EVAL", "local a = {'k'}\n\nreturn redis.call('nosuch', unpack(a))", "0"),
    ("EVAL", "local a = {'k', 'v'}\nreturn redis.call('set', unpack(a), 'EX')", "0"),
    ("EVAL", "return redis.call('ping', ...)", "0"),
    ("EVAL", "local function f(...) return redis.call(...) end\nreturn f('set', 'k', 'v', 'x')",
     "0"),
    ("EVAL", "local t = {call = function(...) return select('#', ...) end}\n"
     "local a = {1, 2, 3}\nreturn t.call(unpack(a))", "0"),
    ("EVAL", "local function loop(n) if n == 0 then return 'done' end return loop(n - 1) end\n"
     "return loop(100000)", "0"),
    ("EVAL", "local a = {'get', 'k'}\nreturn {redis.call(unpack(a)), redis.pcall(unpack(a))}",
     "0"),
]


def test_vararg_api_calls_match_valkey(diff):
    """hotkv.lua.bytecode: the call sites it rewrites, and those it must not."""
    for case in VARARG_CASES:
        diff(*case)
    diff("LRANGE", "l", "7990", "-1")
    lib = ("#!lua name=v\nserver.register_function('f', function(KEYS, ARGV)\n" + _MANY % 7999
           + "return server.call('rpush', KEYS[1], unpack(a))\nend)")
    diff("FUNCTION", "LOAD", "REPLACE", lib)
    diff("FCALL", "f", "1", "fl")
    # At load time server.call is missing; a rewritten site must say so the same way.
    for args in ("unpack(a)", "a"):
        diff("FUNCTION", "LOAD", "REPLACE",
             "#!lua name=w\nlocal a = {1}\nserver.call('ping', %s)" % args)


def test_error_stats_match_valkey(diff):
    diff("CONFIG", "RESETSTAT")
    diff("SET", "h", "x")
    for case in [
        ("EVAL", "return redis.call('nosuch')", "0"),
        ("EVAL", "return redis.pcall('nosuch')", "0"),
        ("EVAL", "return redis.call('incr', 'h')", "0"),
        ("EVAL", "return redis.pcall('incr', 'h')", "0"),
        ("EVAL", "return error('x')", "0"),
        ("EVAL", "return {err='MY x'}", "0"),
        ("EVAL", "return redis.error_reply('OTHER x')", "0"),
        ("EVAL", "return (", "0"),
        ("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"),
    ]:
        diff(*case)
    diff("INFO", "errorstats")


def test_eval_inside_multi_matches_valkey(diff):
    diff("MULTI")
    diff("EVAL", "return redis.call('set', 'a', 1)", "0")
    diff("EVAL", "return redis.call('get', 'a')", "0")
    diff("EVAL", "return redis.call('blpop', 'nolist', 0)", "0")
    diff("EXEC")


def test_script_cache(r):
    sha = r.script_load("return ARGV[1]")
    assert r.script_exists(sha) == [True]
    assert r.evalsha(sha, 0, "hi") == b"hi"
    assert r.script_flush() is True
    assert r.script_exists(sha) == [False]
    import valkey
    with pytest.raises(valkey.exceptions.NoScriptError, match="No matching script"):
        r.evalsha(sha, 0, "hi")
    assert r.execute_command("SCRIPT", "FLUSH", "ASYNC") in (True, b"OK")


def test_register_script(r):
    incr_by = r.register_script(
        "local v = redis.call('incrby', KEYS[1], ARGV[1]) return v * 2")
    assert incr_by(keys=["ctr"], args=[5]) == 10
    r.script_flush()   # register_script reloads the script after NOSCRIPT
    assert incr_by(keys=["ctr"], args=[1]) == 12
    assert r.get("ctr") == b"6"


DEQUEUE = """
local jobId = redis.call('RPOPLPUSH', KEYS[1], KEYS[2])
if not jobId then return nil end
redis.call('HSET', KEYS[3] .. jobId, 'processedOn', ARGV[1], 'lock', ARGV[2])
redis.call('SET', KEYS[3] .. jobId .. ':lock', ARGV[2], 'PX', 30000)
return {jobId, redis.call('HGET', KEYS[3] .. jobId, 'data')}
"""


def test_bullmq_like_atomic_dequeue(r):
    for i in range(3):
        r.hset(f"q:job:{i}", mapping={"data": f"payload-{i}"})
        r.lpush("q:wait", str(i))
    move = r.register_script(DEQUEUE)
    got = []
    for token in ("t1", "t2", "t3", "t4"):
        got.append(move(keys=["q:wait", "q:active", "q:job:"], args=["123", token]))
    assert got[:3] == [[b"0", b"payload-0"], [b"1", b"payload-1"], [b"2", b"payload-2"]]
    assert got[3] is None
    assert r.lrange("q:active", 0, -1) == [b"2", b"1", b"0"]
    assert r.hget("q:job:1", "lock") == b"t2"
    assert 0 < r.pttl("q:job:2:lock") <= 30000


def test_script_is_atomic(server, r):
    """Another client's command never runs in the middle of a script."""
    r.set("counter", 0)
    script = r.register_script(
        "for i = 1, 2000 do redis.call('incr', KEYS[1]) end return redis.call('get', KEYS[1])")
    seen = []
    other = RawClient(server.host, server.port)
    done = threading.Event()

    def reader():
        while not done.is_set():
            seen.append(int(other.call("GET", "counter")[4:-2] or 0))
    t = threading.Thread(target=reader)
    t.start()
    try:
        results = [int(script(keys=["counter"])) for _ in range(5)]
    finally:
        done.set()
        t.join()
        other.close()
    assert results == [2000, 4000, 6000, 8000, 10000]
    assert all(v % 2000 == 0 for v in seen), sorted(set(v for v in seen if v % 2000))


def test_script_write_wakes_blocked_client_and_fails_watch(server, r):
    blocked = RawClient(server.host, server.port)
    blocked.send("BLPOP", "jobs", "5")
    assert wait_for(lambda: r.info("clients")["blocked_clients"] == 1)
    watcher = RawClient(server.host, server.port)
    watcher.call("WATCH", "jobs")
    watcher.call("MULTI")
    watcher.call("PING")
    r.eval("redis.call('rpush', KEYS[1], 'a', 'b') return 1", 1, "jobs")
    assert blocked.read_reply() == b"*2\r\n$4\r\njobs\r\n$1\r\na\r\n"
    assert watcher.call("EXEC") == b"*-1\r\n"
    assert r.lrange("jobs", 0, -1) == [b"b"]
    blocked.close()
    watcher.close()


def test_keyspace_notifications_from_script(server, r):
    r.config_set("notify-keyspace-events", "KEA")
    try:
        p = r.pubsub()
        p.psubscribe("__keyevent@0__:*")
        p.get_message(timeout=1)
        r.eval("redis.call('set', KEYS[1], 'v') redis.call('del', KEYS[1])", 1, "nk")
        events = []
        deadline = time.time() + 2
        while len(events) < 2 and time.time() < deadline:
            m = p.get_message(timeout=0.2)
            if m and m["type"] == "pmessage":
                events.append(m["channel"])
        assert events == [b"__keyevent@0__:set", b"__keyevent@0__:del"]
        p.close()
    finally:
        r.config_set("notify-keyspace-events", "")


def test_publish_to_self_inside_script(server):
    c = RawClient(server.host, server.port)
    c.call("HELLO", "3")
    c.call("SUBSCRIBE", "foo")
    reply = c.call("EVAL", "redis.call('publish', 'foo', 'bar') "
                   "redis.call('publish', 'foo', 'vaz') return 'bla'", "0")
    assert reply == b"$3\r\nbla\r\n"
    assert c.read_reply() == b">3\r\n$7\r\nmessage\r\n$3\r\nfoo\r\n$3\r\nbar\r\n"
    assert c.read_reply() == b">3\r\n$7\r\nmessage\r\n$3\r\nfoo\r\n$3\r\nvaz\r\n"
    c.close()


def test_script_effects_are_propagated_not_the_eval(hotkv_server_factory, tmp_path):
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    c.call("EVAL", "redis.call('set', KEYS[1], ARGV[1]) redis.call('incr', 'n') "
           "redis.call('get', KEYS[1]) return 1", "1", "k", "v")
    c.call("EVAL", "return redis.call('get', 'k')", "0")                 # no write: not logged
    c.call("EVAL", "redis.call('select', 2) redis.call('set', 'x', 1)", "0")
    c.call("EVAL_RO", "return redis.call('get', 'k')", "0")
    c.call("EVAL", "redis.call('incr', 'single') return 1", "0")
    framed = aof_commands(tmp_path, framing=True)
    c.close()
    assert not any(cmd[0] in (b"EVAL", b"EVALSHA", b"EVAL_RO") for cmd in framed)
    assert framed == [
        [b"MULTI"], [b"SELECT", b"0"], [b"SET", b"k", b"v"], [b"INCR", b"n"], [b"EXEC"],
        [b"SELECT", b"2"], [b"SET", b"x", b"1"],
        [b"SELECT", b"0"], [b"INCR", b"single"],
    ]


def test_aof_replay_of_script_effects(hotkv_server_factory, tmp_path):
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    c.call("EVAL", "redis.call('rpush', 'l', 'a', 'b') redis.call('hset', 'h', 'f', 'v')", "0")
    c.close()
    srv.stop()
    again = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    c = RawClient(again.host, again.port)
    assert c.call("LRANGE", "l", "0", "-1") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert c.call("HGET", "h", "f") == b"$1\r\nv\r\n"
    c.close()


def test_sandbox_hides_python(r):
    with pytest.raises(Exception, match="nonexistent global variable 'python'"):
        r.eval("return python.eval('1')", 0)
    with pytest.raises(Exception):
        r.eval("return redis.call.__self__", 0)
    assert r.eval("return 1", 0) == 1


def test_eval_created_scripts_are_evicted_beyond_500(r):
    r.script_flush()
    loaded = r.script_load("return 'kept'")
    assert r.eval("return 0", 0) == 0
    for i in range(1, 501):
        r.eval(f"return {i}", 0)
    first = hashlib.sha1(b"return 0").hexdigest()
    last = hashlib.sha1(b"return 500").hexdigest()
    assert r.script_exists(first, loaded, last) == [False, True, True]
    r.script_flush()


def test_busy_script_and_script_kill(hotkv_server_factory):
    srv = hotkv_server_factory()
    admin = RawClient(srv.host, srv.port)
    runner = RawClient(srv.host, srv.port)
    other = RawClient(srv.host, srv.port)
    other.call("PING")   # accepted before the script starts
    assert admin.call("CONFIG", "SET", "lua-time-limit", "10") == b"+OK\r\n"
    busy = (b"-BUSY Valkey is busy running a script. You can only call SCRIPT KILL or "
            b"SHUTDOWN NOSAVE.\r\n")
    assert other.call("SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
    runner.send("EVAL", "while true do end", "0")
    assert wait_for(lambda: other.call("PING") == busy)
    assert other.call("MULTI") == b"+OK\r\n"            # allow_busy
    assert other.call("INCR", "x") == busy
    assert other.call("EXEC") == b"-EXECABORT Transaction discarded because of: " + busy[1:]
    assert other.call("SCRIPT", "KILL") == b"+OK\r\n"
    assert runner.read_reply() == (
        b"-ERR Script killed by user with SCRIPT KILL. script: "
        b"694a5fe1ddb97a4c6a1bf299d9537c7d3d0f84e7, on @user_script:1.\r\n")
    # A script that catches the error with pcall is still ended.
    runner.send("EVAL", "while true do pcall(function() while true do end end) end", "0")
    assert wait_for(lambda: other.call("PING") == busy)
    assert other.call("SCRIPT", "KILL") == b"+OK\r\n"
    assert runner.read_reply().startswith(b"-ERR Script killed by user with SCRIPT KILL.")
    # One that wrote cannot be killed; it runs to its end.
    runner.send("EVAL", "redis.call('set', 'x', 'y') local i = 0 "
                "while i < 2e7 do i = i + 1 end return 1", "0")
    assert wait_for(lambda: other.call("PING") == busy)
    assert other.call("SCRIPT", "KILL").startswith(b"-UNKILLABLE Sorry the script already")
    assert runner.read_reply() == b":1\r\n"
    assert other.call("GET", "x") == b"$1\r\ny\r\n"
    assert other.call("PING") == b"+PONG\r\n"
    for c in (admin, runner, other):
        c.close()


def test_command_metadata_matches_valkey(diff):
    diff("COMMAND", "INFO", "script")
    diff("COMMAND", "INFO", "eval", "evalsha", "eval_ro", "evalsha_ro")
    diff("COMMAND", "GETKEYS", "EVAL", "return 1", "2", "a", "b", "c")
    diff("COMMAND", "GETKEYS", "EVAL", "return 1", "0")
    diff("COMMAND", "GETKEYSANDFLAGS", "EVAL", "return 1", "1", "a")
    diff("COMMAND", "GETKEYSANDFLAGS", "EVAL_RO", "return 1", "1", "a")


def test_acl_inside_scripts_matches_valkey(diff):
    diff("ACL", "SETUSER", "scriptuser", "on", ">pw", "~*", "+@all", "-set")
    try:
        diff("AUTH", "scriptuser", "pw")
        diff("EVAL", "return redis.call('set', 'a', 'b')", "0")
        diff("EVAL", "return redis.pcall('set', 'a', 'b')", "0")
        diff("EVAL", "return redis.acl_check_cmd('set', 'a', 'b')", "0")
        diff("EVAL", "return redis.acl_check_cmd('get', 'a')", "0")
        diff("EVAL", "return redis.acl_check_cmd('nosuch')", "0")
    finally:
        diff.ours.call("AUTH", "default", "x")
        diff.theirs.call("AUTH", "default", "x")
        diff("ACL", "DELUSER", "scriptuser")


def test_monitor_shows_eval_and_script_commands(server):
    mon = RawClient(server.host, server.port)
    assert mon.call("MONITOR") == b"+OK\r\n"
    c = RawClient(server.host, server.port)
    c.call("EVAL", "redis.call('set', KEYS[1], 'v') return 1", "1", "monkey")
    lines = []
    while len(lines) < 2:
        lines.append(mon.read_reply())
    assert lines[0].endswith(b'"EVAL" "redis.call(\'set\', KEYS[1], \'v\') return 1" "1" '
                             b'"monkey"\r\n')
    assert lines[1].endswith(b'[0 lua] "set" "monkey" "v"\r\n')
    mon.close()
    c.close()


def test_time_stands_still_in_a_script(hotkv_server_factory, ref_server):
    """TIME inside one script (EVAL and FCALL) gives the same instant each
    call, across a DEBUG SLEEP, as valkey-server (Tcl scripting 'TIME
    command using cached time')."""
    body = ("local a = server.call('TIME') server.call('DEBUG', 'SLEEP', 0.01) "
            "local b = server.call('TIME') return {a[1] == b[1] and a[2] == b[2], #a}")
    lib = "#!lua name=timelib\nserver.register_function('t', function() " + body + " end)"
    server = hotkv_server_factory(enable_debug_command="yes")
    results = []
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        c = RawClient(host, port)
        c.call("FUNCTION", "LOAD", "REPLACE", lib)
        c.call("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")   # DEBUG SLEEP from a script
        try:
            results.append((c.call("EVAL", body, "0"), c.call("FCALL", "t", "0")))
        finally:
            c.call("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")
            c.call("FUNCTION", "DELETE", "timelib")
        c.close()
    assert results[0] == results[1] == (b"*2\r\n:1\r\n:2\r\n", b"*2\r\n:1\r\n:2\r\n")


def _evicted_scripts(c) -> int:
    info = c.call("INFO", "stats").split(b"\r\n")
    line = next(x for x in info if x.startswith(b"evicted_scripts:"))
    return int(line.split(b":")[1])


def test_config_resetstat_resets_evicted_scripts(target):
    """INFO's evicted_scripts is a statistic: CONFIG RESETSTAT zeroes it (the
    Tcl scripting unit's 'eviction is plain LRU' counts from a reset)."""
    c = target.admin
    c.call("SCRIPT", "FLUSH")
    c.call("CONFIG", "RESETSTAT")
    pipe = b"".join(b"*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (len(s), s)
                    for s in (b"return %d" % j for j in range(501)))
    c.send_raw(pipe)
    for _ in range(501):
        c.read_reply()
    assert _evicted_scripts(c) == 1
    c.call("CONFIG", "RESETSTAT")
    assert _evicted_scripts(c) == 0
    c.call("SCRIPT", "FLUSH")


def _queued_script_on_new_replica(host, port, primary_port):
    """MULTI on a primary, EVALs queued, the server becomes a replica, EXEC."""
    c, admin, c2 = (RawClient(host, port) for _ in range(3))
    out = [c.call("MULTI"), c.call("EVAL", "#!lua\nreturn 1", 0),
           c2.call("MULTI"), c2.call("EVAL", "#!lua flags=no-writes\nreturn 1", 0),
           admin.call("REPLICAOF", "127.0.0.1", primary_port), c.call("EXEC"), c2.call("EXEC"),
           admin.call("REPLICAOF", "NO", "ONE")]
    for x in (c, admin, c2):
        x.close()
    return out


def test_queued_eval_with_write_shebang_aborts_exec_on_replica(hotkv_server_factory,
                                                              server, ref_server):
    """A queued EVAL's script that declares flags counts as a write (or not,
    with no-writes) for EXEC's gates, as Valkey's evalGetCommandFlags."""
    from support import ReferenceValkey
    replica = hotkv_server_factory()
    with ReferenceValkey() as ref_replica:
        got = _queued_script_on_new_replica(replica.host, replica.port, server.port)
        assert got == _queued_script_on_new_replica(ref_replica.host, ref_replica.port,
                                                    ref_server.port)
    assert got[5].startswith(b"-EXECABORT Transaction discarded because of: READONLY")
    assert got[6] == b"*1\r\n:1\r\n"


SET_REPL = """redis.call('set','a','1')
redis.set_repl(redis.REPL_NONE)
redis.call('set','b','2')
redis.set_repl(redis.REPL_AOF)
redis.call('set','c','3')
redis.set_repl(redis.REPL_REPLICA)
redis.call('set','e','5')
redis.set_repl(redis.REPL_ALL)
redis.call('set','d','4')"""


def test_set_repl_sends_each_command_where_it_says(hotkv_server_factory, tmp_path):
    """redis.set_repl (the Tcl unit's 'selective replication'): a, d
    everywhere, b nowhere, c to the AOF only, e to the replicas only; the
    primary has them all."""
    primary = start_aof_server(hotkv_server_factory, tmp_path)
    replica = hotkv_server_factory()
    c = RawClient(primary.host, primary.port)
    c.call("CONFIG", "SET", "repl-diskless-sync-delay", "0")
    rep = RawClient(replica.host, replica.port)
    assert rep.call("REPLICAOF", "127.0.0.1", primary.port) == b"+OK\r\n"
    assert wait_for(lambda: b"master_link_status:up" in rep.call("INFO", "replication"), 15)
    c.call("EVAL", SET_REPL, 0)
    c.call("SET", "done", "1")
    assert c.call("MGET", "a", "b", "c", "d", "e") == \
        b"*5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n"
    assert wait_for(lambda: rep.call("GET", "done") == b"$1\r\n1\r\n")
    assert rep.call("MGET", "a", "b", "c", "d", "e") == \
        b"*5\r\n$1\r\n1\r\n$-1\r\n$-1\r\n$1\r\n4\r\n$1\r\n5\r\n"
    logged = [cmd for cmd in aof_commands(tmp_path) if cmd[0] == b"SET"]
    assert [cmd[1] for cmd in logged] == [b"a", b"c", b"d", b"done"]
    rep.call("REPLICAOF", "NO", "ONE")
    c.close()
    rep.close()


LOOP_UNTIL_REPLICA_LEFT = """redis.call('set','x','script value')
while true do
  local info = redis.call('info','replication')
  if (string.match(info, 'connected_slaves:0')) then
    redis.call('set','x',info)
    break
  end
end
return 1"""


def test_replica_leaving_during_busy_script_is_seen_by_the_script(hotkv_server_factory):
    """A client that disconnects while a busy script holds the loop is freed
    at once (Valkey's processEventsWhileBlocked): a script waiting for INFO's
    connected_slaves:0 ends when its replica leaves (the Tcl unit's 'not
    enough good replicas state change during long script' hung there)."""
    primary = hotkv_server_factory(**{"repl-diskless-sync-delay": 0})
    replica = hotkv_server_factory()
    admin = RawClient(primary.host, primary.port, timeout=10)
    rep = RawClient(replica.host, replica.port, timeout=10)
    assert rep.call("REPLICAOF", "127.0.0.1", primary.port) == b"+OK\r\n"
    assert wait_for(lambda: b"connected_slaves:1" in admin.call("INFO", "replication"), 15)
    admin.call("CONFIG", "SET", "min-replicas-to-write", "1")
    # the replica counts as good once its first ACK is in
    assert wait_for(lambda: admin.call("SET", "probe", "1") == b"+OK\r\n", 15)
    admin.call("CONFIG", "SET", "lua-time-limit", "10")
    runner = RawClient(primary.host, primary.port, timeout=10)
    runner.send("EVAL", LOOP_UNTIL_REPLICA_LEFT, 1, "x")
    assert wait_for(lambda: admin.call("PING").startswith(b"-BUSY"))
    assert rep.call("REPLICAOF", "NO", "ONE") == b"+OK\r\n"
    try:
        reply = runner.read_reply()     # (a 10 s socket timeout if it never ends)
    except OSError:
        reply = None
        admin.call("SHUTDOWN", "NOSAVE")   # ends the script, so the server can stop
    assert reply == b":1\r\n"
    assert b"connected_slaves:0" in admin.call("GET", "x")
    for c in (admin, rep, runner):
        c.close()
