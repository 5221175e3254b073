/**
 * One behaviour suite (upstream's data-plane tests, docs/dataplane.md §10, plus the stricter §5 rules we
 * adopt) run against every adapter/backend. Each test gets a fresh environment from `open`, so
 * backends never share state between tests.
 */
import type { TestContext } from '../harness/suite.ts';
import { defineSuite, type Suite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { isTensor } from '../../src/dataplane/column-store.ts';
import { KVBatchMeta } from '../../src/dataplane/meta.ts';
import {
  ClaimTimeoutError,
  DataPlaneError,
  LeaseLostError,
  type Columns,
  type DataPlaneClient,
  type HostTensor,
  type RowValue,
} from '../../src/dataplane/types.ts';

export interface ConformanceEnv {
  readonly client: DataPlaneClient;
  /** A second client on the same store (another connection where the backend has connections). */
  peer(): Promise<DataPlaneClient>;
  /** Host copy of a returned row (reads GPU rows back). */
  host(row: RowValue): Promise<HostTensor>;
  close(): Promise<void>;
}

/** Fresh environment; with `gpu`, the backend uses that Gpu (to hold or read back GPU rows). */
export type OpenEnv = (ctx: TestContext, gpu?: Gpu) => Promise<ConformanceEnv>;

export const f32 = (shape: number[], values: number[]): HostTensor => ({ dtype: 'f32', shape, data: Float32Array.from(values) });
export const i32 = (shape: number[], values: number[]): HostTensor => ({ dtype: 'i32', shape, data: Int32Array.from(values) });

const FIELDS = { input_ids: 'i32', hidden: 'f32', loss_mask: 'u32', logits16: 'f16' } as const;

async function expectCode(fn: () => unknown, code: DataPlaneError['code'], pattern: RegExp, what: string): Promise<void> {
  const err = await assertRejects(fn, pattern, what);
  assert(err instanceof DataPlaneError, `${what}: expected a DataPlaneError, got ${err.name}`);
  assertEqual((err as DataPlaneError).code, code, `${what}: error code`);
}

async function hostColumn(
  env: ConformanceEnv,
  columns: Columns,
  field: string,
): Promise<{ shape: readonly number[]; dtype: string; values: number[] }[]> {
  const rows = columns[field];
  assert(Array.isArray(rows), `column ${field} present`);
  return Promise.all(
    rows.map(async (r) => {
      const h = await env.host(r);
      return { shape: [...h.shape], dtype: h.dtype, values: Array.from(h.data) };
    }),
  );
}

export function conformanceSuite(name: string, open: OpenEnv, options: { only?: readonly Platform['name'][] } = {}): Suite {
  return defineSuite(name, (t) => {
    const test = (title: string, body: (env: ConformanceEnv, ctx: TestContext) => Promise<void>): void => {
      t.test(
        title,
        async (ctx) => {
          const env = await open(ctx);
          try {
            await body(env, ctx);
          } finally {
            await env.close();
          }
        },
        { only: options.only, timeoutMs: 60_000 },
      );
    };

    const register = (c: DataPlaneClient, partition = 'train', tasks = ['trainer', 'auditor']) =>
      c.registerPartition({ partition, fields: { ...FIELDS }, consumerTasks: tasks });

    test('put then get round-trips values, jagged shapes and every dtype in request order', async (env) => {
      const c = env.client;
      await register(c);
      const receipt = await c.putSamples({
        partition: 'train',
        sampleIds: ['p0_s0', 'p0_s1'],
        columns: {
          input_ids: [i32([3], [1, 2, 3]), i32([5], [4, 5, 6, 7, 8])],
          hidden: [f32([3, 2], [0.5, -1, 2, 3, 4, 1e-3]), f32([5, 2], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])],
          loss_mask: [
            { dtype: 'u32', shape: [3], data: Uint32Array.from([0, 1, 1]) },
            { dtype: 'u32', shape: [5], data: Uint32Array.from([1, 1, 1, 1, 0]) },
          ],
          logits16: [
            { dtype: 'f16', shape: [2], data: Uint16Array.from([0x3c00, 0xc000]) },
            { dtype: 'f16', shape: [2], data: Uint16Array.from([0x7bff, 0x0001]) },
          ],
        },
        tags: [
          { seq_len: 3, prompt_id: 'p0' },
          { seq_len: 5, prompt_id: 'p0' },
        ],
      });
      assertDeepEqual(receipt.fields, ['input_ids', 'hidden', 'loss_mask', 'logits16'], 'receipt lists the fields this put wrote');
      assertDeepEqual(receipt.sequenceLengths, [3, 5], 'receipt lengths from seq_len tags');
      assertEqual(receipt.taskName, null, 'receipts carry no task');

      const got = await c.getSamples({
        partition: 'train',
        sampleIds: ['p0_s1', 'p0_s0'],
        fields: ['hidden', 'input_ids', 'logits16', 'loss_mask'],
      });
      assertDeepEqual(Object.keys(got).sort(), ['hidden', 'input_ids', 'logits16', 'loss_mask'], 'exactly the requested columns');
      assertDeepEqual(
        await hostColumn(env, got, 'input_ids'),
        [
          { shape: [5], dtype: 'i32', values: [4, 5, 6, 7, 8] },
          { shape: [3], dtype: 'i32', values: [1, 2, 3] },
        ],
        'i32 rows in request order',
      );
      const hidden = await hostColumn(env, got, 'hidden');
      assertDeepEqual(hidden[1].shape, [3, 2], 'jagged f32 shape kept');
      assertDeepEqual(hidden[1].values, Array.from(Float32Array.from([0.5, -1, 2, 3, 4, 1e-3])), 'f32 values bit-exact');
      assertDeepEqual((await hostColumn(env, got, 'logits16'))[0].values, [0x7bff, 0x0001], 'f16 bits untouched');
      assertDeepEqual((await hostColumn(env, got, 'loss_mask'))[1].values, [0, 1, 1], 'u32 rows');

      const only = await c.getSamples({ partition: 'train', sampleIds: ['p0_s0'], fields: ['input_ids'] });
      assertDeepEqual(Object.keys(only), ['input_ids'], 'a one-field read returns one column');
      const empty = await c.getSamples({ partition: 'train', sampleIds: [], fields: ['input_ids'] });
      assertDeepEqual(empty, { input_ids: [] }, 'empty id list → empty column');
    });

    test('reads require an explicit, non-empty field list (getSamples and getData)', async (env) => {
      const c = env.client;
      await register(c);
      await c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { input_ids: [i32([1], [7])] } });
      await expectCode(
        () => c.getSamples({ partition: 'train', sampleIds: ['a'], fields: [] }),
        'invalid_argument',
        /explicit, non-empty field list/,
        'empty field list',
      );
      const meta = new KVBatchMeta({ partition: 'train', sampleIds: ['a'], fields: ['input_ids'] });
      await expectCode(
        () => c.getData(meta, []),
        'invalid_argument',
        /explicit, non-empty field list/,
        'getData without fields (meta.fields is no fallback)',
      );
      const got = await c.getData(meta, ['input_ids']);
      assertDeepEqual((await hostColumn(env, got, 'input_ids'))[0].values, [7], 'getData with explicit fields');
    });

    test('unknown or cleared ids fail loud, naming them (never fewer rows)', async (env) => {
      const c = env.client;
      await register(c);
      await c.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { input_ids: [i32([1], [1]), i32([1], [2])] } });
      await c.clearSamples('train', ['a']);
      await expectCode(
        () => c.getSamples({ partition: 'train', sampleIds: ['a', 'b', 'zz'], fields: ['input_ids'] }),
        'unknown_sample',
        /2 unknown or cleared sample id\(s\): "a", "zz"/,
        'get after clear',
      );
      await expectCode(
        () => c.getSamples({ partition: 'nope', sampleIds: ['b'], fields: ['input_ids'] }),
        'unknown_partition',
        /"nope" is not registered/,
        'unknown partition',
      );
    });

    test('unproduced and undeclared fields are errors naming sample and field', async (env) => {
      const c = env.client;
      await register(c);
      await c.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { input_ids: [i32([1], [1]), i32([1], [2])] } });
      await c.putSamples({ partition: 'train', sampleIds: ['b'], columns: { hidden: [f32([1, 2], [1, 2])] } });
      await expectCode(
        () => c.getSamples({ partition: 'train', sampleIds: ['a', 'b'], fields: ['input_ids', 'hidden'] }),
        'field_not_produced',
        /1 \(sample\/field\) cell\(s\) not produced yet: "a\/hidden"/,
        'unproduced field',
      );
      await expectCode(
        () => c.getSamples({ partition: 'train', sampleIds: ['a'], fields: ['advantages'] }),
        'unknown_field',
        /"advantages" is not declared/,
        'undeclared field',
      );
    });

    test('relay production: later puts add fields to existing rows; upserts replace values', async (env) => {
      const c = env.client;
      await register(c);
      const first = await c.putSamples({
        partition: 'train',
        sampleIds: ['a', 'b'],
        columns: { input_ids: [i32([2], [1, 2]), i32([1], [3])] },
      });
      const second = await c.putSamples({
        partition: 'train',
        sampleIds: ['b', 'a'],
        columns: { hidden: [f32([1], [0.25]), f32([2], [1, 2])] },
      });
      assertDeepEqual(first.fields, ['input_ids'], 'first receipt fields');
      assertDeepEqual(second.fields, ['hidden'], 'second receipt lists only its own field');
      const got = await c.getSamples({ partition: 'train', sampleIds: ['a', 'b'], fields: ['input_ids', 'hidden'] });
      assertDeepEqual(
        (await hostColumn(env, got, 'hidden')).map((r) => r.values),
        [[1, 2], [0.25]],
        'second producer column aligned by id',
      );
      await c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { input_ids: [i32([3], [9, 9, 9])] } });
      const again = await c.getSamples({ partition: 'train', sampleIds: ['a'], fields: ['input_ids'] });
      assertDeepEqual(
        (await hostColumn(env, again, 'input_ids'))[0],
        { shape: [3], dtype: 'i32', values: [9, 9, 9] },
        'upsert replaced the value',
      );
      assertEqual((await c.partitionStats('train')).samples, 2, 'no row duplicated by relay puts');
    });

    test('claim waits for every required field (field-level production status)', async (env) => {
      const c = env.client;
      await register(c);
      await c.putSamples({
        partition: 'train',
        sampleIds: ['a', 'b', 'c'],
        columns: { input_ids: [i32([1], [1]), i32([1], [2]), i32([1], [3])] },
      });
      const none = await c.claimMeta({
        partition: 'train',
        task: 'trainer',
        requiredFields: ['input_ids', 'hidden'],
        batchSize: 2,
        blocking: false,
      });
      assertEqual(none.size, 0, 'nothing claimable before hidden is produced');
      assertDeepEqual(none.fields, ['input_ids', 'hidden'], 'empty claim still names the required fields');
      const pending = c.claimMeta({
        partition: 'train',
        task: 'trainer',
        requiredFields: ['input_ids', 'hidden'],
        batchSize: 2,
        timeoutMs: 10_000,
      });
      await new Promise((r) => setTimeout(r, 30));
      await c.putSamples({ partition: 'train', sampleIds: ['c', 'a'], columns: { hidden: [f32([1], [3]), f32([1], [1])] } });
      const meta = await pending;
      assertDeepEqual([...meta.sampleIds].sort(), ['a', 'c'], 'the two rows with both fields');
      assertEqual(meta.taskName, 'trainer', 'claim carries its task');
      assertDeepEqual(meta.fields, ['input_ids', 'hidden'], 'claim fields = required fields');
      const data = await c.getData(meta, ['hidden']);
      assertEqual(data.hidden.length, 2, 'claimed rows readable');
    });

    test('claim rejects unknown partitions, unregistered tasks and undeclared fields', async (env) => {
      const c = env.client;
      await register(c);
      await expectCode(
        () => c.claimMeta({ partition: 'ghost', task: 'trainer', requiredFields: ['input_ids'], batchSize: 1 }),
        'unknown_partition',
        /"ghost"/,
        'unknown partition',
      );
      await expectCode(
        () => c.claimMeta({ partition: 'train', task: 'trainr', requiredFields: ['input_ids'], batchSize: 1 }),
        'unknown_task',
        /task "trainr" is not a consumer/,
        'typo in task',
      );
      await expectCode(
        () => c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['advantages'], batchSize: 1 }),
        'unknown_field',
        /"advantages" is not declared/,
        'undeclared field',
      );
      await expectCode(
        () => c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: [], batchSize: 1 }),
        'invalid_argument',
        /at least one field/,
        'no required fields',
      );
      await expectCode(
        () => c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['input_ids'], batchSize: 2, minBatch: 3 }),
        'invalid_argument',
        /minBatch 3 exceeds batchSize 2/,
        'minBatch > batchSize',
      );
    });

    test('claims are atomic per task: concurrent consumers get disjoint rows, another task sees all', async (env) => {
      const c = env.client;
      const peer = await env.peer();
      await register(c);
      const n = 60;
      const ids = Array.from({ length: n }, (_, k) => `s${k}`);
      await c.putSamples({ partition: 'train', sampleIds: ids, columns: { input_ids: ids.map((_, k) => i32([1], [k])) } });
      const drain = async (client: DataPlaneClient, task: string): Promise<string[]> => {
        const got: string[] = [];
        for (;;) {
          const m = await client.claimMeta({
            partition: 'train',
            task,
            requiredFields: ['input_ids'],
            batchSize: 7,
            minBatch: 1,
            blocking: false,
          });
          if (m.size === 0) return got;
          got.push(...m.sampleIds);
        }
      };
      const [x, y, z] = await Promise.all([drain(c, 'trainer'), drain(peer, 'trainer'), drain(peer, 'auditor')]);
      const union = [...x, ...y];
      assertEqual(new Set(union).size, union.length, 'no row handed to two consumers of one task');
      assertDeepEqual([...union].sort(), [...ids].sort(), 'the two trainer consumers together got every row');
      assertDeepEqual([...z].sort(), [...ids].sort(), 'the auditor task independently got every row');
      assertEqual(await c.checkConsumptionStatus('train', ['trainer', 'auditor']), true, 'both tasks consumed everything');
    });

    test('claims hand out rows in first-put order and drain the tail with minBatch', async (env) => {
      const c = env.client;
      await register(c);
      const ids = ['e', 'd', 'c', 'b', 'a'];
      await c.putSamples({ partition: 'train', sampleIds: ids, columns: { input_ids: ids.map(() => i32([1], [0])) } });
      const first = await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['input_ids'], batchSize: 2 });
      assertDeepEqual(first.sampleIds, ['e', 'd'], 'oldest rows first');
      const second = await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['input_ids'], batchSize: 2 });
      assertDeepEqual(second.sampleIds, ['c', 'b'], 'then the next ones');
      const allOrNothing = await c.claimMeta({
        partition: 'train',
        task: 'trainer',
        requiredFields: ['input_ids'],
        batchSize: 2,
        blocking: false,
      });
      assertEqual(allOrNothing.size, 0, 'default minBatch = batchSize: one ready row is not a batch');
      const tail = await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['input_ids'], batchSize: 2, minBatch: 1 });
      assertDeepEqual(tail.sampleIds, ['a'], 'minBatch 1 drains the tail');
    });

    test('a blocking claim times out with an error naming the lagging fields', async (env) => {
      const c = env.client;
      await register(c);
      await c.putSamples({
        partition: 'train',
        sampleIds: ['a', 'b', 'c'],
        columns: { input_ids: [i32([1], [1]), i32([1], [2]), i32([1], [3])] },
      });
      await c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { hidden: [f32([1], [1])] } });
      const start = performance.now();
      const err = await assertRejects(
        () =>
          c.claimMeta({
            partition: 'train',
            task: 'trainer',
            requiredFields: ['input_ids', 'hidden', 'loss_mask'],
            batchSize: 2,
            timeoutMs: 150,
          }),
        /timed out after 150 ms: partition "train", task "trainer" wanted 2\.\.2 rows .* 0 ready; lagging fields: hidden \(missing on 2 unclaimed rows\), loss_mask \(missing on 3 unclaimed rows\)/,
        'timeout message',
      );
      assert(err instanceof ClaimTimeoutError, 'a ClaimTimeoutError');
      assertDeepEqual((err as ClaimTimeoutError).lagging, { input_ids: 0, hidden: 2, loss_mask: 3 }, 'lagging counts per field');
      assert(performance.now() - start >= 140, 'waited for the timeout');
    });

    test('consumption status: false before, true after; empty partition false; unknown task an error', async (env) => {
      const c = env.client;
      await register(c);
      assertEqual(await c.checkConsumptionStatus('train', ['trainer']), false, 'empty partition is not consumed');
      await c.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { input_ids: [i32([1], [1]), i32([1], [2])] } });
      assertEqual(await c.checkConsumptionStatus('train', ['trainer']), false, 'before claim');
      await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['input_ids'], batchSize: 2 });
      assertEqual(await c.checkConsumptionStatus('train', ['trainer']), true, 'after claim');
      assertEqual(await c.checkConsumptionStatus('train', ['trainer', 'auditor']), false, 'auditor has not consumed');
      await expectCode(() => c.checkConsumptionStatus('train', ['ghost']), 'unknown_task', /"ghost"/, 'unknown task');
      await c.putSamples({ partition: 'train', sampleIds: ['c'], columns: { input_ids: [i32([1], [3])] } });
      assertEqual(await c.checkConsumptionStatus('train', ['trainer']), false, 'a new row reopens the task');
    });

    test('puts reject undeclared fields, dtype changes, duplicates, misaligned rows and bad tags, writing nothing', async (env) => {
      const c = env.client;
      await register(c);
      await expectCode(
        () => c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { input_ids: [i32([1], [1])], advantages: [f32([1], [1])] } }),
        'unknown_field',
        /field "advantages" is not declared/,
        'undeclared field',
      );
      await expectCode(
        () => c.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { hidden: [f32([1], [1]), i32([1], [1])] } }),
        'dtype_mismatch',
        /field "hidden" is declared f32, sample "b" has i32/,
        'dtype change',
      );
      await expectCode(
        () => c.putSamples({ partition: 'train', sampleIds: ['a', 'a'], columns: { input_ids: [i32([1], [1]), i32([1], [1])] } }),
        'invalid_argument',
        /duplicate sample ids in one put: "a"/,
        'duplicate ids',
      );
      await expectCode(
        () => c.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { input_ids: [i32([1], [1])] } }),
        'invalid_argument',
        /column "input_ids" has 1 rows for 2 sample ids/,
        'row count',
      );
      await expectCode(
        () =>
          c.putSamples({
            partition: 'train',
            sampleIds: ['a'],
            columns: { input_ids: [{ dtype: 'i32', shape: [2], data: Int32Array.from([1]) }] },
          }),
        'invalid_argument',
        /field "input_ids" of sample "a": shape \[2\] has 2 elements but data has 1/,
        'shape/data mismatch',
      );
      await expectCode(
        () =>
          c.putSamples({
            partition: 'train',
            sampleIds: ['a'],
            columns: { input_ids: [{ dtype: 'i32', shape: [1], data: Float32Array.from([1]) } as unknown as HostTensor] },
          }),
        'invalid_argument',
        /must be a Int32Array for dtype i32/,
        'typed array class',
      );
      await expectCode(
        () => c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { input_ids: [i32([1], [1])] }, tags: [{ weights: [1, 2] }] }),
        'invalid_argument',
        /tags of sample "a"\.weights is a Array; tags hold primitives only/,
        'non-primitive tag',
      );
      await expectCode(
        () => c.putSamples({ partition: 'train', sampleIds: ['a'], columns: {} }),
        'invalid_argument',
        /writes no field/,
        'no columns',
      );
      await expectCode(
        () => c.putSamples({ partition: 'ghost', sampleIds: ['a'], columns: { input_ids: [i32([1], [1])] } }),
        'unknown_partition',
        /"ghost" is not registered/,
        'unregistered partition',
      );
      assertEqual((await c.partitionStats('train')).samples, 0, 'no failed put left a row behind');
      assertEqual((await c.partitionStats('train')).bytesHeld, 0, 'no failed put left bytes behind');
    });

    test('clear frees bytes before ids are reused, resets cursors, and is idempotent', async (env) => {
      const c = env.client;
      await register(c);
      await c.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { hidden: [f32([4], [1, 2, 3, 4]), f32([2], [5, 6])] } });
      assertEqual((await c.partitionStats('train')).bytesHeld, 24, 'six f32 values held');
      const claimed = await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['hidden'], batchSize: 2 });
      assertEqual(claimed.size, 2, 'both claimed');
      assertEqual(await c.clearSamples('train', ['a', 'ghost']), 1, 'one known id removed, unknown ignored');
      assertEqual((await c.partitionStats('train')).bytesHeld, 8, "a's 16 bytes freed in the same step");
      assertEqual(await c.clearSamples('train', ['a']), 0, 'second clear is a no-op');
      assertEqual(await c.clearSamples('never-registered', ['a']), 0, 'clear of an unknown partition is a no-op');
      await c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { hidden: [f32([1], [42])] } });
      const fresh = await c.getSamples({ partition: 'train', sampleIds: ['a'], fields: ['hidden'] });
      assertDeepEqual(
        (await hostColumn(env, fresh, 'hidden'))[0],
        { shape: [1], dtype: 'f32', values: [42] },
        'reused id sees only its new bytes',
      );
      const again = await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['hidden'], batchSize: 1 });
      assertDeepEqual(again.sampleIds, ['a'], 'a reused id is unconsumed again for the task');
      assertEqual(await c.clearSamples('train', { all: true }), 2, 'clear all');
      const stats = await c.partitionStats('train');
      assertEqual(stats.samples, 0, 'no samples left');
      assertEqual(stats.bytesHeld, 0, 'no bytes left');
      assertDeepEqual(Object.keys(stats.fields).sort(), Object.keys(FIELDS).sort(), 'schema survives clear all');
      await expectCode(
        () => c.clearSamples('train', null as unknown as string[]),
        'invalid_argument',
        /id list or \{ all: true \}/,
        'no implicit clear-all',
      );
    });

    test('leases: expiry returns rows to the task, ack consumes, late ack is lease_lost, release is immediate', async (env) => {
      const c = env.client;
      const peer = await env.peer();
      await register(c);
      await c.putSamples({
        partition: 'train',
        sampleIds: ['a', 'b', 'c'],
        columns: { input_ids: [i32([1], [1]), i32([1], [2]), i32([1], [3])] },
      });
      const crashed = await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['input_ids'], batchSize: 2, leaseMs: 600 });
      assertDeepEqual(crashed.sampleIds, ['a', 'b'], 'leased a, b');
      assert(crashed.leaseId !== null, 'leased meta carries its lease id');
      assertEqual(await c.checkConsumptionStatus('train', ['trainer']), false, 'leased rows are not consumed');
      const meanwhile = await peer.claimMeta({
        partition: 'train',
        task: 'trainer',
        requiredFields: ['input_ids'],
        batchSize: 3,
        minBatch: 1,
        blocking: false,
      });
      assertDeepEqual(meanwhile.sampleIds, ['c'], 'leased rows are not handed out again before expiry');
      // Generous margins: the lease must not lapse before the peer's first claim on a loaded machine.
      await new Promise((r) => setTimeout(r, 800));
      const recovered = await peer.claimMeta({
        partition: 'train',
        task: 'trainer',
        requiredFields: ['input_ids'],
        batchSize: 2,
        leaseMs: 10_000,
      });
      assertDeepEqual(recovered.sampleIds, ['a', 'b'], "the crashed consumer's rows came back after expiry");
      await expectCode(
        () => c.ackClaim(crashed),
        'lease_lost',
        /no longer holds 2 sample\(s\).*"a", "b"/,
        'late ack by the first consumer',
      );
      const partial = await assertRejects(
        () => c.ackClaim(crashed.concat(meanwhile.with({ leaseId: crashed.leaseId }))),
        /no longer holds 3 sample/,
        'ack naming rows never leased',
      );
      assert(partial instanceof LeaseLostError, 'a LeaseLostError');
      assertDeepEqual(
        [(partial as LeaseLostError).settled, [...(partial as LeaseLostError).lost].sort()],
        [[], ['a', 'b', 'c']],
        'lost rows listed, nothing settled',
      );
      const released = await peer.releaseClaim(recovered.subset([1]));
      assertDeepEqual(released.settled, ['b'], 'release of b');
      const b = await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['input_ids'], batchSize: 1, leaseMs: 10_000 });
      assertDeepEqual(b.sampleIds, ['b'], 'released row is immediately claimable');
      assertDeepEqual((await peer.ackClaim(recovered.subset([0]))).settled, ['a'], 'ack a');
      await c.ackClaim(b);
      assertEqual(await c.checkConsumptionStatus('train', ['trainer']), true, 'a, b acked and c consumed at claim');
      await expectCode(() => c.ackClaim(meanwhile), 'invalid_argument', /not a leased claim/, 'a non-leased claim has nothing to ack');
    });

    test('ack with clear drops a row in the same step once every consumer task has consumed it', async (env) => {
      const c = env.client;
      await register(c);
      await c.putSamples({ partition: 'train', sampleIds: ['a', 'b'], columns: { input_ids: [i32([2], [1, 2]), i32([1], [3])] } });
      const trainer = await c.claimMeta({
        partition: 'train',
        task: 'trainer',
        requiredFields: ['input_ids'],
        batchSize: 2,
        leaseMs: 10_000,
      });
      assertDeepEqual((await c.ackClaim(trainer, { clear: true })).settled, ['a', 'b'], 'trainer acked both');
      assertEqual((await c.partitionStats('train')).samples, 2, 'kept: the auditor task has not consumed them yet');
      const auditor = await c.claimMeta({
        partition: 'train',
        task: 'auditor',
        requiredFields: ['input_ids'],
        batchSize: 1,
        leaseMs: 10_000,
      });
      await c.ackClaim(auditor, { clear: true });
      const after = await c.partitionStats('train');
      assertEqual(after.samples, 1, 'the row both tasks consumed is gone');
      assert(after.bytesHeld > 0 && after.bytesHeld < 12, `its bytes are freed (${after.bytesHeld} left)`);
      const rest = await c.claimMeta({ partition: 'train', task: 'auditor', requiredFields: ['input_ids'], batchSize: 1, leaseMs: 10_000 });
      await c.ackClaim(rest);
      assertEqual((await c.partitionStats('train')).samples, 1, 'a plain ack clears nothing');
      await expectCode(
        () => c.ackClaim(rest, { clear: 'yes' as unknown as boolean }),
        'invalid_argument',
        /options\.clear must be a boolean/,
        'clear must be a boolean',
      );
    });

    test('re-register: empty partition may change schema; non-empty needs replace, which wipes it', async (env) => {
      const c = env.client;
      await register(c);
      await c.registerPartition({ partition: 'train', fields: { input_ids: 'i32' }, consumerTasks: ['trainer'] });
      assertDeepEqual((await c.partitionStats('train')).fields, { input_ids: 'i32' }, 'second registration of an empty partition wins');
      await c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { input_ids: [i32([1], [1])] } });
      await expectCode(
        () => c.registerPartition({ partition: 'train', fields: { input_ids: 'i32' }, consumerTasks: ['trainer'] }),
        'conflict',
        /still holds 1 samples/,
        're-register non-empty',
      );
      await c.registerPartition({ partition: 'train', fields: { hidden: 'f32' }, consumerTasks: ['eval'], replace: true });
      const stats = await c.partitionStats('train');
      assertEqual(stats.samples, 0, 'replace wiped the rows');
      assertEqual(stats.bytesHeld, 0, 'replace freed the bytes');
      assertDeepEqual(stats.consumerTasks, ['eval'], 'replace set the new tasks');
      await expectCode(
        () => c.registerPartition({ partition: 'x', fields: { a: 'f64' as 'f32' }, consumerTasks: ['t'] }),
        'invalid_argument',
        /dtype "f64"/,
        'unknown dtype',
      );
      await expectCode(
        () => c.registerPartition({ partition: 'x', fields: { a: 'f32' }, consumerTasks: [] }),
        'invalid_argument',
        /at least one task/,
        'no tasks',
      );
    });

    test('tags are committed with the put and come back on claims as sequence lengths', async (env) => {
      const c = env.client;
      await register(c);
      await c.putSamples({
        partition: 'train',
        sampleIds: ['a', 'b'],
        columns: { input_ids: [i32([2], [1, 2]), i32([3], [1, 2, 3])] },
        tags: [
          { seq_len: 2, target_version: 7, producer: 'w0', stale: false, note: null },
          { seq_len: 3, target_version: 7, producer: 'w1', stale: true, note: 'x' },
        ],
      });
      await c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { hidden: [f32([1], [1])] }, tags: [{ stale: true }] });
      const meta = await c.claimMeta({ partition: 'train', task: 'trainer', requiredFields: ['input_ids'], batchSize: 2 });
      assertDeepEqual(meta.sequenceLengths, [2, 3], 'lengths from seq_len tags');
      assertDeepEqual(
        meta.tags,
        [
          { seq_len: 2, target_version: 7, producer: 'w0', stale: true, note: null },
          { seq_len: 3, target_version: 7, producer: 'w1', stale: true, note: 'x' },
        ].map((t, i) => Object.fromEntries(Object.keys(meta.tags![i]).map((k) => [k, (t as Record<string, unknown>)[k]]))),
        'tags merged key by key and typed',
      );
      assertEqual(meta.tags![0].stale, true, 'later put updated one tag');
      assertEqual(meta.tags![0].target_version, 7, 'numbers stay numbers');
      assertEqual(meta.tags![0].note, null, 'null survives');
    });

    test('partitions are isolated: the same id in two partitions is two rows', async (env) => {
      const c = env.client;
      await register(c, 'train');
      await register(c, 'eval', ['evaluator']);
      await c.putSamples({ partition: 'train', sampleIds: ['x'], columns: { input_ids: [i32([1], [1])] } });
      await c.putSamples({ partition: 'eval', sampleIds: ['x'], columns: { input_ids: [i32([2], [5, 6])] } });
      await c.clearSamples('train', ['x']);
      const got = await c.getSamples({ partition: 'eval', sampleIds: ['x'], fields: ['input_ids'] });
      assertDeepEqual((await hostColumn(env, got, 'input_ids'))[0].values, [5, 6], 'eval row untouched by clearing train');
      await expectCode(
        () => c.claimMeta({ partition: 'eval', task: 'trainer', requiredFields: ['input_ids'], batchSize: 1 }),
        'unknown_task',
        /not a consumer of partition "eval"/,
        'tasks are per partition',
      );
    });

    test('close is idempotent and later calls fail with closed', async (env) => {
      const c = env.client;
      await register(c);
      await c.close();
      await c.close();
      await expectCode(
        () => c.putSamples({ partition: 'train', sampleIds: ['a'], columns: { input_ids: [i32([1], [1])] } }),
        'closed',
        /is closed/,
        'put after close',
      );
    });

    t.test(
      'GPU tensor rows can be put and read back (residency follows the store)',
      async (ctx) => {
        const gpu = new Gpu(ctx.gpu);
        const env = await open(ctx, gpu);
        try {
          const c = env.client;
          await register(c);
          const t = gpu.upload([2, 2], 'f32', [1, 2, 3, 4], 'row');
          const host = f32([1], [9]);
          await c.putSamples({ partition: 'train', sampleIds: ['g', 'h'], columns: { hidden: [t, host] } });
          // Stores copy at put time; the noop passthrough keeps the caller's tensor by reference.
          gpu.write(t, [0, 0, 0, 0]);
          const got = await c.getSamples({ partition: 'train', sampleIds: ['g', 'h'], fields: ['hidden'] });
          const g = await env.host(got.hidden[0]);
          assertDeepEqual(g.shape, [2, 2], 'shape');
          const passthrough = c.kind === 'noop';
          assertDeepEqual(Array.from(g.data), passthrough ? [0, 0, 0, 0] : [1, 2, 3, 4], 'values (copy for stores, reference for noop)');
          assertDeepEqual(Array.from((await env.host(got.hidden[1])).data), [9], 'host row next to a GPU row');
          const gpuResident = c.kind === 'transferQueue/local-gpu';
          assertEqual(isTensor(got.hidden[1]), gpuResident, 'host rows come back as GPU tensors only from the GPU store');
          assertEqual(
            isTensor(got.hidden[0]),
            gpuResident || passthrough,
            'GPU rows come back as tensors from the GPU store and the passthrough',
          );
          await c.clearSamples('train', { all: true });
          assertEqual((await c.partitionStats('train')).bytesHeld, 0, 'bytes freed');
          if (!passthrough) gpu.release(t);
        } finally {
          await env.close();
          gpu.destroy();
        }
      },
      { only: options.only, timeoutMs: 60_000 },
    );

    t.test(
      'a GPU row without a Gpu to read it back is a clear error',
      async (ctx) => {
        const gpu = new Gpu(ctx.gpu);
        const env = await open(ctx);
        try {
          await register(env.client);
          const t = gpu.upload([1], 'f32', [1], 'row');
          if (env.client.kind === 'noop' || env.client.kind === 'transferQueue/local-gpu') {
            // These keep tensors as tensors and never need to read them back.
            await env.client.putSamples({ partition: 'train', sampleIds: ['g'], columns: { hidden: [t] } });
            assertEqual((await env.client.partitionStats('train')).samples, 1, 'stored');
          } else {
            await expectCode(
              () => env.client.putSamples({ partition: 'train', sampleIds: ['g'], columns: { hidden: [t] } }),
              'invalid_argument',
              /field|GPU Tensor but this data plane has no Gpu/,
              'foreign tensor',
            );
            assertEqual((await env.client.partitionStats('train')).samples, 0, 'nothing stored');
          }
        } finally {
          await env.close();
          gpu.destroy();
        }
      },
      { only: options.only, timeoutMs: 60_000 },
    );
  });
}
