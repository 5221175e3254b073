/**
 * Data-plane throughput: put + claim + getData (+ clear) cycles of 1 MiB and 32 MiB samples on the
 * local host store, the local GPU store, Redis, and Redis behind the WebSocket gateway, against two
 * ceilings measured on this machine: host memory copy bandwidth (Uint8Array.set of 256 MiB) and
 * loopback TCP bandwidth (a node:net echo on 127.0.0.1). Prints one JSON line per measurement.
 *
 *   npx tsx bench/dataplane.ts [--quick]
 *
 * GB/s = sample payload bytes that completed the whole put → claim → get cycle per second (1 GB =
 * 1e9 bytes); each payload byte is written into the store once and read out once. The GPU store's
 * get lends the resident tensor (no read-back), as a GPU consumer would use it.
 */
import { createConnection, createServer, type Socket } from 'node:net';
import process from 'node:process';
import { Gpu } from '../src/gpu/gpu.ts';
import { createDataPlaneClient } from '../src/dataplane/factory.ts';
import type { DataPlaneClient, HostTensor } from '../src/dataplane/types.ts';
import { connectDataPlaneGateway } from '../src/dataplane/ws-client.ts';
import { newGatewayToken, nodeWebSocket, startDataPlaneGateway } from '../src/platform/dataplane-gateway-node.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { connectRedis } from '../src/platform/redis-node.ts';
import { startRedisServer } from '../test/dataplane/redis-fixture.ts';

const MiB = 1 << 20;
const quick = process.argv.includes('--quick');
/** Each configuration runs at least this many samples and at least this long (after one warm-up batch). */
const MIN_SECONDS = quick ? 0.5 : 2;

function emit(record: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench: 'dataplane', ...record }));
}

function memcpyGBps(): number {
  const bytes = 256 * MiB;
  const src = new Uint8Array(bytes).fill(7);
  const dst = new Uint8Array(bytes);
  dst.set(src); // fault the pages in
  let reps = 0;
  const start = performance.now();
  while (reps < 4 || performance.now() - start < MIN_SECONDS * 500) {
    dst.set(src);
    reps++;
  }
  const s = (performance.now() - start) / 1000;
  if (dst[bytes - 1] !== 7) throw new Error('copy check failed');
  return (bytes * reps) / s / 1e9;
}

/** Payload bytes per second through a TCP echo on 127.0.0.1 (each byte crosses loopback twice). */
async function loopbackEchoGBps(): Promise<number> {
  const server = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const socket: Socket = createConnection({ port, host: '127.0.0.1' });
  await new Promise<void>((r) => socket.once('connect', () => r()));
  const chunk = new Uint8Array(MiB).fill(3);
  const total = (quick ? 256 : 1024) * MiB;
  const start = performance.now();
  const received = new Promise<void>((resolve) => {
    let got = 0;
    socket.on('data', (d: Buffer) => {
      got += d.byteLength;
      if (got >= total) resolve();
    });
  });
  for (let sent = 0; sent < total; sent += chunk.byteLength) {
    if (!socket.write(chunk)) await new Promise<void>((r) => socket.once('drain', () => r()));
  }
  await received;
  const s = (performance.now() - start) / 1000;
  socket.destroy();
  await new Promise<void>((r) => server.close(() => r()));
  return total / s / 1e9;
}

interface Result {
  readonly samples: number;
  readonly seconds: number;
}

async function cycle(client: DataPlaneClient, sampleBytes: number, batch: number, minSamples: number): Promise<Result> {
  await client.registerPartition({ partition: 'bench', fields: { x: 'f32' }, consumerTasks: ['trainer'], replace: true });
  const row: HostTensor = { dtype: 'f32', shape: [sampleBytes / 4], data: new Float32Array(sampleBytes / 4).fill(1.5) };
  let next = 0;
  const one = async (): Promise<void> => {
    const ids = Array.from({ length: batch }, () => `s${next++}`);
    await client.putSamples({ partition: 'bench', sampleIds: ids, columns: { x: ids.map(() => row) } });
    const meta = await client.claimMeta({
      partition: 'bench',
      task: 'trainer',
      requiredFields: ['x'],
      batchSize: batch,
      timeoutMs: 60_000,
    });
    const cols = await client.getData(meta, ['x']);
    if (cols.x.length !== batch) throw new Error(`got ${cols.x.length} rows, expected ${batch}`);
    await client.clearSamples('bench', ids);
  };
  await one(); // warm-up
  let samples = 0;
  const start = performance.now();
  while (samples < minSamples || performance.now() - start < MIN_SECONDS * 1000) {
    await one();
    samples += batch;
  }
  return { samples, seconds: (performance.now() - start) / 1000 };
}

const memcpy = memcpyGBps();
emit({ kind: 'ceiling', what: 'memcpy (Uint8Array.set, 256 MiB)', GBps: +memcpy.toFixed(3) });
const loopback = await loopbackEchoGBps();
emit({ kind: 'ceiling', what: 'loopback TCP echo on 127.0.0.1 (payload bytes/s; each byte crosses twice)', GBps: +loopback.toFixed(3) });

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
const redis = await startRedisServer();
const token = newGatewayToken();
const gateway = await startDataPlaneGateway({
  token,
  openClient: () =>
    createDataPlaneClient(
      { impl: 'transferQueue', backend: { kind: 'redis', url: redis.url, keyPrefix: 'gw:' }, claimPollMs: 1 },
      { connectRedis: (url) => connectRedis(url) },
    ),
});

const backends: { name: string; open: () => Promise<DataPlaneClient> }[] = [
  {
    name: 'local-host',
    open: () => createDataPlaneClient({ impl: 'transferQueue', backend: { kind: 'local', columns: 'host' }, claimPollMs: 1 }),
  },
  {
    name: 'local-gpu',
    open: () => createDataPlaneClient({ impl: 'transferQueue', backend: { kind: 'local', columns: 'gpu' }, claimPollMs: 1 }, { gpu }),
  },
  {
    name: 'redis',
    open: () =>
      createDataPlaneClient(
        { impl: 'transferQueue', backend: { kind: 'redis', url: redis.url, keyPrefix: 'bench:' }, claimPollMs: 1 },
        { connectRedis: (url) => connectRedis(url) },
      ),
  },
  { name: 'gateway->redis', open: () => connectDataPlaneGateway({ url: gateway.url, token, WebSocket: nodeWebSocket }) },
];
const sizes = [
  { mib: 1, batch: 8, minSamples: 64 },
  { mib: 32, batch: 1, minSamples: 8 },
];

try {
  for (const b of backends) {
    const client = await b.open();
    try {
      for (const s of sizes) {
        const r = await cycle(client, s.mib * MiB, s.batch, quick ? s.batch * 2 : s.minSamples);
        const GBps = (r.samples * s.mib * MiB) / r.seconds / 1e9;
        emit({
          kind: 'put+claim+get',
          backend: b.name,
          clientKind: client.kind,
          sampleMiB: s.mib,
          batch: s.batch,
          samples: r.samples,
          seconds: +r.seconds.toFixed(3),
          samplesPerSec: +(r.samples / r.seconds).toFixed(1),
          GBps: +GBps.toFixed(3),
          vsMemcpy: +(GBps / memcpy).toFixed(3),
          vsLoopback: +(GBps / loopback).toFixed(3),
        });
      }
    } finally {
      await client.close();
    }
  }
} finally {
  await gateway.close();
  await redis.stop();
  gpu.destroy();
}
await nodePlatform.exit(0);
