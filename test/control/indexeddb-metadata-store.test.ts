/**
 * IndexedDbMetadataStore durability in the browser: reopen by name, aborted transactions record
 * nothing (faults raised inside IndexedDB itself), two connections (tabs) share one state, close
 * semantics, corrupt rows. In Node and Deno: the platform refuses the capability with a pointer
 * to the file store. The closed-tab crash test is test/runners/browser-crash.ts.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertRejects } from '../harness/assert.ts';
import { IndexedDbMetadataStore, METADATA_DB_SCHEMA } from '../../src/control/indexeddb-metadata-store.ts';
import { InMemoryMetadataStore, type MetadataStore } from '../../src/control/metadata-store.ts';
import type { KeyValueDatabase, KeyValueTransaction } from '../../src/ports/storage.ts';
import type { Platform } from '../../src/cli/platform.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import { Rng } from '../../src/util/random.ts';
import { sampleRef } from '../contracts/fixtures.ts';
import { tempDatabase } from './temp-database.ts';

const refs = Array.from({ length: 40 }, (_, i) => sampleRef(`i${i}`));
const BROWSER = { only: ['browser'] } as const;

/** Everything a store exposes, for comparing two stores. */
async function dump(store: MetadataStore): Promise<unknown> {
  const ids = await store.allCommittedIds();
  const marker = await store.durableMarker();
  return {
    ids,
    refs: await Promise.all(ids.map((id) => store.getCommitted(id))),
    count: await store.committedCount(),
    acked: [...marker.acked].sort(),
    step: marker.globalStep,
    durable: marker.optimizerDurable,
  };
}

/**
 * A platform whose key-value transactions misbehave on the `failAt`-th put (counting from 1): the
 * real request is issued with a value IndexedDB cannot clone, so the DataCloneError comes from
 * IndexedDB itself, after the earlier puts of the same transaction were already issued.
 */
function poisonedPlatform(platform: Platform, failAt: () => number): Pick<Platform, 'openKeyValueDatabase'> {
  return {
    async openKeyValueDatabase(name, schema) {
      const db = await platform.openKeyValueDatabase(name, schema);
      let puts = 0;
      const faulty: KeyValueDatabase = {
        name: db.name,
        close: () => db.close(),
        transaction: (stores, mode, body) =>
          db.transaction(stores, mode, (tx) => {
            const wrapped: KeyValueTransaction = {
              ...tx,
              put: (store, value, key) => {
                puts++;
                return tx.put(store, puts === failAt() ? { value, poison: () => 0 } : value, key);
              },
            };
            return body(wrapped);
          }),
      };
      return faulty;
    },
  };
}

