"""RQ scenarios for tests/test_inspect.py, run with whichever RQ is importable:
in the test's process (the installed RQ 3) or in a subprocess whose
PYTHONPATH starts with a pinned release (RQ 2, tests/_libcache.py):

    python -c "import _rq_scenario; _rq_scenario.main()" HOST PORT SCENARIO

Each scenario enqueues real jobs and returns what the test compares
server.inspect.rq() with (job ids, descriptions, RQ's own reading); the
subprocess prints it as the last JSON line.  A running job (``_peek``)
calls PEEK with its id, so that the test looks while it runs: in a
subprocess that prints {"_peek": id} and waits for a line on stdin."""

from __future__ import annotations

import datetime
import json
import sys
import time

PEEK = None


def _ok(x):
    return x


def _boom():
    raise ValueError("boom")


def _peek():
    from rq import get_current_job
    PEEK(get_current_job().id)


def states(host: str, port: int) -> dict:
    """A burst over done/failed/running jobs, then waiting, scheduled and
    another queue's jobs."""
    import redis
    import rq
    conn = redis.Redis(host=host, port=port)
    q = rq.Queue("default", connection=conn)
    done = q.enqueue(_ok, 1)
    bad = q.enqueue(_boom)
    peek = q.enqueue(_peek)
    rq.SimpleWorker([q], connection=conn).work(burst=True)
    waiting = [q.enqueue(_ok, i) for i in range(3)]
    later = q.enqueue_in(datetime.timedelta(seconds=600), _ok, 9)
    other = rq.Queue("emails", connection=conn).enqueue(_ok, 7)
    conn.close()
    return {"version": rq.__version__, "done": done.id, "bad": bad.id, "peek": peek.id,
            "waiting": [j.id for j in waiting], "job_ids": q.job_ids,
            "description": waiting[0].description, "later": later.id, "other": other.id}


def intermediate(host: str, port: int) -> dict:
    """A job a worker LMOVEd into rq:queue:<q>:intermediate and died on,
    marked by RQ's maintenance (set_first_seen)."""
    import redis
    import rq
    conn = redis.Redis(host=host, port=port)
    from rq.intermediate_queue import IntermediateQueue
    q = rq.Queue("default", connection=conn)
    stuck = q.enqueue(_ok, 1)
    waiting = q.enqueue(_ok, 2)
    got = rq.Queue.dequeue_any([q], None, connection=conn)   # a worker took it ...
    assert got[0].id == stuck.id                              # ... and died here
    inter = IntermediateQueue(q.key, connection=conn)
    assert inter.get_job_ids() == [stuck.id]
    before = time.time()
    assert inter.set_first_seen(stuck.id)        # RQ's maintenance saw it once
    conn.close()
    return {"version": rq.__version__, "stuck": stuck.id, "waiting": waiting.id,
            "job_ids": q.job_ids, "description": stuck.description, "before": before,
            "first_seen_key": inter.get_first_seen_key(stuck.id)}


def short_pubsub_poll(setattr_=setattr):
    """RQ's worker polls its pubsub thread with sleep_time=60; at the end of a
    burst it unsubscribes, joins that thread for 1 s and closes the PubSub,
    which waits for the thread's pending get_message: up to 60 s when the
    thread had re-entered it (measured: the first burst of a process took
    60.0 s, the next ones 0.01 s).  A short poll ends that wait at once."""
    import redis
    orig = redis.client.PubSub.run_in_thread

    def run_in_thread(self, sleep_time=0.0, *args, **kwargs):
        return orig(self, min(sleep_time, 0.05), *args, **kwargs)
    setattr_(redis.client.PubSub, "run_in_thread", run_in_thread)


def main() -> None:
    global PEEK
    host, port, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3]

    def peek(job_id):
        print(json.dumps({"_peek": job_id}), flush=True)
        sys.stdin.readline()
    PEEK = peek
    short_pubsub_poll()
    out = {"states": states, "intermediate": intermediate}[scenario](host, port)
    print(json.dumps(out), flush=True)
