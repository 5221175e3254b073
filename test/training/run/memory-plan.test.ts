/**
 * The GPU memory plan (src/training/run/memory-plan.ts): its arithmetic against bytes computed by hand,
 * the binding-limit checks, the budget refusal with its suggestions, and — so that the plan cannot
 * drift from the code it describes — real draft training steps whose measured peak
 * (gpu.memoryStats) must not exceed the plan's draft-step items and must be within 1.5× of them: a
 * small step with every activation kept, and a long one (2,048 tokens) with recompute, f16 compact
 * features and its head, MLP and fc over row chunks, where the plan counts the step's live set per
 * moment (memory-plan-moments.ts) and must come within 1.2× of the measure.
 */
import { sizeClass } from '../../../src/gpu/buffer-pool.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { fcChunkRows } from '../../../src/model/eagle3/fc-chunks.ts';
import { mlpChunkRows } from '../../../src/model/eagle3/mlp-chunks.ts';
import { headChunkRows } from '../../../src/model/eagle3/step-head.ts';
import { batchedHeadsFit } from '../../../src/model/eagle3/step-heads-batched.ts';
import { castF32ToF16Ref } from '../../../src/reference/cast.ts';
import { draftConfigFor } from '../../../src/training/sequences/eagle3-data.ts';
import type { Eagle3Config } from '../../../src/config/eagle3-config.ts';
import type { Eagle3Inputs } from '../../../src/model/eagle3/inputs.ts';
import { Eagle3DraftModel, type Eagle3TrainOptions } from '../../../src/model/eagle3/model.ts';
import { initialEagle3Weights } from '../../../src/model/eagle3/parameters.ts';
import { AdamWBackend, SPECFORGE_OPTIMIZER } from '../../../src/optim/adamw-backend.ts';
import {
  DRAFT_STEP_ITEMS,
  formatMemoryPlan,
  memoryPlanRefusal,
  planTrainingMemory,
  type MemoryPlan,
} from '../../../src/training/run/memory-plan.ts';
import { Rng } from '../../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { BIG, tinyInput, tinyTarget } from './memory-plan-fixture.ts';

const KiB = 1024;
const GiB = 2 ** 30;

const item = (plan: MemoryPlan, key: string) => plan.items.find((i) => i.key === key)!.bytes;

/** What the plan gives a draft training step: the step's own items, the batch and staging. */
const plannedStepBytes = (plan: MemoryPlan) =>
  plan.items.filter((i) => [...DRAFT_STEP_ITEMS, 'batch', 'staging'].includes(i.key)).reduce((a, i) => a + i.bytes, 0);

/**
 * The measured peak of two real training steps of `draft` (the second runs on buffers the pool already
 * holds, so the peak is the steady state), less the target's embedding table the draft borrows: the plan
 * counts that with the target's weights. The model's weights, then the inputs, are drawn from `rng`.
 */
async function measuredStepPeak(
  gpu: Gpu,
  draft: Eagle3Config,
  rng: Rng,
  makeInputs: () => Eagle3Inputs,
  options: Eagle3TrainOptions,
): Promise<number> {
  const backend = new AdamWBackend(gpu, SPECFORGE_OPTIMIZER);
  const D = draft.draftVocabSize;
  const t2d = Array.from({ length: draft.vocabSize }, (_, i) => (i < D ? 1 : 0));
  const before = gpu.memoryStats().liveBytes;
  const embed = gpu.upload([draft.vocabSize, draft.hiddenSize], 'f32', rng.floats(draft.vocabSize * draft.hiddenSize), 'target.embed');
  const embedBytes = gpu.memoryStats().liveBytes - before;
  const weights = initialEagle3Weights(draft, 'shared', rng);
  const model = new Eagle3DraftModel(gpu, backend, draft, weights, { t2d, d2t: new Array(D).fill(0) }, { embed });
  const inputs = makeInputs();
  for (let step = 0; step < 2; step++) {
    const out = await model.trainStep(inputs, options);
    const report = await backend.optimizerStep();
    await Promise.all([out.losses, out.metricSums, report.gradNorm]);
  }
  await gpu.sync();
  const measured = gpu.memoryStats().peakBytes - embedBytes;
  model.destroy();
  gpu.release(embed);
  return measured;
}