export default defineSuite('control/indexeddb-metadata-store', (t) => {
  t.test(
    'reopening the database by name restores refs, commit order and the marker (same state as an in-memory store)',
    async ({ platform }) => {
      const db = tempDatabase(platform, 'reopen');
      try {
        const rng = new Rng(11);
        const store = await IndexedDbMetadataStore.open(platform, db.name);
        const memory = new InMemoryMetadataStore();
        for (let op = 0; op < 40; op++) {
          if (rng.next() < 0.6) {
            const batch = [refs[rng.int(0, 40)], refs[rng.int(0, 40)], refs[rng.int(0, 40)]];
            assertDeepEqual(await store.commitSamples(batch), await memory.commitSamples(batch), `fresh flags of op ${op}`);
          } else {
            const ack = { globalStep: rng.next() < 0.3 ? null : op, optimizerDurable: rng.next() < 0.5 };
            const ids = [refs[rng.int(0, 40)].sampleId, refs[rng.int(0, 40)].sampleId];
            await store.recordTrainAck(ids, ack);
            await memory.recordTrainAck(ids, ack);
          }
        }
        const expected = await dump(memory);
        assertDeepEqual(await dump(store), expected, 'live state');
        await store.close();
        const reopened = await IndexedDbMetadataStore.open(platform, db.name);
        assertDeepEqual(await dump(reopened), expected, 'state after reopening by name');
        const ref = await reopened.getCommitted((await reopened.allCommittedIds())[0]);
        assert(
          ref !== undefined && Object.isFrozen(ref) && Object.isFrozen(ref.featureSpecs),
          'refs read back are validated, frozen records',
        );
        await reopened.close();
      } finally {
        await db.cleanup();
      }
    },
    BROWSER,
  );

  t.test(
    'a commit transaction that fails inside IndexedDB records nothing; the store keeps working',
    async ({ platform }) => {
      const db = tempDatabase(platform, 'commit-abort');
      try {
        const seed = await IndexedDbMetadataStore.open(platform, db.name);
        await seed.commitSample(refs[0]);
        await seed.close();
        let failAt = 3; // the third put of the batch below: two rows already issued in the same transaction
        const store = await IndexedDbMetadataStore.open(
          poisonedPlatform(platform, () => failAt),
          db.name,
        );
        await assertRejects(
          () => store.commitSamples([refs[1], refs[2], refs[3], refs[4]]),
          /commit transaction failed, nothing recorded: DataCloneError/,
          'failed batch',
        );
        assertDeepEqual(await store.allCommittedIds(), [refs[0].sampleId], 'no row of the failed batch is visible');
        failAt = -1;
        assertDeepEqual(
          await store.commitSamples([refs[1], refs[0], refs[2]]),
          [true, false, true],
          'retry after the fault: fresh flags as if the batch never ran',
        );
        await store.close();
        const reopened = await IndexedDbMetadataStore.open(platform, db.name);
        assertDeepEqual(
          await reopened.allCommittedIds(),
          [refs[0], refs[1], refs[2]].map((r) => r.sampleId),
          'after reopen: seed + retry, in order',
        );
        await reopened.close();
      } finally {
        await db.cleanup();
      }
    },
    BROWSER,
  );

  t.test(
    'an ack transaction that fails on the marker write records none of its ids',
    async ({ platform }) => {
      const db = tempDatabase(platform, 'ack-abort');
      try {
        let failAt = -1;
        const store = await IndexedDbMetadataStore.open(
          poisonedPlatform(platform, () => failAt),
          db.name,
        );
        await store.commitSamples([refs[0], refs[1], refs[2]]); // puts 1..3
        await store.recordTrainAck([refs[0].sampleId], { globalStep: 4, optimizerDurable: true }); // puts 4 (id), 5 (marker)
        failAt = 8; // next ack: puts 6, 7 (ids), 8 (marker): the ids are issued, then the marker write fails
        await assertRejects(
          () => store.recordTrainAck([refs[1].sampleId, refs[2].sampleId], { globalStep: 9, optimizerDurable: false }),
          /ack transaction failed, nothing recorded: DataCloneError/,
          'failed ack',
        );
        await store.close();
        const reopened = await IndexedDbMetadataStore.open(platform, db.name);
        const marker = await reopened.durableMarker();
        assertDeepEqual(
          [[...marker.acked], marker.globalStep, marker.optimizerDurable],
          [[refs[0].sampleId], 4, true],
          'marker as of the last successful ack',
        );
        await reopened.close();
      } finally {
        await db.cleanup();
      }
    },
    BROWSER,
  );

  t.test(
    'two connections (two tabs) share one state: concurrent commits report each id fresh exactly once',
    async ({ platform }) => {
      const db = tempDatabase(platform, 'two-tabs');
      try {
        const a = await IndexedDbMetadataStore.open(platform, db.name);
        const b = await IndexedDbMetadataStore.open(platform, db.name);
        const batch = refs.slice(0, 10);
        const results = await Promise.all([
          a.commitSamples(batch),
          b.commitSamples([...batch].reverse()),
          a.commitSamples(batch.slice(3, 7)),
        ]);
        const fresh = new Map<string, number>();
        const count = (sent: readonly SampleRef[], flags: boolean[]): void => {
          flags.forEach((f, i) => {
            if (f) fresh.set(sent[i].sampleId, (fresh.get(sent[i].sampleId) ?? 0) + 1);
          });
        };
        count(batch, results[0]);
        count([...batch].reverse(), results[1]);
        count(batch.slice(3, 7), results[2]);
        assertDeepEqual(
          [fresh.size, [...fresh.values()].every((n) => n === 1)],
          [10, true],
          'each id fresh exactly once across connections',
        );
        await b.recordTrainAck([batch[0].sampleId], { globalStep: 2, optimizerDurable: true });
        const seen = await a.durableMarker();
        assertDeepEqual([[...seen.acked], seen.globalStep, await a.committedCount()], [[batch[0].sampleId], 2, 10], "a sees b's ack");
        await a.close();
        await b.close();
      } finally {
        await db.cleanup();
      }
    },
    BROWSER,
  );

  t.test(
    'close waits for started transactions and then refuses calls',
    async ({ platform }) => {
      const db = tempDatabase(platform, 'close');
      try {
        const store = await IndexedDbMetadataStore.open(platform, db.name);
        const pending = store.commitSamples([refs[0], refs[1]]);
        const ack = store.recordTrainAck([refs[0].sampleId], { globalStep: 1, optimizerDurable: true });
        await store.close();
        assertDeepEqual(await pending, [true, true], 'commit started before close completed');
        await ack;
        await assertRejects(() => store.commitSample(refs[2]), /store is closed/, 'commit after close');
        await assertRejects(() => store.durableMarker(), /store is closed/, 'read after close');
        const reopened = await IndexedDbMetadataStore.open(platform, db.name);
        assertDeepEqual(
          [await reopened.committedCount(), [...(await reopened.durableMarker()).acked]],
          [2, [refs[0].sampleId]],
          'both writes durable',
        );
        await reopened.close();
      } finally {
        await db.cleanup();
      }
    },
    BROWSER,
  );

  t.test(
    'a malformed stored marker or ref is reported, not trusted',
    async ({ platform }) => {
      const db = tempDatabase(platform, 'corrupt');
      try {
        const store = await IndexedDbMetadataStore.open(platform, db.name);
        await store.commitSample(refs[0]);
        const raw = await platform.openKeyValueDatabase(db.name, METADATA_DB_SCHEMA);
        await raw.transaction(['marker', 'committed'], 'readwrite', async (tx) => {
          await tx.put('marker', { globalStep: -3, optimizerDurable: 'yes' }, 'marker');
          await tx.put('committed', { sampleId: refs[1].sampleId, ref: { ...refs[1], strategy: 'nope' } });
        });
        raw.close();
        await assertRejects(() => store.durableMarker(), /marker row is malformed/, 'bad marker');
        await assertRejects(() => store.getCommitted(refs[1].sampleId), /committed .* is invalid[\s\S]*strategy/, 'bad ref');
        await store.close();
      } finally {
        await db.cleanup();
      }
    },
    BROWSER,
  );

  t.test(
    'Node and Deno refuse the IndexedDB capability and point to the file metadata store',
    async ({ platform }) => {
      await assertRejects(
        () => platform.openKeyValueDatabase('speclab-test:nope', METADATA_DB_SCHEMA),
        /not available in (node|deno).*use the file metadata store/,
        'platform',
      );
      await assertRejects(() => IndexedDbMetadataStore.open(platform, 'speclab-test:nope'), /IndexedDB is a browser capability/, 'store');
      await assertRejects(() => platform.deleteKeyValueDatabase('speclab-test:nope'), /use the file metadata store/, 'delete');
    },
    { only: ['node', 'deno'] },
  );
});
