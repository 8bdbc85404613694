"""The script path's own nested call (hotkv.core.dispatch.script_call)
against dispatch.call's nested path, and redis.call's quick path (which
uses it) against the general path, for what a script's command does
besides its reply: INFO commandstats / errorstats, tot-cmds, propagation
(a recording sink, not the default None that propagates nothing), client
tracking of the script's caller, MONITOR's "lua" lines and keyspace
notifications.  tests/test_lua_quick.py compares the replies at volume;
this file the effects."""
from __future__ import annotations

import random
import re
import types

import pytest

from hotkv.clients.client import Client
from hotkv.core.dispatch import ENCODED, call, process_commands, script_call
from hotkv.lua import calls
from hotkv.lua.engine import engine
from hotkv.protocol.resp import RequestParser, encode
from hotkv.server import Server
from test_lua_quick import SETUP, Recorder, _cmd, _script

# Commands as a script's calls, every reply shape the handlers give
# (strings, integers, nil, statuses, flat and nested arrays, maps, sets,
# doubles, stream entries, errors, null arrays), writes that propagate and
# notify, reads the caller's tracking remembers.
ARGVS = [
    ("PING",), ("PING", "x"), ("GET", "str"), ("GET", "nokey"), ("INCR", "n"), ("INCR", "str"),
    ("SET", "k", "v"), ("SET", "k", "w", "GET"), ("APPEND", "k", "7"), ("HGETALL", "h"),
    ("HMGET", "h", "f1", "nope", "f2"), ("LRANGE", "l", "0", "-1"), ("LRANGE", "nokey", "0", "1"),
    ("SMEMBERS", "s"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZSCORE", "z", "b"),
    ("ZINCRBY", "z", "1", "a"), ("TYPE", "h"), ("EXISTS", "str", "nokey"),
    ("MGET", "str", "nokey", "n"), ("XRANGE", "x", "-", "+"), ("OBJECT", "ENCODING", "l"),
    ("CONFIG", "GET", "maxmemory"), ("HINCRBYFLOAT", "h", "n", "0.5"), ("LPUSH", "q", "a", "b"),
    ("LPOP", "q", "5"), ("LPOP", "q", "5"), ("RPOP", "q"), ("EXPIRE", "nokey", "10"),
    ("SET", "e", "1", "PX", "100000"), ("EXPIRE", "e", "100"), ("GETDEL", "k"),
    ("HSET", "h", "f3", "3"), ("LREM", "l", "0", "7"), ("DEL", "k", "e"), ("SADD", "s", "9"),
    ("ZRANDMEMBER", "nokey"), ("LPOS", "l", "8"), ("DBSIZE",), ("ECHO", ""),
    ("INCRBYFLOAT", "n", "1.5"), ("SINTERCARD", "1", "s"), ("HELLO",), ("LPUSH", "str", "x"),
    ("COPY", "str", "str2", "REPLACE"), ("XADD", "x", "MAXLEN", "5", "3-1", "f", "1"),
]


class Side:
    """A server on a frozen clock with a recording AOF sink, a RESP3 caller tracking its
    reads, a MONITOR client and a keyspace-notification subscriber."""

    def __init__(self, quick: bool = True):
        self.server = Server({"save": ""})
        self.server.clock.freeze(1_800_000_000.25)     # (PX becomes the same PXAT)
        self.server.aof = self.sink = Recorder()
        engine(self.server).quick_calls = quick
        self.parser = RequestParser()
        self.client = Client(self.server)
        self.monitor = Client(self.server)
        self.subscriber = Client(self.server)
        for c in (self.client, self.monitor, self.subscriber):    # (as a connection does)
            self.server.clients[c.id] = c
        for c, args in ((self.client, ("HELLO", "3")), (self.client, ("CLIENT", "TRACKING", "ON")),
                        (self.client, ("CONFIG", "SET", "notify-keyspace-events", "KEA")),
                        (self.subscriber, ("PSUBSCRIBE", "__key*__:*")),
                        (self.monitor, ("MONITOR",))):
            self.run(*args, client=c)
        for cmd in SETUP:
            self.run(*cmd)

    def run(self, *args, client=None) -> bytes:
        c = client or self.client
        commands, _ = self.parser.feed(_cmd(*args))
        process_commands(c, commands)
        out = b"".join(c.out)
        c.out.clear()
        return out

    def effects(self) -> tuple:
        """What the others saw since the last look (MONITOR's times blanked)."""
        mon = re.sub(rb"\+\d+\.\d+ ", b"+T ", b"".join(self.monitor.out))
        sub = b"".join(self.subscriber.out)
        self.monitor.out.clear()
        self.subscriber.out.clear()
        fed = self.sink.fed
        self.sink.fed = []
        return mon, sub, fed

    def stats(self) -> bytes:
        info = self.run("INFO", "commandstats")
        lines = [ln.split(b",usec")[0] + b"," + ln.split(b",", 3)[-1]
                 for ln in info.split(b"\r\n") if ln.startswith(b"cmdstat_")]
        return b"\n".join(lines) + self.run("INFO", "errorstats") + \
            self.run("INFO", "stats").split(b"total_commands_processed:")[1].split(b"\r\n")[0]


def _lookup(server, argv):
    cmd = server.command_table[argv[0].lower()]
    if cmd.subcommands is not None:
        cmd = cmd.subcommands[argv[1].lower()]
    return cmd


@pytest.mark.parametrize("resp3", [False, True])
def test_script_call_does_what_call_does_nested(resp3):
    """Each command run the two ways inside a command of the caller's (as
    a script's runs inside its EVAL): the reply (the value script_call
    hands back, encoded here), and every effect, the same."""
    sides = Side(), Side()
    raw = 0
    for side, nested in zip(sides, (call, script_call)):
        server = side.server
        fake = Client(server, fake=True)
        fake.db = side.client.db
        fake.authenticated = True
        fake.resp3 = resp3
        replies = []
        for args in ARGVS * 3:
            argv = [a.encode() for a in args]
            cmd = _lookup(server, argv)
            fake.out = []
            server.current_client = side.client
            try:
                reply = nested(fake, cmd, argv)
            finally:
                server.current_client = None
            if nested is call or reply is ENCODED:
                data = b"".join(fake.out)
            else:
                raw += 1
                out: list = []
                encode(reply, out, resp3)
                data = b"".join(out)
            replies.append((args, data, fake.last_cmd, list(server.prop_pending)))
            server.flush_propagation()
        side.replies = replies
        side.ncmds = side.client.ncmds
    a, b = sides
    assert raw > len(ARGVS) * 3 // 2      # (most came back as values)
    for x, y in zip(a.replies, b.replies):
        assert x == y
    assert a.ncmds == b.ncmds
    assert a.effects() == b.effects()
    assert a.stats() == b.stats()
    # The caller remembered the keys its reads served (its tracking table).
    assert a.server.tracking.table == b.server.tracking.table
    assert b"str" in a.server.tracking.table


def test_quick_path_effects_match_the_general_path():
    """Generated scripts (tests/test_lua_quick.py's) from a RESP3 caller
    tracking its keys, with a MONITOR and a keyspace subscriber: replies
    with their invalidation pushes, MONITOR lines, notifications,
    propagation and stats the same with the quick path on and off."""
    quick, general = Side(True), Side(False)
    rng = random.Random(3333)
    for i in range(300):
        resp3 = rng.random() < 0.3
        script = _script(rng, resp3)
        evalcmd = rng.choice(["EVAL", "EVAL", "EVAL_RO"])
        a, b = quick.run(evalcmd, script, "0"), general.run(evalcmd, script, "0")
        assert a == b, (script, a[:300], b[:300])
        for cmd in (("SET", "n", "10"), ("DEL", "q"), ("SET", "str", "hello"), ("GET", "str")):
            assert quick.run(*cmd) == general.run(*cmd)
        assert quick.effects() == general.effects(), script
    assert {b"INCR", b"GET", b"LRANGE", b"HGETALL"} <= set(engine(quick.server)._quick_rw)
    assert quick.run("DEBUG", "DIGEST") == general.run("DEBUG", "DIGEST")
    assert quick.stats() == general.stats()


def test_effects_are_seen():
    """The comparisons above mean something: the sides do record a
    script's propagation, MONITOR lines, notifications and invalidations."""
    side = Side()
    side.run("GET", "str")
    side.effects()
    side.run("EVAL", "redis.call('GET', 'str') redis.call('INCR', 'n') "
                     "return redis.call('SET', 'str', 'x')", "0")
    mon, sub, fed = side.effects()
    assert b'[0 lua] "INCR" "n"' in mon and b'[0 lua] "GET" "str"' in mon
    assert b"__keyspace@0__:n" in sub and b"incrby" in sub
    assert fed and [0, [b"INCR", b"n"]] in [[d, a] for unit in fed for d, a in unit]
    side.run("GET", "str")
    out = side.run("EVAL", "return redis.call('SET', 'str', 'y')", "0")
    assert b"invalidate" in out


def test_script_call_against_call_through_scripts(monkeypatch):
    """Generated scripts on a server whose calls go through script_call
    (quick path on) and one whose calls go through dispatch.call and the
    RESP reader (quick path off, script_call replaced by call for it), with
    the gates (maxmemory set, over it or not: a denyoom command before the
    script's first write takes the general path; an ACL restriction: every
    call does) and redis.set_repl in between: replies, effects and stats
    the same."""
    new, ref = Side(True), Side(False)
    real = calls.script_call

    def by_server(fake, cmd, argv):
        if fake.server is ref.server:
            call(fake, cmd, argv)
            return ENCODED
        return real(fake, cmd, argv)
    monkeypatch.setattr(calls, "script_call", by_server)

    def retargeted(self, fake, cmd, argv):
        """set_repl's path as it was before script_call (through call())."""
        server, run = self.server, self.run
        mark = len(server.prop_pending)
        call(fake, cmd, argv)
        pending = server.prop_pending
        if len(pending) > mark:
            if run.repl == 0:
                del pending[mark:]
            else:
                run.targets = run.targets or {}
                for i in range(mark, len(pending)):
                    run.targets[i] = run.repl
        return ENCODED
    eng = engine(ref.server)
    eng._call_retargeted = types.MethodType(retargeted, eng)
    rng = random.Random(333)
    gates = [(), ("CONFIG", "SET", "maxmemory", "1gb"), ("CONFIG", "SET", "maxmemory", "1"),
             ("CONFIG", "SET", "maxmemory", "0"), ("ACL", "SETUSER", "default", "-lrange"),
             ("ACL", "SETUSER", "default", "+@all")]
    for i in range(280):
        if i % 40 == 0:
            gate = gates[i // 40 % len(gates)]
            if gate:
                assert new.run(*gate) == ref.run(*gate)
        script = _script(rng, rng.random() < 0.3)
        if rng.random() < 0.2:
            script = script.replace("local out = {}", "local out = {} redis.set_repl(redis.REPL_%s)"
                                    % rng.choice(["NONE", "AOF", "REPLICA", "ALL"]), 1)
        evalcmd = rng.choice(["EVAL", "EVAL", "EVAL_RO"])
        a, b = new.run(evalcmd, script, "0"), ref.run(evalcmd, script, "0")
        assert a == b, (script, a[:300], b[:300])
        for cmd in (("SET", "n", "10"), ("DEL", "q"), ("SET", "str", "hello"), ("GET", "str")):
            assert new.run(*cmd) == ref.run(*cmd)
        assert new.effects() == ref.effects(), script
    assert new.run("DEBUG", "DIGEST") == ref.run("DEBUG", "DIGEST")
    assert new.stats() == ref.stats()


def test_set_repl_calls_reply_as_they_did():
    """A script narrowed by redis.set_repl takes the general path through
    _call_retargeted: its calls' replies and what propagates where."""
    side = Side()
    side.effects()
    for mode in ("NONE", "AOF", "REPLICA", "ALL"):
        out = side.run("EVAL", "redis.set_repl(redis.REPL_%s) return {redis.call('GET', 'str'), "
                               "redis.pcall('HGET', 'h', 'f1'), redis.call('INCR', 'n'), "
                               "redis.call('LRANGE', 'l2', 0, -1), redis.call('SET', 'k', 'v'), "
                               "redis.pcall('GET', 'nokey')}" % mode, "0")
        n = {"NONE": 11, "AOF": 12, "REPLICA": 13, "ALL": 14}[mode]
        # (as before script_call; the caller speaks RESP3: false is a null)
        assert out == (b"*6\r\n$5\r\nhello\r\n$2\r\nv1\r\n:%d\r\n*3\r\n$1\r\na\r\n$0\r\n\r\n"
                       b"$1\r\nc\r\n+OK\r\n_\r\n" % n)
        fed = side.effects()[2]     # (a sink of neither kind: taken as the replicas')
        assert bool(fed) == (mode in ("REPLICA", "ALL"))
