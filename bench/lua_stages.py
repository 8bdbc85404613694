"""Where a script's redis.call spends its time (issue 33): in-process CPU,
no sockets, best of 5 x N (time.process_time), per stage:

* the scripts of bench/run.py's lua scenario: EVALSHA of ``return 1`` (the
  EVALSHA command, the run's set-up, entering and leaving Lua), of 3 calls
  (HSET, LREM, DEL) and of 10 INCR calls, per script;
* the crossing: 10 calls of ``redis.call('GET', 'nokey')`` on a server
  whose engine's ``_lua_call`` does nothing -- the prelude's wrapper,
  lupa's call into Python and back, the bound method (before issue 33's
  third pass: ``redis.setresp(2)``, a guarded callable, printed too);
  and, in a bare Lua state, lupa's call of a Python no-op with two string
  arguments, directly and through a wrapper shaped as the prelude's
  redis.call one (``lupa`` and ``wrapped`` below);
* each command through redis.call (10 calls a script), against the same
  command run by ``dispatch.call`` on a fake client, as a client's command
  (``top``) and nested, as a script's command runs inside its EVALSHA
  (``nested``: the caller set as ``server.current_client``), and by
  ``dispatch.script_call`` (``script``, when the tree has it: the script
  path's own nested call, its reply not encoded);
* the rest: redis.call minus the crossing minus the nested dispatch.call
  (script_call where the tree has it) --
  the script-side checks (arity, noscript, ACL, read-only, OOM...), the
  argument and reply conversions.

    python bench/lua_stages.py [--n 20000] [--config maxmemory=1gb]

Run against two trees with PYTHONPATH pointing at each (the harness reads
whatever hotkv it imports).
"""

from __future__ import annotations

import argparse
import time

from lupa import lua51

from hotkv.clients.client import Client
from hotkv.core import dispatch
from hotkv.core.dispatch import call, process_commands
from hotkv.core.registry import lookup
from hotkv.lua.calls import CallPath
from hotkv.protocol.resp import RequestParser
from hotkv.server import Server

# bench/run.py's LUA_SCRIPTS
SCRIPTS = {
    "EVALSHA 0 calls": ("return 1", 1),
    "EVALSHA 3 calls": ("redis.call('HSET', KEYS[1], 'f', ARGV[1]) "
                        "redis.call('LREM', KEYS[2], 0, ARGV[1]) "
                        "redis.call('DEL', KEYS[3]) return 1", 3),
    "EVALSHA 10 calls": ("for i = 1, 10 do redis.call('INCR', KEYS[1]) end return 1", 1),
}

# The prelude's redis.call wrapper, as it was when this harness was written
# (hotkv/lua/prelude.lua, host_long and call_reply), around a Python no-op.
WRAPPED = """
local f, n = ...
local STATUS, ARRAY, FAIL, LONG = {}, {}, {}, 7000
local select = select
local function call_reply(r, ...)
  if r == STATUS then return {ok = (...)} end
  if r == ARRAY then return {...} end
  if r == FAIL then local _, e = ... error(e, 0) end
  return r
end
local w = function(...)
  local c = select('#', ...)
  if c < LONG then return call_reply(f(...)) end
end
return function(direct)
  if direct then for i = 1, n do f('GET', 'key') end
  else for i = 1, n do w('GET', 'key') end end
end
"""


