/**
 * regenerateReplies (src/training/sequences/regenerate.ts): the target rewrites every reply of a row, turn by
 * turn. Rows with one reply come out exactly as continueWithTarget makes them from their prompt; a
 * two-reply row keeps its contexts, closes its first (generated) reply with the end-of-turn id and
 * the template's closing tokens, and its second reply is what the target generates after all that.
 */
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { generate } from '../../../src/model/target/generate.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import { continueWithTarget, type TrainSequence } from '../../../src/training/sequences/eagle3-data.ts';
import { regenerateReplies } from '../../../src/training/sequences/regenerate.ts';
import { Rng } from '../../../src/util/random.ts';
import { assertDeepEqual, assertRejects } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

const EOT = 7;
const CLOSE = 9;

export default defineSuite('training/sequences/regenerate', (t) => {
  t.test('one-reply rows equal continueWithTarget; a two-reply row is rebuilt turn by turn', async (ctx) => {
    const tmp = tempStore(ctx.platform, 'regenerate');
    const gpu = new Gpu(ctx.gpu);
    try {
      await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
      const target = TargetModel.create(gpu, await loadHfCheckpoint(tmp.files, 'target'));
      try {
        const rng = new Rng(5);
        const ids = (n: number) => Array.from({ length: n }, () => rng.int(10, 384));
        // One reply each: [prompt][reply + EOT + CLOSE], reply tokens masked.
        const prompts = [ids(5), ids(7), ids(4)];
        const rows: TrainSequence[] = prompts.map((p) => ({
          inputIds: [...p, ...ids(3), EOT, CLOSE],
          lossMask: [...p.map(() => 0), 1, 1, 1, 1, 1],
        }));
        for (const how of [{}, { temperature: 0.8, seed: 3 }]) {
          const got = await regenerateReplies(target, rows, 6, { ...how, eosTokenIds: [EOT] });
          const expected = await continueWithTarget(target, prompts, 6, 16, { ...how, eosTokenIds: [EOT] });
          assertDeepEqual(got, expected, `one reply per row (${JSON.stringify(how)}): as continueWithTarget`);
        }

        // Two replies: [c0][r0 EOT CLOSE][c1][r1 EOT CLOSE].
        const c0 = ids(5);
        const c1 = ids(3);
        const row: TrainSequence = {
          inputIds: [...c0, ...ids(2), EOT, CLOSE, ...c1, ...ids(2), EOT, CLOSE],
          lossMask: [...c0.map(() => 0), 1, 1, 1, 1, ...c1.map(() => 0), 1, 1, 1, 1],
        };
        const [out] = await regenerateReplies(target, [row], 4, { eosTokenIds: [EOT] });
        const [g0] = await generate(target, [c0], { maxNewTokens: 4, eosTokenIds: [EOT] });
        const reply0 = g0[g0.length - 1] === EOT ? [...g0, CLOSE] : [...g0, EOT, CLOSE];
        const before1 = [...c0, ...reply0, ...c1];
        const [g1] = await generate(target, [before1], { maxNewTokens: 4, seed: 1, eosTokenIds: [EOT] });
        assertDeepEqual(out.inputIds, [...before1, ...g1], 'ids: context, closed first reply, context, second reply');
        assertDeepEqual(
          out.lossMask,
          [...c0.map(() => 0), ...reply0.map(() => 1), ...c1.map(() => 0), ...g1.map(() => 1)],
          'mask: exactly the two generated replies (the first with its closing)',
        );

        await assertRejects(
          () => regenerateReplies(target, [{ inputIds: [1, 2], lossMask: [1, 1] }], 4),
          /conversation 1: no prompt before its first reply/,
          'a row that starts with a reply',
        );
      } finally {
        target.destroy();
      }
    } finally {
      gpu.destroy();
      await tmp.cleanup();
    }
  });
});
