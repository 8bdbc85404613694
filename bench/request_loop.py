"""What a C extension for the request loop could save (issue 20): one command's
CPU in process, split into the parser, the handler with its reply encoded, and
the rest (dispatch and the per-command bookkeeping).

A bare Server and Client, 100 commands a parser feed (a pipelined read), no
sockets or event loop, as ``bench/compiled.py --inprocess``; best of 7 x N per
part.  A request-loop extension could remove at most the parser and the rest;
bench/RESULTS.md ("The route not built") sets them against the servers' CPU per
request.

    python bench/request_loop.py [--requests 100000]
"""

from __future__ import annotations

import argparse
import gc
import time

from hotkv.clients.client import Client
from hotkv.core import registry
from hotkv.core.dispatch import process_commands
from hotkv.protocol.resp import RequestParser, encode
from hotkv.server import Server


def cmd(*a: bytes) -> bytes:
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%b\r\n" % (len(x), x) for x in a)


WAYS = {"LPUSH": cmd(b"LPUSH", b"mylist", b"x" * 100), "LPOP": cmd(b"LPOP", b"mylist"),
        "XADD": cmd(b"XADD", b"s", b"MAXLEN", b"~", b"10000", b"*", b"f", b"v" * 100),
        "PING": cmd(b"PING")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100000)
    n = ap.parse_args().requests // 100 * 100
    server = Server({"save": ""})
    client = Client(server)

    def best(f, pre=None) -> float:
        runs = []
        for _ in range(7):
            if pre is not None:
                pre()
            t = time.process_time()
            f()
            runs.append((time.process_time() - t) / n * 1e9)
        return min(runs)

    for way, data in WAYS.items():
        def whole(data=data):
            parser = RequestParser()
            for _ in range(n // 100):
                commands, _error = parser.feed(data * 100)
                process_commands(client, commands)
                client.out.clear()

        def parse(data=data):
            parser = RequestParser()
            for _ in range(n // 100):
                parser.feed(data * 100)

        argv = RequestParser().feed(data)[0][0]
        func = registry.lookup(argv[0]).func

        def handler(argv=argv, func=func):
            out = client.out
            for _ in range(n // 100):
                for _ in range(100):
                    encode(func(client, list(argv)), out, False)
                out.clear()

        refill = (lambda: whole(WAYS["LPUSH"])) if way == "LPOP" else None
        whole()          # warm: the key exists, every path has run once
        gc.collect()
        w, p, h = best(whole, refill), best(parse), best(handler, refill)
        print(f"{way:6} whole {w:6.0f} ns   parser {p:5.0f}   handler + reply {h:5.0f}   "
              f"dispatch + bookkeeping {w - p - h:5.0f}", flush=True)


if __name__ == "__main__":
    main()
