"""redis.call's quick path (hotkv.lua.calls, ``CallPath._lua_call``) against
its general path, at volume and in process: two servers run the same
generated scripts, one with the quick path on (the default) and one with it
off (``Engine.quick_calls = False``: every call makes every check and takes
the general reply reader).  Their replies, their datasets (DEBUG DIGEST),
their command and error statistics and their propagated effects must be the
same: thousands of calls, every reply shape (integers, bulk strings, nil,
status, errors, flat and nested arrays, RESP3 maps / sets / doubles /
booleans / nulls), numbers as arguments, wrong arity, unknown and refused
commands, read-only scripts, redis.pcall and pcall, big replies either side
of the 7,000-item limit.  The reference comparison (valkey-server) of the
same reply shapes is tests/test_lua_calls.py."""
from __future__ import annotations

import random

from hotkv.clients.client import Client
from hotkv.core.dispatch import process_commands
from hotkv.lua.engine import engine
from hotkv.protocol.resp import RequestParser
from hotkv.server import Server
from test_lua_calls import DESCRIBE, SETUP as CALLS_SETUP

# The value describer and the dataset of tests/test_lua_calls.py, plus a list
# long enough for arrays past any chunking.
SETUP = CALLS_SETUP + [("RPUSH", "big", *[str(i) for i in range(7005)])]

# (a call's arguments, in Lua) -- every reply shape, numbers, errors
CALLS = [
    "'GET', 'str'", "'GET', 'nokey'", "'get', 'str'", "'INCR', 'n'", "'INCRBY', 'n', 3",
    "'INCRBY', 'n', -2.0", "'INCRBYFLOAT', 'n', 1.5", "'SET', 'k', 'v'", "'SET', 'k', 12.25",
    "'SET', 'k', 1e300", "'SET', 'k', -0.0", "'SET', 'k', 2^53", "'APPEND', 'k', 7",
    "'PING'", "'PING', 'x'", "'ECHO', ''", "'DEL', 'k'", "'EXISTS', 'str', 'nokey', 'h'",
    "'LRANGE', 'l', 0, -1", "'LRANGE', 'l', 0, 4", "'LRANGE', 'nokey', 0, -1",
    "'LRANGE', 'l2', 0, -1",
    "'LPUSH', 'q', 'a', 'b'", "'RPOP', 'q'", "'LPOP', 'q', 5", "'LREM', 'q', 0, 'a'",
    "'HGETALL', 'h'", "'HMGET', 'h', 'f1', 'nope', 'f2'", "'HSET', 'h', 'f3', 3",
    "'HGET', 'h', 'f1'", "'HINCRBYFLOAT', 'h', 'n', '0.5'", "'HLEN', 'h'",
    "'SMEMBERS', 's'", "'SADD', 's', 9", "'SISMEMBER', 's', 'x'",
    "'ZRANGE', 'z', 0, -1, 'WITHSCORES'", "'ZSCORE', 'z', 'b'", "'ZADD', 'z', 4.5, 'd'",
    "'ZINCRBY', 'z', 1, 'a'", "'ZRANGEBYSCORE', 'z', '-inf', '+inf'",
    "'XRANGE', 'x', '-', '+'", "'XLEN', 'x'", "'TYPE', 'h'", "'MGET', 'str', 'nokey', 'n'",
    "'OBJECT', 'ENCODING', 'l'", "'ZRANDMEMBER', 'nokey'", "'LPOS', 'l', '7'",
    "'INCR', 'str'", "'NOSUCHCOMMAND'", "'GET'", "'GET', 'a', 'b'", "'LPUSH', 'str', 'x'",
    "'SINTERCARD', 1, 's'", "'EXPIRE', 'nokey', 10", "'CONFIG', 'GET', 'maxmemory'",
    "'DBSIZE'", "'SETRANGE', 'k', 0, ''", "'SUBSCRIBE', 'ch'", "'MULTI'",
    "'GET', {}", "'GET', true", "'HELLO'", "'PUBLISH', 'ch', 'm'", "'SELECT', 1",
    "'COPY', 'str', 'str2', 'REPLACE'", "'GETDEL', 'str2'", "'SET', 'e', 1, 'PX', 100000",
    "'EXISTS', 'e'", "'BLPOP', 'nokey', 0", "'XADD', 'x', 'MAXLEN', 5, '3-1', 'f', 1",
]


