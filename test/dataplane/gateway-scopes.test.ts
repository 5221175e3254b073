/**
 * Gateway capabilities (src/dataplane/gateway-scopes.ts): which tokens a gateway accepts, what each
 * scope may do, and, through a real Node gateway over the local store, that a rollout token can put
 * into the trainer's partition but never clear it, read it or redeclare it (the regression: any
 * authorised client could clear the trainer's feature partition, so the run failed and could not be
 * resumed), that an observer only reads stats, and that every refusal names the operation and the
 * scope while the connection keeps serving.
 */
import type { Suite } from '../harness/suite.ts';
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { GATEWAY_OPS, TOKEN_PROTOCOL_PREFIX } from '../../src/dataplane/gateway-protocol.ts';
import { authorizeRequest, gatewayGrants, GATEWAY_SCOPES, SamplesPutHere, SCOPE_OPS } from '../../src/dataplane/gateway-scopes.ts';
import { DataPlaneError, type DataPlaneClient, type HostTensor } from '../../src/dataplane/types.ts';
import { connectDataPlaneGateway } from '../../src/dataplane/ws-client.ts';
import { nodeOnlyImport } from './backends.test.ts';
import { HOSTILE_NAMES } from './names.test.ts';

type GatewayPlatform = typeof import('../../src/platform/dataplane-gateway-node.ts');
type WsModule = typeof import('ws');

const TOKENS = { all: 'a'.repeat(32), rollout: 'r'.repeat(32), trainer: 't'.repeat(32), observer: 'o'.repeat(32) };
const row = (v: number): HostTensor => ({ dtype: 'f32', shape: [1], data: Float32Array.of(v) });

function assertForbidden(err: unknown, pattern: RegExp, what: string): void {
  assert(err instanceof DataPlaneError, `${what}: a DataPlaneError, got ${String(err)}`);
  assertEqual((err as DataPlaneError).code, 'forbidden', `${what}: code`);
  assert(pattern.test((err as Error).message), `${what}: message ${JSON.stringify((err as Error).message)} matches ${pattern}`);
}

async function rejection(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (err) {
    return err;
  }
  throw new Error('the call succeeded, but it should have been refused');
}

