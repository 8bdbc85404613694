// BullMQ end to end against one server (bench/run.py's bullmq scenario):
// add N jobs (addBulk, 100 a call), process them with a Worker of
// concurrency 10, then Queue.clean of the completed jobs; prints one JSON
// line: jobs/s added, jobs/s processed, jobs/s end to end, clean ms.
// Usage: node bullmq.mjs PORT N      (run from a directory with bullmq's
// node_modules; bench/run.py copies it there).
import { Queue, Worker } from 'bullmq';

const port = Number(process.argv[2]);
const n = Number(process.argv[3]);
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const name = 'bench' + process.pid;
const queue = new Queue(name, { connection });
await queue.obliterate({ force: true }).catch(() => {});

const t0 = performance.now();
for (let i = 0; i < n; i += 100) {
  const batch = [];
  for (let j = i; j < Math.min(n, i + 100); j++) batch.push({ name: 'job', data: { j } });
  await queue.addBulk(batch);
}
const t1 = performance.now();
let done = 0;
let finish;
const finished = new Promise((resolve) => { finish = resolve; });
const worker = new Worker(name, async (job) => job.data.j, { connection, concurrency: 10 });
worker.on('completed', () => { if (++done === n) finish(); });
await finished;
const t2 = performance.now();
await worker.close();
const cleaned = await queue.clean(0, n, 'completed');
const t3 = performance.now();
console.log(JSON.stringify({
  added_per_s: n / ((t1 - t0) / 1000), processed_per_s: n / ((t2 - t1) / 1000),
  end_to_end_per_s: n / ((t2 - t0) / 1000), clean_ms: t3 - t2, cleaned: cleaned.length,
}));
await queue.obliterate({ force: true }).catch(() => {});
await queue.close();
