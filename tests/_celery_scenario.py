"""The Celery/kombu scenario of tests/test_inspect.py, run with whichever
Celery and kombu are importable: in the test's process (the installed ones)
or in a subprocess whose PYTHONPATH starts with pinned releases (kombu 5.5,
tests/_libcache.py):

    python -c "import _celery_scenario; _celery_scenario.main()" HOST PORT queued

It sends tasks (now, later, to another queue, with a priority), takes one
without acking it and writes a failure to the result backend; then calls
PEEK with the ids, so that the test looks (in a subprocess: prints them as
{"_peek": ...} and waits for a line on stdin); then acks and drains the queue
and returns the ids and the order kombu served them in."""

from __future__ import annotations

import json
import sys

PEEK = None


def queued(host: str, port: int) -> dict:
    import celery
    import kombu
    base = "redis://%s:%d" % (host, port)
    app = celery.Celery("inspect_test", broker=base + "/0", backend=base + "/0",
                        set_as_current=False)
    app.conf.update(broker_connection_retry_on_startup=False)

    @app.task(name="t.add")
    def add(x, y):
        return x + y

    now = [add.delay(i, i) for i in range(3)]
    later = add.apply_async((1, 1), countdown=600)
    mailq = add.apply_async((5, 5), queue="mail")
    prio = add.apply_async((4, 4), priority=5)    # kombu's priority list celery\x06\x163
    ids = {"celery": celery.__version__, "kombu": kombu.__version__,
           "now": [t.id for t in now], "later": later.id, "mail": mailq.id, "prio": prio.id}
    with app.connection() as conn:
        ch = conn.default_channel
        msg = ch.basic_get("celery", no_ack=False)     # taken, not acked: in flight
        assert msg is not None
        ids["taken"] = msg.headers["id"]
        # the result backend's own write of a failed task
        app.backend.mark_as_failure(now[2].id, ValueError("boom"))
        PEEK(ids)
        msg.ack()
        served = []
        for _ in range(4):
            m = ch.basic_get("celery", no_ack=True)
            served.append(m.headers["id"])
        ids["served"] = served
    app.close()
    return ids


def main() -> None:
    global PEEK
    host, port, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3]

    def peek(ids):
        print(json.dumps({"_peek": ids}), flush=True)
        sys.stdin.readline()
    PEEK = peek
    out = {"queued": queued}[scenario](host, port)
    print(json.dumps(out), flush=True)
