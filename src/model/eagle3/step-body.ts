/**
 * One TTT step of the EAGLE3 draft from its input hidden to h_out, before the final norm and lm_head
 * (forward.ts lists the tensors). The forward encodes it for every step; with activation recompute
 * (`Eagle3ForwardOptions.recompute`) the backward encodes it once more for step k from the kept
 * h_inᵏ, right before that step's backward, so the unroll keeps two [R, H] tensors per step instead of
 * twelve. A recomputed body issues the same kernels on the same operands as the forward's, so its
 * tensors are the same bits; it skips what the backward does not read: the k and v projections (the
 * caches already hold them) and h_out (kept).
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { tttAttentionForward } from '../../kernels/attention.ts';
import { copyStrided } from '../../kernels/copy-strided.ts';
import { embeddingForward } from '../../kernels/embedding.ts';
import { linearForward } from '../../kernels/linear.ts';
import { rmsnormForward } from '../../kernels/rmsnorm.ts';
import { ropeTableForward } from '../../kernels/rope-table.ts';
import { canViewAt, copyElements, elementView, shiftRowsLeft } from '../../gpu/tensor-views.ts';
import type { Eagle3Inputs } from './inputs.ts';
import { mlpForward, type MlpActivations } from './mlp-chunks.ts';
import type { Eagle3Parameters } from './parameters.ts';

/** What the backward reads of one step, besides its h_in, h_out, final 1/rms and dF. */
export interface StepBody {
  emb: Tensor;
  invRmsEmb: Tensor;
  z: Tensor;
  invRmsHidden: Tensor;
  qRot: Tensor;
  o: Tensor;
  lse: Tensor;
  h1: Tensor;
  invRmsPost: Tensor;
  n: Tensor;
  /** gate, up and act [R, I] of a whole MLP; undefined when it runs over row chunks (mlp-chunks.ts). */
  mlp: MlpActivations | undefined;
}

/** What every step of one unroll shares. */
export interface StepContext {
  gpu: Gpu;
  params: Eagle3Parameters;
  inputs: Eagle3Inputs;
  dims: { batch: number; seqLen: number; rows: number };
  /** i32 [B·S] per step: t + k. */
  positions: Tensor[];
  ropeForward: Tensor;
  kCache: Tensor;
  vCache: Tensor;
  /** i32 [B, S] scratch for the ids shifted left by k (k ≥ 1). */
  shiftedIds: Tensor | undefined;
  /** Rows per chunk of the MLP (mlp-chunks.ts `mlpChunkRows`); all R runs it whole. */
  mlpChunkRows: number;
  /** Tensor label prefix. */
  tag: string;
}

export interface StepBodyMode {
  /** Keep every tensor of the body (training); otherwise each is released after its last reader. */
  keep: boolean;
  /** The backward's recompute: no k/v projections (the caches hold them) and no h_out. */
  recompute: boolean;
  /** Read-only tap after the attention (the gradient-free mode's, forward.ts Eagle3EvalTaps.attention). */
  afterAttention?: (t: { q: Tensor; kCache: Tensor; mask: Tensor; lse: Tensor }) => Promise<void>;
}

/**
 * Encodes step k on `hIn`. Returns the body and h_out (undefined when recomputing). Without `keep`,
 * the body's tensors are released as their last reader is encoded (so the returned body must not be
 * read) and `hIn` is released after its last reader.
 */
