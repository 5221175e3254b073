/**
 * src/training/run/train-log.ts: the last train step (and its loss) earlier processes of a run logged to its
 * metrics.jsonl, read by the online and offline resumes and by the run folder's abandon check.
 */
import { loggedSteps } from '../../../src/training/run/train-log.ts';
import { assert, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { ONLINE_LINES } from '../../contracts/metrics-lines.ts';

export default defineSuite('training/run/train-log', (t) => {
  t.test('the last logged train step and its loss; other records, a step that is no count and a cut line are passed over', async (ctx) => {
    const tmp = tempStore(ctx.platform, 'train-log');
    try {
      const none = await loggedSteps(tmp.files);
      assert(none.lastStep === 0 && Number.isNaN(none.lastLoss), 'no log: step 0, loss NaN');

      await tmp.files.writeAtomic('metrics.jsonl', new TextEncoder().encode(`${ONLINE_LINES.join('\n')}\n`));
      assertEqual((await loggedSteps(tmp.files)).lastStep, 2, 'the real log: step 2');
      assertEqual((await loggedSteps(tmp.files)).lastLoss, 6.366324424743652, 'its loss');

      const lines = [
        '{"phase":"config","epochs":1}',
        '{"phase":"train","step":3,"loss":5.5}',
        '{"event":"checkpoint","kind":"checkpoint","step":9,"acked":4}',
        '{"phase":"train","step":"4","loss":1}',
        '{"phase":"train","step":4,"loss":null}',
        '{"phase":"train","step":2,"loss":7,"replay":true}',
        '{"phase":"train","st',
      ];
      await tmp.files.writeAtomic('metrics.jsonl', new TextEncoder().encode(lines.join('\n')));
      const read = await loggedSteps(tmp.files);
      assertEqual(read.lastStep, 4, 'the highest train step');
      assert(Number.isNaN(read.lastLoss), `a non-finite loss (written null) reads NaN: ${read.lastLoss}`);
    } finally {
      await tmp.cleanup();
    }
  });
});
