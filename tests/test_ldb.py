"""The Lua debugger (SCRIPT DEBUG, hotkv/lua/ldb.py) against valkey-server 8.1.8.

Every session here is driven the same way on hotkv and on the reference
server -- SCRIPT DEBUG, EVAL, the debugger's commands, then whatever comes
until the server closes the connection -- and the transcripts (each reply's
exact bytes) must be equal; the only normalisation is the address in a
function's or thread's name ("function@0x...").  ``redis-cli --ldb`` (when
installed) must print the same session for both servers too.

Every read has a socket timeout (5 s); a session the test leaves is ended by
closing its connection, which makes the debugger let the script run to its end.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from support import RawClient

ADDR = re.compile(rb"0x[0-9a-f]+")

STEPS = ("local a = 1\nlocal t = {1,2,'x'}\nredis.debug('hi', a, t, {k='v'})\n"
         "redis.call('set','k','v')\nlocal b = redis.call('get','k')\nreturn b\n")
FUNC = "local function f(a, b)\n  local c = a + b\n  return c\nend\nlocal r = f(1, 2)\nreturn r\n"
VALUES = ("local a = 1.5\nlocal b = true\nlocal c = nil\nlocal d = redis.call\n"
          "local e = function() end\nlocal f = 1e20\n"
          "local g = 'a\\0b\\1\"\\\\\\r\\t\\a\\b\\255'\n"
          "local h = {{{{{{{{{{{{1}}}}}}}}}}}}\nreturn 1")
LOOP = ("local s = string.rep('x', 300)\nlocal t = {}\nfor i=1,100 do t[i]=i end\n"
        "return 1")
BP = "local x = 1\nredis.breakpoint()\nlocal y = 2\nreturn redis.breakpoint()"

# name -> (script, debugger commands, keys, args); a command given as bytes
# is sent as it is.
SESSIONS = {
    "step-print-list": (STEPS, [("s",), ("s",), ("p",), ("p", "t"), ("p", "zz"), ("p", "KEYS"),
                                ("l",), ("l", "3", "1"), ("w",), ("s",), ("s",), ("t",),
                                ("c",)], (), ()),
    # b -2 then b -4: Valkey's removal moves bytes, not ints, and we do too
    "breakpoints": (STEPS, [("b",), ("b", "4"), ("b", "5", "2"), ("b", "4"), ("b", "99"),
                            ("b", "x"), ("b",), ("b", "-2"), ("b", "-4"), ("b",), ("c",),
                            ("b", "0"), ("c",)], (), ()),
    "help-maxlen-eval-redis": (STEPS, [("h",), ("m",), ("m", "10"), ("m", "0"), ("e", "1+1"),
                                       ("e", "x", "=", "1"), ("e", "error('x')"),
                                       ("r", "set", "a", "b"), ("r", "nope"), ("r", "get"),
                                       ("server", "ping"), ("v", "lrange", "a", "0", "-1"),
                                       ("r", "hset", "h", "f", "v"), ("r", "hgetall", "h"),
                                       ("r", "get", "nokey"),
                                       ("r", "set", "x", *"1 2 3 4 5 6 7 8 9 10 11".split()),
                                       ("zzz",), ("s", "x"), ("a",)], (), ()),
    "values": (VALUES, [("s",)] * 8 + [("p",), ("e", "{1,nil,3}"), ("e", "{[2]=1}"),
                                       ("e", "{1, x=2}"), ("e", "-0.0"), ("e", "1/0"),
                                       ("e", "0/0"), ("e", "2^53"), ("e", "cjson.null"),
                                       ("e", "1", "+", "1"), ("e",), ("e", "local x = 1"),
                                       ("e", "("), ("e", "redis.debug(1)"),
                                       ("e", "redis.breakpoint()"), ("c",)], (), ()),
    "maxlen-trim-loop": (LOOP, [("s",)] * 5 + [("p",), ("r", "set", "big", "y" * 300),
                                               ("r", "get", "big"), ("m", "70"),
                                               ("r", "get", "big"), ("c",)], (), ()),
    "keys-argv": ("return KEYS[1]", [("p", "KEYS"), ("p", "ARGV"), ("p",), ("e", "KEYS"),
                                     ("c",)], ("k1", "k2"), ("a\n1", "2.5")),
    "function-trace": (FUNC, [("s",), ("s",), ("s",), ("t",), ("p",), ("p", "r"), ("s",),
                              ("p",), ("c",)], (), ()),
    "breakpoint-call": (BP, [("c",), ("c",)], (), ()),
    "breakpoint-step": (BP, [("s",)] * 4, (), ()),
    "abort-at-start": (STEPS, [("abort",)], (), ()),
    "compile-error": ("return +", [], (), ()),
    "runtime-error": ("local x = 1\nerror('boom')\n", [("c",)], (), ()),
    "not-resp": ("return 1", [b"hello\r\n"], (), ()),
    "no-args": ("return 1", [b"*0\r\n"], (), ()),
    # only the first command of a read counts: the rest is dropped
    "pipelined": ("return 1", [b"*2\r\n$1\r\np\r\n$1\r\na\r\n*1\r\n$1\r\nw\r\n", ("c",)], (), ()),
    # a NUL ends a command's name, as strcasecmp sees it
    "nul-names": ("return 1", [("hello\0world",), ("hello\0",), ("\0hello",), ("c\0x",)],
                  (), ()),
    "read-only": ("return redis.call('set','a','b')", [("c",)], (), ()),
    # the API's argument errors are logged while stepping (Valkey's luaPushError)
    "api-errors": ("pcall(redis.setresp, 5)\npcall(redis.setresp)\npcall(redis.sha1hex)\n"
                   "pcall(redis.log)\npcall(redis.log, 'x', 'y')\npcall(redis.log, 9, 'y')\n"
                   "pcall(redis.acl_check_cmd)\npcall(redis.acl_check_cmd, 'nope')\n"
                   "pcall(redis.acl_check_cmd, {})\npcall(redis.error_reply)\n"
                   "pcall(redis.status_reply, 1)\npcall(redis.set_repl)\n"
                   "pcall(redis.set_repl, 9)\npcall(redis.call)\npcall(redis.call, {})\n"
                   "return 1\n", [("s",)] * 15 + [("c",)], (), ()),
    "resp3-replies": ("redis.setresp(3)\nredis.call('hset','h','a','1')\n"
                      "redis.call('hgetall','h')\nredis.call('smembers','h')\n"
                      "return redis.call('exists','h')",
                      [("s",), ("s",), ("s",), ("c",)], (), ()),
}


def transcript(host, port, mode, script, commands, keys=(), args=(), ro=False):
    """Every reply of one debugging session, then what came until the close."""
    c = RawClient(host, port, timeout=5)
    try:
        c.call("FLUSHALL")
        out = [c.call("SCRIPT", "DEBUG", mode)]
        out.append(c.call("EVAL_RO" if ro else "EVAL", script, len(keys), *keys, *args))
        for cmd in commands:
            if isinstance(cmd, bytes):
                c.send_raw(cmd)
            else:
                c.send(*cmd)
            out.append(c.read_reply())
        rest = c.buf
        for _ in range(100):    # the session's end: <endsession>, the reply, the close
            chunk = c.sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        out.append(rest)
        return [ADDR.sub(b"0xADDR", x) for x in out]
    finally:
        c.close()


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_sync_session_matches_valkey(server, ref_server, name):
    script, commands, keys, args = SESSIONS[name]
    ro = name == "read-only"
    ours = transcript(server.host, server.port, "sync", script, commands, keys, args, ro)
    theirs = transcript(ref_server.host, ref_server.port, "sync", script, commands, keys,
                        args, ro)
    assert ours == theirs
    assert ours[-1], "the session ends with the EVAL's reply"


def test_sync_session_keeps_changes_and_yes_rolls_back(server, ref_server):
    script = "redis.call('set','forked','1')\nreturn redis.call('get','forked')"
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        for mode, kept in (("yes", b"$-1\r\n"), ("sync", b"$1\r\n1\r\n")):
            got = transcript(host, port, mode, script, [("s",), ("s",)])
            assert got[-1].endswith(b"$1\r\n1\r\n"), got
            c = RawClient(host, port)
            assert c.call("GET", "forked") == kept, (port, mode)
            c.close()
    yes = transcript(server.host, server.port, "yes", script, [("s",), ("s",)])
    assert yes == transcript(ref_server.host, ref_server.port, "yes", script, [("s",), ("s",)])


def _script_debug_errors(host, port):
    out = []
    c = RawClient(host, port)
    out += [c.call("SCRIPT", "DEBUG", "sync"), c.call("EVALSHA", "a" * 40, 0),
            c.call("EVALSHA", "a", 0), c.call("SCRIPT", "DEBUG", "maybe"),
            c.call("SCRIPT", "DEBUG", "no"), c.call("EVAL", "return 1", 0),
            c.call("EVAL", "return redis.breakpoint()", 0),
            c.call("EVAL", "redis.debug('x') return 2", 0)]
    c.send_raw(b"*1\r\n$4\r\nPING\r\n*3\r\n$6\r\nSCRIPT\r\n$5\r\nDEBUG\r\n$3\r\nyes\r\n")
    out += [c.read_reply(), c.read_reply()]
    out += [c.call("MULTI"), c.call("SCRIPT", "DEBUG", "yes"), c.call("EXEC")]
    c.close()
    return out


def test_script_debug_refusals_match_valkey(server, ref_server):
    ours = _script_debug_errors(server.host, server.port)
    assert ours == _script_debug_errors(ref_server.host, ref_server.port)
    assert ours[1] == b"-ERR Please use EVAL instead of EVALSHA for debugging\r\n"


def _client_leaves(host, port):
    """The client goes away at a stop: the script runs to its end."""
    c = RawClient(host, port, timeout=5)
    c.call("FLUSHALL")
    c.call("SCRIPT", "DEBUG", "sync")
    first = c.call("EVAL", "local x = 1\nredis.call('set','left','yes')\nreturn x", 0)
    c.close()
    admin = RawClient(host, port, timeout=5)
    got = admin.call("GET", "left")     # served once the session is over
    admin.close()
    return first, got


def test_client_leaving_lets_the_script_finish(server, ref_server):
    ours = _client_leaves(server.host, server.port)
    assert ours == _client_leaves(ref_server.host, ref_server.port)
    assert ours[1] == b"$3\r\nyes\r\n"


def test_debugger_server_command_with_many_arguments(server, ref_server):
    """The Tcl suite's 'lua stack overflow' case: 100 arguments to an unknown command."""
    cmd = b"*101\r\n$5\r\nredis\r\n" + b"$4\r\ntest\r\n" * 100
    ours = transcript(server.host, server.port, "sync", "return 'hello'", [cmd, ("c",)])
    theirs = transcript(ref_server.host, ref_server.port, "sync", "return 'hello'",
                        [cmd, ("c",)])
    assert ours == theirs
    assert b"Unknown command called from script" in ours[2]


