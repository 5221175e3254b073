/** FileMetadataStore durability: torn tails, corruption, snapshots, reopen after many acks, write faults. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { FileMetadataStore } from '../../src/control/file-metadata-store.ts';
import { InMemoryMetadataStore, type MetadataStore } from '../../src/control/metadata-store.ts';
import type { FileStore } from '../../src/ports/storage.ts';
import { Rng } from '../../src/util/random.ts';
import { sampleRef } from '../contracts/fixtures.ts';
import { tempFiles } from './temp-files.ts';

/** The file journal needs append + fsync, which the browser's IndexedDB FileStore refuses (by design). */
const FILE_JOURNAL_ONLY = { only: ['node', 'deno'] } as const;
const refs = Array.from({ length: 60 }, (_, i) => sampleRef(`t${i}`));
const JOURNAL0 = 'metadata/journal-00000000.log';

/** Everything a store exposes, for comparing two stores. */
async function dump(store: MetadataStore): Promise<unknown> {
  const ids = await store.allCommittedIds();
  const marker = await store.durableMarker();
  return {
    ids,
    refs: await Promise.all(ids.map((id) => store.getCommitted(id))),
    acked: [...marker.acked].sort(),
    step: marker.globalStep,
    durable: marker.optimizerDurable,
  };
}

async function rewrite(files: FileStore, path: string, edit: (bytes: Uint8Array) => Uint8Array): Promise<void> {
  await files.writeAtomic(path, edit(await files.read(path)));
}

