/**
 * One behavioural contract for every MetadataStore (docs/durability.md §2): run against the in-memory
 * store everywhere, the file-backed store in Node/Deno and the IndexedDB store in the browser.
 * `open` returns a fresh, empty store and a cleanup; `only` restricts the runtimes.
 */
import type { SuiteBuilder, TestContext } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import type { MetadataStore } from '../../src/control/metadata-store.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import type { RuntimeName } from '../../src/ports/runtime.ts';
import { sampleRef } from '../contracts/fixtures.ts';

export type StoreFactory = (ctx: TestContext) => Promise<{ store: MetadataStore; cleanup: () => Promise<void> }>;

export function metadataStoreConformance(
  t: SuiteBuilder,
  label: string,
  open: StoreFactory,
  options: { only?: readonly RuntimeName[] } = {},
): void {
  const check = (name: string, body: (store: MetadataStore) => Promise<void>): void => {
    t.test(
      `${label}: ${name}`,
      async (ctx) => {
        const { store, cleanup } = await open(ctx);
        try {
          await body(store);
        } finally {
          await store.close();
          await cleanup();
        }
      },
      { only: options.only },
    );
  };
  const [s0, s1, s2] = ['s0', 's1', 's2'].map((id) => sampleRef(id));

  check('commit dedups on sample id and resolves refs', async (store) => {
    assertEqual(await store.commitSample(s0), true, 'first commit is fresh');
    assertEqual(await store.commitSample(s0), false, 'second commit is a duplicate');
    assertEqual(await store.isCommitted(s0.sampleId), true, 'isCommitted');
    assertEqual(await store.isCommitted('nope'), false, 'isCommitted unknown');
    assertDeepEqual(await store.getCommitted(s0.sampleId), s0, 'getCommitted returns the ref');
    assertEqual(await store.getCommitted('nope'), undefined, 'getCommitted unknown');
    assertDeepEqual(
      await store.getCommittedMany(['nope', s0.sampleId, s0.sampleId]),
      [undefined, s0, s0],
      'getCommittedMany keeps order and unknowns',
    );
    assertDeepEqual(await store.getCommittedMany([]), [], 'getCommittedMany of nothing');
    assertEqual(await store.committedCount(), 1, 'committedCount');
  });

  check('batch commit: per-ref flags, repeats within a batch are duplicates, insertion order kept', async (store) => {
    assertDeepEqual(await store.commitSamples([s2, s0, s2]), [true, true, false], 'first batch');
    assertDeepEqual(await store.commitSamples([s0, s1]), [false, true], 'second batch');
    assertDeepEqual(
      await store.allCommittedIds(),
      [s2, s0, s1].map((r) => r.sampleId),
      'commit order',
    );
    assertDeepEqual(await store.commitSamples([]), [], 'empty batch');
  });

  check('concurrent commits of the same id report it fresh exactly once', async (store) => {
    const results = await Promise.all([
      store.commitSamples([s0]),
      store.commitSamples([s0, s1]),
      store.commitSample(s0),
      store.commitSamples([s1]),
    ]);
    const flags = results.flat();
    assertEqual(flags.filter(Boolean).length, 2, 'one fresh flag per distinct id');
    assertEqual(await store.committedCount(), 2, 'two committed');
  });

  check('durable marker: union of ids, step only when given, last durable flag wins', async (store) => {
    await store.commitSamples([s0, s1, s2]);
    const empty = await store.durableMarker();
    assertDeepEqual([...empty.acked], [], 'initially no acks');
    assertEqual(empty.globalStep, null, 'initially no step');
    await store.recordTrainAck([s0.sampleId], { globalStep: 3, optimizerDurable: false });
    const first = await store.durableMarker();
    await store.recordTrainAck([s1.sampleId, s0.sampleId], { globalStep: null, optimizerDurable: true });
    const marker = await store.durableMarker();
    assertDeepEqual([...marker.acked].sort(), [s0.sampleId, s1.sampleId], 'acked union');
    assertEqual(marker.globalStep, 3, 'null step leaves the step');
    assertEqual(marker.optimizerDurable, true, 'durable flag');
    assertDeepEqual([...first.acked], [s0.sampleId], 'earlier marker copy unchanged');
    await store.recordTrainAck([], { globalStep: 7, optimizerDurable: false });
    const last = await store.durableMarker();
    assertEqual(last.globalStep, 7, 'step overwritten');
    assertEqual(last.optimizerDurable, false, 'flag overwritten (last writer wins)');
  });

  check('bad input is rejected with nothing recorded', async (store) => {
    await assertRejects(
      () => store.recordTrainAck([s0.sampleId], { globalStep: -1, optimizerDurable: true }),
      /globalStep must be a non-negative integer/,
      'negative step',
    );
    await assertRejects(
      () => store.recordTrainAck([42 as unknown as string], { optimizerDurable: true }),
      /sampleIds\[0\] must be a non-empty string/,
      'non-string id',
    );
    const smuggled = { ...s1, metadata: { x: new Float32Array(2) } } as unknown as SampleRef;
    await assertRejects(() => store.commitSamples([s0, smuggled]), /refs\[1\]\.metadata\.x is a tensor-like value/, 'tensor in a ref');
    const broken = { ...s2, strategy: 'nope' } as unknown as SampleRef;
    await assertRejects(() => store.commitSample(broken), /is invalid[\s\S]*strategy/, 'schema violation');
    assertEqual(await store.committedCount(), 0, 'nothing committed');
    const marker = await store.durableMarker();
    assert(marker.acked.size === 0 && marker.globalStep === null, 'marker untouched');
  });
}
