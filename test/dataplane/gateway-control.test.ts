/**
 * The gateway's control-plane RPC for rollout tabs (protocol src/dataplane/gateway-control.ts,
 * server src/platform/control-gateway-node.ts, client src/dataplane/gateway-control-client.ts), in
 * Node against a real redis-server: a controller over the run's Redis control stores behind the
 * data-plane gateway's port. Register, heartbeat, lease with the run's lease, commit (dedup), fail;
 * a connection acts only for its own workers; every bad request is answered with an error naming
 * the field; frames that cannot be answered close that connection and the gateway serves on; the
 * token, the version and the data plane on the same port. Node-only modules load at run time.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { makeSampleRef, onlineSampleId } from '../../src/contracts/index.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { openRedisControlStores } from '../../src/control/redis/redis-control-stores.ts';
import { RedisRunRecord } from '../../src/control/redis/redis-run-record.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { connectControlGateway } from '../../src/dataplane/gateway-control-client.ts';
import { CONTROL_PROTOCOL } from '../../src/dataplane/gateway-control.ts';
import { GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX } from '../../src/dataplane/gateway-protocol.ts';
import { connectDataPlaneGateway } from '../../src/dataplane/ws-client.ts';
import { nodeOnlyImport } from './backends.test.ts';

type RedisFixture = typeof import('./redis-fixture.ts');
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');
type GatewayPlatform = typeof import('../../src/platform/dataplane-gateway-node.ts');
type ControlPlatform = typeof import('../../src/platform/control-gateway-node.ts');
type WsModule = typeof import('ws');

const RUN = 'tabs-run';
const LEASE_MS = 60_000;

const ref = (taskId: string) =>
  makeSampleRef({
    sampleId: onlineSampleId(RUN, taskId),
    runId: RUN,
    sourceTaskId: taskId,
    featureStoreUri: `dataplane://${RUN}/${taskId}`,
    featureKeys: {},
    featureSpecs: {},
    strategy: 'eagle3',
  });

/** Raw frames on an authenticated control connection: the answers received, then the close. */
async function raw(
  url: string,
  token: string,
  frames: (string | Uint8Array)[],
  answers: number,
): Promise<{ replies: unknown[]; code: number | null; reason: string }> {
  const { WebSocket } = await nodeOnlyImport<WsModule>('ws');
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, [CONTROL_PROTOCOL, TOKEN_PROTOCOL_PREFIX + token]);
    const replies: unknown[] = [];
    let hello = false;
    ws.on('message', (data) => {
      if (!hello) {
        hello = true;
        for (const f of frames) ws.send(f);
        return;
      }
      replies.push(JSON.parse(String(data)));
      if (replies.length === answers) ws.close();
    });
    // Answers come as requests finish, not in order: sort them by request id.
    ws.on('close', (code, reason) =>
      resolve({ replies: replies.sort((x, y) => (x as { id: number }).id - (y as { id: number }).id), code, reason: String(reason) }),
    );
    ws.on('error', reject);
  });
}

async function upgradeStatus(url: string, protocols: string[]): Promise<number> {
  const { WebSocket } = await nodeOnlyImport<WsModule>('ws');
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols);
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      resolve(101);
      ws.close();
    });
    ws.on('error', reject);
  });
}

/** The Node-only modules both tests use, loaded at run time, and a fresh redis-server with a link to it. */
async function nodeSetup() {
  const { startRedisServer } = await nodeOnlyImport<RedisFixture>('./redis-fixture.ts');
  const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
  const gw = await nodeOnlyImport<GatewayPlatform>('../../src/platform/dataplane-gateway-node.ts');
  const { startRunGateway } = await nodeOnlyImport<ControlPlatform>('../../src/platform/control-gateway-node.ts');
  const redis = await startRedisServer();
  const link = await connectRedis(redis.url);
  return { connectRedis, gw, startRunGateway, redis, link };
}

