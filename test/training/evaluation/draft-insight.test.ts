/**
 * Draft insight (src/training/evaluation/draft-insight.ts) on a live Eagle3TrainingSession over the lab target
 * (assets/lab-target): captures between optimizer steps leave training bit-identical (losses, metrics
 * and final weights of a run with captures equal those of a run without); the captured attention
 * probabilities equal the float64 reference on the forward's own queries and keys, their rows sum to
 * 1 and blocked keys are 0; and the per-position correctness summed over the held-out set is the
 * held-out evaluation's correct_k / denom_k.
 * Node and Deno: the session reads the lab target from disk (the lab's e2e test covers Chromium).
 */
import { FileMetadataStore } from '../../../src/control/file-metadata-store.ts';
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import { attentionProbsRef } from '../../../src/reference/attention-probs.ts';
import {
  captureDraftInsight,
  locateSample,
  predictions,
  type DraftInsight,
  type DraftInsightParts,
} from '../../../src/training/evaluation/draft-insight.ts';
import { continueWithTarget } from '../../../src/training/sequences/eagle3-data.ts';
import { Eagle3TrainingSession, sessionSettingsSchema, type SessionStep } from '../../../src/training/session/eagle3-session.ts';
import { Rng } from '../../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRelClose } from '../../harness/assert.ts';
import { defineSuite, type TestContext } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';

const SETTINGS = sessionSettingsSchema.parse({
  epochs: 1,
  roundPrompts: 4,
  batchSize: 2,
  tttLength: 3,
  lr: 1e-2,
  responseLength: 6,
  checkpointEvery: 100,
  rolloutWorkers: 1,
  seed: 7,
});

/** The sample's step-k queries [B·S, nH·hd] and the K cache, read through the forward's own taps. */
async function forwardOperands(
  parts: DraftInsightParts,
  sample: number,
): Promise<{ q: Float32Array[]; kCache: Float32Array; mask: Int32Array; row: number; batch: number }> {
  const { gpu, strategy } = parts;
  const { batch, row } = locateSample(parts.batches, sample);
  const q: Promise<Float32Array>[] = [];
  let kCache: Promise<Float32Array> | undefined;
  let mask: Promise<Int32Array> | undefined;
  const out = await strategy.evaluate(batch, {
    attention: async (k, t) => {
      q.push(gpu.readLater(t.q) as Promise<Float32Array>);
      if (k === strategy.tttLength - 1) kCache = gpu.readLater(t.kCache) as Promise<Float32Array>;
      mask ??= gpu.readLater(t.mask) as Promise<Int32Array>;
    },
  });
  await out.loss;
  return { q: await Promise.all(q), kCache: await kCache!, mask: await mask!, row, batch: batch.sampleIds.length };
}

function checkProbs(
  ins: DraftInsight,
  ops: Awaited<ReturnType<typeof forwardOperands>>,
  parts: DraftInsightParts,
): { err: number; rowErr: number } {
  const c = parts.strategy.model.config;
  const { seq: S, tttLength: K, heads: H, width: W } = ins;
  const slot = ops.batch * S * c.numKvHeads * c.headDim;
  const kSteps = Array.from({ length: K }, (_, j) => ops.kCache.subarray(j * slot, (j + 1) * slot));
  let err = 0;
  let rowErr = 0;
  for (let k = 0; k < K; k++) {
    const dims = { batch: ops.batch, seq: S, heads: H, kvHeads: c.numKvHeads, headDim: c.headDim, step: k, sample: ops.row, slots: K };
    const want = attentionProbsRef(ops.q[k], kSteps, ops.mask, dims);
    const got = ins.probs.subarray(k * H * S * W, (k + 1) * H * S * W);
    err = Math.max(err, assertRelClose(got, want, 1e-5, `sample ${ins.sample} step ${k}: probabilities vs the float64 reference`));
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < ins.length; i++) {
        let sum = 0;
        for (let col = 0; col < W; col++) {
          const p = got[(h * S + i) * W + col];
          const visible = col < S ? col <= i && ins.attentionMask[col] === 1 : col - S + 1 <= k;
          assert(visible || p === 0, `sample ${ins.sample} step ${k} head ${h} row ${i}: blocked key ${col} has P = ${p}`);
          sum += p;
        }
        rowErr = Math.max(rowErr, Math.abs(sum - 1));
      }
    }
  }
  return { err, rowErr };
}

async function openSession(
  ctx: TestContext,
  gpu: Gpu,
  target: TargetModel,
  prompts: number[][],
  heldOut: Awaited<ReturnType<typeof continueWithTarget>>,
  root: string,
): Promise<Eagle3TrainingSession> {
  const metadata = await FileMetadataStore.open(ctx.platform.files(root), { dir: 'metadata' });
  return Eagle3TrainingSession.open({
    gpu,
    target,
    trainPrompts: prompts,
    settings: SETTINGS,
    runId: 'insight-test',
    now: () => performance.now(),
    storage: { checkpoints: ctx.platform.files(`${root}/checkpoints`), metadata, spill: ctx.platform.files(`${root}/spill`) },
    evaluation: { sequences: heldOut, every: 1 },
  });
}

