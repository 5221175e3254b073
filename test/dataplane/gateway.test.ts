/**
 * The WebSocket gateway (src/platform/dataplane-gateway-node.ts) and its client
 * (src/dataplane/ws-client.ts), in Node: the whole conformance suite through gateway → Redis, plus
 * the gateway's own rules (token, loopback bind, size bounds, framing, dropped connections).
 * Every test starts its own redis-server and gateway; Node-only modules load at run time.
 */
import type { Suite } from '../harness/suite.ts';
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { toHostRow } from '../../src/dataplane/column-store.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { DataPlaneError, type DataPlaneClient } from '../../src/dataplane/types.ts';
import { connectDataPlaneGateway } from '../../src/dataplane/ws-client.ts';
import { conformanceSuite } from './conformance.ts';
import { nodeOnlyImport } from './backends.test.ts';

type RedisFixture = typeof import('./redis-fixture.ts');
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');
type GatewayPlatform = typeof import('../../src/platform/dataplane-gateway-node.ts');
type WsModule = typeof import('ws');

interface Rig {
  readonly url: string;
  readonly token: string;
  readonly gw: GatewayPlatform;
  connect(options?: { gpu?: Gpu; namespace?: string; token?: string }): Promise<DataPlaneClient>;
  /** Stops the gateway, then Redis. */
  stop(): Promise<void>;
}

/** redis-server + gateway (one Redis connection per WebSocket connection, key prefix per namespace). */
type RigOptions = { maxMessageBytes?: number; maxInFlight?: number; allowedOrigins?: string[] };

export async function startRig(options: RigOptions = {}): Promise<Rig> {
  const { startRedisServer } = await nodeOnlyImport<RedisFixture>('./redis-fixture.ts');
  const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
  const gw = await nodeOnlyImport<GatewayPlatform>('../../src/platform/dataplane-gateway-node.ts');
  const redis = await startRedisServer();
  try {
    const token = gw.newGatewayToken();
    const gateway = await gw.startDataPlaneGateway({
      token,
      maxMessageBytes: options.maxMessageBytes,
      maxInFlight: options.maxInFlight,
      allowedOrigins: options.allowedOrigins,
      openClient: (info) =>
        createDataPlaneClient(
          {
            impl: 'transferQueue',
            backend: { kind: 'redis', url: redis.url, keyPrefix: `gw:${info.namespace ?? 'default'}:` },
            claimPollMs: 5,
          },
          { connectRedis: (url) => connectRedis(url) },
        ),
    });
    return {
      url: gateway.url,
      token,
      gw,
      connect: (o = {}) =>
        connectDataPlaneGateway({
          url: gateway.url,
          token: o.token ?? token,
          WebSocket: gw.nodeWebSocket,
          gpu: o.gpu,
          namespace: o.namespace,
        }),
      stop: async () => {
        await gateway.close();
        await redis.stop();
      },
    };
  } catch (err) {
    await redis.stop();
    throw err;
  }
}

export const gatewayConformance: Suite = conformanceSuite(
  'dataplane/conformance/gateway',
  async (_ctx, gpu) => {
    const rig = await startRig();
    const clients: DataPlaneClient[] = [];
    const open = async (): Promise<DataPlaneClient> => {
      const c = await rig.connect({ gpu });
      clients.push(c);
      return c;
    };
    try {
      const client = await open();
      return {
        client,
        peer: open,
        host: (row) => toHostRow(row, gpu, 'conformance read-back'),
        close: async () => {
          for (const c of clients) await c.close();
          await rig.stop();
        },
      };
    } catch (err) {
      await rig.stop();
      throw err;
    }
  },
  { only: ['node'] },
);

const f32Row = (n: number, seed: number) => ({
  dtype: 'f32' as const,
  shape: [n],
  data: Float32Array.from({ length: n }, (_, i) => Math.fround(Math.sin(i * 0.37 + seed))),
});

/** Upgrade attempt with raw `ws`: resolves to the HTTP status of a refusal, or 101 when accepted. */
async function upgradeStatus(url: string, protocols: string[], origin?: string): Promise<number> {
  const { WebSocket } = await nodeOnlyImport<WsModule>('ws');
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, origin ? { origin } : {});
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      resolve(101);
      ws.close();
    });
    ws.on('error', (err) => reject(err));
  });
}

/** Sends raw frames on an authenticated connection; resolves with the close code and reason. */
async function rawClose(rig: Rig, frames: (string | Uint8Array)[]): Promise<{ code: number; reason: string }> {
  const { WebSocket } = await nodeOnlyImport<WsModule>('ws');
  const { GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX } = await import('../../src/dataplane/gateway-protocol.ts');
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(rig.url, [GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX + rig.token]);
    ws.on('message', () => {
      // After the hello: break the protocol.
      for (const f of frames) ws.send(f);
    });
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    ws.on('error', reject);
  });
}

