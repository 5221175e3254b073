/**
 * EAGLE3 draft backward through the TTT unroll on the GPU (the float64 twin is the backward half of
 * src/reference/eagle3.ts). Walks the steps in reverse, adding every weight gradient into the
 * backend's grad buffers (matmul beta = 1, RMSNorm accumulateDw), so micro-batches accumulate.
 *
 * Two paths cross steps:
 *   - recurrent hidden: h_inᵏ = h_outᵏ⁻¹, so the gradient reaching h_inᵏ is added to ∂/∂h_outᵏ⁻¹
 *     (`dFromNext`, used as the accumulating dx of the final-norm backward of step k − 1);
 *   - K/V caches: slot j is read by every step k ≥ j. The attention backward of step k adds into
 *     dKCache/dVCache slots 0..k (step L − 1, processed first, overwrites), so slot k is complete when
 *     step k is reached and flows back through RoPE⁻¹ and the k/v projections of step k.
 * Each step starts with its head (step-head.ts): f = norm(h_out) again, the logits, metrics, the loss
 * with its gradient and the lm_head backward, which give dF, the gradient at f, for this step only
 * (where the heads are small, all steps' heads run at once before the first body instead, and each
 * step reads its rows of their one dF: step-heads-batched.ts); then its body (kept, or encoded again
 * under recompute), whose tensors are released one by one after their last reader, so the step's
 * scratch grows as its body shrinks (the memory plan counts the live set at each point,
 * training/run/memory-plan-moments.ts).
 * The rows' losses of every step are kept ([R] each) and summed into the weighted total at the end,
 * in step order, as the gradient-free forward sums them.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { tttAttentionBackward } from '../../kernels/attention.ts';
import { copyStrided } from '../../kernels/copy-strided.ts';
import { linearGrads } from '../../kernels/linear-grads.ts';
import { reduceStepLoss } from '../../kernels/loss.ts';
import { rmsnormBackward, rmsnormForward } from '../../kernels/rmsnorm.ts';
import { rmsnormGatherBackwardDw } from '../../kernels/rmsnorm-gather.ts';
import { pairBackwardUnfit, rmsnormPairBackward } from '../../kernels/rmsnorm-pair.ts';
import { ropeQkvJoin } from '../../kernels/rope-qkv.ts';
import { ropeTableForward } from '../../kernels/rope-table.ts';
import type { Eagle3ForwardState } from './forward-state.ts';
import { canViewAt, copyElements, elementView, viewIfAligned } from '../../gpu/tensor-views.ts';
import type { Eagle3Parameters } from './parameters.ts';
import { fcWeightGrad } from './fc-chunks.ts';
import { mlpActivationTensors, mlpBackward } from './mlp-chunks.ts';
import { encodeStepBody, stackedProjectionFits, type StepContext } from './step-body.ts';
import { encodeBatchedHeads } from './step-heads-batched.ts';
import {
  captureLogits,
  encodeStepHead,
  reduceStepLosses,
  reduceStepMetrics,
  stepLossSlots,
  stepTableStride,
  type StepHeadContext,
} from './step-head.ts';

export async function eagle3Backward(gpu: Gpu, params: Eagle3Parameters, s: Eagle3ForwardState): Promise<void> {
  const c = params.config;
  const w = params.weights;
  const { batch: B, seqLen: S, rows: R, tttLength: L } = s.dims;
  const H = c.hiddenSize;
  const qDim = c.numHeads * c.headDim;
  const norm = { rows: R, hidden: H };
  // Weights, their grads and activations may be split into row parts (linear.ts); unsplit, each pair of
  // gradients is one or two matmuls (linear-grads.ts).

  const dKCache = gpu.tensor(s.kCache.shape, 'f32', 'eagle3.dKCache');
  const dVCache = gpu.tensor(s.vCache.shape, 'f32', 'eagle3.dVCache');
  let dFromNext: Tensor | undefined;

  // Every step's row losses in one [L, stride] table, and its [R, 4] metric terms in another, each
  // step's rows a view of their own, so one dispatch reduces each table at the end; one tensor per step
  // (reduced with its head) where a table would not fit a binding.
  const align = gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256;
  const stride = stepTableStride(R, L, align, gpu.maxBindingBytes);
  const rowLossTable = stride ? gpu.tensor([L, stride], 'f32', 'eagle3.rowLosses') : undefined;
  const statsStride = stepTableStride(4 * R, L, align, gpu.maxBindingBytes);
  const rowStatsTable = statsStride ? gpu.tensor([L, statsStride], 'f32', 'eagle3.rowStats') : undefined;
  const rowLosses: Tensor[] = [];
  const headContext: StepHeadContext = {
    gpu,
    params,
    inputs: s.inputs,
    dims: s.dims,
    teacher: s.teacher,
    chunkRows: s.headChunkRows,
    lossOut: s.lossOut,
    metricsOut: s.metricsOut,
    lossScale: s.lossScale,
  };
  const statsView = (table: Tensor, k: number) => elementView(gpu, table, k * statsStride, 4 * R, `eagle3.s${k}.rowStats`, [R, 4]);
  /** Step k's rows of the row-loss table, else a tensor of its own; kept in rowLosses[k]. */
  const rowLossOf = (k: number) =>
    (rowLosses[k] = rowLossTable
      ? elementView(gpu, rowLossTable, k * stride, R, `eagle3.s${k}.rowLoss`)
      : gpu.tensor([R], 'f32', `eagle3.s${k}.rowLoss`));
  /** Step k's head (step-head.ts) on f = norm(h_out): returns dF [R, H]; its rows' losses go to rowLosses[k]. */
  const encodeHead = async (k: number, hOut: Tensor, invRmsFinal: Tensor): Promise<Tensor> => {
    const f = gpu.tensor([R, H], 'f32', `eagle3.s${k}.f`);
    const dF = gpu.tensor([R, H], 'f32', `eagle3.s${k}.dF`);
    const out = { loss: rowLossOf(k), stats: rowStatsTable && statsView(rowStatsTable, k) };
    await rmsnormForward(gpu, hOut, w.norm.value, f, invRmsFinal, { ...norm, eps: c.rmsNormEps });
    const captured = s.captured ? captureLogits(gpu, R, c.draftVocabSize) : undefined;
    const head = { ...headContext, onLogits: captured && (async (logits: Tensor) => captured.add(logits)) };
    await encodeStepHead(head, k, f, dF, out);
    if (s.captured && captured) s.captured.logits[k] = captured.done();
    gpu.release(f);
    return dF;
  };
  // Small heads run for all steps at once, before the first step's body (step-heads-batched.ts).
  const batched =
    s.batchedHeads && s.hOutStack && rowLossTable && rowStatsTable
      ? await encodeBatchedHeads(
          headContext,
          s.hOutStack,
          { loss: rowLossTable, lossStride: stride, stats: rowStatsTable, statsStride },
          s.captured && ((k, logits) => (s.captured!.logits[k] = gpu.readLater(logits) as Promise<Float32Array>)),
        )
      : undefined;

  const stepContext: StepContext = {
    gpu,
    params,
    inputs: s.inputs,
    dims: s.dims,
    positions: s.positions,
    ropeForward: s.ropeForward,
    kCache: s.kCache,
    vCache: s.vCache,
    mlpChunkRows: s.mlpChunkRows,
    tag: 'eagle3',
  };

  for (let k = L - 1; k >= 0; k--) {
    const step = s.steps[k];
    // The step's head first (it reads h_out only): its loss rows, metrics and dF, before the body's
    // tensors exist. dHOut accumulates onto the gradient from step k + 1.
    const invRmsFinal = batched ? batched.invRms(k) : gpu.tensor([R], 'f32', `eagle3.s${k}.invRmsFinal`);
    const dF = batched ? batched.dF(k) : await encodeHead(k, step.hOut, invRmsFinal);
    const dHOut = dFromNext ?? gpu.tensor([R, H], 'f32', `eagle3.s${k}.dHOut`);
    await rmsnormBackward(gpu, step.hOut, w.norm.value, invRmsFinal, dF, dHOut, w.norm.grad, norm, {
      accumulateDx: dFromNext !== undefined,
      accumulateDw: true,
    });
    // A batched head's dF and 1/rms are views of the steps' tensors, released after step 0.
    if (!batched) gpu.release(dF, invRmsFinal);
    // Under activation recompute, the step's body is encoded again from its kept h_in (same bits).
    // Either way each of its tensors is released after its last reader below, so the backward of a
    // step holds less and less of its body.
    const a = step.body ?? (await encodeStepBody(stepContext, k, step.hIn, { keep: true, recompute: true })).body;
    step.body = undefined;

    // h_out = h1 + (silu(n·W_gᵀ) ⊙ n·W_uᵀ) · W_dᵀ, n = post_attention_layernorm(h1): whole, or by row chunks (mlp-chunks.ts).
    const dn = gpu.tensor([R, H], 'f32', `eagle3.s${k}.dn`);
    await mlpBackward(gpu, params, { n: a.n, dHOut, dn }, a.mlp, R, stepContext.mlpChunkRows, `eagle3.s${k}.mlp`);
    gpu.release(a.n);
    if (a.mlp) gpu.release(...mlpActivationTensors(a.mlp));
    // dH1 = dHOut + the norm's dx, accumulated in place: the MLP's backward, dHOut's last reader, is
    // encoded above and the queue runs in encoding order (a copy would end the pass for nothing).
    const dH1 = dHOut;
    await rmsnormBackward(gpu, a.h1, w.postNorm.value, a.invRmsPost, dn, dH1, w.postNorm.grad, norm, {
      accumulateDx: true,
      accumulateDw: true,
    });
    gpu.release(dn, a.h1, a.invRmsPost);

    // h1 = h_in + o · W_oᵀ; o = TTT attention of step k.
    const dO = gpu.tensor([R, qDim], 'f32', `eagle3.s${k}.dO`);
    const dQRot = gpu.tensor([R, qDim], 'f32', `eagle3.s${k}.dQRot`);
    await linearGrads(gpu, { dy: dH1, w: w.o.value, x: a.o, dx: dO, dw: w.o.grad }, { rows: R, inFeatures: qDim, outFeatures: H });
    await tttAttentionBackward(
      gpu,
      { q: a.qRot, kCache: s.kCache, vCache: s.vCache, mask: s.inputs.attentionMask, o: a.o, lse: a.lse, dO, dQ: dQRot, dKCache, dVCache },
      { batch: B, seq: S, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim, step: k },
      { accumulate: k < L - 1 },
    );
    gpu.release(dO, a.qRot, a.o, a.lse);

    // Cache slot k now holds the gradient of every step ≥ k: undo RoPE, then the projections.
    const dz = gpu.tensor([R, 2 * H], 'f32', `eagle3.s${k}.dz`);
    await projectionsBackward(
      gpu,
      params,
      { dQRot, dKCache, dVCache, z: a.z, dz, positions: s.positions[k], ropeInverse: s.ropeInverse },
      k,
      R,
    );
    gpu.release(dQRot, a.z);

    // z = [input_layernorm(emb) | hidden_norm(h_in)], both halves read with row stride 2H. The
    // embedding is frozen: only input_layernorm's dw is kept. dHIn = dH1 + hidden_norm's dx, in place
    // likewise: the o projection's backward (dH1's last reader) is encoded.
    const dHIn = dH1;
    const gather = { rows: R, vocab: c.vocabSize, hidden: H, seqLen: S, shift: k };
    if (!a.emb && pairBackwardUnfit(gpu, R, H, { dwEmb: w.inputNorm.grad, dwHidden: w.hiddenNorm.grad }) === undefined) {
      // Both norms' gradients in one dispatch (the embedding rows gathered again for dw).
      const t = { ids: s.inputs.inputIds, table: params.embed, x: step.hIn, wHidden: w.hiddenNorm.value, dz, dx: dHIn };
      await rmsnormPairBackward(
        gpu,
        { ...t, invRmsEmb: a.invRmsEmb, invRmsHidden: a.invRmsHidden, dwEmb: w.inputNorm.grad, dwHidden: w.hiddenNorm.grad },
        { ...gather, strideDy: 2 * H },
        { accumulateDx: true, accumulateDw: true },
      );
      gpu.release(a.invRmsEmb);
    } else {
      await inputNormDw(gpu, params, { emb: a.emb, invRmsEmb: a.invRmsEmb, dz, inputIds: s.inputs.inputIds }, gather, `eagle3.s${k}`);
      // Released before hidden_norm's scratch is made, as the memory plan's moments count them.
      if (a.emb) gpu.release(a.emb);
      gpu.release(a.invRmsEmb);
      await hiddenNormBackward(gpu, params, { hIn: step.hIn, invRmsHidden: a.invRmsHidden, dz, dHIn }, R, `eagle3.s${k}`);
    }
    gpu.release(dz, a.invRmsHidden);

    if (k > 0) {
      dFromNext = dHIn;
    } else {
      // h_in⁰ = Haux · W_fcᵀ (Haux f16 is widened a row chunk at a time, fc-chunks.ts).
      const fc = { rows: R, inFeatures: 3 * c.targetHiddenSize, outFeatures: H, chunkRows: s.fcChunkRows };
      await fcWeightGrad(gpu, dHIn, s.inputs.hiddenStates, w.fc.grad, fc, 'eagle3');
      gpu.release(dHIn);
    }
  }
  // The losses: each step's, and the weighted total in step order (the bits of the gradient-free forward's).
  batched?.release();
  gpu.release(dKCache, dVCache);
  if (rowStatsTable) {
    await reduceStepMetrics(gpu, rowStatsTable, s.metricsOut, R, L, statsStride);
    gpu.release(rowStatsTable);
  }
  if (rowLossTable) {
    await reduceStepLosses(gpu, rowLossTable, s.lossOut, R, L, stride);
    gpu.release(rowLossTable);
  } else {
    for (let k = 0; k < L; k++) await reduceStepLoss(gpu, rowLosses[k], s.lossOut, stepLossSlots(k, R, L));
    gpu.release(...rowLosses);
  }
}

