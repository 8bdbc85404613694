"""``hotkv queues``' enqueue and dequeue rates (hotkv/tools/queues_tui.py): from a
hotkv whose dashboard is on, the per-list counters read from its
/api/state (with basic auth when the server wants a password) -- exact
counts, and in/s and out/s from their change between two refreshes (over
the server's time between the snapshots they came from), so a
queue whose consumer keeps up shows its real rates while its depth stays 0;
from valkey-server 8.1.8 or a hotkv with http-port 0, no counters: in/s and
out/s are "-", net/s is the change of depth, and the caption says so.  Real
servers, real clients, the view read as a user runs it (``--once``) and
frame by frame (``collect`` + ``rates``, as the refreshing loop does).
CI-sized: ~5 s; nothing to scale up.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import threading
import time
import urllib.request

import pytest
import valkey

from support import free_port, wait_for

pytest.importorskip("rich", reason="rich (pip install 'hotkv[dashboard]') is missing")
pytest.importorskip("h11", reason="h11 (pip install 'hotkv[dashboard]') is not installed")

from hotkv.tools import queues_tui  # noqa: E402
from hotkv.tools.cli_tool import Options, connect  # noqa: E402


def _once(port, monkeypatch, *args) -> str:
    monkeypatch.setenv("COLUMNS", "200")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert queues_tui.main(["-p", str(port), "--once", *args]) == 0
    return out.getvalue()


def _row(out: str, key: str, width: int = 8) -> list:
    """The cells of the row of ``key`` in the table ``width`` columns wide
    (the Lists table's by default)."""
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == width and cells[0] == key:
            return cells
    raise AssertionError("no row for %r in:\n%s" % (key, out))


def _settled(http_port: int, auth: str):
    """Wait (bounded) for a snapshot taken after this call: hotkv queues'
    fresh request may get the latest one, a few ms old."""
    since = time.time()
    req = urllib.request.Request("http://127.0.0.1:%d/api/state?fresh=1" % http_port)
    req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    for _ in range(200):
        with urllib.request.urlopen(req, timeout=10) as resp:
            if json.loads(resp.read())["time"] >= since:
                return
        time.sleep(0.01)
    raise AssertionError("no snapshot newer than the request in 200 tries")


def _ok(x):
    return x


def _opts(port, password=None) -> Options:
    o = Options()
    o.host, o.port, o.password = "127.0.0.1", port, password
    return o


def test_counters_and_rates_from_a_hotkv_with_the_dashboard_on(hotkv_server_factory,
                                                               monkeypatch):
    http_port = free_port()
    server = hotkv_server_factory(http_port=http_port, requirepass="s3cret")
    r = valkey.Valkey(host=server.host, port=server.port, password="s3cret")
    r.rpush("jobs", *range(10))
    r.rpop("jobs", 3)
    for i in range(5):          # drained as it fills: no key at the end
        r.lpush("live", i)
        r.rpop("live")
    import redis
    import rq
    conn = redis.Redis(host=server.host, port=server.port, password="s3cret")
    q = rq.Queue("emails", connection=conn)
    for i in range(3):
        q.enqueue(_ok, i)
    rq.SimpleWorker([q], connection=conn).work(burst=True)   # takes the 3 jobs
    q.enqueue(_ok, 3)
    conn.close()
    _settled(http_port, "default:s3cret")
    out = _once(server.port, monkeypatch, "-a", "s3cret")
    assert "enqueue/dequeue counters (http-port %d)" % http_port in out
    # key, depth, in/s, out/s, net/s, enqueued, dequeued, oldest item
    jobs, live = _row(out, "jobs"), _row(out, "live")
    assert (jobs[1], jobs[5], jobs[6]) == ("7", "10", "3")
    assert (live[1], live[5], live[6]) == ("0", "5", "5")
    # library, queue, in/s, out/s, enqueued, dequeued: RQ's rq:queue:emails
    rq_row = _row(out, "rq", 6)
    assert (rq_row[1], rq_row[4], rq_row[5]) == ("emails", "4", "3")

    # Frame by frame: a consumer blocked in BRPOP takes every job pushed.
    o = _opts(server.port, "s3cret")
    conn = connect(o)
    k, done = 100, []
    consumer = valkey.Valkey(host=server.host, port=server.port, password="s3cret")

    def drain():
        for _ in range(k):
            if consumer.brpop(["live"], 10) is None:
                return
            done.append(1)

    t = threading.Thread(target=drain)
    t.start()
    first = queues_tui.rates(queues_tui.collect(conn, o), None)
    assert wait_for(lambda: r.info("clients")["blocked_clients"] == 1, timeout=10)
    for i in range(k):
        r.lpush("live", i)
    t.join(30)
    assert len(done) == k and not r.exists("live")
    # The server may answer from a snapshot a few ms old (its bound on fresh
    # ones): refresh (bounded) until one taken after the pushes comes.
    for _ in range(100):
        second = queues_tui.rates(queues_tui.collect(conn, o), first)
        live = next(q for q in second["lists"] if q["key"] == "live")
        if live["enqueued"] == 5 + k:
            break
        time.sleep(0.02)
    assert (live["enqueued"], live["dequeued"], live["depth"]) == (5 + k, 5 + k, 0)
    dt = second["counted_at"] - first["counted_at"]   # the server's clock
    assert live["in"] == live["out"] == pytest.approx(k / dt) and live["in"] > 0
    assert live["net"] == 0                  # what the depth alone says
    conn.sock.close()
    consumer.close()
    r.close()


def test_no_counters_against_valkey_or_with_the_dashboard_off(hotkv_server_factory,
                                                              ref_server, monkeypatch):
    server = hotkv_server_factory()
    for port in (server.port, ref_server.port):
        r = valkey.Valkey(host="127.0.0.1", port=port)
        r.flushall()
        r.rpush("jobs", *range(4))
        out = _once(port, monkeypatch)
        assert "no enqueue/dequeue counters on this server" in out and "not a" in out
        jobs = _row(out, "jobs")
        assert jobs[1:7] == ["4", "-", "-", "-", "-", "-"]
        o = _opts(port)
        conn = connect(o)
        first = queues_tui.rates(queues_tui.collect(conn, o), None)
        r.rpush("jobs", *range(6))
        second = queues_tui.rates(queues_tui.collect(conn, o), first)
        q = next(q for q in second["lists"] if q["key"] == "jobs")
        assert q["in"] is None and q["out"] is None
        dt = second["time"] - first["time"]
        assert q["net"] == pytest.approx(6 / dt) and q["net"] > 0
        conn.sock.close()
        r.flushall()
        r.close()
