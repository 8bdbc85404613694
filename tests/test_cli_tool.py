"""``hotkv cli`` and ``hotkv queues`` as a user runs them (subprocesses of
``python -m hotkv``).  ``hotkv cli``'s output is compared byte for byte with
the real redis-cli's (valkey-cli next to the reference server, or redis-cli
from redis-tools) on the same commands against the same server: the raw form
(stdout is a pipe), the human form (--no-raw), RESP2 and RESP3, and the exit
code.  ``hotkv queues --once`` is run against hotkv and against the
reference valkey-server: it only uses commands both have.  ``hotkv --help``
lists every subcommand.  ~10 s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import valkey

from support import valkey_server_binary

COMMANDS = [
    ["PING"],
    ["SET", "s", "hello"],
    ["GET", "s"],
    ["GET", "missing"],
    ["SET", "q", 'say "hi"\n\t\x01\xff'],
    ["GET", "q"],
    ["INCR", "n"],
    ["INCRBYFLOAT", "f", "1.5"],
    ["RPUSH", "l", *("item%d" % i for i in range(12))],
    ["LRANGE", "l", "0", "-1"],
    ["LRANGE", "nothing", "0", "-1"],
    ["HSET", "h", "f1", "v1", "f2", "v2"],
    ["HGETALL", "h"],
    ["HGETALL", "nothing"],
    ["SMEMBERS", "nothing"],
    ["ZADD", "z", "1.5", "a", "2", "b"],
    ["ZSCORE", "z", "a"],
    ["ZRANGE", "z", "0", "-1", "WITHSCORES"],
    ["XADD", "st", "1-1", "f", "v", "g", "w"],
    ["XADD", "st", "2-1", "f", "x"],
    ["XRANGE", "st", "-", "+"],
    ["XGROUP", "CREATE", "st", "grp", "0"],
    ["XREADGROUP", "GROUP", "grp", "c1", "COUNT", "1", "STREAMS", "st", ">"],
    ["EVAL", "return {1, 'two', {3, 'four', {}}, false}", "0"],
    ["EXISTS", "s", "missing"],
    ["LPUSH", "s", "x"],
    ["NOSUCHCOMMAND", "a"],
    ["CONFIG", "GET", "maxmemory*"],
]


def _reference_cli() -> str | None:
    ref = valkey_server_binary()
    if ref:
        cli = os.path.join(os.path.dirname(ref), "valkey-cli")
        if os.access(cli, os.X_OK):
            return cli
    return shutil.which("redis-cli") or shutil.which("valkey-cli")


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, timeout=30, **kw)


def hotkv(*args):
    return _run([sys.executable, "-m", "hotkv", *args])


@pytest.fixture
def cli():
    path = _reference_cli()
    if path is None:
        pytest.skip("no redis-cli or valkey-cli to compare with (apt-get install redis-tools)")
    return path


def ours(*args):
    """hotkv cli's main in this process (real sockets, the real server):
    (stdout bytes, exit code) with stdout a pipe, as for redis-cli below."""
    from hotkv.tools import cli_tool
    buf = io.BytesIO()
    out = io.TextIOWrapper(buf, encoding="utf-8", errors="surrogateescape", newline="")
    with contextlib.redirect_stdout(out):
        rc = cli_tool.main(list(args))
        out.flush()
    return buf.getvalue(), rc


@pytest.mark.parametrize("mode", [[], ["--no-raw"], ["-3", "--no-raw"], ["-3"]],
                         ids=["raw", "human", "resp3-human", "resp3-raw"])
def test_output_is_redis_clis(cli, hotkv_server_factory, mode):
    """The same commands on two fresh servers, one through hotkv cli, one
    through redis-cli: the same bytes and exit codes."""
    a, b = hotkv_server_factory(), hotkv_server_factory()
    mismatches = []
    for cmd in COMMANDS:
        got = ours("-p", str(a.port), *mode, *cmd)
        ref = _run([cli, "-p", str(b.port), *mode, *cmd])
        if got != (ref.stdout, ref.returncode):
            mismatches.append((cmd, got, (ref.stdout, ref.returncode)))
    assert not mismatches, "\n".join(repr(m) for m in mismatches)


def test_the_hotkv_command_runs_it(hotkv_server_factory):
    server = hotkv_server_factory()
    got = hotkv("cli", "-p", str(server.port), "LPUSH", "q", "job")
    assert (got.stdout, got.returncode) == (b"1\n", 0)
    assert ours("-p", str(server.port), "--no-raw", "LRANGE", "q", "0", "-1") == \
        (b'1) "job"\n', 0)


def test_connection_options_url_db_and_auth(cli, hotkv_server_factory):
    server = hotkv_server_factory(requirepass="pw")
    r = valkey.Valkey(host=server.host, port=server.port, password="pw", db=3)
    r.set("k", "in db 3")
    url = "redis://:pw@127.0.0.1:%d/3" % server.port
    assert ours("-u", url, "GET", "k") == (b"in db 3\n", 0)
    got = ours("-p", str(server.port), "-a", "pw", "-n", "3", "--no-raw", "GET", "k")
    assert got == (b'"in db 3"\n', 0)
    r.execute_command("ACL", "SETUSER", "bob", "on", ">bobpw", "~*", "+@all")
    got = ours("-p", str(server.port), "--user", "bob", "-a", "bobpw", "-3", "--no-raw",
               "ACL", "WHOAMI")
    assert got == (b'"bob"\n', 0)
    got = ours("-p", str(server.port), "--no-raw", "GET", "k")
    assert got[0].startswith(b"(error) NOAUTH") and got[1] == 0   # valkey-cli's exit code
    assert ours("-p", "1", "PING")[1] == 1   # nothing listens: exit 1


def test_interactive_session(hotkv_server_factory, tmp_path):
    """Lines from a pipe, as valkey-cli reads them: no prompt, the replies
    in the raw form unless --no-raw (the pty transcripts are in
    test_cli_transcripts.py)."""
    server = hotkv_server_factory()
    script = b"SET greeting hello\nGET greeting\nhelp LPUSH\nSELECT 2\nDBSIZE\nquit\n"
    proc = subprocess.run([sys.executable, "-m", "hotkv", "cli", "-p", str(server.port),
                           "--no-raw"], input=script, capture_output=True, timeout=30,
                          env=dict(os.environ, HOME=str(tmp_path)))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert out.startswith('OK\n"hello"\n\r\n  \x1b[1mLPUSH\x1b[0m'), out
    assert "summary:\x1b[0m Prepends one or more elements" in out   # from COMMAND DOCS
    assert out.endswith("OK\n(integer) 0\n")
    assert "> " not in out   # no prompt when stdin is not a terminal


def test_help_syntax_from_command_docs_arguments(ref_server, tmp_path):
    """The syntax line is built from COMMAND DOCS' arguments as valkey-cli
    builds it (against valkey-server, whose COMMAND DOCS has them)."""
    proc = subprocess.run([sys.executable, "-m", "hotkv", "cli", "-p", str(ref_server.port)],
                          input=b"help LPUSH\nhelp XADD\nLPUSH\n", capture_output=True,
                          timeout=30, env=dict(os.environ, HOME=str(tmp_path)))
    out = proc.stdout.decode()
    assert "LPUSH\x1b[0m \x1b[90mkey element [element ...]\x1b[0m" in out
    assert "XADD\x1b[0m \x1b[90mkey [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] " \
        "*|id field value [field value ...]\x1b[0m" in out
    assert out.endswith("ERR wrong number of arguments for 'lpush' command\n\n"), out


def _queues_once(port, monkeypatch, *args) -> str:
    """hotkv queues --once in this process, its terminal 200 columns wide."""
    from hotkv.tools import queues_tui
    monkeypatch.setenv("COLUMNS", "200")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert queues_tui.main(["-p", str(port), "--once", *args]) == 0
    return out.getvalue()


def _fill(r):
    r.rpush("jobs", "a", "b", "c")
    r.xadd("events", {"n": 1}, id="1-1")
    r.xadd("events", {"n": 2}, id="2-1")
    r.xgroup_create("events", "workers", "0")
    r.xreadgroup("workers", "w1", {"events": ">"}, count=1)
    r.rpush("rq:queue:emails", "job-1", "job-2")
    r.sadd("rq:queues", "rq:queue:emails")


def test_queues_view_on_hotkv_and_on_valkey(hotkv_server_factory, ref_server, monkeypatch):
    pytest.importorskip("rich", reason="rich (pip install 'hotkv[dashboard]') is missing")
    server = hotkv_server_factory()
    outputs = []
    for host, port in ((server.host, server.port), ("127.0.0.1", ref_server.port)):
        r = valkey.Valkey(host=host, port=port)
        r.flushall()
        _fill(r)
        out = _queues_once(port, monkeypatch)
        for needle in ("jobs", "events", "workers", "w1 (1,", "rq", "emails", "queued 2"):
            assert needle in out, (needle, out)
        # Idle times differ by the milliseconds between the two runs (and so
        # do column widths): compare the words of each line.
        outputs.append([re.findall(r"[\w:.,()-]+", re.sub(r"w1 \(1, \d+\)", "w1 (1, N)", ln))
                        for ln in out.splitlines()[1:]])
        r.flushall()
    assert outputs[0] == outputs[1]   # the same view of the same data on both servers


def _add(x, y):
    return x + y


def _job(x):
    return None


def _enqueue_libraries(host, port, read):
    """Real Celery (kombu), dramatiq and taskiq-redis producers enqueue on
    (host, port), leave one job of each in flight, and ``read()`` runs while
    those are still held (kombu and dramatiq give an unacked job back when
    their connection closes)."""
    import asyncio

    import celery
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker
    from taskiq_redis import RedisStreamBroker
    url = "redis://%s:%d/0" % (host, port)

    async def taskiq_jobs():
        sb = RedisStreamBroker(url, consumer_name="w1", xread_block=100, xread_count=1)

        @sb.task(task_name="stask")
        async def stask(x):
            return x

        await sb.startup()
        for i in range(3):
            await stask.kiq(i)
        listen = sb.listen()
        await listen.__anext__()              # delivered, never acked: pending
        await listen.aclose()
        await sb.shutdown()

    asyncio.run(asyncio.wait_for(taskiq_jobs(), 20))
    app = celery.Celery("queues_view", broker=url, backend=url, set_as_current=False)
    app.conf.update(broker_connection_retry_on_startup=False)
    add = app.task(name="t.add")(_add)
    now = [add.delay(i, i) for i in range(3)]
    add.apply_async((1, 1), countdown=600)              # eta
    add.apply_async((5, 5), queue="mail")
    add.apply_async((4, 4), priority=5)                 # the priority list celery\x06\x163
    broker = RedisBroker(host=host, port=port)          # namespace "dramatiq"
    job = dramatiq.actor(_job, actor_name="job", broker=broker, queue_name="work")
    for i in range(4):
        job.send(i)
    job.send_with_options(args=(99,), delay=600_000)
    consumer = broker.consume("work", prefetch=2, timeout=1000)
    try:
        taken = [next(consumer) for _ in range(2)]
        consumer.nack(taken[1])                         # dead-lettered
        with app.connection() as conn:
            msg = conn.default_channel.basic_get("celery", no_ack=False)   # unacked
            assert msg is not None
            app.backend.mark_as_failure(now[2].id, ValueError("boom"))
            return read()
    finally:
        consumer.close()
        broker.close()
        app.close()


def _library_rows(out: str) -> dict:
    """(library, queue) -> the states text of the Library queues table."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("\u2502")]
        if len(cells) == 5 and cells[1] in ("rq", "celery", "dramatiq", "bullmq", "taskiq"):
            rows[(cells[1], cells[2])] = cells[3]
    return rows