CLI_SCRIPT = ('local a = 1\nredis.call("set", KEYS[1], ARGV[1])\nredis.debug(a, KEYS)\n'
              'return redis.call("get", KEYS[1])\n')


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="needs redis-cli (redis-tools)")
@pytest.mark.parametrize("sync", [False, True])
def test_redis_cli_ldb_transcript_matches_valkey(server, ref_server, tmp_path, sync):
    path = tmp_path / "s.lua"
    path.write_text(CLI_SCRIPT)

    def run(port):
        extra = ["--ldb-sync-mode"] if sync else ["--ldb"]
        p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *extra, "--eval",
                            str(path), "k1", ",", "v1"], input="s\np\nb 4\nc\nc\n",
                           capture_output=True, text=True, timeout=30)
        return p.stdout

    ours = run(server.port)
    assert ours == run(ref_server.port)
    assert "<debug> line 3: 1, {\"k1\"}" in ours and "v1" in ours


def _timeout_session(host, port):
    admin = RawClient(host, port)
    admin.call("CONFIG", "SET", "lua-time-limit", "100")
    try:
        return transcript(host, port, "sync", "local i = 0\nwhile true do i = i + 1 end\n",
                          [("c",), ("a",)])
    finally:
        admin.call("CONFIG", "SET", "lua-time-limit", "5000")
        admin.close()


def test_session_stops_a_script_past_its_time_limit(server, ref_server):
    """After 'continue', a script running past lua-time-limit stops on its own
    ("timeout reached, infinite loop?") and can be aborted."""
    ours = _timeout_session(server.host, server.port)
    assert ours == _timeout_session(ref_server.host, ref_server.port)
    assert b"stop reason = timeout reached, infinite loop?" in ours[2]
