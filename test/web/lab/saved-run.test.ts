/** The lab's saved run (web/lab/saved-run.ts): what a reloaded tab continues, the conversations it trains on included. */
import { readSavedRun, RUN_FILE, writeSavedRun, type SavedRun } from '../../../web/lab/saved-run.ts';
import { DEFAULT_SETTINGS } from '../../../web/lab/protocol.ts';
import { sealJson } from '../../../src/util/sealed-json.ts';
import { assertDeepEqual, assertEqual, assertRejects } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';

const run: SavedRun = {
  settings: DEFAULT_SETTINGS,
  model: 'lab-target',
  total: 12,
  data: { file: 'chats.jsonl', bytes: 4096, crc32: 123456789, heldOut: 3 },
};

export default defineSuite('web/lab/saved-run', (t) => {
  t.test(
    'a run with its conversations round-trips; none saved: undefined; a bad data record is refused naming the field',
    async ({ platform }) => {
      const tmp = tempStore(platform, 'lab-saved-run');
      try {
        assertEqual(await readSavedRun(tmp.files), undefined, 'no saved run yet');
        await writeSavedRun(tmp.files, run);
        assertDeepEqual(await readSavedRun(tmp.files), run, 'the run and its data, as written');
        const { data: _data, ...bundled } = run;
        await writeSavedRun(tmp.files, bundled);
        assertDeepEqual(await readSavedRun(tmp.files), bundled, 'a run on the bundled prompts has no data');
        await tmp.files.writeAtomic(RUN_FILE, sealJson({ ...run, data: { ...run.data, crc32: 'x' } }));
        await assertRejects(
          () => readSavedRun(tmp.files),
          /run\.json: the saved run is malformed \(data\)/,
          'a data record without its CRC-32',
        );
      } finally {
        await tmp.cleanup();
      }
    },
  );
});
