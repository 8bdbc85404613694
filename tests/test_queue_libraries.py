"""Real queue libraries, unchanged, against a real hotkv.

Each test runs a library's own producer and worker over TCP, as its users
do: RQ (lists, hashes, sorted-set registries, MULTI pipelines), dramatiq
(Lua dispatch scripts with EVALSHA, delayed and dead-letter queues) and
Celery through kombu (BRPOP across queues, the unacked hash and index of
late acks, pub/sub result notification on the Redis result backend),
taskiq-redis's stream broker (consumer groups: XREADGROUP BLOCK, XACK, and
XAUTOCLAIM of a dead worker's messages inside a MULTI with a Lua-released
lock), and BullMQ on ioredis in Node.js (Lua scripts throughout).
"""

import datetime
import threading


def _rq_add(a, b):
    return a + b


def _rq_boom():
    raise ValueError("boom")


def test_rq_enqueue_work_and_registries(server):
    import redis
    import rq
    from rq.registry import FailedJobRegistry, FinishedJobRegistry, ScheduledJobRegistry
    r = redis.Redis(host=server.host, port=server.port)
    r.flushall()
    q = rq.Queue("default", connection=r)
    ok = q.enqueue(_rq_add, 2, 3)
    bad = q.enqueue(_rq_boom)
    later = q.enqueue_in(datetime.timedelta(seconds=60), _rq_add, 10, 20)
    due = q.enqueue_at(datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1),
                       _rq_add, 1, 1)
    assert q.count == 2
    assert ScheduledJobRegistry(queue=q).count == 2
    assert r.type(ok.key) == b"hash"
    rq.SimpleWorker([q], connection=r).work(burst=True, with_scheduler=True)
    ok.refresh()
    bad.refresh()
    later.refresh()
    due.refresh()
    assert ok.get_status() == "finished" and ok.return_value() == 5
    assert due.get_status() == "finished" and due.return_value() == 2
    assert bad.get_status() == "failed"
    assert later.get_status() == "scheduled"
    assert sorted(FinishedJobRegistry(queue=q).get_job_ids()) == sorted([ok.id, due.id])
    assert ScheduledJobRegistry(queue=q).get_job_ids() == [later.id]
    assert FailedJobRegistry(queue=q).get_job_ids() == [bad.id]
    r.close()


def test_dramatiq_worker_runs_delays_and_dead_letters(server):
    import dramatiq
    import redis
    from dramatiq.brokers.redis import RedisBroker
    broker = RedisBroker(host=server.host, port=server.port, namespace="hotkv-test")
    broker.flush_all()
    done = []
    lock = threading.Lock()

    @dramatiq.actor(broker=broker, max_retries=0)
    def add(x, y):
        with lock:
            done.append(x + y)

    @dramatiq.actor(broker=broker, max_retries=0)
    def boom():
        raise ValueError("boom")

    for i in range(40):
        add.send(i, i)
    add.send_with_options(args=(1000, 1), delay=300)   # via the delay queue
    failed = boom.send()
    worker = dramatiq.Worker(broker, worker_threads=4, worker_timeout=50)
    worker.start()
    try:
        broker.join(add.queue_name, timeout=20000)
    finally:
        worker.stop()
    assert sorted(done) == sorted([2 * i for i in range(40)] + [1001])
    r = redis.Redis(host=server.host, port=server.port)
    # Nothing is left in flight; the failed message is in the dead-letter queue.
    assert r.llen("hotkv-test:default") == 0
    assert r.zcard("hotkv-test:default.DQ") == 0
    assert r.zrange("hotkv-test:default.XQ", 0, -1) == [failed.options["redis_message_id"].encode()]
    assert r.hlen("hotkv-test:default.XQ.msgs") == 1
    r.close()
    broker.close()


def test_celery_worker_results_retries_and_countdown(server):
    import celery
    from celery.contrib.testing.worker import start_worker
    base = "redis://%s:%d" % (server.host, server.port)
    app = celery.Celery("hotkv_test", broker=base + "/3", backend=base + "/4", set_as_current=False)
    app.conf.update(task_acks_late=True, worker_hijack_root_logger=False,
                    broker_transport_options={"visibility_timeout": 30},
                    broker_connection_retry_on_startup=False)
    import redis
    r = redis.Redis(host=server.host, port=server.port, db=3)
    r.flushall()

    @app.task
    def add(x, y):
        return x + y

    @app.task(bind=True, max_retries=3, default_retry_delay=0.1)
    def flaky(self, n):
        if self.request.retries < n:
            raise self.retry()
        return "ok after %d" % self.request.retries

    with start_worker(app, perform_ping_check=False, pool="solo", concurrency=1,
                      shutdown_timeout=10):
        results = [add.delay(i, i) for i in range(20)]
        assert [res.get(timeout=15) for res in results] == [2 * i for i in range(20)]
        assert flaky.delay(2).get(timeout=15) == "ok after 2"
        assert add.apply_async((1, 2), countdown=0.3).get(timeout=15) == 3
    # Late acks leave nothing unacknowledged once the worker is done.
    assert r.llen("celery") == 0
    assert r.hlen("unacked") == 0
    assert r.zcard("unacked_index") == 0
    r.close()
    app.close()


