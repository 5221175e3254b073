/**
 * The training step's moments (src/training/run/memory-plan-moments.ts) where a step's heads may run
 * all at once (model/eagle3/step-heads-batched.ts): the batched moment at the most rows of a step that
 * batches them, every step's dF and 1/rms through the rest of the backward, and one head per step at
 * B·S rows beside them, since a run's shorter batches may go either way.
 */
import { stepTensors, type StepShape } from '../../../src/training/run/memory-plan-moments.ts';
import type { TensorSpec } from '../../../src/training/run/memory-plan-shapes.ts';
import { assert, assertDeepEqual, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

/** A lab-sized step: 4 × 56 rows, TTT 4, hidden 128, draft vocabulary 2048. */
const LAB: StepShape = {
  batch: 4,
  seq: 56,
  tttLength: 4,
  hidden: 128,
  intermediate: 256,
  draftVocab: 2048,
  heads: 4,
  qDim: 128,
  kvDim: 64,
  targetHidden: 128,
  auxWidth: 384,
  compact: false,
  f16Features: false,
  recompute: false,
  stackedProjection: true,
  gatheredInputNorm: true,
  mlpRows: 224,
  headRows: 224,
  fcRows: 224,
  rowLossStride: 256,
  rowStatsStride: 896,
  batchedHeadRows: 0,
};

const named = (moment: readonly TensorSpec[], name: string) => moment.find((s) => s.name === name);

export default defineSuite('training/run/memory-plan-moments', (t) => {
  t.test('batched heads: their moment at the rows that batch, their dF through the backward, one head per step beside them', () => {
    const perStep = stepTensors(LAB);
    const batched = stepTensors({ ...LAB, batchedHeadRows: 128 });
    assert(!perStep.moments.some((m) => named(m, 'logits (all steps)')), 'no batched moment where no step batches');
    assertEqual(batched.moments.length, perStep.moments.length + 1, 'one moment more: every head at once');
    const heads = batched.moments.filter((m) => named(m, 'logits (all steps)'));
    assertEqual(heads.length, 1, 'one batched moment');
    assertDeepEqual(named(heads[0], 'logits (all steps)')!.shape, [4 * 128, 2048], 'logits of 4 steps × 128 rows');
    assertDeepEqual(named(heads[0], 'f (all steps)')!.shape, [4 * 128, 128], 'f of 4 steps × 128 rows');
    // One head per step at B·S rows is still counted (a batch of 224 rows runs it).
    assert(
      batched.moments.some((m) => named(m, 'logits')?.shape[0] === 224),
      'the per-step head moment at 224 rows',
    );
    // From the batched heads to the fc's gradient, every backward moment holds every step's dF and 1/rms.
    const first = batched.moments.indexOf(heads[0]);
    for (const m of batched.moments.slice(first)) {
      assertDeepEqual(named(m, 'dF (all steps)')?.shape, [4 * 128, 128], 'dF of every step through the backward');
      // 128 rows of 1/rms per step, each step's from a 256-byte boundary.
      assertDeepEqual(named(m, 'invRmsFinal (all steps)')?.shape, [4, 128], "every step's 1/rms");
    }
    assertEqual(
      batched.moments.slice(0, first - 1).filter((m) => named(m, 'dF (all steps)')).length,
      0,
      'the forward holds no batched tensor',
    );
    // The batched steps' stack of every h_out (4 × 128 rows) is within four h_out of 224 rows: the kept tensors do not change.
    assertDeepEqual(batched.kept, perStep.kept, 'the kept tensors do not change');
    // Three steps of 224 rows that batch: one stack of 672 rows is a size class above three of 224.
    const three = stepTensors({ ...LAB, tttLength: 3, batchedHeadRows: 224 }).kept;
    assertDeepEqual(named(three, 'hOut (all steps, batched heads)')?.shape, [3 * 224, 128], 'the stack, counted where it is larger');
    assertEqual(named(three, 'hOut'), undefined, 'instead of one h_out per step');
  });
});
