/** Metrics middleware (docs/dataplane.md §8, upstream test_observability.py) and the config factory. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { parseDataPlaneConfig } from '../../src/dataplane/config.ts';
import { HostColumnStore } from '../../src/dataplane/column-store.ts';
import { MetricsDataPlaneClient, type DataPlaneEvent } from '../../src/dataplane/observability.ts';
import type { DataPlaneClient, HostTensor } from '../../src/dataplane/types.ts';

const f32 = (values: number[]): HostTensor => ({ dtype: 'f32', shape: [values.length], data: Float32Array.from(values) });

async function wrapped(maxBytesOutstanding?: number): Promise<{ m: MetricsDataPlaneClient; events: DataPlaneEvent[] }> {
  const events: DataPlaneEvent[] = [];
  const inner = await createDataPlaneClient({ impl: 'transferQueue', backend: { kind: 'local', columns: 'host' }, claimPollMs: 5 });
  const m = new MetricsDataPlaneClient(inner, { onEvent: (e) => events.push(e), maxBytesOutstanding });
  await m.registerPartition({ partition: 'train', fields: { hidden: 'f32' }, consumerTasks: ['trainer'] });
  return { m, events };
}

export default defineSuite('dataplane/observability', (t) => {
  t.test('one event per call with op, partition, keys, bytes, wall time and status', async () => {
    const { m, events } = await wrapped();
    await m.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { hidden: [f32([1, 2]), f32([3, 4])] } });
    const claim = await m.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['hidden'], batchSize: 2 });
    await m.getData(claim, ['hidden']);
    await m.getSamples({ partition: 'train', sampleIds: ['a'], fields: ['hidden'] });
    await m.checkConsumptionStatus('train', ['trainer']);
    await m.clearSamples('train', ['a', 'b']);
    await m.close();
    assertDeepEqual(
      events.map((e) => [e.op, e.partition, e.nKeys, e.nBytes, e.status]),
      [
        ['register', 'train', 0, 0, 'ok'],
        ['put', 'train', 2, 16, 'ok'],
        ['claim', 'train', 2, 0, 'ok'],
        ['getData', 'train', 2, 16, 'ok'],
        ['get', 'train', 1, 8, 'ok'],
        ['consumption', 'train', 0, 0, 'ok'],
        ['clear', 'train', 2, 0, 'ok'],
        ['close', '', 0, 0, 'ok'],
      ],
      'events',
    );
    assert(
      events.every((e) => e.wallMs >= 0 && Number.isFinite(e.wallMs)),
      'wall times are finite, non-negative',
    );
  });

  t.test('errors and timeouts are recorded, then re-raised', async () => {
    const { m, events } = await wrapped();
    await assertRejects(
      () => m.getSamples({ partition: 'train', sampleIds: ['ghost'], fields: ['hidden'] }),
      /unknown or cleared/,
      'error re-raised',
    );
    await assertRejects(
      () => m.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['hidden'], batchSize: 1, timeoutMs: 20 }),
      /timed out/,
      'timeout re-raised',
    );
    assertDeepEqual(
      events.slice(1).map((e) => [e.op, e.status]),
      [
        ['get', 'error'],
        ['claim', 'timeout'],
      ],
      'statuses',
    );
    const totals = m.totals();
    assertEqual(totals.errors, 1, 'error count');
    assertEqual(totals.timeouts, 1, 'timeout count');
    assertEqual(totals.ops, 1, 'only successful ops (the register) counted');
  });

  t.test('running totals: bytes outstanding follow puts and clears, with the peak kept', async () => {
    const { m } = await wrapped();
    await m.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { hidden: [f32([1, 2, 3]), f32([4])] } });
    assertEqual(m.totals().bytesOutstanding, 16, 'after put');
    await m.putSamples({ partition: 'train', sampleIds: ['c'], columns: { hidden: [f32([1, 2])] } });
    assertEqual(m.totals().peakBytesOutstanding, 24, 'peak');
    await m.clearSamples('train', ['a']);
    assertEqual(m.totals().bytesOutstanding, 12, "exactly a's 12 bytes subtracted");
    assertEqual(m.totals().keysOutstanding, 2, 'keys outstanding');
    await m.clearSamples('train', { all: true });
    const totals = m.totals();
    assertEqual(totals.bytesOutstanding, 0, 'clear all');
    assertEqual(totals.peakBytesOutstanding, 24, 'peak survives');
    assertEqual(totals.bytesPut, 24, 'bytes put');
    assertDeepEqual(totals.bytesOutstandingByPartition, { train: 0 }, 'per partition');
    assert(
      /^dataplane ops=\d+ put=0\.0MB .*outstanding=0\.0MB peak=0\.0MB errors=0 timeouts=0$/.test(m.progressLine()),
      `progress line: ${m.progressLine()}`,
    );
  });

  t.test('back-pressure blocks at the byte limit and clears when consumers free bytes elsewhere', async () => {
    const { m } = await wrapped(16);
    await m.putSamples({ partition: 'train', sampleIds: ['a'], columns: { hidden: [f32([1, 2])] } });
    assertDeepEqual(m.backpressure(), { blocked: false, bytesOutstanding: 8, limitBytes: 16 }, 'under the limit');
    await m.putSamples({ partition: 'train', sampleIds: ['b'], columns: { hidden: [f32([1, 2])] } });
    assertEqual(m.backpressure().blocked, true, 'at the limit');
    await assertRejects(
      () => m.waitForCapacity({ timeoutMs: 30, pollMs: 5 }),
      /16 bytes outstanding ≥ limit 16/,
      'nobody clears: times out',
    );
    // A consumer clears through another handle on the same store (as another process would).
    setTimeout(() => void m.inner.clearSamples('train', ['a']), 20);
    const state = await m.waitForCapacity({ timeoutMs: 2000, pollMs: 5 });
    assertEqual(state.blocked, false, 'unblocked after the store freed bytes');
    assertEqual(state.bytesOutstanding, 8, 'reconciled with the store');
  });

  t.test('config: explicit choices, strict keys, factory wraps with metrics when enabled', async () => {
    const bad: [unknown, RegExp][] = [
      [{ impl: 'transfer_queue', claimPollMs: 5 }, /impl/],
      [{ impl: 'noop' }, /claimPollMs/],
      [{ impl: 'transferQueue', claimPollMs: 5 }, /backend/],
      [
        { impl: 'transferQueue', backend: { kind: 'local', columns: 'host', extra: 1 }, claimPollMs: 5 },
        /backend: .*extra|Unrecognized key/,
      ],
      [
        { impl: 'transferQueue', backend: { kind: 'redis', url: 'http://x', keyPrefix: 'p' }, claimPollMs: 5 },
        /backend\.url: must be a redis:\/\//,
      ],
      [{ impl: 'noop', claimPollMs: -1 }, /claimPollMs/],
    ];
    for (const [cfg, pattern] of bad) {
      let message = '';
      try {
        parseDataPlaneConfig(cfg);
      } catch (err) {
        message = (err as Error).message;
      }
      assert(
        /^invalid data plane config: /.test(message) && pattern.test(message),
        `config ${JSON.stringify(cfg)} → "${message}" should match ${pattern}`,
      );
    }
    await assertRejects(
      () =>
        createDataPlaneClient({
          impl: 'transferQueue',
          backend: { kind: 'redis', url: 'redis://127.0.0.1:1/0', keyPrefix: 'p' },
          claimPollMs: 5,
        }),
      /needs deps\.connectRedis/,
      'redis without a platform connection',
    );
    await assertRejects(
      () => createDataPlaneClient({ impl: 'transferQueue', backend: { kind: 'local', columns: 'gpu' }, claimPollMs: 5 }),
      /columns "gpu" needs deps\.gpu/,
      'gpu columns without a Gpu',
    );
    const events: DataPlaneEvent[] = [];
    const c: DataPlaneClient = await createDataPlaneClient(
      { impl: 'noop', claimPollMs: 5, observability: { enabled: true, maxBytesOutstanding: 1024 } },
      { onEvent: (e) => events.push(e) },
    );
    assert(c instanceof MetricsDataPlaneClient, 'wrapped');
    assertEqual(c.kind, 'metrics(noop)', 'kind names both layers');
    await c.registerPartition({ partition: 'p', fields: { x: 'f32' }, consumerTasks: ['t'] });
    assertEqual(events.length, 1, 'events flow to the sink');
    const plain = await createDataPlaneClient({
      impl: 'transferQueue',
      backend: { kind: 'local', columns: 'auto' },
      claimPollMs: 5,
      observability: { enabled: false },
    });
    assertEqual(plain.kind, 'transferQueue/local-host', 'auto without a Gpu keeps typed arrays; disabled observability does not wrap');
    // The ColumnStore seam: an injected store backs the local transfer queue.
    const store = new HostColumnStore();
    const seam = await createDataPlaneClient(
      { impl: 'transferQueue', backend: { kind: 'local', columns: 'host' }, claimPollMs: 5 },
      { columnStore: store },
    );
    await seam.registerPartition({ partition: 'p', fields: { x: 'f32' }, consumerTasks: ['t'] });
    await seam.putSamples({ partition: 'p', sampleIds: ['a'], columns: { x: [f32([1, 2, 3])] } });
    assertEqual(store.bytesHeld, 12, 'bytes landed in the injected store');
    await seam.clearSamples('p', ['a']);
    assertEqual(store.bytesHeld, 0, 'clear freed them there');
    await seam.close();
  });
});
