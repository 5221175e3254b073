/**
 * One process of the multi-process proof (test/dataplane/multiprocess.ts), Node only.
 *   producer <url> <index> <count> <putBatch> <maxBytesOutstanding>
 *   consumer <url> <name>          (claims, verifies, acks, clears; stops on "stop" from stdin)
 *   victim   <url>                 (claims one leased batch, reports it, then hangs until killed)
 * Reports go to stdout as one JSON object per line; the parent parses them.
 */
import process from 'node:process';
import { connectRedis } from '../../src/platform/redis-node.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { MetricsDataPlaneClient } from '../../src/dataplane/observability.ts';
import { ClaimTimeoutError, LeaseLostError, type HostTensor } from '../../src/dataplane/types.ts';

const PARTITION = 'mp';
const TASK = 'train';
const FIELDS = ['input_ids', 'hidden'] as const;
/** Consumers' lease: long enough for a live consumer to ack, short enough that a killed one's rows return soon. */
const LEASE_MS = 5000;

/** The payload is a pure function of (producer, index), so any consumer can verify every byte. */
function payload(producer: number, index: number): { len: number; ids: number[]; hidden: number[] } {
  const len = 1 + ((index * 7 + producer) % 9);
  const ids = Array.from({ length: len }, (_, t) => producer * 1_000_000 + index * 10 + t);
  const hidden = Array.from({ length: len * 2 }, (_, k) => Math.fround((index % 1000) / 8 + producer + k / 4));
  return { len, ids, hidden };
}

function sampleId(producer: number, index: number): string {
  return `p${producer}_s${index}`;
}

function report(record: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

async function client(url: string) {
  return createDataPlaneClient(
    { impl: 'transferQueue', backend: { kind: 'redis', url, keyPrefix: 'mp' }, claimPollMs: 10 },
    { connectRedis },
  );
}

async function producer(url: string, index: number, count: number, putBatch: number, maxBytes: number): Promise<void> {
  const dp = new MetricsDataPlaneClient(await client(url), { maxBytesOutstanding: maxBytes });
  let waits = 0;
  for (let start = 0; start < count; start += putBatch) {
    if (dp.backpressure().blocked) waits += 1;
    await dp.waitForCapacity({ timeoutMs: 120_000, pollMs: 10 });
    const ids: string[] = [];
    const inputIds: HostTensor[] = [];
    const hidden: HostTensor[] = [];
    const tags: Record<string, number | string>[] = [];
    for (let i = start; i < Math.min(count, start + putBatch); i++) {
      const p = payload(index, i);
      ids.push(sampleId(index, i));
      inputIds.push({ dtype: 'i32', shape: [p.len], data: Int32Array.from(p.ids) });
      hidden.push({ dtype: 'f32', shape: [p.len, 2], data: Float32Array.from(p.hidden) });
      tags.push({ seq_len: p.len, producer: `p${index}` });
    }
    await dp.putSamples({ partition: PARTITION, sampleIds: ids, columns: { input_ids: inputIds, hidden }, tags });
  }
  const t = dp.totals();
  report({
    kind: 'produced',
    producer: index,
    count,
    bytesPut: t.bytesPut,
    peakBytesOutstanding: t.peakBytesOutstanding,
    backpressureWaits: waits,
  });
  await dp.close();
}

function verify(id: string, ids: HostTensor, hidden: HostTensor, tagLen: unknown): string | null {
  const m = /^p(\d+)_s(\d+)$/.exec(id);
  if (!m) return `unexpected id ${id}`;
  const p = payload(Number(m[1]), Number(m[2]));
  if (tagLen !== p.len) return `${id}: seq_len tag ${String(tagLen)} != ${p.len}`;
  if (ids.dtype !== 'i32' || ids.shape.join() !== String(p.len) || Array.from(ids.data).join() !== p.ids.join())
    return `${id}: input_ids differ`;
  if (hidden.dtype !== 'f32' || hidden.shape.join() !== `${p.len},2` || Array.from(hidden.data).join() !== p.hidden.join())
    return `${id}: hidden differs`;
  return null;
}

async function consumer(url: string, name: string): Promise<void> {
  const dp = await client(url);
  let stop = false;
  let go: () => void = () => {};
  const started = new Promise<void>((resolve) => (go = resolve));
  process.stdin.on('data', (chunk) => {
    if (String(chunk).includes('go')) go();
    if (String(chunk).includes('stop')) stop = true;
  });
  // Connected: wait for the parent to start every consumer at once, so that on a loaded machine a
  // fast-starting consumer cannot drain the task before a slow-starting one has claimed anything.
  report({ kind: 'ready', consumer: name });
  await started;
  let batches = 0;
  while (!stop) {
    let meta;
    try {
      meta = await dp.claimMeta({
        partition: PARTITION,
        task: TASK,
        requiredFields: [...FIELDS],
        batchSize: 64,
        minBatch: 1,
        timeoutMs: 500,
        leaseMs: LEASE_MS,
      });
    } catch (err) {
      if (err instanceof ClaimTimeoutError) continue; // idle: producers are slow, or only leased rows remain
      throw err;
    }
    const data = await dp.getData(meta, [...FIELDS]);
    const bad: string[] = [];
    meta.sampleIds.forEach((id, k) => {
      const problem = verify(id, data.input_ids[k] as HostTensor, data.hidden[k] as HostTensor, meta.tags?.[k]?.seq_len);
      if (problem) bad.push(problem);
    });
    let acked: readonly string[];
    try {
      // Ack and clear in one atomic step: a kill right after it strands no consumed rows.
      acked = (await dp.ackClaim(meta, { clear: true })).settled;
    } catch (err) {
      if (!(err instanceof LeaseLostError)) throw err;
      acked = err.settled;
      report({ kind: 'lost', consumer: name, ids: err.lost });
    }
    batches += 1;
    report({ kind: 'acked', consumer: name, ids: acked, bad, lengthsSum: (meta.sequenceLengths ?? []).reduce((a, b) => a + b, 0) });
  }
  report({ kind: 'consumer-done', consumer: name, batches });
  await dp.close();
}

async function victim(url: string): Promise<void> {
  const dp = await client(url);
  const meta = await dp.claimMeta({
    partition: PARTITION,
    task: TASK,
    requiredFields: [...FIELDS],
    batchSize: 16,
    timeoutMs: 60_000,
    leaseMs: 1500,
  });
  report({ kind: 'claimed', ids: meta.sampleIds });
  // Simulate a consumer that dies mid-batch: never ack, never release; the parent SIGKILLs us.
  setInterval(() => undefined, 1000);
}

const [role, url, ...rest] = process.argv.slice(2);
try {
  if (role === 'producer') await producer(url, Number(rest[0]), Number(rest[1]), Number(rest[2]), Number(rest[3]));
  else if (role === 'consumer') await consumer(url, rest[0]);
  else if (role === 'victim') await victim(url);
  else throw new Error(`unknown role ${role}`);
  if (role !== 'victim') process.exit(0);
} catch (err) {
  report({ kind: 'error', role, message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
}
