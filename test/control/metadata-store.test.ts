/** The MetadataStore conformance suite, run against both stores. */
import { defineSuite } from '../harness/suite.ts';
import { InMemoryMetadataStore } from '../../src/control/metadata-store.ts';
import { FileMetadataStore } from '../../src/control/file-metadata-store.ts';
import { metadataStoreConformance } from './metadata-store-conformance.ts';
import { tempFiles } from './temp-files.ts';

export default defineSuite('control/metadata-store', (t) => {
  metadataStoreConformance(t, 'in-memory', async () => ({ store: new InMemoryMetadataStore(), cleanup: async () => {} }));
  metadataStoreConformance(t, 'file', async ({ platform }) => {
    const tmp = tempFiles(platform, 'conformance');
    // snapshotEvery 2 so the contract is also checked across snapshot switches.
    return { store: await FileMetadataStore.open(tmp.files, { snapshotEvery: 2 }), cleanup: tmp.cleanup };
  });
});
