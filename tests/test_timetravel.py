"""hotkv.testing.timetravel: one call moves the process's time (time-machine) and the servers.

Issue 30: libraries that compute due times in the client (RQ's scheduler,
Celery's ETA) did not follow ``server.clock.advance``.  Real libraries over
a real hotkv (TCP, as their users run them).
"""

from __future__ import annotations

import datetime
import threading
import time

import pytest
import redis

pytest.importorskip("time_machine")

from hotkv import EmbeddedServer  # noqa: E402
from hotkv.testing.timetravel import travel  # noqa: E402

HOUR = datetime.timedelta(hours=1)


@pytest.fixture
def server():
    with EmbeddedServer() as s:
        yield s


def test_process_and_server_move_together(server):
    r = redis.Redis(port=server.port)
    with travel(server, to=datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)) as t:
        assert datetime.datetime.now(datetime.timezone.utc).year == 2030
        assert r.time()[0] == int(time.time()) == int(t.time())
        r.set("k", "v", ex=3600)
        t.advance(HOUR)
        assert r.get("k") is None                        # the server moved too
        assert int(time.time()) == r.time()[0]           # and agrees with the process
        t.move_to(datetime.datetime(2031, 6, 1, tzinfo=datetime.timezone.utc))
        assert datetime.date.today().year == 2031 and r.time()[0] == int(time.time())
    assert server.clock.real                               # back to real time after
    assert abs(time.time() - r.time()[0]) < 120
    r.close()


def test_a_blocked_command_times_out_on_advance(server):
    """The server's monotonic view moves too (time-machine alone leaves it)."""
    r = redis.Redis(port=server.port)
    got = []
    with travel(server) as t:
        thread = threading.Thread(target=lambda: got.append(r.blpop("nothing", timeout=600)))
        thread.start()
        server.wait_until(lambda s: any(c.blocked for c in s.server.clients.values()), 30)
        t.advance(601)
        thread.join(30)
    assert got == [None]
    r.close()


def test_starts_at_the_servers_time(server):
    server.clock.freeze(at=datetime.datetime(2029, 3, 4, tzinfo=datetime.timezone.utc))
    with travel(server):
        assert datetime.datetime.now(datetime.timezone.utc).date() == datetime.date(2029, 3, 4)


def test_misuse_says_what_to_do(server):
    t = travel(server)
    with pytest.raises(RuntimeError, match="context manager"):
        t.advance(1)
    with pytest.raises(TypeError, match="timedelta"):
        with travel(server) as t:
            t.advance("1h")
    with pytest.raises(TypeError, match="needs at least one server"):
        travel()


def _rq_add(a, b):
    return a + b


def test_releases_an_rq_enqueue_in_job(server):
    """RQ's scheduler releases an ``enqueue_in`` job once the *client's* time
    passes it: the server's clock alone does not do it, travel() does."""
    import rq
    from rq.registry import FinishedJobRegistry, ScheduledJobRegistry
    from rq.scheduler import RQScheduler
    r = redis.Redis(port=server.port)
    q = rq.Queue("default", connection=r)
    with travel(server) as t:
        job = q.enqueue_in(HOUR, _rq_add, 2, 3)
        scheduler = RQScheduler([q], connection=r)
        assert scheduler.acquire_locks() == {"default"}
        scheduler.enqueue_scheduled_jobs()
        assert q.count == 0 and ScheduledJobRegistry(queue=q).count == 1

        server.clock.advance(HOUR + datetime.timedelta(seconds=1))   # the server alone
        scheduler.enqueue_scheduled_jobs()
        assert q.count == 0                                           # not released

        t.advance(HOUR)                                               # both
        scheduler.enqueue_scheduled_jobs()
        assert q.count == 1 and ScheduledJobRegistry(queue=q).count == 0
        rq.SimpleWorker([q], connection=r).work(burst=True)
        job.refresh()
        assert job.return_value() == 5
        assert FinishedJobRegistry(queue=q).count == 1
        scheduler.release_locks()
    r.close()


def test_releases_a_celery_eta_task(server):
    """A task sent with a one-hour countdown (its ETA computed by the sender's
    clock) runs when a worker consumes it after ``advance``; without the
    advance the worker holds it in its timer (``scheduled``), unrun."""
    celery = pytest.importorskip("celery")
    from celery.contrib.testing.worker import start_worker
    base = "redis://127.0.0.1:%d" % server.port
    app = celery.Celery("hotkv_timetravel", broker=base + "/3", backend=base + "/4",
                        set_as_current=False)
    app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=False)
    ran = []

    @app.task
    def remind(who):
        ran.append(who)
        return "reminded " + who

    with travel(server) as t:
        held = remind.apply_async(("held",), countdown=3600)
        due = remind.apply_async(("due",), countdown=3600)
        with start_worker(app, perform_ping_check=False, pool="solo", concurrency=1,
                          shutdown_timeout=10) as worker:
            # the worker has both, in its timer until their ETA: neither runs
            consumer = worker.consumer
            server.wait_until(lambda s: len(consumer.timer.queue) >= 2, 30)
            assert ran == [] and held.state == "PENDING"
        # (the worker gave both messages back to the broker when it stopped)
        t.advance(HOUR)
        with start_worker(app, perform_ping_check=False, pool="solo", concurrency=1,
                          shutdown_timeout=10):
            assert due.get(timeout=30) == "reminded due"
            assert held.get(timeout=30) == "reminded held"
    assert sorted(ran) == ["due", "held"]
    app.close()