export default defineSuite('control/file-metadata-store', (t) => {
  t.test(
    'torn tail: a journal cut mid-record reopens with every earlier record intact',
    async ({ platform }) => {
      const tmp = tempFiles(platform, 'torn');
      try {
        const store = await FileMetadataStore.open(tmp.files);
        await store.commitSamples([refs[0], refs[1]]);
        await store.recordTrainAck([refs[0].sampleId], { globalStep: 1, optimizerDurable: true });
        await store.commitSample(refs[2]);
        await store.close();
        await rewrite(tmp.files, JOURNAL0, (b) => b.subarray(0, b.length - 7));
        const reopened = await FileMetadataStore.open(tmp.files);
        assertDeepEqual(
          await reopened.allCommittedIds(),
          [refs[0].sampleId, refs[1].sampleId],
          'torn commit of t2 dropped, earlier commits kept',
        );
        assertEqual((await reopened.durableMarker()).globalStep, 1, 'ack kept');
        assert(reopened.recovery.tornBytesDropped > 0, 'torn bytes reported');
        // New writes must land after the cut, never behind garbage.
        await reopened.commitSample(refs[2]);
        await reopened.close();
        const again = await FileMetadataStore.open(tmp.files);
        assertEqual(await again.committedCount(), 3, 'write after recovery survives the next reopen');
        assertEqual(again.recovery.tornBytesDropped, 0, 'no torn tail the second time');
        await again.close();
      } finally {
        await tmp.cleanup();
      }
    },
    FILE_JOURNAL_ONLY,
  );

  t.test(
    'corrupted checksum: last record dropped; damage in the middle refuses to open and changes nothing',
    async ({ platform }) => {
      const tmp = tempFiles(platform, 'crc');
      try {
        const store = await FileMetadataStore.open(tmp.files);
        for (const ref of refs.slice(0, 3)) await store.commitSample(ref);
        await store.close();
        const pristine = await tmp.files.read(JOURNAL0);
        const frame = pristine.length / 3; // the three frames have equal length (same-shaped refs)
        await rewrite(tmp.files, JOURNAL0, (b) => {
          const c = b.slice();
          c[Math.floor(frame) + 20] ^= 0x55;
          return c;
        });
        const damaged = await tmp.files.read(JOURNAL0);
        await assertRejects(
          () => FileMetadataStore.open(tmp.files),
          /journal-00000000\.log: damaged record at byte \d+ \(checksum mismatch\) is followed by more data/,
          'middle damage',
        );
        assertDeepEqual([...(await tmp.files.read(JOURNAL0))], [...damaged], 'journal untouched by the failed open');
        await tmp.files.writeAtomic(JOURNAL0, pristine);
        await rewrite(tmp.files, JOURNAL0, (b) => {
          const c = b.slice();
          c[c.length - 3] ^= 0x55;
          return c;
        });
        const reopened = await FileMetadataStore.open(tmp.files);
        assertEqual(await reopened.committedCount(), 2, 'last (torn) record dropped');
        await reopened.close();
      } finally {
        await tmp.cleanup();
      }
    },
    FILE_JOURNAL_ONLY,
  );

  t.test(
    'snapshot + journal replay equals the state of an in-memory store given the same operations',
    async ({ platform }) => {
      const tmp = tempFiles(platform, 'snapshot');
      try {
        const rng = new Rng(7);
        const file = await FileMetadataStore.open(tmp.files, { snapshotEvery: 4 });
        const memory = new InMemoryMetadataStore();
        for (let op = 0; op < 40; op++) {
          if (rng.next() < 0.6) {
            const batch = [refs[rng.int(0, 60)], refs[rng.int(0, 60)]];
            assertDeepEqual(await file.commitSamples(batch), await memory.commitSamples(batch), `fresh flags of op ${op}`);
          } else {
            const ack = { globalStep: rng.next() < 0.3 ? null : op, optimizerDurable: rng.next() < 0.5 };
            const ids = [refs[rng.int(0, 60)].sampleId];
            await file.recordTrainAck(ids, ack);
            await memory.recordTrainAck(ids, ack);
          }
        }
        await file.close();
        const names = await tmp.files.list('metadata');
        assert(names.includes('snapshot.json'), `a snapshot was written (${names.join(', ')})`);
        assert(!names.includes(JOURNAL0.split('/')[1]), 'generation-0 journal compacted away');
        const reopened = await FileMetadataStore.open(tmp.files, { snapshotEvery: 4 });
        assert(reopened.recovery.snapshotGeneration !== null && reopened.recovery.snapshotGeneration > 1, 'recovered from a snapshot');
        assertDeepEqual(await dump(reopened), await dump(memory), 'recovered state');
        await reopened.close();
      } finally {
        await tmp.cleanup();
      }
    },
    FILE_JOURNAL_ONLY,
  );

  t.test(
    'a snapshot rename lost to a power cut is covered by the retained previous journal',
    async ({ platform }) => {
      const tmp = tempFiles(platform, 'lost-rename');
      try {
        const store = await FileMetadataStore.open(tmp.files, { snapshotEvery: 2 });
        await store.commitSamples([refs[0]]);
        await store.commitSamples([refs[1]]);
        await store.commitSamples([refs[2]]); // snapshot generation 1 written before this record
        const older = await tmp.files.read('metadata/snapshot.json');
        await store.recordTrainAck([refs[0].sampleId], { globalStep: 4, optimizerDurable: true });
        await store.commitSamples([refs[3]]); // snapshot generation 2 written before this record
        const expected = await dump(store);
        await store.close();
        await tmp.files.writeAtomic('metadata/snapshot.json', older); // the newer rename "never happened"
        const reopened = await FileMetadataStore.open(tmp.files, { snapshotEvery: 2 });
        assertEqual(reopened.recovery.snapshotGeneration, 1, 'older snapshot loaded');
        assertDeepEqual(await dump(reopened), expected, 'nothing lost');
        await reopened.close();
        await tmp.files.remove('metadata/snapshot.json');
        await assertRejects(
          () => FileMetadataStore.open(tmp.files),
          /snapshot\.json is missing but journals of later generations exist/,
          'missing snapshot refused',
        );
      } finally {
        await tmp.cleanup();
      }
    },
    FILE_JOURNAL_ONLY,
  );

  t.test(
    'an edited, truncated or bit-flipped snapshot is refused naming the file, never loaded into another run',
    async ({ platform }) => {
      const tmp = tempFiles(platform, 'damaged-snapshot');
      try {
        const store = await FileMetadataStore.open(tmp.files, { snapshotEvery: 2 });
        await store.commitSamples([refs[0], refs[1]]);
        await store.recordTrainAck([refs[0].sampleId], { globalStep: 40, optimizerDurable: true });
        await store.commitSamples([refs[2]]);
        await store.close();
        const good = await tmp.files.read('metadata/snapshot.json');
        const text = new TextDecoder().decode(good);
        assert(text.includes('"globalStep": 40'), 'the snapshot holds step 40');
        const cases: [string, Uint8Array, RegExp][] = [
          [
            'globalStep edited 40 → 36',
            new TextEncoder().encode(text.replace('"globalStep": 40', '"globalStep": 36')),
            /CRC-32 [0-9a-f]+, the header recorded/,
          ],
          [
            'a committed id dropped',
            new TextEncoder().encode(text.replace(refs[1].sampleId, refs[0].sampleId)),
            /CRC-32 [0-9a-f]+, the header recorded/,
          ],
          ['cut short', good.slice(0, good.length - 10), /\d+ bytes after the header, which recorded/],
          ['one bit flipped', good.map((b, i) => (i === good.length - 3 ? b ^ 4 : b)), /CRC-32/],
        ];
        for (const [label, bytes, pattern] of cases) {
          await tmp.files.writeAtomic('metadata/snapshot.json', bytes);
          await assertRejects(
            () => FileMetadataStore.open(tmp.files),
            new RegExp(`metadata/snapshot\\.json: the ledger snapshot .* is damaged \\(${pattern.source}`),
            label,
          );
        }
        await tmp.files.writeAtomic('metadata/snapshot.json', good);
        const reopened = await FileMetadataStore.open(tmp.files, { snapshotEvery: 2 });
        assertEqual((await reopened.durableMarker()).globalStep, 40, 'the intact snapshot loads');
        await reopened.close();
      } finally {
        await tmp.cleanup();
      }
    },
    FILE_JOURNAL_ONLY,
  );

  t.test(
    'reopen after many acks (with snapshots) keeps every ack and the last step',
    async ({ platform }) => {
      const tmp = tempFiles(platform, 'many-acks');
      try {
        let store = await FileMetadataStore.open(tmp.files, { snapshotEvery: 25 });
        await store.commitSamples(refs);
        for (let step = 1; step <= 60; step++) {
          await store.recordTrainAck([refs[step - 1].sampleId], { globalStep: step, optimizerDurable: true });
          if (step % 20 === 0) {
            await store.close();
            store = await FileMetadataStore.open(tmp.files, { snapshotEvery: 25 });
          }
        }
        const marker = await store.durableMarker();
        assertEqual(marker.acked.size, 60, 'acked ids');
        assertEqual(marker.globalStep, 60, 'last step');
        assertEqual(await store.committedCount(), 60, 'commits');
        await store.close();
      } finally {
        await tmp.cleanup();
      }
    },
    FILE_JOURNAL_ONLY,
  );

  t.test(
    'a failed journal write records nothing and blocks writes until reopen',
    async ({ platform }) => {
      const tmp = tempFiles(platform, 'fault');
      try {
        const seed = await FileMetadataStore.open(tmp.files);
        await seed.commitSample(refs[0]);
        await seed.close();
        // A disk that accepts half a frame and then fails (the fault is in the file system, not the store).
        const faulty: FileStore = Object.create(tmp.files) as FileStore;
        faulty.openAppendLog = async (path) => {
          const log = await tmp.files.openAppendLog(path);
          return {
            path: log.path,
            append: async (bytes) => {
              await log.append(bytes.subarray(0, 10));
              throw new Error('EIO: injected write failure');
            },
            close: () => log.close(),
          };
        };
        const store = await FileMetadataStore.open(faulty);
        await assertRejects(() => store.commitSample(refs[1]), /journal write failed, change not applied: EIO/, 'failed commit');
        assertEqual(await store.isCommitted(refs[1].sampleId), false, 'not committed in memory');
        await assertRejects(
          () => store.recordTrainAck([refs[0].sampleId], { optimizerDurable: true }),
          /earlier journal write failed.*reopen the store/,
          'later writes refused',
        );
        await store.close();
        const recovered = await FileMetadataStore.open(tmp.files);
        assertDeepEqual(await recovered.allCommittedIds(), [refs[0].sampleId], 'acknowledged commit kept, partial frame dropped');
        assert(recovered.recovery.tornBytesDropped === 10, `partial frame dropped (${recovered.recovery.tornBytesDropped} bytes)`);
        await recovered.close();
      } finally {
        await tmp.cleanup();
      }
    },
    FILE_JOURNAL_ONLY,
  );
});
