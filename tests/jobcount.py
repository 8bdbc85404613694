"""Counting every job of a concurrent queue run (used by test_exactly_once.py).

``HotkvProcess`` runs ``hotkv serve`` as a child process, so the test's
client threads (which hold this process's GIL) cannot starve the server;
the reference Valkey runs as a process too (``support.ReferenceValkey``).

``QueueRun`` drives one run against one server: producer threads push
unique jobs (pipelined, a few commands a round trip) and blocking consumer
threads take them, each over its own connection; the ``Ledger`` records
every delivery (which job, which consumer, how: a read, a claim).

Invariants the run keeps, so a test can tell a lost or doubled job from a
slow machine:

* producers never run more than ``window`` jobs ahead of what consumers
  have recorded (so consumers keep blocking and being woken, and a stream
  trimmed with MAXLEN ~ above the window never loses an undelivered entry);
* each consumer stops by itself: once every job has been recorded, the run
  pushes one sentinel at a time and waits for one consumer to take it and
  exit before pushing the next, so every consumer gets exactly one;
* nothing waits for ever: every wait ends at a hard deadline (scaled with
  the job count) or after ``stall`` seconds without a single delivery; the
  run then kills the clients' connections (CLIENT KILL), the threads end
  with an error, and the test fails with the counts instead of hanging.
"""

from __future__ import annotations

import collections
import itertools
import os
import random
import select
import subprocess
import sys
import threading
import time

import valkey

SENTINEL = b"STOP"


def jobs_per_test(default: int) -> int:
    """The number of jobs a test pushes: HOTKV_JOBS when set (a long run),
    else the CI default."""
    return int(os.environ.get("HOTKV_JOBS", default))


def make_jobs(total: int, producers: int) -> list[list[bytes]]:
    """Unique payloads of varying length, split among the producers."""
    jobs = [b"p%d:%07d:%s" % (i % producers, i, b"x" * (i % 37)) for i in range(total)]
    return [jobs[p::producers] for p in range(producers)]


class HotkvProcess:
    """``hotkv serve`` on an ephemeral port in a child process."""

    def __init__(self, *extra: str):
        self.extra = extra
        self.proc = None
        self.host = "127.0.0.1"
        self.port = 0

    def start(self) -> "HotkvProcess":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hotkv.tools.cli", "serve", "--port", "0", "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--loglevel", "warning", *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().decode() if ready else ""
        if "listening on" not in line:
            self.stop()
            raise RuntimeError("hotkv serve did not start: %r" % line)
        self.port = int(line.rsplit(":", 1)[1])
        return self

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for f in (self.proc.stdout, self.proc.stderr):
                f.close()
            self.proc = None


class Deadline(Exception):
    """A wait passed the run's hard deadline or its stall bound."""