def _cmd(*a) -> bytes:
    a = [x if isinstance(x, bytes) else str(x).encode() for x in a]
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%b\r\n" % (len(x), x) for x in a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                    help="a server setting (maxmemory=1gb: every call takes the general path)")
    opts = ap.parse_args()
    n = opts.n // 100 * 100
    config = {"save": ""}
    config.update(kv.split("=", 1) for kv in opts.config)
    class Target:
        def __init__(self):
            self.server = Server(dict(config))
            self.client = Client(self.server)
            self.parser = RequestParser()

        def run(self, data):
            commands, _ = self.parser.feed(data)
            process_commands(self.client, commands)
            out = b"".join(self.client.out)
            self.client.out.clear()
            return out

    target = Target()
    server, client, run = target.server, target.client, target.run

    def best(f) -> float:
        runs = []
        for _ in range(5):
            t = time.process_time()
            f()
            runs.append((time.process_time() - t) / n * 1e6)
        return min(runs)

    def per_script(body: str, nkeys: int = 1, on=target) -> float:
        run = on.run
        sha = run(_cmd("SCRIPT", "LOAD", body)).split(b"\r\n")[1]
        keys = ["lua:%s:%d" % (sha[:8].decode(), i) for i in range(nkeys)]
        batch = _cmd("EVALSHA", sha, nkeys, *keys, "job") * 100
        reply = run(batch)
        assert b"-" not in reply[:1] and b"\r\n-" not in reply, reply[:200]
        return best(lambda: [run(batch) for _ in range(n // 100)])

    run(_cmd("HSET", "h", "f", "v"))
    for name, (body, nkeys) in SCRIPTS.items():
        print(f"{name:38} {per_script(body, nkeys):6.2f} us a script")
    empty = per_script("return 1")
    setresp = (per_script("for i = 1, 10 do redis.setresp(2) end return 1") - empty) / 10
    print(f"{'crossing (redis.setresp(2))':38} {setresp:6.2f} us a call")
    # redis.call's own crossing: a server whose engine's _lua_call does
    # nothing (the prelude's wrapper, lupa both ways, the bound method)
    saved = CallPath._lua_call
    CallPath._lua_call = lambda self, *args: False
    try:
        crossing = (per_script("for i = 1, 10 do redis.call('GET', 'nokey') end return 1",
                               on=Target()) - per_script("return 1", on=Target())) / 10
    finally:
        CallPath._lua_call = saved
    print(f"{'crossing (redis.call of a no-op)':38} {crossing:6.2f} us a call")
    lua = lua51.LuaRuntime(encoding=None)
    bare = lua.execute(WRAPPED, lambda *a: None, n)
    print(f"{'lupa: Lua -> Python no-op, 2 args':38} {best(lambda: bare(True)):6.2f} us a call"
          f"   wrapped {best(lambda: bare(False)):5.2f}")
    fake = Client(server, fake=True)
    script_call = getattr(dispatch, "script_call", None)
    for name, argv, lua in (("PING", [b"PING"], "'PING'"),
                            ("GET (nil)", [b"GET", b"nokey"], "'GET', 'nokey'"),
                            ("INCR", [b"INCR", b"n"], "'INCR', 'n'"),
                            ("HGET", [b"HGET", b"h", b"f"], "'HGET', 'h', 'f'"),
                            ("LRANGE (3 items)", [b"LRANGE", b"l3", b"0", b"-1"],
                             "'LRANGE', 'l3', 0, -1")):
        if name.startswith("LRANGE"):
            run(_cmd("RPUSH", "l3", "a", "b", "c"))
        scripted = (per_script("for i = 1, 10 do redis.call(%s) end return 1" % lua)
                    - empty) / 10
        command = lookup(argv[0])

        def direct(command=command, argv=argv):
            for _ in range(n):
                fake.out = []
                call(fake, command, list(argv))

        def nested(command=command, argv=argv, f=call):
            server.current_client = client
            try:
                for _ in range(n):
                    fake.out = []
                    f(fake, command, list(argv))
            finally:
                server.current_client = None
        dispatched = best(direct)
        inner = best(nested)
        line = (f"{'redis.call ' + name:38} {scripted:6.2f} us   dispatch.call top "
                f"{dispatched:5.2f} nested {inner:5.2f}")
        if script_call is not None:
            inner = best(lambda: nested(f=script_call))
            line += f" script {inner:5.2f}"
        print(line + f"   the rest {scripted - crossing - inner:5.2f}")


if __name__ == "__main__":
    main()