def test_taskiq_stream_broker_acks_and_reclaims_a_dead_workers_message(server):
    """taskiq-redis's RedisStreamBroker as its workers use it: worker a
    takes four messages, acks three and dies; worker b reads the rest and,
    once a's message has been idle past idle_timeout, XAUTOCLAIMs it.
    Every message reaches exactly one live worker; nothing stays pending."""
    import asyncio

    import redis
    from taskiq.message import BrokerMessage
    from taskiq_redis import RedisStreamBroker
    url = "redis://%s:%d/5" % (server.host, server.port)
    r = redis.Redis(host=server.host, port=server.port, db=5)
    r.flushdb()

    def message(i):
        return BrokerMessage(task_id=str(i), task_name="job", message=b"job-%d" % i, labels={})

    def broker(name):
        return RedisStreamBroker(url, queue_name="jobs", consumer_name=name, maxlen=1000,
                                 xread_block=100, xread_count=4, idle_timeout=300)

    async def scenario():
        producer, a, b = broker("producer"), broker("a"), broker("b")
        for x in (producer, a, b):
            await x.startup()
        for i in range(6):
            await producer.kick(message(i))
        got_a = []
        async for m in a.listen():
            got_a.append(m.data)
            if len(got_a) == 4:
                break                     # dies holding job-3, never acked
            await m.ack()
        await a.shutdown()
        got_b = []
        listen = b.listen()
        for _ in range(2):                # the two nobody had
            m = await listen.__anext__()
            got_b.append(m.data)
            await m.ack()
        await asyncio.sleep(0.4)          # job-3 is now idle past idle_timeout
        await producer.kick(message(6))
        for _ in range(2):                # b's XAUTOCLAIM after that read, then a new read
            m = await listen.__anext__()
            got_b.append(m.data)
            await m.ack()
        await listen.aclose()
        await b.shutdown()
        await producer.shutdown()
        return got_a, got_b

    got_a, got_b = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert got_a == [b"job-0", b"job-1", b"job-2", b"job-3"]
    assert got_b == [b"job-4", b"job-5", b"job-3", b"job-6"]
    assert r.xlen("jobs") == 7
    assert r.xpending("jobs", "taskiq")["pending"] == 0
    consumers = {c["name"]: c["pending"] for c in r.xinfo_consumers("jobs", "taskiq")}
    assert consumers == {b"a": 0, b"b": 0}
    assert r.exists("autoclaim:taskiq:jobs") == 0     # the lock was released
    r.close()


BULLMQ_SCRIPT = r"""
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';
const connection = new IORedis({
  host: process.env.HOST, port: Number(process.env.PORT), maxRetriesPerRequest: null,
});
const queue = new Queue('jobs', { connection });
const results = [];
let failures = 0;
const worker = new Worker('jobs', async job => {
  if (job.name === 'flaky' && job.attemptsMade < 2) throw new Error('flaky');
  if (job.name === 'bad') throw new Error('bad');
  return job.data.x * 2;
}, { connection, concurrency: 4 });
worker.on('completed', (job, r) => results.push(r));
worker.on('failed', () => failures++);
for (let i = 0; i < 30; i++) await queue.add('double', { x: i });
await queue.add('delayed', { x: 1000 }, { delay: 300 });
await queue.add('flaky', { x: 7 }, { attempts: 3, backoff: { type: 'fixed', delay: 50 } });
await queue.add('bad', { x: 0 }, { attempts: 1 });
await queue.add('prio', { x: 5 }, { priority: 3 });
const t0 = Date.now();
while ((results.length < 33 || failures < 3) && Date.now() - t0 < 20000)
  await new Promise(r => setTimeout(r, 50));
const counts = await queue.getJobCounts();
console.log(JSON.stringify({ results: results.sort((a, b) => a - b), failures, counts }));
await worker.close(); await queue.close(); await connection.quit();
"""


def test_bullmq_worker_on_ioredis(server):
    """BullMQ (Lua scripts throughout, msgpack-packed arguments, delayed,
    prioritized and retried jobs) with its ioredis connection."""
    import json
    import os
    import subprocess

    import redis

    from support import npm_packages_dir
    node_dir = npm_packages_dir("bullmq@6", "ioredis@5")
    redis.Redis(host=server.host, port=server.port).flushall()
    script = os.path.join(node_dir, "bullmq_%d.mjs" % os.getpid())
    with open(script, "w") as f:
        f.write(BULLMQ_SCRIPT)
    try:
        proc = subprocess.run(["node", script], cwd=node_dir, capture_output=True, text=True,
                              timeout=60,
                              env=dict(os.environ, HOST=server.host, PORT=str(server.port)))
    finally:
        os.unlink(script)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["results"] == sorted([2 * i for i in range(30)] + [2000, 14, 10])
    assert got["failures"] == 3            # flaky twice, bad once
    assert got["counts"] == {"active": 0, "completed": 33, "delayed": 0, "failed": 1,
                             "prioritized": 0, "waiting": 0, "waiting-children": 0}