/**
 * input_layernorm's weight gradient where it does not run with hidden_norm's backward: from the kept
 * embedding rows (the norm's dx goes to a scratch tensor), or from the rows gathered again.
 */
async function inputNormDw(
  gpu: Gpu,
  params: Eagle3Parameters,
  t: { emb: Tensor | undefined; invRmsEmb: Tensor; dz: Tensor; inputIds: Tensor },
  gather: { rows: number; vocab: number; hidden: number; seqLen: number; shift: number },
  tag: string,
): Promise<void> {
  const w = params.weights;
  const { rows: R, hidden: H } = gather;
  if (t.emb) {
    const embScratch = gpu.tensor([R, H], 'f32', `${tag}.dEmb.scratch`);
    await rmsnormBackward(
      gpu,
      t.emb,
      w.inputNorm.value,
      t.invRmsEmb,
      t.dz,
      embScratch,
      w.inputNorm.grad,
      { rows: R, hidden: H, strideY: 2 * H },
      { accumulateDw: true },
    );
    gpu.release(embScratch);
    return;
  }
  await rmsnormGatherBackwardDw(
    gpu,
    t.inputIds,
    params.embed,
    t.invRmsEmb,
    t.dz,
    w.inputNorm.grad,
    { ...gather, strideDy: 2 * H },
    { accumulate: true },
  );
}

