/**
 * The MetadataStore conformance suite: in-memory everywhere, the file journal in Node/Deno, and
 * IndexedDB in the browser (each runtime checks the in-memory store plus its durable one).
 */
import { defineSuite } from '../harness/suite.ts';
import { InMemoryMetadataStore } from '../../src/control/metadata-store.ts';
import { FileMetadataStore } from '../../src/control/file-metadata-store.ts';
import { IndexedDbMetadataStore } from '../../src/control/indexeddb-metadata-store.ts';
import { metadataStoreConformance } from './metadata-store-conformance.ts';
import { tempFiles } from './temp-files.ts';
import { tempDatabase } from './temp-database.ts';

export default defineSuite('control/metadata-store', (t) => {
  metadataStoreConformance(t, 'in-memory', async () => ({ store: new InMemoryMetadataStore(), cleanup: async () => {} }));
  metadataStoreConformance(
    t,
    'file',
    async ({ platform }) => {
      const tmp = tempFiles(platform, 'conformance');
      // snapshotEvery 2 so the contract is also checked across snapshot switches.
      return { store: await FileMetadataStore.open(tmp.files, { snapshotEvery: 2 }), cleanup: tmp.cleanup };
    },
    { only: ['node', 'deno'] },
  );
  metadataStoreConformance(
    t,
    'indexeddb',
    async ({ platform }) => {
      const db = tempDatabase(platform, 'conformance');
      return { store: await IndexedDbMetadataStore.open(platform, db.name), cleanup: db.cleanup };
    },
    { only: ['browser'] },
  );
});