export const gatewaySuite: Suite = defineSuite('dataplane/gateway', (t) => {
  const only = ['node'] as const;
  const test = (name: string, body: (rig: Rig) => Promise<void>, rigOptions: RigOptions = {}) =>
    t.test(
      name,
      async () => {
        const rig = await startRig(rigOptions);
        try {
          await body(rig);
        } finally {
          await rig.stop();
        }
      },
      { only: [...only], timeoutMs: 60_000 },
    );

  test('binds 127.0.0.1 by default, needs the token, answers plain HTTP with 426', async (rig) => {
    const { GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX } = await import('../../src/dataplane/gateway-protocol.ts');
    assert(rig.url.startsWith('ws://127.0.0.1:'), `loopback by default: ${rig.url}`);
    assertEqual(await upgradeStatus(rig.url, [GATEWAY_PROTOCOL]), 401, 'no token → 401');
    assertEqual(await upgradeStatus(rig.url, [GATEWAY_PROTOCOL, `${TOKEN_PROTOCOL_PREFIX}${'x'.repeat(64)}`]), 401, 'wrong token → 401');
    assertEqual(await upgradeStatus(rig.url, [`${TOKEN_PROTOCOL_PREFIX}${rig.token}`]), 400, 'token without the protocol name → 400');
    assertEqual(await upgradeStatus(rig.url, [GATEWAY_PROTOCOL, `${TOKEN_PROTOCOL_PREFIX}${rig.token}`]), 101, 'right token → upgraded');
    const http = await fetch(rig.url.replace('ws://', 'http://'));
    assertEqual(http.status, 426, 'plain HTTP → 426 Upgrade Required');
    await assertRejects(
      () => rig.connect({ token: 'y'.repeat(40) }),
      /closed the connection \(code 1006: refused, unreachable, or the token was rejected\)/,
      'the client reports a refused token clearly',
    );
    await assertRejects(
      () => rig.connect({ token: 'short' }),
      /token must be 16\.\.256 characters/,
      'malformed token rejected before connecting',
    );
  });

  test(
    'an Origin allow-list refuses pages from other origins with 403',
    async (rig) => {
      const { GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX } = await import('../../src/dataplane/gateway-protocol.ts');
      const offer = [GATEWAY_PROTOCOL, `${TOKEN_PROTOCOL_PREFIX}${rig.token}`];
      assertEqual(await upgradeStatus(rig.url, offer, 'http://127.0.0.1:5173'), 101, 'listed origin');
      assertEqual(await upgradeStatus(rig.url, offer, 'http://evil.example'), 403, 'other origin');
      assertEqual(await upgradeStatus(rig.url, offer), 403, 'no origin at all');
    },
    { allowedOrigins: ['http://127.0.0.1:5173'] },
  );

  test('kind names the server-side backend; namespaces are separate stores; values round-trip bit-exact', async (rig) => {
    const a = await rig.connect({ namespace: 'tab-a' });
    const b = await rig.connect({ namespace: 'tab-b' });
    try {
      assertEqual(a.kind, 'gateway/transferQueue/redis', 'kind');
      await a.registerPartition({ partition: 'train', fields: { hidden: 'f32' }, consumerTasks: ['trainer'] });
      await expectCode(() => b.partitionStats('train'), 'unknown_partition', "namespace tab-b does not see tab-a's partition");
      const big = f32Row(2 * 1024 * 1024, 1); // 8 MiB: many WebSocket fragments on the wire
      const small = f32Row(3, 2);
      await a.putSamples({
        partition: 'train',
        sampleIds: ['big', 'small'],
        columns: { hidden: [big, small] },
        tags: [{ seq_len: 7 }, { seq_len: 1 }],
      });
      const meta = await a.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['hidden'], batchSize: 2 });
      assertDeepEqual(meta.sequenceLengths, [7, 1], 'tags come back on the claim');
      const got = await a.getData(meta, ['hidden']);
      const row = await toHostRow(got.hidden[0], undefined, 'gateway read');
      assertDeepEqual(row.shape, [big.data.length], 'shape');
      let same = row.data.length === big.data.length;
      for (let i = 0; same && i < big.data.length; i++) same = Object.is(row.data[i], big.data[i]);
      assert(same, '8 MiB row bit-exact');
      assertEqual((await a.partitionStats('train')).bytesHeld, big.data.byteLength + small.data.byteLength, 'bytes held');
    } finally {
      await a.close();
      await b.close();
    }
  });

  test(
    'message sizes are bounded with clear errors, in both directions',
    async (rig) => {
      const c = await rig.connect();
      try {
        await c.registerPartition({ partition: 'p', fields: { x: 'f32' }, consumerTasks: ['t'] });
        await expectCode(
          () => c.putSamples({ partition: 'p', sampleIds: ['a'], columns: { x: [f32Row(40_000, 0)] } }),
          'invalid_argument',
          'oversized put refused before sending',
          /put: request of \d+ bytes exceeds the gateway's message limit of 131072 bytes; split it/,
        );
        await c.putSamples({ partition: 'p', sampleIds: ['a'], columns: { x: [f32Row(20_000, 0)] } });
        await c.putSamples({ partition: 'p', sampleIds: ['b'], columns: { x: [f32Row(20_000, 1)] } });
        await expectCode(
          () => c.getSamples({ partition: 'p', sampleIds: ['a', 'b'], fields: ['x'] }),
          'invalid_argument',
          'oversized result refused by the server',
          /getSamples result holds 160000 bytes, over the gateway's message limit of 131072 bytes; read fewer/,
        );
        assertEqual(
          (await c.getSamples({ partition: 'p', sampleIds: ['b'], fields: ['x'] })).x.length,
          1,
          'the connection is still usable',
        );
      } finally {
        await c.close();
      }
      const tooBig = await rawClose(rig, [
        JSON.stringify({ t: 'req', id: 1, op: 'put', args: {}, rows: [{ dtype: 'f32', shape: [1 << 20] }] }),
      ]);
      assertDeepEqual(
        [tooBig.code, /message of \d+ bytes exceeds the gateway limit of 131072 bytes/.test(tooBig.reason)],
        [1009, true],
        `a raw oversized header is cut off with 1009 (${tooBig.reason})`,
      );
      const stray = await rawClose(rig, [new Uint8Array(8)]);
      assertDeepEqual([stray.code, stray.reason], [1002, 'binary frame without a message header'], 'framing violation → 1002');
      const wrongSize = await rawClose(rig, [
        JSON.stringify({ t: 'req', id: 1, op: 'put', args: {}, rows: [{ dtype: 'f32', shape: [2] }] }),
        new Uint8Array(4),
      ]);
      assertDeepEqual(
        [wrongSize.code, wrongSize.reason],
        [1002, 'row frame 0 has 4 bytes, its header declared 8'],
        'row size mismatch → 1002',
      );
    },
    { maxMessageBytes: 128 * 1024 },
  );

  test('a dropped gateway fails in-flight calls with closed, naming why; close is idempotent', async (rig) => {
    const c = await rig.connect();
    await c.registerPartition({ partition: 'p', fields: { x: 'f32' }, consumerTasks: ['t'] });
    // Settle into a value at once: the rejection arrives while rig.stop() is still awaited.
    const waiting = c.claimMeta({ partition: 'p', task: 't', requiredFields: ['x'], batchSize: 1, timeoutMs: 30_000 }).then(
      () => Promise.reject(new Error('the claim should not have succeeded')),
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 50));
    const started = performance.now();
    await rig.stop();
    const outcome = await waiting;
    const err = await assertRejects(
      () => Promise.reject(outcome),
      /claim: gateway ws:\/\/127\.0\.0\.1:\d+\/ closed the connection \(code 1000: gateway shutting down\)/,
      'blocking claim ends',
    );
    assertEqual((err as DataPlaneError).code, 'closed', 'code closed');
    assert(performance.now() - started < 10_000, 'promptly, not at the claim timeout');
    await expectCode(() => c.partitionStats('p'), 'closed', 'later calls fail with closed', /is closed: gateway .* closed the connection/);
    await c.close();
    await c.close();
  });

  test(
    'requests beyond maxInFlight are refused; the rest complete',
    async (rig) => {
      const c = await rig.connect();
      const producer = await rig.connect();
      try {
        await c.registerPartition({ partition: 'p', fields: { x: 'f32' }, consumerTasks: ['t'] });
        const claims = Array.from({ length: 3 }, () =>
          c.claimMeta({ partition: 'p', task: 't', requiredFields: ['x'], batchSize: 1, timeoutMs: 5_000 }).then(
            () => 'ok',
            (e: Error) => e.message,
          ),
        );
        await new Promise((r) => setTimeout(r, 50));
        // The bound is per connection: another connection still gets through.
        await producer.putSamples({ partition: 'p', sampleIds: ['a', 'b'], columns: { x: [f32Row(1, 0), f32Row(1, 1)] } });
        const outcomes = await Promise.all(claims);
        assertDeepEqual(outcomes.filter((o) => o === 'ok').length, 2, 'two claims in flight got the two rows');
        assert(
          outcomes.some((o) => /more than 2 concurrent requests on one gateway connection/.test(o)),
          `third refused: ${JSON.stringify(outcomes)}`,
        );
      } finally {
        await c.close();
        await producer.close();
      }
    },
    { maxInFlight: 2 },
  );
});

async function expectCode(fn: () => unknown, code: DataPlaneError['code'], what: string, pattern: RegExp = /./): Promise<void> {
  const err = await assertRejects(fn, pattern, what);
  assert(err instanceof DataPlaneError, `${what}: expected a DataPlaneError, got ${err.name}: ${err.message}`);
  assertEqual((err as DataPlaneError).code, code, `${what}: error code`);
}
