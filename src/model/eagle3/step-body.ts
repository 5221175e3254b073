/**
 * One TTT step of the EAGLE3 draft from its input hidden to h_out, before the final norm and lm_head
 * (forward.ts lists the tensors). The forward encodes it for every step; with activation recompute
 * (`Eagle3ForwardOptions.recompute`) the backward encodes it once more for step k from the kept
 * h_inᵏ, right before that step's backward, so the unroll keeps two [R, H] tensors per step instead of
 * twelve. A recomputed body issues the same kernels on the same operands as the forward's, so its
 * tensors are the same bits; it skips what the backward does not read: the rotation and placement of
 * k and v (the caches already hold them; their projections too, where q is projected on its own) and
 * h_out (kept).
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { tttAttentionForward } from '../../kernels/attention.ts';
import { copyStrided } from '../../kernels/copy-strided.ts';
import { embeddingForward } from '../../kernels/embedding.ts';
import { linearForward } from '../../kernels/linear.ts';
import { linearForwardResidual } from '../../kernels/linear-residual.ts';
import { rmsnormForward } from '../../kernels/rmsnorm.ts';
import { gathersFromTable } from '../../kernels/rmsnorm-gather.ts';
import { rmsnormPairForward } from '../../kernels/rmsnorm-pair.ts';
import { ropeQkvSplit } from '../../kernels/rope-qkv.ts';
import { ropeTableForward } from '../../kernels/rope-table.ts';
import { canViewAt, copyElements, elementView, viewIfAligned } from '../../gpu/tensor-views.ts';
import type { Eagle3Inputs } from './inputs.ts';
import { mlpActivationTensors, mlpForward, type MlpActivations } from './mlp-chunks.ts';
import type { Eagle3Parameters } from './parameters.ts';

/** What the backward reads of one step, besides its h_in, h_out, final 1/rms and dF. */
export interface StepBody {
  /**
   * The step's embedding rows, gathered for input_layernorm; undefined where the norm gathered them
   * itself from a one-binding table (rmsnorm-pair.ts), so the backward gathers them again.
   */
  emb: Tensor | undefined;
  invRmsEmb: Tensor;
  z: Tensor;
  invRmsHidden: Tensor;
  qRot: Tensor;
  o: Tensor;
  lse: Tensor;
  h1: Tensor;
  invRmsPost: Tensor;
  n: Tensor;
  /** gate, up and act of a whole MLP; undefined when it runs over row chunks (mlp-chunks.ts). */
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
  /** Where h_out goes (a view of every step's stacked h_out, forward.ts); default a tensor of its own. */
  hOutInto?: Tensor;
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
  const eps = c.rmsNormEps;
  const s = `${ctx.tag}.s${k}${mode.recompute ? '.re' : ''}`;
  const done = (...tensors: Tensor[]) => {
    if (!mode.keep) gpu.release(...tensors);
  };

  const z = gpu.tensor([R, 2 * H], 'f32', `${s}.z`);
  // The backward reads each norm's 1/rms; gradient-free, the step's four norms share one buffer.
  const invRmsEmb = gpu.tensor([R], 'f32', mode.keep ? `${s}.invRmsEmb` : `${s}.invRms`);
  const invRmsFor = (name: string) => (mode.keep ? gpu.tensor([R], 'f32', `${s}.${name}`) : invRmsEmb);
  // Step k reads the ids shifted left by k within each sequence, zero-filled: input_layernorm gathers
  // those embedding rows itself where the table is one binding, else they are gathered first.
  const gather = { rows: R, vocab: c.vocabSize, hidden: H, seqLen: S, shift: k };
  let emb: Tensor | undefined;
  let invRmsHidden: Tensor;
  if (gathersFromTable(params.embed)) {
    // Both norms in one dispatch, each into its half of z. Its two 1/rms bindings are written in
    // one dispatch, so gradient-free the hidden norm's goes to a scratch tensor of its own.
    invRmsHidden = gpu.tensor([R], 'f32', `${s}.invRmsHidden`);
    const t = { ids: inputs.inputIds, table: params.embed, wEmb: w.inputNorm.value, x: hIn, wHidden: w.hiddenNorm.value, y: z };
    await rmsnormPairForward(gpu, { ...t, invRmsEmb, invRmsHidden }, { ...gather, eps, strideY: 2 * H });
    if (!mode.keep) {
      gpu.release(invRmsHidden);
      invRmsHidden = invRmsEmb;
    }
  } else {
    invRmsHidden = invRmsFor('invRmsHidden');
    emb = gpu.tensor([R, H], 'f32', `${s}.emb`);
    await embeddingForward(gpu, inputs.inputIds, params.embed, emb, { n: R, vocab: c.vocabSize, hidden: H }, { seqLen: S, shift: k });
    await rmsnormForward(gpu, emb, w.inputNorm.value, z, invRmsEmb, { rows: R, hidden: H, eps, strideY: 2 * H });
    done(emb);
    await encodeHiddenNorm(ctx, hIn, z, invRmsHidden, s);
  }

