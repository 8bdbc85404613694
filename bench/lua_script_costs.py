"""What a script costs outside its redis.call's (issue 33), in process:
CPU per EVALSHA (time.thread_time, best of 5 x N) of scripts that isolate
one part each -- the run itself (``return 1``), a 3-call and a 10-call
script, returning BullMQ's moveToFinished reply shape (an array of 4 with
16 strings nested), cmsgpack.unpack of BullMQ's job arguments and options,
cjson.encode of a job's options; an FCALL of a function returning 1.
Run it with PYTHONPATH at each tree to
compare them (alternate the runs: the machine's load moves the figures).

    python bench/lua_script_costs.py [--n 20000]
"""

from __future__ import annotations

import argparse
import time

from hotkv.clients.client import Client
from hotkv.core.dispatch import process_commands
from hotkv.protocol.resp import RequestParser
from hotkv.server import Server

# BullMQ 6's msgpacked job arguments (addStandardJob's ARGV[1], ARGV[3]) and
# a worker's options (moveToFinished's last argument).
ADD_ARGS = b'\x9a\xafbull:bench9342:\xa0\xa3job\xcbBz%\x08\x08\xac\x80\x00\xc0\xc0\xc0\xc0\xc0\xc0'
ADD_OPTS = b'\xde\x00\x01\xa8attempts\x00'
WORKER_OPTS = (b'\xde\x00\x0b\xa5token\xd9&9bd95242-11a2-48b7-a10c-49ff9aaf365d:0\xa4name\xc0'
               b'\xa8keepJobs\xde\x00\x01\xa5count\xff\xa7limiter\xc0\xaclockDuration\xcdu0'
               b'\xa8attempts\x00\xaemaxMetricsSize\xa0\xa4fpof\xc2\xa4cpof\xc2\xa4idof\xc2'
               b'\xa4rdof\xc2')

CASES = [
    ("EVALSHA of return 1", "return 1", ["1", "k"]),
    ("3 calls (HSET, LREM, DEL)",
     "redis.call('HSET', KEYS[1], 'f', 'v') redis.call('LREM', KEYS[2], 0, 'x') "
     "redis.call('DEL', KEYS[3]) return 1", ["3", "h", "l", "d"]),
    ("10 calls (INCR)", "for i = 1, 10 do redis.call('INCR', KEYS[1]) end return 1",
     ["1", "n"]),
    ("reply {16 strings, 3 more}",
     "local t = {} for i = 1, 16 do t[i] = ARGV[1] end return {t, '1011', 0, 0}",
     ["0", "processedOn"]),
    ("12 arguments, return 1", "return 1", ["9"] + ["bull:q:k%d" % i for i in range(9)]
     + [ADD_ARGS, b'{"j":1}', ADD_OPTS]),
    ("cmsgpack.unpack x2 (add's args, opts)",
     "local a = cmsgpack.unpack(ARGV[1]) local b = cmsgpack.unpack(ARGV[2]) return 1",
     ["0", ADD_ARGS, ADD_OPTS]),
    ("cmsgpack.unpack (worker opts)", "local a = cmsgpack.unpack(ARGV[1]) return 1",
     ["0", WORKER_OPTS]),
    ("cjson.encode (job opts)", "local a = cjson.encode({attempts = 0}) return 1", ["0"]),
]


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
            t = time.thread_time()
            f()
            runs.append((time.thread_time() - t) / n * 1e6)
        return min(runs)

    base = None
    for name, body, args in CASES:
        sha = run(_cmd("SCRIPT", "LOAD", body)).split(b"\r\n")[1]
        batch = parser.feed(_cmd("EVALSHA", sha, *args) * 100)[0]
        process_commands(client, batch)
        client.out.clear()

        def go(batch=batch):
            for _ in range(n // 100):
                process_commands(client, batch)
                client.out.clear()
        us = best(go)
        if base is None:
            base = us
        print(f"{name:40} {us:7.2f} us a script  ({us - base:+7.2f} over return 1)")
    run(_cmd("FUNCTION", "LOAD", "REPLACE", "#!lua name=costs33\n"
             "server.register_function('one', function(KEYS, ARGV) return 1 end)"))
    batch = parser.feed(_cmd("FCALL", "one", 1, "k") * 100)[0]

    def fcall(batch=batch):
        for _ in range(n // 100):
            process_commands(client, batch)
            client.out.clear()
    us = best(fcall)
    print(f"{'FCALL of return 1':40} {us:7.2f} us a call    ({us - base:+7.2f} over return 1)")


if __name__ == "__main__":
    main()
