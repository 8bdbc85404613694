"""The floor: what uvloop + hiredis alone serve, with none of hotkv.

A reference point for bench/RESULTS.md, not a server anyone should use: it
knows LPUSH/RPUSH/LPOP/RPOP/PING, a bare XADD (and answers CONFIG GET / FLUSHALL so
redis-benchmark starts), keeps lists in a dict of deques, and has no
expiry, types, errors, stats, blocking, AOF or protocol checks.  Whatever
hotkv falls short of this figure is the cost of Redis's semantics in
Python (dispatch, bookkeeping, exact protocol handling); whatever this
falls short of Valkey is the cost of CPython and the event loop.

    python bench/floor.py 7005 &
    redis-benchmark -p 7005 -c 50 -n 1000000 -P 16 -t lpush,lpop -q -d 100
"""

import asyncio
import socket
import sys
from collections import deque

import hiredis
import uvloop

STORE: dict = {}


def _push(argv):
    lst = STORE.get(argv[1])
    if lst is None:
        lst = STORE[argv[1]] = deque()
    lst.extendleft(argv[2:])
    return b":%d\r\n" % len(lst)


def _pop(argv):
    lst = STORE.get(argv[1])
    if not lst:
        return b"$-1\r\n"
    value = lst.popleft()
    return b"$%d\r\n%b\r\n" % (len(value), value)


_SEQ = [0]


def _xadd(argv):
    # No ID rules, no trimming: the cost of a reply that names a new entry.
    _SEQ[0] += 1
    entry_id = b"%d-0" % _SEQ[0]
    STORE.setdefault(argv[1], []).append((entry_id, argv[-2:]))
    return b"$%d\r\n%b\r\n" % (len(entry_id), entry_id)


TABLE = {b"XADD": _xadd, b"LPUSH": _push, b"RPUSH": _push, b"LPOP": _pop, b"RPOP": _pop,
         b"PING": lambda argv: b"+PONG\r\n", b"CONFIG": lambda argv: b"*0\r\n",
         b"FLUSHALL": lambda argv: b"+OK\r\n"}


class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.reader = hiredis.Reader()
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        reader = self.reader
        reader.feed(data)
        out = []
        while True:
            argv = reader.gets()
            if argv is False:
                break
            out.append(TABLE[argv[0].upper()](argv))
        self.transport.write(b"".join(out))


async def main(port: int):
    server = await asyncio.get_running_loop().create_server(Floor, "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7005))