export async function encodeStepBody(
  ctx: StepContext,
  k: number,
  hIn: Tensor,
  mode: StepBodyMode,
): Promise<{ body: StepBody; hOut: Tensor | undefined }> {
  const { gpu, params, inputs, kCache, vCache } = ctx;
  const c = params.config;
  const w = params.weights;
  const { batch: B, seqLen: S, rows: R } = ctx.dims;
  const H = c.hiddenSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const eps = c.rmsNormEps;
  const s = `${ctx.tag}.s${k}${mode.recompute ? '.re' : ''}`;
  const linear = (x: Tensor, weight: Tensor, y: Tensor, outDim: number, inDim: number, beta = 0) =>
    linearForward(gpu, x, weight, y, { rows: R, inFeatures: inDim, outFeatures: outDim }, { beta });
  const done = (...tensors: Tensor[]) => {
    if (!mode.keep) gpu.release(...tensors);
  };

  let ids = inputs.inputIds;
  if (k > 0 && ctx.shiftedIds) {
    shiftRowsLeft(gpu, inputs.inputIds, ctx.shiftedIds, B, S, k);
    ids = ctx.shiftedIds;
  }
  const emb = gpu.tensor([R, H], 'f32', `${s}.emb`);
  await embeddingForward(gpu, ids, params.embed, emb, { n: R, vocab: c.vocabSize, hidden: H });

  const z = gpu.tensor([R, 2 * H], 'f32', `${s}.z`);
  // The backward reads each norm's 1/rms; gradient-free, the step's four norms share one buffer.
  const invRmsEmb = gpu.tensor([R], 'f32', mode.keep ? `${s}.invRmsEmb` : `${s}.invRms`);
  const invRmsFor = (name: string) => (mode.keep ? gpu.tensor([R], 'f32', `${s}.${name}`) : invRmsEmb);
  const invRmsHidden = invRmsFor('invRmsHidden');
  await rmsnormForward(gpu, emb, w.inputNorm.value, z, invRmsEmb, { rows: R, hidden: H, eps, strideY: 2 * H });
  done(emb);
  if (canViewAt(gpu, H)) {
    const zHidden = elementView(gpu, z, H, R * 2 * H - H, `${s}.z.hidden`);
    await rmsnormForward(gpu, hIn, w.hiddenNorm.value, zHidden, invRmsHidden, { rows: R, hidden: H, eps, strideY: 2 * H });
  } else {
    // The hidden half of z cannot be bound on its own (H · 4 bytes is off the binding alignment):
    // normalise into a scratch tensor and place it with a strided copy.
    const hNorm = gpu.tensor([R, H], 'f32', `${s}.hiddenNorm`);
    await rmsnormForward(gpu, hIn, w.hiddenNorm.value, hNorm, invRmsHidden, { rows: R, hidden: H, eps });
    await copyStrided(gpu, hNorm, z, { rows: R, width: H, dstStride: 2 * H, dstOffset: H });
    gpu.release(hNorm);
  }

  const rope = (heads: number) => ({ rows: R, nHeads: heads, headDim: c.headDim });
  const q = gpu.tensor([R, qDim], 'f32', `${s}.q`);
  const qRot = gpu.tensor([R, qDim], 'f32', `${s}.qRot`);
  await linear(z, w.q.value, q, qDim, 2 * H);
  await ropeTableForward(gpu, q, ctx.positions[k], ctx.ropeForward, qRot, rope(c.numHeads));
  if (mode.recompute) gpu.release(q);
  else {
    const slot = R * kvDim;
    const kv = gpu.tensor([R, kvDim], 'f32', `${s}.k`);
    const kRot = gpu.tensor([R, kvDim], 'f32', `${s}.kRot`);
    await linear(z, w.k.value, kv, kvDim, 2 * H);
    await ropeTableForward(gpu, kv, ctx.positions[k], ctx.ropeForward, kRot, rope(c.numKvHeads));
    copyElements(gpu, kRot, 0, kCache, k * slot, slot);
    await linear(z, w.v.value, kv, kvDim, 2 * H);
    copyElements(gpu, kv, 0, vCache, k * slot, slot);
    gpu.release(q, kv, kRot);
  }
  done(z);

  const o = gpu.tensor([R, qDim], 'f32', `${s}.o`);
  const lse = gpu.tensor([B, c.numHeads, S], 'f32', `${s}.lse`);
  await tttAttentionForward(
    gpu,
    { q: qRot, kCache, vCache, mask: inputs.attentionMask, o, lse },
    { batch: B, seq: S, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim, step: k },
  );
  await mode.afterAttention?.({ q: qRot, kCache, mask: inputs.attentionMask, lse });
  const h1 = gpu.clone(hIn, `${s}.h1`);
  await linear(o, w.o.value, h1, H, qDim, 1);
  done(qRot, o, lse);

  const n = gpu.tensor([R, H], 'f32', `${s}.n`);
  const invRmsPost = invRmsFor('invRmsPost');
  await rmsnormForward(gpu, h1, w.postNorm.value, n, invRmsPost, { rows: R, hidden: H, eps });
  const hOut = mode.recompute ? undefined : gpu.tensor([R, H], 'f32', `${s}.hOut`);
  const mlp = await mlpForward(gpu, params, { n, h1, hOut }, R, ctx.mlpChunkRows, mode.keep, s);
  // hIn (hidden0 or the previous step's hOut) was last read by the hidden norm and the h1 copy.
  done(n, h1, hIn);
  return { body: { emb, invRmsEmb, z, invRmsHidden, qRot, o, lse, h1, invRmsPost, n, mlp }, hOut };
}

/** Releases a kept body's tensors (the gradient-free mode shares one 1/rms buffer; training does not). */
export function releaseStepBody(gpu: Gpu, b: StepBody): void {
  gpu.release(b.emb, b.invRmsEmb, b.z, b.invRmsHidden, b.qRot, b.o, b.lse, b.h1, b.invRmsPost, b.n);
  if (b.mlp) gpu.release(b.mlp.gate, b.mlp.up, b.mlp.act);
}