/**
 * hidden_norm's backward on its half of dz (columns [H, 2H)), its dx added into dHIn: bound as a view
 * of dz where H · 4 bytes is on the binding alignment, else copied out first.
 */
async function hiddenNormBackward(
  gpu: Gpu,
  params: Eagle3Parameters,
  t: { hIn: Tensor; invRmsHidden: Tensor; dz: Tensor; dHIn: Tensor },
  R: number,
  tag: string,
): Promise<void> {
  const w = params.weights;
  const H = params.config.hiddenSize;
  let dzHidden: Tensor;
  let hiddenStride = 2 * H;
  if (canViewAt(gpu, H)) {
    dzHidden = elementView(gpu, t.dz, H, R * 2 * H - H, `${tag}.dz.hidden`);
  } else {
    dzHidden = gpu.tensor([R, H], 'f32', `${tag}.dz.hidden`);
    await copyStrided(gpu, t.dz, dzHidden, { rows: R, width: H, srcStride: 2 * H, srcOffset: H });
    hiddenStride = H;
  }
  await rmsnormBackward(
    gpu,
    t.hIn,
    w.hiddenNorm.value,
    t.invRmsHidden,
    dzHidden,
    t.dHIn,
    w.hiddenNorm.grad,
    { rows: R, hidden: H, strideY: hiddenStride },
    { accumulateDx: true, accumulateDw: true },
  );
  if (dzHidden.part.buffer !== t.dz.part.buffer) gpu.release(dzHidden);
}