def test_queues_view_names_celery_dramatiq_and_taskiq(hotkv_server_factory, ref_server,
                                                      monkeypatch):
    """Jobs enqueued by the real libraries: hotkv queues --once names their
    queues with the counts server.inspect gives on hotkv, and the same
    counts against valkey-server."""
    pytest.importorskip("rich", reason="rich (pip install 'hotkv[dashboard]') is missing")
    for lib in ("celery", "dramatiq", "taskiq_redis"):
        pytest.importorskip(lib, reason="%s is not installed" % lib)
    server = hotkv_server_factory()

    def states(q):
        return ", ".join("%s %d" % (k, len(v)) for k, v in q.states.items())

    def expected():
        i = server.inspect
        want = {("celery", n): states(q) for n, q in i.celery().items()}
        want.update({("dramatiq", n): states(q) for n, q in i.dramatiq("dramatiq").items()})
        want[("taskiq", "taskiq")] = states(i.taskiq("taskiq"))
        return want

    seen = {}
    for name, host, port in (("hotkv", server.host, server.port),
                             ("valkey", "127.0.0.1", ref_server.port)):
        valkey.Valkey(host=host, port=port).flushall()
        out, want = _enqueue_libraries(
            host, port, lambda: (_queues_once(port, monkeypatch),
                                 expected() if name == "hotkv" else None))
        rows = _library_rows(out)
        seen[name] = rows
        if want is not None:
            # Every queue each library has, and each one's counts, in order.
            assert {k for k in want if k in rows} == set(want), (want, out)
            assert {k: rows[k] for k in want} == want, out
            assert {("celery", "celery"), ("celery", "mail"), ("dramatiq", "work"),
                    ("taskiq", "taskiq")} <= set(want)
            assert "unacked 1" in want[("celery", "celery")]
        valkey.Valkey(host=host, port=port).flushall()
    assert seen["valkey"] == seen["hotkv"]   # the same view of the same jobs