  const qRot = await encodeProjections(ctx, k, z, mode.recompute, s);
  done(z);

  const o = gpu.tensor([R, qDim], 'f32', `${s}.o`);
  const lse = gpu.tensor([B, c.numHeads, S], 'f32', `${s}.lse`);
  await tttAttentionForward(
    gpu,
    { q: qRot, kCache, vCache, mask: inputs.attentionMask, o, lse },
    { batch: B, seq: S, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim, step: k },
  );
  await mode.afterAttention?.({ q: qRot, kCache, mask: inputs.attentionMask, lse });
  // h1 = hIn + o·W_oᵀ: one dispatch where the device takes it, else a copy of hIn and the product.
  const h1 = gpu.tensor(hIn.shape, 'f32', `${s}.h1`);
  await linearForwardResidual(gpu, { x: o, w: w.o.value, res: hIn, y: h1 }, { rows: R, inFeatures: qDim, outFeatures: H });
  done(qRot, o, lse);

  const n = gpu.tensor([R, H], 'f32', `${s}.n`);
  const invRmsPost = invRmsFor('invRmsPost');
  await rmsnormForward(gpu, h1, w.postNorm.value, n, invRmsPost, { rows: R, hidden: H, eps });
  const hOut = mode.recompute ? undefined : (mode.hOutInto ?? gpu.tensor([R, H], 'f32', `${s}.hOut`));
  const mlp = await mlpForward(gpu, params, { n, h1, hOut }, R, ctx.mlpChunkRows, mode.keep, s);
  // hIn (hidden0 or the previous step's hOut) was last read by the hidden norm and the o projection's residual add.
  done(n, h1, hIn);
  return { body: { emb, invRmsEmb, z, invRmsHidden, qRot, o, lse, h1, invRmsPost, n, mlp }, hOut };
}

/**
 * hidden_norm of hIn into the hidden half of z (columns [H, 2H)), where it does not run together with
 * input_layernorm (rmsnormPairForward): bound as a view of z where H · 4 bytes is on the binding
 * alignment, else normalised into a scratch tensor and placed with a strided copy.
 */
async function encodeHiddenNorm(ctx: StepContext, hIn: Tensor, z: Tensor, invRmsHidden: Tensor, s: string): Promise<void> {
  const { gpu, params } = ctx;
  const R = ctx.dims.rows;
  const H = params.config.hiddenSize;
  const eps = params.config.rmsNormEps;
  const wHidden = params.weights.hiddenNorm.value;
  if (canViewAt(gpu, H)) {
    const zHidden = elementView(gpu, z, H, R * 2 * H - H, `${s}.z.hidden`);
    await rmsnormForward(gpu, hIn, wHidden, zHidden, invRmsHidden, { rows: R, hidden: H, eps, strideY: 2 * H });
    return;
  }
  const hNorm = gpu.tensor([R, H], 'f32', `${s}.hiddenNorm`);
  await rmsnormForward(gpu, hIn, wHidden, hNorm, invRmsHidden, { rows: R, hidden: H, eps });
  await copyStrided(gpu, hNorm, z, { rows: R, width: H, dstStride: 2 * H, dstOffset: H });
  gpu.release(hNorm);
}

/**
 * Whether step rows run the stacked q | k | v projection: its [rows, qDim + 2·kvDim] output must fit
 * one binding (RoPE and the copies bind it whole). Otherwise (or where the weights are not stacked)
 * each projection runs on its own. The memory plan asks the same (training/run/memory-plan-tensors.ts).
 */