class Ledger:
    """Every delivery of every job, and the events the checks need; one
    lock (with a condition) for all of it."""

    def __init__(self, stall: float, deadline: float):
        self.cond = threading.Condition()
        self.deliveries = collections.defaultdict(list)   # job -> [(consumer, how, seq)]
        self.acks = {}              # (consumer, job) -> seq after its first ack returned
        self.acked = 0              # sum of XACK / LREM replies
        self.produced = 0           # jobs reserved by producers (pushed or in flight)
        self.sentinels = []         # consumers that took a sentinel and left
        self.exited = []            # every thread that ended, in order
        self.dead = set()           # consumers that died on purpose
        self.errors = []            # (thread, repr(exception))
        self.requeued = collections.Counter()   # job -> times claimed / moved back
        self.seq = itertools.count()
        self.stall = stall
        self.deadline = deadline
        self.last_progress = time.monotonic()

    @property
    def distinct(self) -> int:
        return len(self.deliveries)

    def record(self, consumer: str, jobs, how: str = "read", seq: int | None = None):
        with self.cond:
            s = next(self.seq) if seq is None else seq
            for j in jobs:
                self.deliveries[j].append((consumer, how, s))
            if jobs:
                self.last_progress = time.monotonic()
            self.cond.notify_all()

    def ack(self, consumer: str, jobs, replied: int):
        with self.cond:
            s = next(self.seq)
            for j in jobs:   # the first ack of a job by this consumer
                self.acks.setdefault((consumer, j), s)
            self.acked += replied

    def wait(self, pred) -> bool:
        """Wait until pred() (called under the lock) holds; False at the
        deadline or after ``stall`` seconds without a delivery."""
        with self.cond:
            for _ in range(1_000_000):
                if pred():
                    return True
                now = time.monotonic()
                if now >= self.deadline or now - self.last_progress >= self.stall:
                    return False
                self.cond.wait(min(0.2, self.deadline - now))
        return False

    def reserve(self, n: int, window: int):
        """A producer's permission to push n more jobs: waits until they
        keep the backlog (pushed, not yet recorded) within window."""
        if not self.wait(lambda: self.produced + n - self.distinct <= window):
            raise Deadline("producer waited for consumers: %s" % self.counts())
        with self.cond:
            self.produced += n

    def counts(self) -> str:
        with self.cond:
            return ("produced %d, delivered %d distinct / %d total, sentinels %d, "
                    "dead %d, exited %d, errors %s" % (
                        self.produced, self.distinct,
                        sum(len(d) for d in self.deliveries.values()), len(self.sentinels),
                        len(self.dead), len(self.exited), self.errors[:3]))


