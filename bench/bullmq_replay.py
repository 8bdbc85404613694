"""BullMQ's scripts replayed in process (issue 33): where a script's time
goes besides its redis.call's.

``record``: runs bench/bullmq.mjs (2,000 jobs by default) against an
embedded hotkv through a recording proxy, and saves what every connection
sent, in the order the proxy forwarded it (/tmp/bullmq_stream.pickle).

``replay``: a fresh ``hotkv.server.Server`` per round, every recorded
command run in order through ``process_commands`` on one in-process client
per connection (blocking commands are dropped: a fake client cannot wait);
the CPU time (time.thread_time) of each EVALSHA is summed per script name,
best of the rounds.

    python bench/bullmq_replay.py record [--n 2000]
    python bench/bullmq_replay.py replay [--rounds 5] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STREAM = "/tmp/bullmq_stream.pickle"
BLOCKING = {b"bzpopmin", b"bzpopmax", b"blpop", b"brpop", b"brpoplpush", b"blmove",
            b"bzmpop", b"blmpop", b"wait", b"waitaof"}


def record(n: int) -> None:
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import hotkv
    from support import npm_packages_dir
    node_dir = npm_packages_dir("bullmq@6", "ioredis@5")
    import shutil
    shutil.copy(os.path.join(HERE, "bullmq.mjs"), node_dir)
    srv = hotkv.EmbeddedServer(port=0, save="")
    srv.start()
    port = srv.port
    chunks: list = []      # (connection number, bytes)
    names: dict = {}       # sha -> script name (from SCRIPT LOAD / EVAL bodies)
    loop = asyncio.new_event_loop()
    counter = [0]

    async def pipe(reader, writer, conn, log):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if log:
                    chunks.append((conn, data))
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def handle(creader, cwriter):
        counter[0] += 1
        conn = counter[0]
        sreader, swriter = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(pipe(creader, swriter, conn, True),
                             pipe(sreader, cwriter, conn, False))

    ready = threading.Event()
    holder = {}

    def serve():
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
        holder["port"] = server.sockets[0].getsockname()[1]
        ready.set()
        loop.run_forever()

    threading.Thread(target=serve, daemon=True).start()
    ready.wait()
    out = subprocess.run(["node", "bullmq.mjs", str(holder["port"]), str(n)], cwd=node_dir,
                         capture_output=True, text=True, timeout=900)
    print(out.stdout.strip(), out.stderr.strip()[-2000:])
    time.sleep(0.5)
    loop.call_soon_threadsafe(loop.stop)
    srv.stop()
    scripts = os.path.join(node_dir, "node_modules", "bullmq", "dist", "cjs", "scripts")
    import hashlib
    for fname in os.listdir(scripts):
        m = re.match(r"(.+)-\d+\.js$", fname)
        if not m:
            continue
        text = open(os.path.join(scripts, fname)).read()
        body = re.search(r"const content = `(.*)`;", text, re.S)
        if body:
            src = body.group(1).replace("\\`", "`").replace("\\\\", "\\")
            names[hashlib.sha1(src.encode()).hexdigest().encode()] = m.group(1)
    with open(STREAM, "wb") as f:
        pickle.dump({"chunks": chunks, "names": names}, f)
    print("recorded %d chunks, %d bytes" % (len(chunks), sum(len(c) for _, c in chunks)))


def replay(rounds: int, profile: bool, only: str | None, breakdown: bool) -> None:
    sys.path.insert(0, ROOT)
    from hotkv.clients.client import Client
    from hotkv.commands import scripting
    from hotkv.core.dispatch import process_commands
    from hotkv.protocol.resp import RequestParser
    from hotkv.server import Server

    with open(STREAM, "rb") as f:
        rec = pickle.load(f)
    names = rec["names"]
    # Parse once: per connection, the commands in order.
    parsers: dict = {}
    stream = []
    for conn, data in rec["chunks"]:
        p = parsers.get(conn)
        if p is None:
            p = parsers[conn] = RequestParser()
        cmds, _ = p.feed(data)
        cmds = [c for c in cmds if c and c[0].lower() not in BLOCKING]
        if cmds:
            stream.append((conn, cmds))

    timings: dict = {}
    current = ["-"]
    orig = scripting._run_plain
    clock = time.thread_time

    def timed_run(c, argv, evalsha, ro, eng=None):
        name = names.get(argv[1].lower(), argv[1][:8].decode()) if evalsha else "EVAL"
        current[0] = name
        t = clock()
        try:
            return orig(c, argv, evalsha, ro, eng)
        finally:
            dt = clock() - t
            current[0] = "-"
            slot = timings.setdefault(name, [0, 0.0])
            slot[0] += 1
            slot[1] += dt

    scripting._run_plain = timed_run
    parts: dict = {}

    def wrap(owner, attr, label):
        inner = getattr(owner, attr)

        def timed(*a, **k):
            t = clock()
            try:
                return inner(*a, **k)
            finally:
                slot = parts.setdefault((current[0], label), [0, 0.0])
                slot[0] += 1
                slot[1] += clock() - t
        setattr(owner, attr, timed)

    if breakdown:
        from hotkv.lua import calls, engine as eng_mod
        from hotkv.lua.libs import cjson, cmsgpack
        wrap(calls.CallPath, "_lua_call", "redis.call")
        wrap(calls.CallPath, "_lua_pcall", "redis.pcall")
        wrap(cmsgpack, "unpack", "cmsgpack.unpack")
        wrap(cmsgpack, "pack", "cmsgpack.pack")
        wrap(cjson, "encode", "cjson.encode")
        wrap(cjson, "decode", "cjson.decode")
        wrap(eng_mod.Engine, "execute", "execute")
        wrap(eng_mod.Engine, "_reply_table", "reply (tables)")
        init = eng_mod.Engine._init_lua

        def init_lua(self):
            init(self)
            wrap(self, "_run", "lua run (prelude run)")
        eng_mod.Engine._init_lua = init_lua
    best: dict = {}
    best_parts: dict = {}
    total_best = None
    for r in range(rounds):
        timings.clear()
        parts.clear()
        server = Server({"save": ""})
        clients: dict = {}
        prof = None
        if profile and r == rounds - 1:
            import cProfile
            prof = cProfile.Profile()
        t0 = clock()
        if prof:
            prof.enable()
        for conn, cmds in stream:
            c = clients.get(conn)
            if c is None:
                c = clients[conn] = Client(server)
            if only is None:
                process_commands(c, cmds)
            else:
                process_commands(c, cmds)
            c.out.clear()
        if prof:
            prof.disable()
        total = clock() - t0
        if total_best is None or total < total_best:
            total_best = total
        for name, (k, dt) in timings.items():
            if name not in best or dt < best[name][1]:
                best[name] = (k, dt)
                best_parts[name] = {lab: v for (sc, lab), v in parts.items() if sc == name}
        if prof:
            import pstats
            pstats.Stats(prof).sort_stats("tottime").print_stats(40)
    print("replay: %.3f s CPU for the whole stream (best of %d)" % (total_best, rounds))
    for name, (k, dt) in sorted(best.items(), key=lambda x: -x[1][1]):
        print("%-28s %6d runs %8.3f s %8.1f us each" % (name, k, dt, dt / k * 1e6))
        for label, (pk, pdt) in sorted(best_parts.get(name, {}).items(), key=lambda x: -x[1][1]):
            print("    %-26s %6d calls %8.3f s %8.2f us each, %7.2f us a script"
                  % (label, pk, pdt, pdt / pk * 1e6, pdt / k * 1e6))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("record", "replay"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--only", default=None)
    ap.add_argument("--breakdown", action="store_true")
    a = ap.parse_args()
    if a.mode == "record":
        record(a.n)
    else:
        replay(a.rounds, a.profile, a.only, a.breakdown)


if __name__ == "__main__":
    main()