export default defineSuite('dataplane/gateway-control', (t) => {
  t.test(
    'a tab registers, heartbeats, leases with the run lease, commits and fails through the gateway; bad requests are answered, never fatal',
    async () => {
      const { connectRedis, gw, startRunGateway, redis, link } = await nodeSetup();
      const closers: (() => Promise<unknown>)[] = [];
      try {
        const stores = await openRedisControlStores(link, RUN, { requireDurable: false, prompts: { leaseTimeoutMs: LEASE_MS } });
        // The trainer's side: its own controller over the same stores (the gateway's is passive too).
        const trainer = DataFlowController.over(RUN, stores, { enqueueCommits: false });
        const record = new RedisRunRecord(link, RUN);
        // Key order of stableJson (the record stores manifests sorted).
        const manifest = { capture: { auxLayerIds: [0] }, promptLeaseMs: LEASE_MS, run: RUN, target: { precision: 'f32' } };
        await record.publish(manifest);
        const taskIds = await trainer.ingestPrompts([
          { taskId: 'p0', payload: { text: 'a' } },
          { taskId: 'p1', payload: { text: 'b' } },
          { taskId: 'p2', payload: { text: 'c' } },
        ]);
        const token = gw.newGatewayToken();
        const gateway = await startRunGateway({
          token,
          host: '127.0.0.1',
          port: 0,
          openClient: () =>
            createDataPlaneClient(
              { impl: 'transferQueue', backend: { kind: 'redis', url: redis.url, keyPrefix: 'gwc:' }, claimPollMs: 5 },
              { connectRedis },
            ),
          controller: DataFlowController.over(RUN, stores, { enqueueCommits: false }),
          record,
          promptLeaseMs: LEASE_MS,
        });
        closers.push(() => gateway.close());
        const connect = (o: { run?: string; token?: string } = {}) =>
          connectControlGateway({ url: gateway.url, token: o.token ?? token, WebSocket: gw.nodeWebSocket, run: o.run ?? RUN });
        const tab = await connect();
        closers.push(() => tab.close());
        assertDeepEqual(
          [tab.hello.run, tab.hello.promptLeaseMs, tab.hello.protocol],
          [RUN, LEASE_MS, 1],
          'hello: run, prompt lease, version',
        );
        assertDeepEqual(await tab.manifest(), { manifest, finished: false }, 'manifest as the trainer published it');

        await assertRejects(
          () => tab.lease('tab-1', 2),
          /lease: gateway refused: .*worker "tab-1" was not registered on this connection/,
          'lease before register',
        );
        assertEqual((await tab.register({ workerId: 'tab-1' })).workerId, 'tab-1', 'register with an id');
        assert(/^rollout-[0-9a-f]{8}$/.test((await tab.register({})).workerId), 'register mints an id');
        const leased = await tab.lease('tab-1', 2);
        assertDeepEqual(
          leased.tasks.map((task) => task.taskId),
          taskIds.slice(0, 2),
          'lease: FIFO, up to max',
        );
        assertEqual(leased.leaseMs, LEASE_MS, 'lease: the run prompt lease');
        assertEqual((await trainer.status()).promptsLeased, 2, 'the Redis ledger holds the lease');

        // Bad arguments: an error naming the field, nothing changed.
        await assertRejects(() => tab.lease('tab-1', 0), /lease: gateway refused: ControlRequestError: lease args\.max: /, 'lease max 0');
        const odd = await raw(
          gateway.url,
          token,
          ['{"t":"req","id":1,"op":"lease","args":{"workerId":"tab-1","max":2,"extra":1}}', '{"t":"req","id":2,"op":"drop","args":{}}'],
          2,
        );
        assert(/lease args: .*extra/i.test(JSON.stringify(odd.replies[0])), `an unknown field is named: ${JSON.stringify(odd.replies[0])}`);
        assert(
          /unknown control op \\"drop\\"/.test(JSON.stringify(odd.replies[1])),
          `an unknown op is named: ${JSON.stringify(odd.replies[1])}`,
        );
        assertEqual(odd.code, 1005, 'answered, and the connection stayed open until the client closed it');
        await assertRejects(
          () => tab.commit('tab-1', [{ sampleId: 'x' }]),
          /commit: gateway refused: .*commitSamples/,
          'an invalid ref is refused by the controller',
        );
        assertEqual((await trainer.status()).samplesCommitted, 0, 'the refused commit committed nothing');

        const fresh = await tab.commit('tab-1', [ref('p0')]);
        assertDeepEqual(
          fresh.fresh.map((r) => r.sampleId),
          [onlineSampleId(RUN, 'p0')],
          'commit returns the fresh ref',
        );
        assertEqual((await tab.commit('tab-1', [ref('p0')])).fresh.length, 0, 'a duplicate commit is dropped');
        assertDeepEqual(
          await tab.fail('tab-1', ['p1'], 'tab closed', true),
          { requeued: ['p1'], failed: [], skipped: [] },
          'fail requeues',
        );
        const after = await trainer.status();
        assertDeepEqual([after.samplesCommitted, after.promptsLeased, after.promptsPending], [1, 0, 2], 'ledger after commit and fail');

        // Another connection may not act for tab-1.
        const other = await connect();
        closers.push(() => other.close());
        await assertRejects(
          () => other.lease('tab-1', 1),
          /not registered on this connection/,
          'a connection acts only for its own workers',
        );
        await assertRejects(
          () => connect({ run: 'another-run' }),
          /serves run "tabs-run", not "another-run"/,
          'a client of another run is refused',
        );
        await assertRejects(() => connect({ token: 'x'.repeat(32) }), /closed the control connection/, 'a wrong token is refused');
        assertEqual(
          await upgradeStatus(gateway.url, ['speclab-control.v2', TOKEN_PROTOCOL_PREFIX + token]),
          400,
          'another protocol version is refused in the handshake',
        );

        // Frames that cannot be answered close that connection; answerable ones get errors.
        const bad = await raw(gateway.url, token, ['{"t":"req","id":7,"op":"lease","args":{"workerId":"a b","max":1}}'], 1);
        assertEqual((bad.replies[0] as { id: number; ok: boolean }).ok, false, 'a request with an id is answered');
        assert(
          /lease args\.workerId/.test(JSON.stringify(bad.replies[0])),
          `the answer names the field: ${JSON.stringify(bad.replies[0])}`,
        );
        assertEqual(
          (await raw(gateway.url, token, ['{"t":"req","id":"x"}'], 0)).code,
          1002,
          'a request without an id closes the connection (protocol error)',
        );
        assertEqual((await raw(gateway.url, token, ['not json'], 0)).code, 1002, 'a text frame that is not JSON closes it');
        assertEqual((await raw(gateway.url, token, [new Uint8Array([1, 2, 3])], 0)).code, 1002, 'a binary frame closes it');
        assertEqual(
          (await raw(gateway.url, token, ['x'.repeat(1024 * 1024 + 1)], 0)).code,
          1009,
          'a message over the bound closes it (too big)',
        );

        // The gateway serves on: the first tab's connection, and the data plane on the same port.
        assertEqual((await tab.heartbeat('tab-1')).finished, false, 'heartbeat before the end');
        const data = await connectDataPlaneGateway({ url: gateway.url, token, WebSocket: gw.nodeWebSocket });
        closers.push(() => data.close());
        assertEqual(data.kind, 'gateway/transferQueue/redis', 'the data plane answers on the same port');
        assertEqual(await upgradeStatus(gateway.url, [GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX + token]), 101, 'data-plane upgrade');
        await record.finish();
        assertEqual((await tab.heartbeat('tab-1')).finished, true, 'heartbeat says the run is finished');
      } finally {
        for (const close of closers.reverse()) await close().catch(() => undefined);
        await link.close();
        await redis.stop();
      }
    },
    { only: ['node'], timeoutMs: 60_000 },
  );

  t.test(
    'hostile requests: 400 seeded random requests (random ops, argument types and sizes) are each answered, and the gateway serves on',
    async () => {
      const { connectRedis, gw, startRunGateway, redis, link } = await nodeSetup();
      let gateway: { url: string; close(): Promise<void> } | undefined;
      try {
        const stores = await openRedisControlStores(link, RUN, { requireDurable: false, prompts: { leaseTimeoutMs: LEASE_MS } });
        const record = new RedisRunRecord(link, RUN);
        await record.publish({ run: RUN, promptLeaseMs: LEASE_MS });
        await DataFlowController.over(RUN, stores).ingestPrompts([{ taskId: 'q0', payload: {} }]);
        const token = gw.newGatewayToken();
        gateway = await startRunGateway({
          token,
          host: '127.0.0.1',
          port: 0,
          openClient: () =>
            createDataPlaneClient(
              { impl: 'transferQueue', backend: { kind: 'redis', url: redis.url, keyPrefix: 'gwf:' }, claimPollMs: 5 },
              { connectRedis },
            ),
          controller: DataFlowController.over(RUN, stores, { enqueueCommits: false }),
          record,
          promptLeaseMs: LEASE_MS,
        });
        // xorshift32: the same requests on every run.
        let seed = 0x5eed1234;
        const next = () => ((seed ^= seed << 13), (seed ^= seed >>> 17), (seed ^= seed << 5), (seed >>> 0) / 2 ** 32);
        const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)];
        const values = (): unknown =>
          pick<() => unknown>([
            () => null,
            () => -1,
            () => 1e308,
            () => 2 ** 53,
            () => 'w',
            () => 'x'.repeat(600),
            () => true,
            () => [],
            () => [{}],
            () => ({}),
            () => ({ sampleId: 1 }),
            () => 'tab-f',
            () => 3,
          ])();
        const ops = ['manifest', 'register', 'heartbeat', 'lease', 'commit', 'fail', 'complete', 'x', '', '__proto__'];
        const fields = ['workerId', 'max', 'refs', 'taskIds', 'reason', 'retryable', 'strategy', 'constructor', 'extra'];
        const frames = [JSON.stringify({ t: 'req', id: 0, op: 'register', args: { workerId: 'tab-f' } })];
        for (let id = 1; id < 400; id++) {
          const args: Record<string, unknown> = {};
          for (let k = Math.floor(next() * 4); k > 0; k--) args[pick(fields)] = values();
          frames.push(JSON.stringify({ t: 'req', id, op: pick(ops), args: next() < 0.1 ? values() : args }));
        }
        // At most 16 in flight: send in bursts of 8, each after the previous burst's answers.
        const { WebSocket } = await nodeOnlyImport<WsModule>('ws');
        const answers = await new Promise<{ id: number; ok: boolean }[]>((resolve, reject) => {
          const ws = new WebSocket(gateway!.url, [CONTROL_PROTOCOL, TOKEN_PROTOCOL_PREFIX + token]);
          const got: { id: number; ok: boolean }[] = [];
          let sent = 0;
          const burst = () => {
            for (const f of frames.slice(sent, sent + 8)) ws.send(f);
            sent = Math.min(frames.length, sent + 8);
          };
          let hello = false;
          ws.on('message', (data) => {
            if (!hello) return ((hello = true), burst());
            got.push(JSON.parse(String(data)) as { id: number; ok: boolean });
            if (got.length === frames.length) ws.close();
            else if (got.length === sent) burst();
          });
          ws.on('close', (code) =>
            got.length === frames.length
              ? resolve(got)
              : reject(new Error(`closed (${code}) after ${got.length} of ${frames.length} answers`)),
          );
          ws.on('error', reject);
        });
        assertDeepEqual(
          answers.map((a) => a.id).sort((x, y) => x - y),
          frames.map((_, i) => i),
          'every request answered once',
        );
        assert(answers.filter((a) => !a.ok).length > 300, 'most random requests are refused');
        const tab = await connectControlGateway({ url: gateway.url, token, WebSocket: gw.nodeWebSocket, run: RUN });
        await tab.register({ workerId: 'tab-g' });
        const leased = await tab.lease('tab-g', 4);
        assert(leased.tasks.length <= 1, 'the ledger is intact: at most the one prompt');
        await tab.close();
      } finally {
        await gateway?.close();
        await link.close();
        await redis.stop();
      }
    },
    { only: ['node'], timeoutMs: 60_000 },
  );
});
