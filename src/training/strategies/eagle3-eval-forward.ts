/**
 * The EAGLE3 draft's forward over the TTT unroll with its loss and metric kernels and NO gradient:
 * what SpecForge's evaluator runs under torch.no_grad (specforge/eval/evaluator.py, forward_fn =
 * strategy.forward_loss). It issues exactly the kernels of src/model/eagle3/forward.ts in the same
 * order and with the same operands, so the losses and metric sums are those `trainStep` reports for
 * the same batch and weights (test/training/evaluation/held-out-eval.test.ts checks it bit for bit), except:
 *   - the soft cross-entropy runs with grad 'none' (its loss does not depend on the grad mode),
 *   - no lm_head backward (forward.ts folds the loss gradient through lm_head inside the forward,
 *     adding into lm_head's grad buffer) and no eagle3Backward: no grad buffer is touched,
 *   - each step's activations are released as soon as the next kernel has read them (nothing is kept
 *     for a backward), so memory is one step's activations plus the K/V caches.
 * Kept beside the strategy because it only reads the model's parameters; if forward.ts ever gains a
 * gradient-free mode this file folds into it.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { tttAttentionForward } from '../../kernels/attention.ts';
import { copyStrided } from '../../kernels/copy-strided.ts';
import { embeddingForward } from '../../kernels/embedding.ts';
import { softCrossEntropy } from '../../kernels/loss.ts';
import { linearForward } from '../../kernels/linear.ts';
import { eagle3Metrics } from '../../kernels/metrics.ts';
import { rmsnormForward } from '../../kernels/rmsnorm.ts';
import { ropeTableForward } from '../../kernels/rope-table.ts';
import { swigluForward } from '../../kernels/swiglu.ts';
import { buildTeacher } from '../../kernels/teacher.ts';
import { PLOSS_DECAY } from '../../config/eagle3-config.ts';
import { canViewAt, copyElements, elementView, shiftRowsLeft } from '../../gpu/tensor-views.ts';
import { checkEagle3Inputs, type Eagle3Inputs } from '../../model/eagle3/forward.ts';
import type { Eagle3Parameters } from '../../model/eagle3/parameters.ts';

export interface Eagle3EvalOutput {
  /** [L + 1]: ploss_0..ploss_{L−1}, total = Σ 0.8ᵏ ploss_k. */
  losses: Promise<Float32Array>;
  /** [4·L]: per step correct, denom, acceptSum, acceptCount (src/kernels/metrics.ts). */
  metricSums: Promise<Float32Array>;
  /** B·S, as Eagle3TrainOutput.lossDenominator. */
  lossDenominator: number;
}

/**
 * Read-only taps into the forward (the lab's draft insight, src/training/evaluation/draft-insight.ts). Each is
 * called while its tensors are live and may only encode work that reads them (and writes its own
 * tensors); the forward's own kernels, operands and order are the same with or without taps.
 */
export interface Eagle3EvalTaps {
  /** After the teacher is built: tok [R] (argmax target ids) and positionMask [R]. */
  teacher?(t: { tok: Tensor; positionMask: Tensor }): Promise<void>;
  /** After step k's attention: its RoPE'd queries, the K cache (slots 0..k written), the mask and its lse. */
  attention?(k: number, t: { q: Tensor; kCache: Tensor; mask: Tensor; lse: Tensor }): Promise<void>;
  /** After step k's logits [R, D] are computed, before the metric and loss kernels read them. */
  logits?(k: number, logits: Tensor): Promise<void>;
}