def _kombu_message(i, eta):
    return json.dumps({"body": "", "content-type": "application/json", "properties": {},
                       "headers": {"id": "task-%d" % i, "task": "t.add",
                                   "eta": "2030-01-01T00:00:00+00:00" if eta else None}})


def test_queues_view_bounded_reads_and_taskiq_layouts(hotkv_server_factory, ref_server,
                                                      monkeypatch):
    """The reads' bounds and taskiq's other layouts, on hotkv and on
    valkey-server: Celery messages past the body budget count as queued and
    the row says how many went unread; a taskiq stream whose group has no lag
    (an entry deleted: XINFO says nil) is counted by XRANGE; a taskiq list in
    another database (--url .../1).  Full counts equal server.inspect's."""
    pytest.importorskip("rich", reason="rich (pip install 'hotkv[dashboard]') is missing")
    from hotkv.tools import queues_remote
    server = hotkv_server_factory()
    seen = {}
    for name, port in (("hotkv", server.port), ("valkey", ref_server.port)):
        r = valkey.Valkey(host="127.0.0.1", port=port)
        r.flushall()
        r.sadd("_kombu.binding.celery", "celery\x06\x16\x06\x16celery")
        for i, eta in enumerate((True, False, False, True, False)):   # oldest first
            r.lpush("celery", _kombu_message(i, eta))
        ids = [r.xadd("taskiq", {"data": json.dumps({"task_id": str(i)})}) for i in range(5)]
        r.xgroup_create("taskiq", "taskiq", "0")
        r.xreadgroup("taskiq", "w1", {"taskiq": ">"}, count=2)
        r.xdel("taskiq", ids[3])
        assert r.xinfo_groups("taskiq")[0]["lag"] is None    # the XRANGE path is taken
        r1 = valkey.Valkey(host="127.0.0.1", port=port, db=1)
        r1.rpush("taskiq", "a", "b", "c")
        full = _library_rows(_queues_once(port, monkeypatch))
        in_db1 = _library_rows(_queues_once(port, monkeypatch, "--url",
                                            "redis://127.0.0.1:%d/1" % port))
        monkeypatch.setattr(queues_remote, "MAX_BODIES", 3)
        bounded = _library_rows(_queues_once(port, monkeypatch))
        monkeypatch.undo()
        if name == "hotkv":
            i = server.inspect
            c, t = i.celery()["celery"], i.taskiq("taskiq")
            assert full[("celery", "celery")] == "queued %d, eta %d, unacked 0, FAILURE 0" % (
                len(c.queued), len(c.delayed))
            assert full[("taskiq", "taskiq")] == "queued %d, pending %d" % (
                len(t.queued), len(t.in_flight))
            assert in_db1[("taskiq", "taskiq")] == "queued %d" % len(
                i.taskiq("taskiq", db=1).queued)
        # The 3 oldest read (one with an ETA), the 2 newest counted unread.
        assert bounded[("celery", "celery")] == \
            "queued 4, eta 1, unacked 0, FAILURE 0 (2 records unread: over the budget)"
        seen[name] = (full, in_db1, bounded)
        r.flushall()
    assert seen["valkey"] == seen["hotkv"]