/**
 * The q, k and v projections of step k backward, from dQRot and cache slot k of dKCache and dVCache:
 * RoPE⁻¹ (the rotation by −angle: the same kernel with the (cos, −sin) table), then the weight
 * gradients (accumulated) and dz (written). Where W_q, W_k and W_v are stacked (Eagle3Parameters.qkv),
 * dq, dk and dv go side by side into one [R, qDim + 2·kvDim] tensor (one dispatch, ropeQkvJoin,
 * rotates and places the three), and one pair of products (linearGrads: one dispatch where the
 * device takes the pair) gives the three weight gradients and dz; otherwise a pair for each of q, k
 * and v, dz summed in that order. A cache slot is read in place where it can be bound on its own, else
 * copied out first.
 */
async function projectionsBackward(
  gpu: Gpu,
  params: Eagle3Parameters,
  x: { dQRot: Tensor; dKCache: Tensor; dVCache: Tensor; z: Tensor; dz: Tensor; positions: Tensor; ropeInverse: Tensor },
  k: number,
  R: number,
): Promise<void> {
  const c = params.config;
  const w = params.weights;
  const H = c.hiddenSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const slot = R * kvDim;
  const shape = (outDim: number) => ({ rows: R, inFeatures: 2 * H, outFeatures: outDim });
  const slotOf = (cache: Tensor, name: string): { t: Tensor; owned: boolean } => {
    const view = viewIfAligned(gpu, cache, k * slot, slot, `eagle3.s${k}.${name}`);
    if (view) return { t: view, owned: false };
    const t = gpu.tensor([R, kvDim], 'f32', `eagle3.s${k}.${name}`);
    copyElements(gpu, cache, k * slot, t, 0, slot);
    return { t, owned: true };
  };
  const unrotate = (from: Tensor, to: Tensor, heads: number) =>
    ropeTableForward(gpu, from, x.positions, x.ropeInverse, to, { rows: R, nHeads: heads, headDim: c.headDim });
  const dKRot = slotOf(x.dKCache, 'dKRot');
  const dv = slotOf(x.dVCache, 'dv');
  const W = qDim + 2 * kvDim;
  if (params.qkv && stackedProjectionFits(R, W, gpu.maxBindingBytes)) {
    const dQkv = gpu.tensor([R, W], 'f32', `eagle3.s${k}.dQkv`);
    const heads = { rows: R, qHeads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim };
    await ropeQkvJoin(gpu, { q: x.dQRot, k: dKRot.t, v: dv.t }, x.positions, x.ropeInverse, dQkv, heads);
    await linearGrads(gpu, { dy: dQkv, w: params.qkv.value, x: x.z, dx: x.dz, dw: params.qkv.grad }, shape(W));
    gpu.release(dQkv);
  } else {
    const dq = gpu.tensor([R, qDim], 'f32', `eagle3.s${k}.dq`);
    const dk = gpu.tensor([R, kvDim], 'f32', `eagle3.s${k}.dk`);
    await unrotate(x.dQRot, dq, c.numHeads);
    await unrotate(dKRot.t, dk, c.numKvHeads);
    // dz sums q's product, then k's, then v's.
    await linearGrads(gpu, { dy: dq, w: w.q.value, x: x.z, dx: x.dz, dw: w.q.grad }, shape(qDim));
    await linearGrads(gpu, { dy: dk, w: w.k.value, x: x.z, dx: x.dz, dw: w.k.grad }, shape(kvDim), { betaX: 1 });
    await linearGrads(gpu, { dy: dv.t, w: w.v.value, x: x.z, dx: x.dz, dw: w.v.grad }, shape(kvDim), { betaX: 1 });
    gpu.release(dq, dk);
  }
  for (const owned of [dKRot, dv].filter((o) => o.owned)) gpu.release(owned.t);
}