class QueueRun:
    """One concurrent run against the server at host:port (see the module
    docstring).  Threads are started with ``producer`` / ``consumer`` /
    ``helper``; ``finish`` stops them and returns whether all went well."""

    def __init__(self, host: str, port: int, total: int, *, window: int = 256,
                 stall: float | None = None):
        self.host = host
        self.port = port
        self.total = total
        self.window = window
        stall = float(os.environ.get("HOTKV_STALL_S", 30)) if stall is None else stall
        self.started = time.monotonic()
        self.ledger = Ledger(stall, self.started + 120 + total / 100)
        self.admin = self.client("admin")
        self.threads: dict[str, list[threading.Thread]] = collections.defaultdict(list)
        self.aborted = False
        self.stop = threading.Event()   # for helpers (reapers, recoverers)

    def client(self, name: str) -> valkey.Valkey:
        c = valkey.Valkey(host=self.host, port=self.port, socket_connect_timeout=5,
                          single_connection_client=True)
        c.execute_command("CLIENT", "SETNAME", name)
        return c

    def _spawn(self, kind: str, name: str, body):
        def run():
            try:
                body()
            except BaseException as e:   # recorded; the test fails on it
                with self.ledger.cond:
                    if not self.aborted:
                        self.ledger.errors.append((name, repr(e)))
            finally:
                with self.ledger.cond:
                    self.ledger.exited.append(name)
                    self.ledger.cond.notify_all()
        t = threading.Thread(target=run, name=name, daemon=True)
        self.threads[kind].append(t)
        t.start()

    def producer(self, name: str, jobs: list[bytes], push):
        """push(pipeline, job) queues the command for one job.  The producer
        alternates bursts (1..16 jobs a round trip, no pause: consumers
        mostly find jobs waiting) and paced stretches (1..4 jobs, then a
        millisecond's pause: the queue runs dry, consumers block and are
        woken), 256 jobs each."""
        rng = random.Random(name)

        def body():
            c = valkey.Valkey(host=self.host, port=self.port, socket_connect_timeout=5)
            try:
                i = 0
                for _ in range(len(jobs)):
                    if i >= len(jobs):
                        break
                    paced = (i // 256) % 2 == 1
                    part = jobs[i:i + rng.randint(1, 4 if paced else 16)]
                    i += len(part)
                    if paced:
                        time.sleep(0.001)
                    self.ledger.reserve(len(part), self.window)
                    pipe = c.pipeline(transaction=False)
                    for j in part:
                        push(pipe, j)
                    for reply in pipe.execute(raise_on_error=True):
                        if reply is None or reply is False:
                            raise AssertionError("push refused: %r" % reply)
            finally:
                c.close()
        self._spawn("producer", name, body)

    def consumer(self, name: str, take, ack=None, max_rounds: int | None = None):
        """A consumer taking batches until it gets a sentinel: take(client)
        returns the jobs of one blocking read (a list, maybe with the
        sentinel), ack(client, jobs) acknowledges them and returns the
        server's count."""
        rounds = max_rounds or 2 * self.total + 100

        def body():
            c = self.client(name)
            try:
                for _ in range(rounds):
                    batch = take(c)
                    jobs = [j for j in batch if j != SENTINEL]
                    self.ledger.record(name, jobs)
                    if ack is not None:
                        self.ledger.ack(name, batch, ack(c, batch))
                    if len(jobs) != len(batch):
                        with self.ledger.cond:
                            self.ledger.sentinels.append(name)
                        return
                raise AssertionError("%s: no sentinel after %d reads" % (name, rounds))
            finally:
                c.close()
        self._spawn("consumer", name, body)

    def helper(self, name: str, body):
        """A thread running body() (it should return once self.stop is set)."""
        self._spawn("helper", name, body)

    def dying(self, name: str, body):
        """A consumer thread of its own making that ends by itself (gets no
        sentinel)."""
        self._spawn("dying", name, body)

    def finish(self, push_sentinel, done=None) -> str | None:
        """Wait until every job has been delivered (and done(), called under
        the ledger's lock, holds), stop the helpers, send the consumers one
        sentinel at a time; on the deadline or a stall kill every client.
        Returns None when all went well, else what went wrong."""
        lg = self.ledger
        problem = None
        n_consumers = len(self.threads["consumer"])
        if not lg.wait(lambda: (lg.distinct >= self.total and (done is None or done()))
                       or lg.errors):
            problem = "not all jobs delivered"
        elif lg.errors:
            problem = "a thread failed"
        self.stop.set()
        for t in self.threads["helper"] + self.threads["producer"]:
            if problem is None:
                t.join(max(0.0, lg.deadline - time.monotonic()))
        consumers = set(t.name for t in self.threads["consumer"])

        def consumers_left() -> int:
            return len(consumers - set(lg.exited))
        for _ in range(n_consumers):
            if problem is not None:
                break
            with lg.cond:
                before = consumers_left()
            if not before:
                break
            push_sentinel(self.admin)
            with lg.cond:
                lg.last_progress = time.monotonic()
            if not lg.wait(lambda: consumers_left() < before):
                problem = "consumers did not stop after their sentinels"
        everyone = [t for ts in self.threads.values() for t in ts]
        for t in everyone:
            if problem is None:
                t.join(max(0.0, min(30.0, lg.deadline - time.monotonic())))
        if problem is None and any(t.is_alive() for t in everyone):
            problem = "threads still running after the sentinels"
        if problem is not None:
            with lg.cond:
                self.aborted = True
            self.stop.set()
            # CLIENT KILL ends every blocked read, so each thread returns.
            self.admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        for t in everyone:
            t.join(30)
        if problem is None and lg.errors:
            problem = "a thread failed"
        self.elapsed = time.monotonic() - self.started
        return None if problem is None else "%s: %s" % (problem, lg.counts())

    def close(self):
        self.admin.close()


def exactly_once_report(ledger: Ledger, jobs: list[bytes]) -> list[str]:
    """What is wrong with the deliveries for an exactly-once run (empty
    when every job was delivered once and nothing else was)."""
    wanted = set(jobs)
    got = ledger.deliveries
    missing = wanted - set(got)
    doubled = {j: d for j, d in got.items() if len(d) > 1}
    unknown = set(got) - wanted
    out = []
    if missing:
        out.append("%d of %d jobs never delivered, e.g. %r" % (
            len(missing), len(wanted), sorted(missing)[:3]))
    if doubled:
        out.append("%d jobs delivered more than once, e.g. %r" % (
            len(doubled), list(doubled.items())[:2]))
    if unknown:
        out.append("%d unknown payloads delivered, e.g. %r" % (len(unknown), sorted(unknown)[:3]))
    return out