def test_hotkv_help_lists_every_subcommand():
    out = hotkv("--help").stdout.decode()
    for sub in ("serve", "cli", "queues", "check-rdb", "check-aof", "valkey-server"):
        assert "hotkv %s" % sub in out, sub


def test_tls_options(hotkv_server_factory, tmp_path):
    """--tls --cacert (and a client certificate when the server asks for
    one), and rediss:// URLs."""
    pytest.importorskip("cryptography", reason="cryptography is not installed")
    from support import make_pki
    pki = make_pki(tmp_path)
    cert, key = pki["server"]
    server = hotkv_server_factory(tls_port=0, tls_cert_file=cert, tls_key_file=key,
                                  tls_ca_cert_file=pki["ca"][0], tls_auth_clients="yes")
    port = str(server.tls_port)
    client = ["--cert", pki["client"][0], "--key", pki["client"][1]]
    assert ours("-h", "localhost", "-p", port, "--tls", "--cacert", pki["ca"][0], *client,
                "--no-raw", "PING") == (b"PONG\n", 0)
    got = ours("-u", "rediss://localhost:%s/2" % port, "--cacert", pki["ca"][0], *client,
               "SET", "k", "v")
    assert got == (b"OK\n", 0)
    assert valkey.Valkey(host=server.host, port=server.port, db=2).get("k") == b"v"
    # Without the CA the server's certificate is not trusted: no connection.
    assert ours("-h", "localhost", "-p", port, "--tls", *client, "PING")[1] == 1