export default defineSuite('training/evaluation/draft-insight', (t) => {
  t.test('predictions: softmax top-k most probable first, ties to the lower draft id as the metric kernel', () => {
    const z = [0.5, 2, -1, 2, 1];
    const { top, argmax } = predictions(z, 3);
    assertEqual(argmax, 1, 'argmax ties go to the lowest id');
    assertDeepEqual(
      top.map((x) => x.id),
      [1, 3, 4],
      'top-3 ids, the tie in id order',
    );
    const sum = z.reduce((a, v) => a + Math.exp(v), 0);
    assertRelClose(
      top.map((x) => x.p),
      [Math.exp(2) / sum, Math.exp(2) / sum, Math.exp(1) / sum],
      1e-12,
      'softmax probabilities',
    );
    assertDeepEqual(predictions([3], 1).top, [{ id: 0, p: 1 }], 'a one-token vocabulary');
  });

  t.test(
    'lab target: captures leave training bit-identical; probabilities match the reference, rows sum to 1, blocked keys 0; correctness sums to the held-out metrics',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'draft-insight');
      const gpu = new Gpu(ctx.gpu);
      try {
        const checkpoint = await loadHfCheckpoint(ctx.platform.files('assets'), 'lab-target');
        const target = TargetModel.create(gpu, checkpoint);
        const rng = new Rng(13);
        const vocab = checkpoint.config.vocabSize;
        const prompts = Array.from({ length: 4 }, () => Array.from({ length: 5 }, () => rng.int(0, vocab)));
        const heldOut = await continueWithTarget(
          target,
          Array.from({ length: 3 }, () => Array.from({ length: 4 }, () => rng.int(0, vocab))),
          SETTINGS.responseLength,
        );
        const withInsight = await openSession(ctx, gpu, target, prompts, heldOut, `${tmp.files.root}/with`);
        const without = await openSession(ctx, gpu, target, prompts, heldOut, `${tmp.files.root}/without`);
        try {
          const parts = () => {
            const p = withInsight.insightParts();
            assert(p, 'a session with a held-out evaluation offers insight parts');
            return p;
          };
          let last: DraftInsight[] = [];
          const captureAll = async () => (last = await Promise.all([0, 1, 2].map((s) => captureDraftInsight(parts(), s, { topK: 4 }))));
          await captureAll();
          const a: SessionStep[] = [];
          const b: SessionStep[] = [];
          for (;;) {
            const sa = await withInsight.step();
            await captureAll();
            const sb = await without.step();
            if (!sa || !sb) {
              assertEqual(sa, sb, 'both runs end at the same step');
              break;
            }
            a.push(sa);
            b.push(sb);
          }
          assertEqual(a.length, 2, 'two optimizer steps (four prompts, batch 2)');
          for (const [i, sa] of a.entries()) {
            assertEqual(sa.loss, b[i].loss, `step ${i + 1}: loss bit-identical with and without insight`);
            assertEqual(JSON.stringify(sa.metrics), JSON.stringify(b[i].metrics), `step ${i + 1}: metrics bit-identical`);
            assertEqual(JSON.stringify(sa.eval), JSON.stringify(b[i].eval), `step ${i + 1}: held-out eval bit-identical`);
          }
          const [wa, wb] = [await withInsight.currentWeights(), await without.currentWeights()];
          for (const name of Object.keys(wb))
            assert(
              wa[name].every((v, i) => Object.is(v, wb[name][i])),
              `weight ${name} bit-identical after training with insight captures`,
            );

          // The last captures (after the final step) against the forward's own operands.
          const p = parts();
          assertEqual(last[2].globalStep, 2, 'the insight records the optimizer step of its weights');
          let err = 0;
          let rowErr = 0;
          for (const ins of last) {
            const r = checkProbs(ins, await forwardOperands(p, ins.sample), p);
            err = Math.max(err, r.err);
            rowErr = Math.max(rowErr, r.rowErr);
            for (const st of ins.steps) {
              for (let i = 0; i < ins.seq; i++) {
                const top = st.top[i];
                assertEqual(top.length, 4, 'top-4 per position');
                assert(
                  top.every((x, j) => x.id >= 0 && x.id < vocab && (j === 0 || x.p <= top[j - 1].p)),
                  `sample ${ins.sample} row ${i}: target ids, most probable first`,
                );
                assertEqual(st.argmax[i], top[0].id, 'the argmax heads the top-k');
                assertEqual(st.correct[i], st.argmax[i] === st.targets[i], 'correct = argmax is the target token');
              }
            }
          }
          assert(rowErr < 1e-5, `visible rows sum to 1 within 1e-5, worst ${rowErr}`);
          // Σ over the held-out set of per-position correctness = the eval's correct_k / denom_k.
          const sums = await Promise.all(p.batches.map(async (batch) => (await p.strategy.evaluate(batch)).metrics));
          for (let k = 0; k < SETTINGS.tttLength; k++) {
            const correct = sums.reduce((x, m) => x + m[`correct_${k}`], 0);
            const denom = sums.reduce((x, m) => x + m[`denom_${k}`], 0);
            assertEqual(
              last.reduce((x, ins) => x + ins.steps[k].correctCount, 0),
              correct,
              `step ${k}: Σ correct over the held-out set = the eval's correct_${k}`,
            );
            assertEqual(
              last.reduce((x, ins) => x + ins.steps[k].supervisedCount, 0),
              denom,
              `step ${k}: Σ supervised = the eval's denom_${k}`,
            );
          }
          ctx.note('worst rel err', err.toExponential(2));
          ctx.note('worst |row sum − 1|', rowErr.toExponential(2));
        } finally {
          withInsight.destroy();
          without.destroy();
        }
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );
});