const suite: Suite = defineSuite('dataplane/gateway-scopes', (t) => {
  t.test('grants: one token means every scope; scoped tokens one each; malformed, reused, unknown or no tokens are refused', () => {
    assertDeepEqual(gatewayGrants(TOKENS.all, undefined), [{ token: TOKENS.all, scopes: GATEWAY_SCOPES }], 'single token');
    assertDeepEqual(
      gatewayGrants(undefined, { rollout: TOKENS.rollout, observer: TOKENS.observer }).map((g) => g.scopes),
      [['rollout'], ['observer']],
      'scoped tokens',
    );
    assertThrows(() => gatewayGrants(undefined, undefined), /^a gateway needs a token, or one per scope/, 'none');
    assertThrows(() => gatewayGrants('short', undefined), /^gateway token must be 16\.\.256 characters/, 'short token');
    assertThrows(() => gatewayGrants(undefined, { trainer: 'bad token!' }), /^the trainer gateway token must be/, 'bad scoped token');
    assertThrows(
      () => gatewayGrants(TOKENS.all, { rollout: TOKENS.all }),
      /^the rollout gateway token is the same as the rollout\+trainer\+observer token/,
      'a token reused',
    );
    assertThrows(
      () => gatewayGrants(undefined, JSON.parse(`{"__proto__": "${TOKENS.rollout}"}`) as never),
      /^unknown gateway scope "__proto__"/,
      'a prototype key as a scope',
    );
    assertThrows(() => gatewayGrants(undefined, { admin: TOKENS.rollout } as never), /^unknown gateway scope "admin"/, 'unknown scope');
  });

  t.test('scopes: rollout registers (create only) and puts, trainer consumes and clears, observer reads stats', () => {
    assertDeepEqual(SCOPE_OPS.rollout, ['register', 'put'], 'rollout ops');
    assertDeepEqual(SCOPE_OPS.observer, ['stats'], 'observer ops');
    assert(!SCOPE_OPS.trainer.includes('put') && SCOPE_OPS.trainer.includes('clear'), 'trainer: clear, no put');
    for (const op of GATEWAY_OPS) assertEqual(authorizeRequest(GATEWAY_SCOPES, op, { partition: 'p' }) !== undefined, true, `all: ${op}`);
    const put = { partition: 'p', sampleIds: [], columns: {} };
    assertEqual(authorizeRequest(['rollout'], 'put', put), put, 'rollout put passes unchanged');
    assertDeepEqual(
      authorizeRequest(['rollout'], 'register', { partition: 'p' }),
      { partition: 'p', createOnly: true },
      'a rollout register is create-only',
    );
    const all = { partition: 'p', replace: true };
    assertEqual(authorizeRequest(GATEWAY_SCOPES, 'register', all), all, 'an all-scope register is unchanged');
    for (const [scopes, op, pattern] of [
      [
        ['rollout'],
        'clear',
        /^gateway op "clear" of every sample in partition "p" needs the trainer scope; a rollout token clears only samples its own connection put/,
      ],
      [['observer'], 'clear', /^gateway op "clear" needs the trainer scope; this connection's token grants observer$/],
      [['rollout'], 'get', /^gateway op "get" needs the trainer scope/],
      [['rollout'], 'claim', /^gateway op "claim" needs the trainer scope/],
      [['rollout'], 'stats', /^gateway op "stats" needs the trainer or observer scope; this connection's token grants rollout$/],
      [['observer'], 'put', /^gateway op "put" needs the rollout scope; this connection's token grants observer$/],
      [['observer'], 'register', /^gateway op "register" needs the rollout or trainer scope/],
      [['trainer'], 'put', /^gateway op "put" needs the rollout scope/],
      [['rollout'], 'register', /^gateway op "register" with replace wipes partition "p": that needs the trainer scope/],
    ] as const) {
      const err = assertThrows(() => authorizeRequest(scopes, op, { partition: 'p', replace: true }), pattern, `${scopes} ${op}`);
      assertForbidden(err, pattern, `${scopes} ${op}`);
    }
    for (const bad of HOSTILE_NAMES) {
      assertThrows(() => authorizeRequest(GATEWAY_SCOPES, 'stats', { partition: bad }), /^gateway stats partition /, `stats ${bad}`);
      assertThrows(
        () => authorizeRequest(GATEWAY_SCOPES, 'ack', { meta: { partition: bad } }),
        /^gateway ack meta\.partition /,
        `ack ${bad}`,
      );
    }
    assertEqual(authorizeRequest(['observer'], 'nonsense', 7), 7, 'unknown ops pass through to the router, which refuses them');
    // A rollout clears, by id, only what its own connection put.
    const putHere = new SamplesPutHere();
    putHere.record('put', { partition: 'p', sampleIds: ['mine', 'also-mine'] });
    const own = { partition: 'p', target: ['mine'] };
    assertEqual(
      authorizeRequest(['rollout'], 'clear', own, (p, id) => putHere.has(p, id)),
      own,
      'its own sample',
    );
    assertThrows(
      () => authorizeRequest(['rollout'], 'clear', { partition: 'p', target: ['mine', 'theirs'] }, (p, id) => putHere.has(p, id)),
      /^gateway op "clear" of 1 sample\(s\) it did not put \("theirs"\) in partition "p" needs the trainer scope/,
      'a sample it did not put',
    );
    assertThrows(
      () => authorizeRequest(['rollout'], 'clear', { partition: 'q', target: ['mine'] }, (p, id) => putHere.has(p, id)),
      /it did not put \("mine"\) in partition "q"/,
      'the same id in another partition',
    );
    putHere.record('clear', own);
    assert(!putHere.has('p', 'mine') && putHere.has('p', 'also-mine'), 'a cleared id is forgotten');
    const bounded = new SamplesPutHere(2);
    bounded.record('put', { partition: 'p', sampleIds: ['a', 'b', 'c'] });
    assert(!bounded.has('p', 'a') && bounded.has('p', 'c'), 'the oldest are forgotten past the bound');
  });

  t.test(
    "a real gateway with scoped tokens: a rollout client puts but cannot clear, read or redeclare the trainer's partition",
    async () => {
      const gw = await nodeOnlyImport<GatewayPlatform>('../../src/platform/dataplane-gateway-node.ts');
      // One store behind every connection, as a run's Redis is.
      const store = await createDataPlaneClient({ impl: 'transferQueue', backend: { kind: 'local', columns: 'host' }, claimPollMs: 5 });
      const gateway = await gw.startDataPlaneGateway({
        scopedTokens: { rollout: TOKENS.rollout, trainer: TOKENS.trainer, observer: TOKENS.observer },
        openClient: async () => sharedView(store),
        control: { protocol: 'speclab-test-control', serve: async (ws) => void ws.close() },
      });
      const open = (token: string) => connectDataPlaneGateway({ url: gateway.url, token, WebSocket: gw.nodeWebSocket });
      const clients: DataPlaneClient[] = [];
      try {
        const [trainer, rollout, observer] = [await open(TOKENS.trainer), await open(TOKENS.rollout), await open(TOKENS.observer)];
        clients.push(trainer, rollout, observer);
        await trainer.registerPartition({ partition: 'run1', fields: { x: 'f32' }, consumerTasks: ['trainer'], replace: true });
        await rollout.putSamples({ partition: 'run1', sampleIds: ['s1', 's2'], columns: { x: [row(1), row(2)] } });

        assertForbidden(
          await rejection(() => rollout.clearSamples('run1', { all: true })),
          /"clear" of every sample in partition "run1" needs the trainer scope/,
          'clear all',
        );
        const otherTab = await open(TOKENS.rollout);
        clients.push(otherTab);
        assertForbidden(
          await rejection(() => otherTab.clearSamples('run1', ['s1'])),
          /"clear" of 1 sample\(s\) it did not put \("s1"\) in partition "run1"/,
          "another rollout connection's sample",
        );
        assertForbidden(
          await rejection(() => rollout.getSamples({ partition: 'run1', sampleIds: ['s1'], fields: ['x'] })),
          /"get" needs the trainer scope/,
          'get',
        );
        assertForbidden(
          await rejection(() =>
            rollout.claimMeta({ partition: 'run1', task: 'trainer', requiredFields: ['x'], batchSize: 1, blocking: false }),
          ),
          /"claim" needs the trainer scope/,
          'claim',
        );
        assertForbidden(await rejection(() => rollout.partitionStats('run1')), /"stats" needs the trainer or observer scope/, 'stats');
        assertForbidden(
          await rejection(() =>
            rollout.registerPartition({ partition: 'run1', fields: { x: 'f32' }, consumerTasks: ['t'], replace: true }),
          ),
          /"register" with replace wipes partition "run1"/,
          'register with replace',
        );
        await assertRejects(
          () => rollout.registerPartition({ partition: 'run1', fields: { y: 'i32' }, consumerTasks: ['t'] }),
          /partition "run1" is already registered \(createOnly/,
          "a rollout register of the trainer's partition",
        );
        await rollout.registerPartition({ partition: 'scratch', fields: { y: 'i32' }, consumerTasks: ['t'] });
        // After every refusal the rollout connection still serves, and may drop a sample it put itself.
        await rollout.putSamples({ partition: 'run1', sampleIds: ['s3', 'dropped'], columns: { x: [row(3), row(9)] } });
        assertEqual(await rollout.clearSamples('run1', ['dropped']), 1, 'a rollout clears its own sample');

        assertForbidden(
          await rejection(() => observer.putSamples({ partition: 'run1', sampleIds: ['o1'], columns: { x: [row(0)] } })),
          /"put" needs the rollout scope; this connection's token grants observer/,
          'observer put',
        );
        assertForbidden(
          await rejection(() => observer.clearSamples('run1', ['s1'])),
          /"clear" needs the trainer scope; this connection's token grants observer/,
          'observer clear',
        );
        const stats = await observer.partitionStats('run1');
        assertEqual(stats.samples, 3, "the trainer's partition holds every put sample");
        assertDeepEqual(stats.fields, { x: 'f32' }, 'and its schema');

        const meta = await trainer.claimMeta({ partition: 'run1', task: 'trainer', requiredFields: ['x'], batchSize: 3, leaseMs: 10_000 });
        const got = await trainer.getData(meta, ['x']);
        assertDeepEqual(
          got.x.map((r) => (r as HostTensor).data[0]),
          [1, 2, 3],
          'the trainer reads every row',
        );
        await trainer.ackClaim(meta, { clear: true });
        assertEqual((await observer.partitionStats('run1')).samples, 0, 'the trainer consumed and cleared them');
        assertForbidden(
          await rejection(() => trainer.putSamples({ partition: 'run1', sampleIds: ['t1'], columns: { x: [row(0)] } })),
          /"put" needs the rollout scope/,
          'trainer put',
        );

        // The control endpoints (a rollout worker's) refuse a trainer or observer token at the upgrade.
        const { WebSocket } = await nodeOnlyImport<WsModule>('ws');
        for (const [token, expected] of [
          [TOKENS.trainer, 403],
          [TOKENS.observer, 403],
          [TOKENS.rollout, 101],
        ] as const) {
          const status = await new Promise<number>((resolve) => {
            const ws = new WebSocket(gateway.url, ['speclab-test-control', TOKEN_PROTOCOL_PREFIX + token]);
            ws.on('unexpected-response', (_req, res) => {
              resolve(res.statusCode ?? 0);
              ws.terminate();
            });
            ws.on('upgrade', () => resolve(101));
            ws.on('error', () => undefined);
          });
          assertEqual(status, expected, `control upgrade with the ${token[0]} token`);
        }
      } finally {
        for (const c of clients) await c.close();
        await gateway.close();
        await store.close();
      }
    },
    { only: ['node'] },
  );
});

/** The client's methods bound to it, so gateway connections can share one store (closing a view does not close the store). */
export function sharedView(client: DataPlaneClient): DataPlaneClient {
  return {
    kind: client.kind,
    registerPartition: (o) => client.registerPartition(o),
    claimMeta: (o) => client.claimMeta(o),
    ackClaim: (m, o) => client.ackClaim(m, o),
    releaseClaim: (m) => client.releaseClaim(m),
    getData: (m, f) => client.getData(m, f),
    checkConsumptionStatus: (p, t) => client.checkConsumptionStatus(p, t),
    putSamples: (o) => client.putSamples(o),
    getSamples: (o) => client.getSamples(o),
    clearSamples: (p, t) => client.clearSamples(p, t),
    partitionStats: (p) => client.partitionStats(p),
    close: async () => {},
  };
}

export default suite;
