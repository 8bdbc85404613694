#!/usr/bin/env python3
"""A job queue on Streams with a consumer group -- the managed-queue
recipe (producer, workers, a recovery process, a dead-letter stream) as
one runnable script.  Works against hotkv or any Valkey/Redis.

    python examples/streams_queue.py [URL] demo            # the whole flow, checked
    python examples/streams_queue.py [URL] produce 100     # add 100 jobs
    python examples/streams_queue.py [URL] work NAME       # process until idle
    python examples/streams_queue.py [URL] recover         # reclaim stuck jobs

URL is ``redis://[user:password@]host:port[/db]`` (``rediss://`` for TLS);
without it, $VALKEY_URL, else redis://127.0.0.1:6379/0.

The flow, as the recipe has it: a producer XADDs with an approximate
MAXLEN; the group is created once with XGROUP CREATE ... MKSTREAM (a
BUSYGROUP error means it exists); a worker XREADGROUPs with BLOCK,
processes, and only then XACKs; a recovery process looks at XPENDING and
XAUTOCLAIMs entries idle longer than a lease, moving entries delivered too
many times to a dead-letter stream; XTRIM bounds the stream.  Delivery is
at least once, so processing must be idempotent (the demo keeps a set of
job ids it has done).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from urllib.parse import unquote, urlparse

from valkey import Valkey
from valkey.exceptions import ResponseError

STREAM = "jobs:emails"
GROUP = "email-workers"
DEAD = "jobs:emails:dead"
MAXLEN = 10000
LEASE_MS = 200             # a job pending longer than this is presumed lost
MAX_DELIVERIES = 3         # more deliveries than this: dead letter


def connect(url: str) -> Valkey:
    u = urlparse(url)
    db = int(u.path.lstrip("/") or 0) if u.path not in ("", "/") else 0
    return Valkey(host=u.hostname or "127.0.0.1", port=u.port or 6379, db=db,
                  username=unquote(u.username) if u.username else None,
                  password=unquote(u.password) if u.password else None,
                  ssl=u.scheme == "rediss", decode_responses=True)


def ensure_group(client: Valkey):
    try:
        client.xgroup_create(STREAM, GROUP, id="$", mkstream=True)
    except ResponseError as error:
        if "BUSYGROUP" not in str(error):
            raise


def produce(client: Valkey, jobs) -> list:
    ids = []
    for job in jobs:
        ids.append(client.xadd(STREAM, job, maxlen=MAXLEN, approximate=True))
    return ids


def work(client: Valkey, consumer: str, handle, *, count=10, block_ms=100, max_batches=None):
    """Read new jobs for ``consumer``, handle each, ack after success.
    A job whose handler raises stays pending (for the recovery process).
    Returns when a read times out with nothing new, or after max_batches."""
    batches = 0
    while max_batches is None or batches < max_batches:
        reply = client.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=count, block=block_ms)
        if not reply:
            return
        batches += 1
        for _, messages in reply:
            for message_id, fields in messages:
                try:
                    handle(message_id, fields)
                except Exception:   # the job stays in the PEL
                    continue
                client.xack(STREAM, GROUP, message_id)


def recover(client: Valkey, consumer: str, handle, *, lease_ms=LEASE_MS,
            max_deliveries=MAX_DELIVERIES) -> dict:
    """One pass of the recovery process: dead-letter what was delivered
    too often, reclaim what sat idle past the lease and handle it."""
    moved = claimed = 0
    for p in client.xpending_range(STREAM, GROUP, "-", "+", 1000, idle=lease_ms):
        if p["times_delivered"] >= max_deliveries:
            mid = p["message_id"]
            found = client.xrange(STREAM, mid, mid)
            fields = found[0][1] if found else {}
            client.xadd(DEAD, {**fields, "job_id": mid, "deliveries": p["times_delivered"],
                               "last_consumer": p["consumer"]})
            client.xack(STREAM, GROUP, mid)
            moved += 1
    cursor = "0-0"
    while True:
        cursor, messages, deleted = client.xautoclaim(STREAM, GROUP, consumer, lease_ms, cursor,
                                                      count=100)
        for message_id, fields in messages:
            claimed += 1
            try:
                handle(message_id, fields)
            except Exception:
                continue
            client.xack(STREAM, GROUP, message_id)
        if cursor == "0-0":
            break
    return {"dead_lettered": moved, "reclaimed": claimed}


def demo(url: str) -> int:
    """Producer, a worker that crashes, a healthy worker, the recovery
    process and the dead-letter stream; checks the outcome."""
    admin = connect(url)
    admin.delete(STREAM, DEAD)
    ensure_group(admin)
    jobs = [{"type": "welcome", "user_id": str(i)} for i in range(20)]
    jobs[7] = {"type": "poison", "user_id": "7"}      # fails every time
    ids = produce(admin, jobs)
    done = set()

    def handle(message_id, fields):
        if fields.get("type") == "poison":
            raise RuntimeError("cannot process")
        done.add(message_id)                         # idempotent: a set

    # Worker 1 takes a batch, handles half of it and dies (its connection
    # goes away with five jobs unacknowledged).
    crashing = connect(url)
    reply = crashing.xreadgroup(GROUP, f"worker-{uuid.uuid4()}", {STREAM: ">"}, count=10)
    for message_id, fields in reply[0][1][:5]:
        handle(message_id, fields)
        crashing.xack(STREAM, GROUP, message_id)
    crashing.close()

    # Worker 2 takes the rest; the poison job stays pending.
    healthy = connect(url)
    work(healthy, f"worker-{uuid.uuid4()}", handle)
    healthy.close()

    # The recovery process: reclaim after the lease, until the poison job
    # has been delivered too often and goes to the dead-letter stream.
    recovery = connect(url)
    rounds = []
    for _ in range(MAX_DELIVERIES + 2):
        time.sleep(LEASE_MS / 1000 + 0.05)
        rounds.append(recover(recovery, "recovery", handle))
        if admin.xpending(STREAM, GROUP)["pending"] == 0:
            break
    recovery.close()
    admin.xtrim(STREAM, maxlen=MAXLEN, approximate=True)

    dead = admin.xrange(DEAD)
    summary = {
        "produced": len(ids),
        "processed": len(done),
        "pending": admin.xpending(STREAM, GROUP)["pending"],
        "dead_letters": [(d[1]["job_id"], d[1]["type"], int(d[1]["deliveries"])) for d in dead],
        "recovery_rounds": rounds,
    }
    print(json.dumps(summary))
    ok = (done == set(ids) - {ids[7]} and summary["pending"] == 0
          and summary["dead_letters"] == [(ids[7], "poison", MAX_DELIVERIES)])
    admin.close()
    if not ok:
        print("queue invariants violated", file=sys.stderr)
    return 0 if ok else 1


def main(argv) -> int:
    args = list(argv)
    url = os.environ.get("VALKEY_URL", "redis://127.0.0.1:6379/0")
    if args and "://" in args[0]:
        url = args.pop(0)
    cmd = args.pop(0) if args else "demo"
    if cmd == "demo":
        return demo(url)
    client = connect(url)
    ensure_group(client)
    if cmd == "produce":
        n = int(args[0]) if args else 10
        for i in produce(client, [{"type": "welcome", "user_id": str(i)} for i in range(n)]):
            print(i)
    elif cmd == "work":
        name = args[0] if args else f"worker-{uuid.uuid4()}"
        work(client, name, lambda mid, fields: print("process message", mid, fields))
    elif cmd == "recover":
        print(json.dumps(recover(client, "recovery",
                                 lambda mid, fields: print("process message", mid, fields))))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