class Recorder:
    """A propagation sink: what each flush handed it."""

    def __init__(self):
        self.fed = []

    def feed(self, entries):
        self.fed.append([(db, list(argv)) for db, argv in entries])


def _cmd(*args) -> bytes:
    a = [x if isinstance(x, bytes) else str(x).encode() for x in args]
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%b\r\n" % (len(x), x) for x in a)


class _Side:
    def __init__(self, quick: bool):
        self.server = Server({"save": ""})
        # What the scripts propagate goes to a recording sink (with no AOF or
        # replica the dispatcher propagates nothing, and the comparison of
        # the two sides' effects compared two empty lists); the clocks are
        # frozen at one instant (PX becomes the same PXAT on both).
        self.server.clock.freeze(1_800_000_000.25)
        self.server.aof = self.sink = Recorder()
        self.client = Client(self.server)
        self.parser = RequestParser()
        engine(self.server).quick_calls = quick
        self.propagated: list = []

    def run(self, *args) -> bytes:
        commands, _ = self.parser.feed(_cmd(*args))
        process_commands(self.client, commands)
        out = b"".join(self.client.out)
        self.client.out.clear()
        for entries in self.sink.fed:
            self.propagated.extend(entries)
        self.sink.fed.clear()
        return out


def _script(rng: random.Random, resp3: bool) -> str:
    body = [DESCRIBE, "local out = {}"]
    if resp3:
        body.append("redis.setresp(3)")
    for _ in range(rng.randint(1, 8)):
        call = rng.choice(CALLS)
        fn = rng.choice(["redis.pcall", "redis.call", "pcall", "loop"])
        if fn == "pcall":
            body.append("local ok, v = pcall(redis.call, %s) out[#out + 1] = tostring(ok) .. "
                        "'|' .. d(v, 0)" % call)
        elif fn == "loop":      # the same call again and again (the path's memo)
            body.append("for i = 1, 5 do out[#out + 1] = d(redis.pcall(%s), 0) end" % call)
        else:
            body.append("out[#out + 1] = d(%s(%s), 0)" % (fn, call))
    if rng.random() < 0.2:          # a script that fails on a call, or returns one
        body.append("return redis.call(%s)" % rng.choice(CALLS))
    body.append("return out")
    return "\n".join(body)


def _stats(side: _Side) -> bytes:
    info = side.run("INFO", "commandstats")
    errs = side.run("INFO", "errorstats")
    # (the usec figures differ from run to run)
    lines = [ln.split(b",usec")[0] + b"," + ln.split(b",", 3)[-1]
             for ln in info.split(b"\r\n") if ln.startswith(b"cmdstat_")]
    return b"\n".join(lines) + errs


def test_quick_path_matches_the_general_path_at_volume():
    quick, general = _Side(True), _Side(False)
    for cmd in SETUP:
        assert quick.run(*cmd) == general.run(*cmd)
    rng = random.Random(33)
    calls = 0
    for i in range(500):
        resp3 = rng.random() < 0.3
        script = _script(rng, resp3)
        calls += script.count("redis.") - resp3
        evalcmd = rng.choice(["EVAL", "EVAL", "EVAL_RO"])
        a, b = quick.run(evalcmd, script, "0"), general.run(evalcmd, script, "0")
        assert a == b, (script, a[:300], b[:300])
        for cmd in (("SET", "n", "10"), ("DEL", "q"), ("SET", "str", "hello")):
            quick.run(*cmd)
            general.run(*cmd)
    assert calls > 2000
    # (the comparison means something: the quick path took these by name)
    assert {b"INCR", b"GET", b"LRANGE", b"HGETALL"} <= set(engine(quick.server)._quick_rw)
    assert b"INCR" not in engine(quick.server)._quick_ro
    assert not engine(general.server)._quick_rw
    assert quick.run("DEBUG", "DIGEST") == general.run("DEBUG", "DIGEST")
    assert _stats(quick) == _stats(general)
    assert quick.propagated == general.propagated and quick.propagated, len(quick.propagated)