/** Encodes the gradient-free forward of one batch; the results come back as pending reads. */
export async function eagle3EvalForward(
  gpu: Gpu,
  params: Eagle3Parameters,
  inputs: Eagle3Inputs,
  tttLength: number,
  taps: Eagle3EvalTaps = {},
): Promise<Eagle3EvalOutput> {
  const c = params.config;
  const w = params.weights;
  const { batch: B, seqLen: S } = checkEagle3Inputs(c, inputs);
  const L = tttLength;
  if (!Number.isInteger(L) || L < 1) throw new Error(`eagle3: tttLength must be a positive integer, got ${L}`);
  const R = B * S;
  const H = c.hiddenSize;
  const I = c.intermediateSize;
  const D = c.draftVocabSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const eps = c.rmsNormEps;
  const linear = (x: Tensor, weight: Tensor, y: Tensor, outDim: number, inDim: number, beta = 0) =>
    linearForward(gpu, x, weight, y, { rows: R, inFeatures: inDim, outFeatures: outDim }, { beta });

  const positions = params.rope.stepPositions(B, S, L);
  const ropeTables = params.rope.tables(S + L - 1);
  const teacher = {
    p: gpu.tensor([R, D], 'f32', 'eagle3.eval.teacher.p'),
    pTilde: gpu.tensor([R, D], 'f32', 'eagle3.eval.teacher.pTilde'),
    tok: gpu.tensor([R], 'i32', 'eagle3.eval.teacher.tok'),
    positionMask: gpu.tensor([R], 'i32', 'eagle3.eval.teacher.positionMask'),
  };
  const hidden0 = gpu.tensor([R, H], 'f32', 'eagle3.eval.hidden0');
  const kCache = gpu.tensor([L, B, S, c.numKvHeads, c.headDim], 'f32', 'eagle3.eval.kCache');
  const vCache = gpu.tensor([L, B, S, c.numKvHeads, c.headDim], 'f32', 'eagle3.eval.vCache');
  const lossOut = gpu.zeros([L + 1], 'f32', 'eagle3.eval.losses');
  const metricsOut = gpu.zeros([4 * L], 'f32', 'eagle3.eval.metrics');
  const shiftedIds = L > 1 ? gpu.tensor([B, S], 'i32', 'eagle3.eval.ids.shifted') : undefined;
  let hIn = hidden0;
  try {
    await buildTeacher(
      gpu,
      { logits: inputs.target, t2d: params.t2d, used: params.used, lossMask: inputs.lossMask, ...teacher },
      { rows: R, vocab: c.vocabSize, draftVocab: D },
    );
    await taps.teacher?.({ tok: teacher.tok, positionMask: teacher.positionMask });
    await linear(inputs.hiddenStates, w.fc.value, hidden0, H, 3 * c.targetHiddenSize);
    const slot = R * kvDim;
    for (let k = 0; k < L; k++) {
      let ids = inputs.inputIds;
      if (k > 0 && shiftedIds) {
        shiftRowsLeft(gpu, inputs.inputIds, shiftedIds, B, S, k);
        ids = shiftedIds;
      }
      const emb = gpu.tensor([R, H], 'f32', `eagle3.eval.s${k}.emb`);
      await embeddingForward(gpu, ids, params.embed, emb, { n: R, vocab: c.vocabSize, hidden: H });

      const z = gpu.tensor([R, 2 * H], 'f32', `eagle3.eval.s${k}.z`);
      const invRms = gpu.tensor([R], 'f32', `eagle3.eval.s${k}.invRms`);
      await rmsnormForward(gpu, emb, w.inputNorm.value, z, invRms, { rows: R, hidden: H, eps, strideY: 2 * H });
      gpu.release(emb);
      if (canViewAt(gpu, H)) {
        const zHidden = elementView(gpu, z, H, R * 2 * H - H, `eagle3.eval.s${k}.z.hidden`);
        await rmsnormForward(gpu, hIn, w.hiddenNorm.value, zHidden, invRms, { rows: R, hidden: H, eps, strideY: 2 * H });
      } else {
        const hNorm = gpu.tensor([R, H], 'f32', `eagle3.eval.s${k}.hiddenNorm`);
        await rmsnormForward(gpu, hIn, w.hiddenNorm.value, hNorm, invRms, { rows: R, hidden: H, eps });
        await copyStrided(gpu, hNorm, z, { rows: R, width: H, dstStride: 2 * H, dstOffset: H });
        gpu.release(hNorm);
      }

      const rope = (heads: number) => ({ rows: R, nHeads: heads, headDim: c.headDim });
      const q = gpu.tensor([R, qDim], 'f32', `eagle3.eval.s${k}.q`);
      const qRot = gpu.tensor([R, qDim], 'f32', `eagle3.eval.s${k}.qRot`);
      await linear(z, w.q.value, q, qDim, 2 * H);
      await ropeTableForward(gpu, q, positions[k], ropeTables.forward, qRot, rope(c.numHeads));
      const kv = gpu.tensor([R, kvDim], 'f32', `eagle3.eval.s${k}.k`);
      const kRot = gpu.tensor([R, kvDim], 'f32', `eagle3.eval.s${k}.kRot`);
      await linear(z, w.k.value, kv, kvDim, 2 * H);
      await ropeTableForward(gpu, kv, positions[k], ropeTables.forward, kRot, rope(c.numKvHeads));
      copyElements(gpu, kRot, 0, kCache, k * slot, slot);
      await linear(z, w.v.value, kv, kvDim, 2 * H);
      copyElements(gpu, kv, 0, vCache, k * slot, slot);
      gpu.release(q, kv, kRot, z);

      const o = gpu.tensor([R, qDim], 'f32', `eagle3.eval.s${k}.o`);
      const lse = gpu.tensor([B, c.numHeads, S], 'f32', `eagle3.eval.s${k}.lse`);
      await tttAttentionForward(
        gpu,
        { q: qRot, kCache, vCache, mask: inputs.attentionMask, o, lse },
        {
          batch: B,
          seq: S,
          heads: c.numHeads,
          kvHeads: c.numKvHeads,
          headDim: c.headDim,
          step: k,
        },
      );
      await taps.attention?.(k, { q: qRot, kCache, mask: inputs.attentionMask, lse });
      const h1 = gpu.clone(hIn, `eagle3.eval.s${k}.h1`);
      await linear(o, w.o.value, h1, H, qDim, 1);
      gpu.release(qRot, o, lse);

      const n = gpu.tensor([R, H], 'f32', `eagle3.eval.s${k}.n`);
      await rmsnormForward(gpu, h1, w.postNorm.value, n, invRms, { rows: R, hidden: H, eps });
      const gate = gpu.tensor([R, I], 'f32', `eagle3.eval.s${k}.gate`);
      const up = gpu.tensor([R, I], 'f32', `eagle3.eval.s${k}.up`);
      const act = gpu.tensor([R, I], 'f32', `eagle3.eval.s${k}.act`);
      await linear(n, w.gate.value, gate, I, H);
      await linear(n, w.up.value, up, I, H);
      await swigluForward(gpu, gate, up, act, { rows: R, inter: I });
      const hOut = gpu.clone(h1, `eagle3.eval.s${k}.hOut`);
      await linear(act, w.down.value, hOut, H, I, 1);
      // hIn (hidden0 or the previous step's hOut) was last read by the hidden norm and the h1 copy.
      gpu.release(n, gate, up, act, h1, hIn);
      hIn = hOut;

      const f = gpu.tensor([R, H], 'f32', `eagle3.eval.s${k}.f`);
      await rmsnormForward(gpu, hOut, w.norm.value, f, invRms, { rows: R, hidden: H, eps });
      const logits = gpu.tensor([R, D], 'f32', `eagle3.eval.s${k}.logits`);
      await linear(f, w.lmHead.value, logits, D, H);
      await taps.logits?.(k, logits);
      await eagle3Metrics(
        gpu,
        {
          logits,
          pTilde: teacher.pTilde,
          tok: teacher.tok,
          lossMask: inputs.lossMask,
          positionMask: teacher.positionMask,
          used: params.used,
          metricsOut,
        },
        {
          rows: R,
          draftVocab: D,
          seqLen: S,
          step: k,
          slot: k,
        },
      );
      await softCrossEntropy(
        gpu,
        { logits, p: teacher.p, positionMask: teacher.positionMask, lossOut },
        {
          rows: R,
          draftVocab: D,
          seqLen: S,
          step: k,
          grad: 'none',
          slot: k,
          total: { slot: L, weight: PLOSS_DECAY ** k, accumulate: k > 0 },
        },
      );
      gpu.release(f, logits, invRms);
    }
    return {
      losses: gpu.readLater(lossOut) as Promise<Float32Array>,
      metricSums: gpu.readLater(metricsOut) as Promise<Float32Array>,
      lossDenominator: R,
    };
  } finally {
    // Reads are queued before the release, and any reuse of these buffers is ordered after them.
    gpu.release(
      ...positions,
      hIn,
      kCache,
      vCache,
      teacher.p,
      teacher.pTilde,
      teacher.tok,
      teacher.positionMask,
      lossOut,
      metricsOut,
      ...(shiftedIds ? [shiftedIds] : []),
    );
  }
}
