"""Where a big SET or GET spends its CPU (issue 32): per-stage microseconds
per request through a real ``Connection``, no sockets, no event loop.

    PYTHONPATH=<tree> python bench/bigvalue_stages.py

SET and GET of 1 KB, 100 KB and 1 MiB values, P1 and P16.  The client's
write is cut into reads as uvloop cuts them (its 256,000-byte receive
buffer) and each read copied out of a bytearray as uvloop copies it ("read
copy"); then ``data_received`` runs, split into the parser's ``feed``
("parse"), ``process_commands`` with the replies encoded ("dispatch") and
``flush`` ("flush": the join or writelines, the transport keeping a
reference only -- the kernel's copy is every server's); "rest" is the
connection's own work.  Best of 3 runs per row.  A measurement, nothing is
asserted; run two trees one after the other to compare them.
"""

from __future__ import annotations

import gc
import time

from hotkv.net import connection as connmod
from hotkv.protocol import resp
from hotkv.server import Server
from stubs import Loop, Transport

RECV = 256000
pc = time.perf_counter
acc: dict = {}
busy: set = set()


def wrap(owner, name, label):
    f = getattr(owner, name)

    def timed(*a, **k):
        if label in busy:
            return f(*a, **k)
        busy.add(label)
        t = pc()
        try:
            return f(*a, **k)
        finally:
            acc[label] = acc.get(label, 0.0) + pc() - t
            busy.discard(label)
    setattr(owner, name, timed)


    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%b\r\n" % (len(x), x) for x in a)


def run_case(server, loop, c, op, size, pl):
    val = b"x" * size
    n = max(16, min(2000, (64 << 20) // size)) // pl * pl
    req = b"".join(cmd(b"SET", b"key:%06d" % (i % 100), val) if op == "SET"
                   else cmd(b"GET", b"key:%06d" % (i % 100)) for i in range(pl))
    pieces = [bytearray(req[i:i + RECV]) for i in range(0, len(req), RECV)]
    best = None
    for _ in range(3):
        acc.clear()
        gc.collect()
        tcopy = 0.0
        t0 = pc()
        for _ in range(n // pl):
            for p in pieces:
                t = pc()
                data = bytes(p)     # uvloop's copy out of its receive buffer
                tcopy += pc() - t
                c.data_received(data)
            loop.run()
            server.before_sleep()
        tot = pc() - t0
        if best is None or tot < best[0]:
            best = (tot, dict(acc), tcopy)
    tot, a, tcopy = best
    stages = [tcopy, a.get("parse", 0.0), a.get("dispatch", 0.0), a.get("flush", 0.0)]
    stages.append(tot - sum(stages))
    stages.append(tot)
    return [x / n * 1e6 for x in stages]


def main():
    server = Server({"save": ""})
    loop = server.loop = Loop()
    c = connmod.Connection(server)
    c.connection_made(Transport())
    wrap(resp.RequestParser, "feed", "parse")
    wrap(connmod, "process_commands", "dispatch")
    wrap(connmod.Connection, "flush", "flush")
    head = ("read copy", "parse", "dispatch", "flush", "rest", "total")
    print(f"{'request':<16}" + "".join(f"{h:>10}" for h in head) + "   (us per request)")
    for size, label in ((1024, "1KB"), (102400, "100KB"), (1 << 20, "1MiB")):
        for pl in (1, 16):
            for op in ("SET", "GET"):
                row = run_case(server, loop, c, op, size, pl)
                print(f"{op} {label} P{pl:<8}"[:16].ljust(16) + "".join(f"{x:>10.1f}" for x in row),
                      flush=True)


if __name__ == "__main__":
    main()