def test_quick_path_big_replies():
    """Arrays either side of the 7,000 items a reply passes to Lua as values,
    nested, with nils, in RESP2 and RESP3, many times."""
    quick, general = _Side(True), _Side(False)
    for n in (6999, 7000, 7001, 20000):
        for side in (quick, general):
            side.run("DEL", "big")
            for start in range(0, n, 1000):
                side.run("RPUSH", "big", *[str(i) for i in range(start, min(n, start + 1000))])
        for resp in (2, 3):
            body = ("redis.setresp(%d) local r = {} for i = 1, 5 do "
                    "local t = redis.call('LRANGE', 'big', 0, -1) "
                    "local m = redis.call('HMGET', 'nokey', unpack({'a', 'b', 'c'})) "
                    "r[#r + 1] = {#t, t[1], t[#t], t[7000], t[7001], #m, m[1] == false} end "
                    "r[#r + 1] = redis.call('LRANGE', 'big', 0, -1) return r" % resp)
            assert quick.run("EVAL", body, 0) == general.run("EVAL", body, 0)
    assert _stats(quick) == _stats(general)


def test_quick_path_keeps_evalsha_scripts_and_readonly_checks():
    """The same script by EVALSHA many times (the commands memo filled),
    then its read-only twin: a write refused every time, as on the general
    path."""
    quick, general = _Side(True), _Side(False)
    body = ("local n = 0 for i = 1, 20 do n = n + redis.call('INCR', KEYS[1]) end "
            "redis.call('HSET', KEYS[2], 'f', ARGV[1], 'g', 3) "
            "redis.call('LPUSH', KEYS[3], ARGV[1], 1.5) "
            "return {n, redis.call('HGETALL', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1)}")
    sha_q = quick.run("SCRIPT", "LOAD", body)
    assert sha_q == general.run("SCRIPT", "LOAD", body)
    sha = sha_q.split(b"\r\n")[1]
    for i in range(300):
        args = ("EVALSHA", sha, 3, "c", "h", "l", "v%d" % i)
        assert quick.run(*args) == general.run(*args)
        ro = ("EVALSHA_RO", sha, 3, "c", "h", "l", "v")
        assert quick.run(*ro) == general.run(*ro)
    ro_body = "#!lua flags=no-writes\nreturn redis.call('INCR', KEYS[1])"
    for _ in range(50):
        assert quick.run("EVAL", ro_body, 1, "c") == general.run("EVAL", ro_body, 1, "c")
    assert quick.run("DEBUG", "DIGEST") == general.run("DEBUG", "DIGEST")
    assert _stats(quick) == _stats(general)
    assert quick.propagated == general.propagated and quick.propagated, len(quick.propagated)


def test_quick_path_follows_gates_set_during_the_run():
    """Gates the quick path leaves to the general one: ACL restrictions,
    maxmemory (OOM), set_repl, and commands allowed after DEBUG
    SET-DISABLE-DENY-SCRIPTS -- on or off between scripts."""
    quick, general = _Side(True), _Side(False)
    script = ("redis.call('SET', KEYS[1], ARGV[1]) "
              "return {redis.pcall('INCR', KEYS[1]), redis.pcall('GET', KEYS[1])}")
    steps = [("EVAL", script, 1, "k", "5"),
             ("ACL", "SETUSER", "default", "-incr"),
             ("EVAL", script, 1, "k", "6"),
             ("ACL", "SETUSER", "default", "+incr"),
             ("EVAL", script, 1, "k", "7"),
             ("CONFIG", "SET", "maxmemory", "1"),
             ("EVAL", script, 1, "k", "8"),
             ("EVAL", "return redis.pcall('GET', KEYS[1])", 1, "k"),
             ("CONFIG", "SET", "maxmemory", "0"),
             ("EVAL", "redis.set_repl(redis.REPL_NONE) redis.call('INCR', KEYS[1]) "
                      "redis.set_repl(redis.REPL_ALL) return redis.call('INCR', KEYS[1])",
              1, "k"),
             ("EVAL", "return redis.pcall('CONFIG', 'GET', 'maxmemory')", 0),
             ("DEBUG", "SET-DISABLE-DENY-SCRIPTS", 1),
             ("EVAL", "return redis.pcall('CONFIG', 'GET', 'maxmemory')", 0),
             ("DEBUG", "SET-DISABLE-DENY-SCRIPTS", 0),
             ("EVAL", "return redis.pcall('CONFIG', 'GET', 'maxmemory')", 0)]
    for step in steps * 3:
        assert quick.run(*step) == general.run(*step), step
    assert _stats(quick) == _stats(general)
    assert quick.propagated == general.propagated and quick.propagated, len(quick.propagated)
