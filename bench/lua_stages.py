"""Where a script's redis.call spends its time (issue 33): in-process CPU,
no sockets, best of 5 x N (time.process_time), per stage:

* the script itself: an EVALSHA of ``return 1`` (the EVALSHA command, the
  run's set-up, entering and leaving Lua);
* the crossing: 10 calls of ``redis.setresp(2)`` -- the prelude's wrapper,
  lupa's call into Python and back, a Python function doing nothing;
* each command through redis.call (10 calls a script), against the same
  command run by ``dispatch.call`` on a fake client (the dispatcher's
  bookkeeping, the handler, its reply encoded);
* the rest: redis.call minus the crossing minus dispatch.call -- the
  script-side checks (arity, noscript, ACL, read-only, OOM...), the
  argument and reply conversions.

    python bench/lua_stages.py [--n 20000]
"""

from __future__ import annotations

import argparse
import time

from hotkv.clients.client import Client
from hotkv.core.dispatch import call, process_commands
from hotkv.core.registry import lookup
from hotkv.protocol.resp import RequestParser
from hotkv.server import Server


def _cmd(*a) -> bytes:
    a = [x if isinstance(x, bytes) else str(x).encode() for x in a]
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%b\r\n" % (len(x), x) for x in a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    n = ap.parse_args().n // 100 * 100
    server = Server({"save": ""})
    client = Client(server)
    parser = RequestParser()

    def run(data):
        commands, _ = parser.feed(data)
        process_commands(client, commands)
        out = b"".join(client.out)
        client.out.clear()
        return out

    def best(f) -> float:
        runs = []
        for _ in range(5):
            t = time.process_time()
            f()
            runs.append((time.process_time() - t) / n * 1e6)
        return min(runs)

    def per_script(body: str) -> float:
        sha = run(_cmd("SCRIPT", "LOAD", body)).split(b"\r\n")[1]
        batch = _cmd("EVALSHA", sha, 1, "k") * 100
        run(batch)
        return best(lambda: [run(batch) for _ in range(n // 100)])

    run(_cmd("HSET", "h", "f", "v"))
    empty = per_script("return 1")
    crossing = (per_script("for i = 1, 10 do redis.setresp(2) end return 1") - empty) / 10
    print(f"{'EVALSHA of return 1':38} {empty:6.2f} us a script")
    print(f"{'crossing (redis.setresp(2))':38} {crossing:6.2f} us a call")
    fake = Client(server, fake=True)
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
        dispatched = best(direct)
        print(f"{'redis.call ' + name:38} {scripted:6.2f} us   dispatch.call {dispatched:5.2f}"
              f"   the rest {scripted - crossing - dispatched:5.2f}")


if __name__ == "__main__":
    main()
