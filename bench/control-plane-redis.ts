/**
 * Control-plane cost on Redis, on a durable server (appendonly yes, appendfsync always: every reply
 * waits for an fsync of the AOF in a temp dir) and, for reference, one with persistence off.
 * Prints one JSON line per measurement.
 *
 *   npx tsx bench/control-plane-redis.ts
 *
 * ack-latency: one recordTrainAck of 64 ids (one script: SADD + marker HSET), 200 times in a row;
 *   median and p99 wall time per ack as the trainer sees it.
 * commit-throughput: commitSamples of 64 fresh refs per batch, batches back to back; refs/s.
 *
 * controller: the whole path a sample's metadata takes, through DataFlowController over the Redis
 *   stores (openRedisControlStores): commitSamples (dedup + order + enqueue), leaseTrainRefs, then
 *   ackTrainRefs (the durable marker first, then the lease release), 64 refs per batch, 8 batches in
 *   flight; against a controller over the in-memory stores the same way.
 *
 * Add a measurement by appending to MEASUREMENTS; each gets a fresh run id on both servers.
 */
import { DataFlowController } from '../src/control/controller.ts';
import { InMemoryMetadataStore } from '../src/control/metadata-store.ts';
import { openRedisControlStores } from '../src/control/redis/redis-control-stores.ts';
import { RedisMetadataStore } from '../src/control/redis/redis-metadata-store.ts';
import { RedisRefQueue } from '../src/control/redis/redis-ref-queue.ts';
import { SampleRefQueue } from '../src/control/sample-ref-queue.ts';
import type { RefQueue } from '../src/control/control-stores.ts';
import type { SampleRef } from '../src/contracts/records.ts';
import { connectRedis } from '../src/platform/redis-node.ts';
import { sampleRef } from '../test/contracts/fixtures.ts';
import { startRedisServer, type RedisServer } from '../test/dataplane/redis-fixture.ts';

const BATCH = 64;

interface Measurement {
  readonly name: string;
  run(server: RedisServer, runId: string): Promise<Record<string, number>>;
}

function emit(record: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench: 'control-plane-redis', ...record }));
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function openStore(server: RedisServer, runId: string): Promise<RedisMetadataStore> {
  // requireDurable false so the same code measures the reference server too.
  return RedisMetadataStore.open(await connectRedis(server.url), runId, { requireDurable: false, ownsLink: true });
}

function refBatches(runId: string, batches: number): SampleRef[][] {
  return Array.from({ length: batches }, (_, b) => Array.from({ length: BATCH }, (_, i) => sampleRef(`${runId}-${b}-${i}`)));
}