export default defineSuite('training/run/memory-plan', (t) => {
  t.test('draft weights, gradients and moments: bytes by hand', () => {
    const plan = planTrainingMemory(tinyInput(), { limits: BIG });
    // [out, in] f32: fc 64×192, q 64×128, k/v 32×128, o 64×64, gate/up 128×64, down 64×128, lm_head 64×64;
    // four norms of 64 floats (256 bytes each). All of them are packed into one arena slab (every size is
    // a multiple of 256 bytes, so no gaps), one buffer of the pool's size class: 246,784 → 262,144 bytes.
    const packed = 4 * (64 * 192 + 64 * 128 + 2 * 32 * 128 + 64 * 64 + 3 * 128 * 64 + 64 * 64) + 4 * 256;
    assertEqual(packed, 246_784, 'packed bytes');
    const weights = sizeClass(packed);
    assertEqual(weights, 262_144, 'slab bytes');
    assertEqual(item(plan, 'draftWeights'), weights, 'draft weights');
    assertEqual(item(plan, 'moments'), 2 * weights, 'AdamW m and v');
    // ⌈61,696 / 2,048⌉ = 31 sum-of-squares workgroups over the slab: 31 floats of partials, and the [2] norm
    // result (256 bytes each).
    assertEqual(item(plan, 'gradients'), weights + 256 + 256, 'gradients + grad-norm workspace');
    // t2d [256] i32, used [64] i32 (256 bytes), RoPE tables [66, 8, 2] f32 twice (4224 bytes → size
    // class 5120 = 4096 × 1.25); the frozen embedding is the target's table, counted with its weights.
    assertEqual(item(plan, 'draftFrozen'), 1024 + 256 + 2 * 5120, 'vocab maps, RoPE tables (no embedding copy)');
  });

  t.test('activations per TTT step × L and the forward state: bytes by hand', () => {
    const plan = planTrainingMemory(tinyInput(), { limits: BIG });
    const R = 2 * 64; // rows = batch × max length
    // Per step: h1, n, hOut [R, 64]; z [R, 128]; qRot, o [R, 64]; gate | up [R, 256], act [R, 128];
    // lse [2, 4, 64]; three inverse-RMS vectors [R] (the final norm's is the backward's, with dF and f).
    // No emb: the embedding table is one binding, so input_layernorm gathers its rows itself.
    const perStep = 4 * (3 * R * 64 + R * 128 + 2 * R * 64 + 3 * R * 128 + 2 * 4 * 64 + 3 * R);
    assertEqual(perStep, 419.5 * KiB, 'per step');
    // positions [R] i32 per step; hidden0 [R, 64]; K and V caches [3, 2, 64, 2, 16]; teacher p and
    // pTilde [R, 64], tok and mask [R] i32; each step's loss rows [R] and metric terms [R, 4] (two tables
    // of 3 steps, one reduction each); losses [4] and metrics [12] in one buffer, the metrics from element
    // 64 (the next 256-byte boundary): 76 floats, a 320-byte size class.
    const state = 3 * R * 4 + R * 64 * 4 + 2 * (3 * 2 * 64 * 32 * 4) + 2 * R * 64 * 4 + 2 * R * 4 + 3 * R * 4 + 3 * 4 * R * 4 + 320;
    assertEqual(item(plan, 'activations'), 3 * perStep + state, 'activations');
    // The collated batch: ids, attention and loss masks [2, 64] i32; hidden_state [2, 64, 192], target [2, 64, 256] f32.
    assertEqual(item(plan, 'batch'), 3 * 512 + R * 192 * 4 + R * 256 * 4, 'training batch');
    // The store keeps 4 samples of [64, 192] + [64, 256] f32 and two [64] i32 vectors.
    assertEqual(item(plan, 'featureStore'), 4 * (64 * 192 * 4 + 64 * 256 * 4 + 2 * 256), 'feature store');
    // Four phases, one at a time: the target generating, a capture forward, a batch collated, the draft's steps.
    const shared =
      plan.items.reduce((a, i) => a + i.bytes, 0) -
      ['targetKv', 'drafter', 'targetCapture', 'batch', 'activations', 'scratch'].reduce((a, k) => a + item(plan, k), 0);
    const phases = {
      generation: shared + item(plan, 'targetKv') + item(plan, 'drafter'),
      capture: shared + item(plan, 'targetCapture'),
      batching: shared + item(plan, 'batch'),
      step: shared + item(plan, 'batch') + item(plan, 'activations') + item(plan, 'scratch'),
    };
    assertDeepEqual(
      plan.phases,
      Object.entries(phases).map(([phase, bytes]) => ({ phase, bytes })),
      'each phase by hand',
    );
    assertEqual(plan.totalBytes, Math.max(...Object.values(phases)), 'total = the largest phase');
    const f16 = planTrainingMemory(tinyInput({ features: 'f16' }), { limits: BIG });
    assertEqual(item(f16, 'featureStore'), 4 * (64 * 192 * 2 + 64 * 256 * 2 + 2 * 256), 'f16 features: half the feature bytes');
    const kv = planTrainingMemory(tinyInput({ generationBatch: 16 }), { limits: BIG });
    assertEqual(item(kv, 'targetKv'), 2 * 2 * 16 * 64 * 32 * 4, 'KV cache: 2 × layers × batch × length × kv width f32');
    assertEqual(item(plan, 'targetKv'), 0, 'no generation, no KV cache');
  });

  t.test('target weights at f32 and f16: matrices halve, norms stay f32', () => {
    const f32 = item(planTrainingMemory(tinyInput(), { limits: BIG }), 'targetWeights');
    const f16 = item(planTrainingMemory(tinyInput({ targetWeights: 'f16' }), { limits: BIG }), 'targetWeights');
    // Per layer q 64×64, k/v 32×64, o 64×64, gate/up/down 128×64 elements; embedding and lm_head 256×64; 5 norms.
    const elements = 2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64) + 2 * 256 * 64;
    assertEqual(f32, elements * 4 + 5 * 256, 'f32');
    assertEqual(f16, elements * 2 + 5 * 256, 'f16');
  });

  t.test('binding limits: split tensors are noted, a row or a whole-bound tensor past a binding is unfittable', () => {
    // 64 KiB bindings (64-token capture forwards): the 64 KiB embedding fits; the batch's target
    // [2, 64, 256] (128 KiB) is split; the 128 KiB uniform arena is no storage binding.
    const small = planTrainingMemory(tinyInput({ captureBatchTokens: 64 }), {
      limits: { maxBufferSize: GiB, maxStorageBufferBindingSize: 64 * KiB },
    });
    assert(
      small.notes.some((n) => /training batch: target \(128 KiB\) is split into 2 parts/.test(n)),
      `split noted: ${small.notes.join(' | ')}`,
    );
    // The capture's activations [64, 128] are bound whole: 32 KiB fits, so the plan fits.
    assert(small.fits, `fits with split tensors: ${small.problems.join(' | ')}`);
    const tiny = planTrainingMemory(tinyInput(), { limits: { maxBufferSize: 16 * KiB, maxStorageBufferBindingSize: 16 * KiB } });
    assert(!tiny.fits, 'does not fit');
    assert(
      tiny.problems.some((p) =>
        /target capture activations: h \[256, 64\] f32 is 64\.0 KiB and must fit one binding \(16\.0 KiB\)/.test(p),
      ),
      `whole-bound tensor named: ${tiny.problems.join(' | ')}`,
    );
    const row = planTrainingMemory(tinyInput(), { limits: { maxBufferSize: 512, maxStorageBufferBindingSize: 512 } });
    assert(
      row.problems.some((p) => /one row is 1\.00 KiB, more than one binding holds \(512 B\); no split can fit it/.test(p)),
      `row too big: ${row.problems.join(' | ')}`,
    );
  });

  t.test('a budget below the total: refused with the largest item and suggestions that fit', () => {
    const plan = planTrainingMemory(tinyInput({ batchSize: 8 }), { limits: BIG });
    const refused = planTrainingMemory(tinyInput({ batchSize: 8 }), { limits: BIG, budgetBytes: Math.floor(plan.totalBytes * 0.8) });
    assert(!refused.fits, 'over budget');
    assertEqual(refused.largest.bytes, Math.max(...refused.items.map((i) => i.bytes)), 'largest item');
    assert(
      refused.suggestions.some((s) => /^batch size 8 → 4: .* \(fits\)$/.test(s)),
      `batch suggestion: ${refused.suggestions.join(' | ')}`,
    );
    assert(
      refused.suggestions.some((s) => /^feature precision f32 → f16/.test(s)),
      'precision suggestion',
    );
    const line = memoryPlanRefusal(refused);
    assert(!line.includes('\n'), 'one line');
    assert(
      line.includes(`largest item ${refused.largest.label}`) && /over the budget of/.test(line) && /lower: batch size 8 → 4/.test(line),
      line,
    );
    const table = formatMemoryPlan(refused);
    assertEqual(table.length, refused.items.length + 4, 'one line per item, the phases, the total, the verdict, the suggestions');
    assert(
      table.some((l) => /^ {2}total +\S+ \S+ {2}budget /.test(l)),
      `total line: ${table.join('\n')}`,
    );
    assert(planTrainingMemory(tinyInput(), { limits: BIG, budgetBytes: plan.totalBytes }).fits, 'a budget equal to the total fits');
    assertThrows(
      () => planTrainingMemory(tinyInput({ batchSize: 0 }), { limits: BIG }),
      /memory plan: batchSize must be a positive integer, got 0/,
      'bad input named',
    );
    assertThrows(
      () => planTrainingMemory(tinyInput({ features: 'bf16' as 'f16' }), { limits: BIG }),
      /memory plan: features must be "f32" or "f16"/,
      'bad precision named',
    );
  });

  t.test(
    'the plan of a real draft training step is not below its measured peak, and within 1.5× of it',
    async ({ gpu: ctx, note }) => {
      const started = performance.now();
      const input = tinyInput();
      const draft = input.draft;
      const plan = planTrainingMemory(input, { limits: BIG });
      const planned = plannedStepBytes(plan);
      const gpu = new Gpu(ctx);
      try {
        const rng = new Rng(3);
        const [B, S] = [input.batchSize, input.maxLength];
        // This step runs every TTT step's head at once (step-heads-batched.ts): the plan's moment for it is checked.
        assert(
          batchedHeadsFit(B * S, input.tttLength, draft.draftVocabSize, draft.hiddenSize, gpu.maxBindingBytes),
          'the step batches its heads',
        );
        const measured = await measuredStepPeak(
          gpu,
          draft,
          rng,
          () => ({
            inputIds: gpu.upload(
              [B, S],
              'i32',
              Array.from({ length: B * S }, () => rng.int(0, draft.vocabSize)),
              'input_ids',
            ),
            attentionMask: gpu.upload([B, S], 'i32', new Array(B * S).fill(1), 'attention_mask'),
            lossMask: gpu.upload([B, S], 'i32', new Array(B * S).fill(1), 'loss_mask'),
            hiddenStates: gpu.upload(
              [B, S, 3 * draft.targetHiddenSize],
              'f32',
              rng.floats(B * S * 3 * draft.targetHiddenSize),
              'hidden_state',
            ),
            target: gpu.upload([B, S, draft.vocabSize], 'f32', rng.floats(B * S * draft.vocabSize, 3), 'target'),
          }),
          { tttLength: input.tttLength, lossScale: 1 },
        );
        note('planned', planned);
        note('measured', measured);
        note('ratio', Number((planned / measured).toFixed(3)));
        note('seconds', Number(((performance.now() - started) / 1000).toFixed(1)));
        assert(planned >= measured, `plan ${planned} bytes is below the measured peak ${measured}`);
        assert(planned <= 1.5 * measured, `plan ${planned} bytes is over 1.5× the measured peak ${measured}`);
      } finally {
        gpu.destroy();
      }
    },
    { timeoutMs: 300_000 },
  );
  t.test(
    'a long recomputed step over row chunks on f16 compact features: the plan is not below its measured peak, and within 1.2× of it',
    async ({ gpu: ctx, note }) => {
      // H 64 with a wide MLP (I 1024) and draft vocabulary (512), 2,048 tokens: under 2 MiB bindings the
      // MLP runs in 4 chunks and the head in 2, as 8B dims do at 32,768 tokens under 128 MiB.
      const target = tinyTarget({ intermediate_size: 1024, vocab_size: 1024, max_position_embeddings: 4096 });
      const draft = draftConfigFor({ config: target }, 512);
      const limits = { maxBufferSize: 4 * GiB, maxStorageBufferBindingSize: 2 * 1024 * KiB };
      const [S, L, D, Ht] = [2048, 3, 512, 64];
      const input = tinyInput({
        target,
        draft,
        batchSize: 1,
        maxLength: S,
        tttLength: L,
        features: 'f16',
        targetRepr: 'hidden_state',
        recompute: true,
      });
      const plan = planTrainingMemory(input, { limits });
      assertEqual(plan.fits, true, `the plan fits: ${plan.problems.join('; ')}`);
      const planned = plannedStepBytes(plan);
      // The model chunks as the plan does under those bindings (this device's own bindings are larger).
      const chunks = {
        headChunkRows: headChunkRows(S, D, limits.maxStorageBufferBindingSize),
        mlpChunkRows: mlpChunkRows(S, draft.intermediateSize, limits.maxStorageBufferBindingSize),
        fcChunkRows: fcChunkRows(S, 3 * Ht, limits.maxStorageBufferBindingSize),
      };
      assert(chunks.headChunkRows < S && chunks.mlpChunkRows < S, `head and MLP over row chunks: ${JSON.stringify(chunks)}`);
      const gpu = new Gpu(ctx);
      try {
        const rng = new Rng(5);
        const f16 = (shape: number[], scale: number, label: string) =>
          gpu.upload(
            shape,
            'f16',
            castF32ToF16Ref(
              rng.floats(
                shape.reduce((a, b) => a * b, 1),
                scale,
              ),
            ).bits,
            label,
          );
        const measured = await measuredStepPeak(
          gpu,
          draft,
          rng,
          () => ({
            inputIds: gpu.upload(
              [1, S],
              'i32',
              Array.from({ length: S }, () => rng.int(0, draft.vocabSize)),
              'input_ids',
            ),
            attentionMask: gpu.upload([1, S], 'i32', new Array(S).fill(1), 'attention_mask'),
            lossMask: gpu.upload([1, S], 'i32', new Array(S).fill(1), 'loss_mask'),
            hiddenStates: f16([1, S, 3 * Ht], 1, 'hidden_state'),
            target: {
              hidden: f16([1, S, Ht], 1, 'target.hidden'),
              head: gpu.upload([D, Ht], 'f32', rng.floats(D * Ht, 0.3), 'target.head'),
              lse: gpu.upload([1, S], 'f32', new Array(S).fill(8), 'target_lse'),
              tok: gpu.upload(
                [1, S],
                'i32',
                Array.from({ length: S }, () => rng.int(0, D)),
                'target_tok',
              ),
            },
          }),
          {
            tttLength: L,
            lossScale: 1,
            recompute: true,
            ...chunks,
          },
        );
        note('planned', planned);
        note('measured', measured);
        note('ratio', Number((planned / measured).toFixed(3)));
        assert(planned >= measured, `plan ${planned} bytes is below the measured peak ${measured}`);
        assert(planned <= 1.2 * measured, `plan ${planned} bytes is over 1.2× the measured peak ${measured}`);
      } finally {
        gpu.destroy();
      }
    },
    { timeoutMs: 300_000 },
  );
});