export function stackedProjectionFits(rows: number, qkvWidth: number, maxBindingBytes: number): boolean {
  return rows * qkvWidth * 4 <= maxBindingBytes;
}

/**
 * q, k and v of step k from z: qRot is returned, the rotated k and the v go into cache slot k (not
 * under recompute: the caches hold them). Where the arena stacked W_q, W_k and W_v
 * (Eagle3Parameters.qkv) one projection gives all three side by side in each row, and one dispatch
 * (ropeQkvSplit) rotates q and k and places the three where they go; a recompute runs that same
 * projection and rotates only q (rope/table, the same bits), so its q has the bits of the forward's.
 * Otherwise three projections. The rotated k and the v go straight into the cache slot where it can
 * be bound on its own, else through scratch tensors and a copy.
 */
async function encodeProjections(ctx: StepContext, k: number, z: Tensor, recompute: boolean, s: string): Promise<Tensor> {
  const { gpu, params, kCache, vCache } = ctx;
  const c = params.config;
  const w = params.weights;
  const R = ctx.dims.rows;
  const H = c.hiddenSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const slot = R * kvDim;
  const linear = (x: Tensor, weight: Tensor, y: Tensor, outDim: number) =>
    linearForward(gpu, x, weight, y, { rows: R, inFeatures: 2 * H, outFeatures: outDim });
  const rope = (x: Tensor, y: Tensor, heads: number, at?: { stride: number; offset: number }) =>
    ropeTableForward(gpu, x, ctx.positions[k], ctx.ropeForward, y, {
      rows: R,
      nHeads: heads,
      headDim: c.headDim,
      ...(at && { strideX: at.stride, offsetX: at.offset }),
    });
  const qRot = gpu.tensor([R, qDim], 'f32', `${s}.qRot`);
  const kSlot = recompute ? undefined : viewIfAligned(gpu, kCache, k * slot, slot, `${s}.kCache.slot`);
  const vSlot = recompute ? undefined : viewIfAligned(gpu, vCache, k * slot, slot, `${s}.vCache.slot`);
  const kRot = recompute ? undefined : (kSlot ?? gpu.tensor([R, kvDim], 'f32', `${s}.kRot`));
  const v = recompute ? undefined : (vSlot ?? gpu.tensor([R, kvDim], 'f32', `${s}.v`));

  const W = qDim + 2 * kvDim;
  if (params.qkv && stackedProjectionFits(R, W, gpu.maxBindingBytes)) {
    const qkv = gpu.tensor([R, W], 'f32', `${s}.qkv`);
    await linear(z, params.qkv.value, qkv, W);
    if (kRot && v) {
      const heads = { rows: R, qHeads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim };
      await ropeQkvSplit(gpu, qkv, ctx.positions[k], ctx.ropeForward, { q: qRot, k: kRot, v }, heads);
    } else await rope(qkv, qRot, c.numHeads, { stride: W, offset: 0 });
    gpu.release(qkv);
  } else {
    const q = gpu.tensor([R, qDim], 'f32', `${s}.q`);
    await linear(z, w.q.value, q, qDim);
    await rope(q, qRot, c.numHeads);
    gpu.release(q);
    if (kRot && v) {
      const kIn = gpu.tensor([R, kvDim], 'f32', `${s}.k`);
      await linear(z, w.k.value, kIn, kvDim);
      await rope(kIn, kRot, c.numKvHeads);
      await linear(z, w.v.value, v, kvDim);
      gpu.release(kIn);
    }
  }
  if (kRot && !kSlot) {
    copyElements(gpu, kRot, 0, kCache, k * slot, slot);
    gpu.release(kRot);
  }
  if (v && !vSlot) {
    copyElements(gpu, v, 0, vCache, k * slot, slot);
    gpu.release(v);
  }
  return qRot;
}

/** Releases a kept body's tensors (the gradient-free mode shares one 1/rms buffer; training does not). */
export function releaseStepBody(gpu: Gpu, b: StepBody): void {
  if (b.emb) gpu.release(b.emb);
  gpu.release(b.invRmsEmb, b.z, b.invRmsHidden, b.qRot, b.o, b.lse, b.h1, b.invRmsPost, b.n);
  if (b.mlp) gpu.release(...mlpActivationTensors(b.mlp));
}