const MEASUREMENTS: readonly Measurement[] = [
  {
    name: 'ack-latency',
    async run(server, runId) {
      const store = await openStore(server, runId);
      const acks = 200;
      const ids = Array.from({ length: acks + 10 }, (_, a) => Array.from({ length: BATCH }, (_, i) => `${runId}-${a}-${i}`));
      const ms: number[] = [];
      for (let a = 0; a < ids.length; a++) {
        const start = performance.now();
        await store.recordTrainAck(ids[a], { globalStep: a, optimizerDurable: a % 2 === 0 });
        if (a >= 10) ms.push(performance.now() - start); // the first 10 warm up the script cache and JIT
      }
      await store.close();
      ms.sort((x, y) => x - y);
      return { acks, ids_per_ack: BATCH, median_ms: percentile(ms, 0.5), p99_ms: percentile(ms, 0.99), max_ms: ms[ms.length - 1] };
    },
  },
  {
    name: 'commit-throughput',
    async run(server, runId) {
      const store = await openStore(server, runId);
      const batches = refBatches(runId, 210);
      for (const batch of batches.slice(0, 10)) await store.commitSamples(batch);
      const start = performance.now();
      for (const batch of batches.slice(10)) await store.commitSamples(batch);
      const seconds = (performance.now() - start) / 1000;
      await store.close();
      const refs = (batches.length - 10) * BATCH;
      return { refs, refs_per_batch: BATCH, refs_per_s: refs / seconds, ms_per_batch: (seconds * 1000) / (batches.length - 10) };
    },
  },
  {
    // queue-traffic: commit-free RefQueue traffic. Each of 8 loops puts a batch of 64 fresh refs,
    // gets up to 64 and acks what it got, so 8 batches are in flight at once (a get may lease
    // another loop's refs; leftovers are drained at the end, inside the timing). RedisRefQueue over
    // one link, then the in-memory SampleRefQueue driven the same way (memory_refs_per_s).
    // refs_per_s = refs that completed put → get → ack per second, drain included.
    name: 'queue-traffic',
    async run(server, runId) {
      const inFlight = 8;
      const traffic = async (q: RefQueue, batches: readonly SampleRef[][]): Promise<number> => {
        for (const batch of batches.slice(0, 10)) {
          await q.put(batch); // warm-up: script cache, JIT
          await q.ack(await q.get(BATCH));
        }
        let next = 10;
        let acked = 0;
        const loop = async (): Promise<void> => {
          while (next < batches.length) {
            await q.put(batches[next++]);
            const released = await q.ack(await q.get(BATCH));
            acked += released; // not `acked += await …`: that reads acked before the await and loses other loops' counts
          }
        };
        const start = performance.now();
        await Promise.all(Array.from({ length: inFlight }, loop));
        while (acked < (batches.length - 10) * BATCH) {
          const released = await q.ack(await q.get(BATCH));
          if (released === 0)
            throw new Error(`queue-traffic: ${acked} of ${(batches.length - 10) * BATCH} refs acked, and nothing is left to get`);
          acked += released;
        }
        const seconds = (performance.now() - start) / 1000;
        return acked / seconds;
      };
      const link = await connectRedis(server.url);
      const redis = await traffic(new RedisRefQueue(link, runId), refBatches(`${runId}-r`, 410));
      await link.close();
      const memory = await traffic(new SampleRefQueue(), refBatches(`${runId}-m`, 410));
      return { refs: 400 * BATCH, refs_per_batch: BATCH, batches_in_flight: inFlight, refs_per_s: redis, memory_refs_per_s: memory };
    },
  },
  {
    name: 'controller',
    async run(server, runId) {
      const inFlight = 8;
      const path = async (controller: DataFlowController, run: string): Promise<number> => {
        const worker = await controller.registerRolloutWorker({ workerId: 'w' });
        const trainer = await controller.registerTrainer({ trainerId: 't' });
        const batches = Array.from({ length: 210 }, (_, b) =>
          Array.from({ length: BATCH }, (_, i) => sampleRef(`${run}-${b}-${i}`, { runId: run })),
        );
        let step = 0;
        const one = async (batch: readonly SampleRef[]): Promise<number> => {
          await controller.commitSamples(worker, batch);
          const leased = await controller.leaseTrainRefs(trainer, BATCH);
          await controller.ackTrainRefs(
            trainer,
            leased.map((r) => r.sampleId),
            { globalStep: ++step, optimizerDurable: true },
          );
          return leased.length;
        };
        for (const batch of batches.slice(0, 10)) await one(batch); // warm-up
        let next = 10;
        let acked = 0;
        const loop = async (): Promise<void> => {
          while (next < batches.length) {
            const n = await one(batches[next++]);
            acked += n;
          }
        };
        const start = performance.now();
        await Promise.all(Array.from({ length: inFlight }, loop));
        const seconds = (performance.now() - start) / 1000;
        if (acked !== 200 * BATCH) throw new Error(`controller: ${acked} of ${200 * BATCH} refs leased and acked`);
        return acked / seconds;
      };
      const link = await connectRedis(server.url);
      const redis = await path(DataFlowController.over(runId, await openRedisControlStores(link, runId, { requireDurable: false })), runId);
      await link.close();
      const memory = await path(new DataFlowController({ runId: `${runId}-m`, store: new InMemoryMetadataStore() }), `${runId}-m`);
      return { refs: 200 * BATCH, refs_per_batch: BATCH, batches_in_flight: inFlight, refs_per_s: redis, memory_refs_per_s: memory };
    },
  },
];

const servers = [
  { persistence: 'durable', server: await startRedisServer({ durable: true }) },
  { persistence: 'off', server: await startRedisServer() },
];
try {
  for (const m of MEASUREMENTS) {
    for (const { persistence, server } of servers) {
      const runId = `bench-${m.name}-${Date.now().toString(36)}`;
      const result = await m.run(server, runId);
      emit({
        measurement: m.name,
        persistence,
        ...Object.fromEntries(Object.entries(result).map(([k, v]) => [k, Number(v.toPrecision(4))])),
      });
    }
  }
} finally {
  for (const { server } of servers) await server.stop();
}
