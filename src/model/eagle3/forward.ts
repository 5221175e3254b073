/**
 * EAGLE3 draft forward over the TTT unroll on the GPU (docs/eagle3.md §3–§6; the float64 twin is
 * src/reference/eagle3.ts). Every activation the backward needs is kept in `Eagle3ForwardState`;
 * nothing is read back except what the caller asks to capture.
 *
 * Per step k (rows r = b·S + t, layouts row-major):
 *   idsᵏ            ids shifted left by k per sequence (copies + clears)
 *   emb  [R, H]     embedding of idsᵏ (frozen table)
 *   z    [R, 2H]    [input_layernorm(emb) | hidden_norm(h_in)] — both RMSNorms write straight into
 *                   their half of z with a row stride of 2H, so there is no concat pass (when H · 4
 *                   bytes is off the binding alignment, the hidden half goes through a strided copy)
 *   qRot [R, nH·hd] RoPE(z·Wqᵀ) at t + k (cos/sin tables, rope.ts);  RoPE(z·Wkᵀ) and z·Wvᵀ go
 *                   into cache slot k
 *   o, lse          TTT attention over cache slots 0..k
 *   h1   [R, H]     h_in + o·Woᵀ (matmul with beta = 1 onto a copy of h_in)
 *   n, gate, up, act, h_out = h1 + act·Wdᵀ, f = norm(h_out), logits = f·W_lmᵀ
 * The per-step loss runs in the forward with its gradient written in place into the logits buffer
 * (SpecForge's fused-kernel behaviour), scaled by lossScale · 0.8ᵏ; the metrics read the logits first.
 * That gradient goes straight through lm_head (lm-head.ts `lmHeadBackward`), so no step keeps a
 * vocabulary-sized tensor.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import { fmtShape, type Tensor } from '../../gpu/tensor.ts';
import { tttAttentionForward } from '../../kernels/attention.ts';
import { embeddingForward } from '../../kernels/embedding.ts';
import { softCrossEntropy } from '../../kernels/loss.ts';
import { linearForward } from '../../kernels/linear.ts';
import { eagle3Metrics } from '../../kernels/metrics.ts';
import { rmsnormForward } from '../../kernels/rmsnorm.ts';
import { ropeTableForward } from '../../kernels/rope-table.ts';
import { swigluForward } from '../../kernels/swiglu.ts';
import { buildTeacher } from '../../kernels/teacher.ts';
import { copyStrided } from '../../kernels/copy-strided.ts';
import { PLOSS_DECAY, type Eagle3Config } from '../../config/eagle3-config.ts';
import { lmHeadBackward } from './lm-head.ts';
import { canViewAt, copyElements, elementView, shiftRowsLeft } from '../../gpu/tensor-views.ts';
import type { Eagle3Parameters } from './parameters.ts';

/** One micro-batch, as SpecForge's OnlineEagle3Model receives it. */
export interface Eagle3Inputs {
  /** i32 [B, S], already shifted left once. */
  inputIds: Tensor;
  /** i32 [B, S], 1 = real token. */
  attentionMask: Tensor;
  /** i32 [B, S] or [B, S, 1], unshifted. */
  lossMask: Tensor;
  /** f32 [B, S, 3·Ht] aux hidden states. */
  hiddenStates: Tensor;
  /** f32 [B, S, V] full-vocab target logits, already shifted left once. */
  target: Tensor;
}

export interface Eagle3ForwardOptions {
  tttLength: number;
  /** Multiplies every gradient (1 / accumulation steps); the reported losses are unscaled. */
  lossScale: number;
  /** Read back each step's logits and hidden output (tests, debugging). */
  capture?: boolean;
}

export interface Eagle3Dims {
  batch: number;
  seqLen: number;
  rows: number;
  tttLength: number;
}

/** What one TTT step keeps for the backward. */
export interface StepActivations {
  emb: Tensor;
  invRmsEmb: Tensor;
  z: Tensor;
  invRmsHidden: Tensor;
  /** Input hidden of this step: fc output (k = 0) or the previous step's hOut (owned there). */
  hIn: Tensor;
  qRot: Tensor;
  o: Tensor;
  lse: Tensor;
  h1: Tensor;
  invRmsPost: Tensor;
  n: Tensor;
  gate: Tensor;
  up: Tensor;
  act: Tensor;
  hOut: Tensor;
  invRmsFinal: Tensor;
  /** d(lossScale · 0.8ᵏ · ploss_k)/d norm(h_out), already through lm_head (whose dW is accumulated). */
  dF: Tensor;
}

export interface Eagle3ForwardState {
  dims: Eagle3Dims;
  inputs: Eagle3Inputs;
  lossScale: number;
  /** i32 [B·S] per step: t + k. */
  positions: Tensor[];
  /** RoPE table of the inverse rotation (owned by the parameters' Eagle3Rope). */
  ropeInverse: Tensor;
  /** fc output, h_in of step 0. */
  hidden0: Tensor;
  /** f32 [L, B, S, nKV, hd]: RoPE'd keys / values of every step. */
  kCache: Tensor;
  vCache: Tensor;
  teacher: { p: Tensor; pTilde: Tensor; tok: Tensor; positionMask: Tensor };
  steps: StepActivations[];
  /** f32 [L + 1]: ploss_0..ploss_{L−1}, then the weighted total. */
  lossOut: Tensor;
  /** f32 [4·L]: per step correct, denom, acceptSum, acceptCount (src/kernels/metrics.ts). */
  metricsOut: Tensor;
  captured?: { logits: Promise<Float32Array>[]; hidden: Promise<Float32Array>[] };
}

/** Checks the inputs against the config, naming the offending tensor; returns B and S. */
export function checkEagle3Inputs(c: Eagle3Config, x: Eagle3Inputs): { batch: number; seqLen: number } {
  const ids = x.inputIds;
  if (ids.shape.length !== 2) throw new Error(`eagle3: input_ids (${ids.label}) must be [B, S], got ${fmtShape(ids.shape)}`);
  const [B, S] = ids.shape;
  const expect = (name: string, t: Tensor, dtype: string, shapes: number[][]) => {
    if (t.dtype !== dtype) throw new Error(`eagle3: ${name} (${t.label}) must be ${dtype}, got ${t.dtype}`);
    if (!shapes.some((s) => s.length === t.shape.length && s.every((d, i) => d === t.shape[i]))) {
      throw new Error(`eagle3: ${name} (${t.label}) must have shape ${shapes.map(fmtShape).join(' or ')}, got ${fmtShape(t.shape)}`);
    }
  };
  expect('input_ids', ids, 'i32', [[B, S]]);
  expect('attention_mask', x.attentionMask, 'i32', [[B, S]]);
  expect('loss_mask', x.lossMask, 'i32', [
    [B, S],
    [B, S, 1],
  ]);
  expect('hidden_state', x.hiddenStates, 'f32', [[B, S, 3 * c.targetHiddenSize]]);
  expect('target', x.target, 'f32', [[B, S, c.vocabSize]]);
  // hidden_state and target may be split into row parts: fc (linear.ts) and the teacher kernel take
  // split tensors. The ids and the mask are bound whole by the embedding and attention kernels.
  for (const [name, t] of [
    ['input_ids', ids],
    ['attention_mask', x.attentionMask],
  ] as const) {
    if (t.isChunked) throw new Error(`eagle3: ${name} (${t.label}) is split into ${t.parts.length} parts; it must fit one binding`);
  }
  return { batch: B, seqLen: S };
}

export async function eagle3Forward(
  gpu: Gpu,
  params: Eagle3Parameters,
  inputs: Eagle3Inputs,
  options: Eagle3ForwardOptions,
): Promise<Eagle3ForwardState> {
  const c = params.config;
  const w = params.weights;
  const { batch: B, seqLen: S } = checkEagle3Inputs(c, inputs);
  const L = options.tttLength;
  if (!Number.isInteger(L) || L < 1) throw new Error(`eagle3: tttLength must be a positive integer, got ${L}`);
  if (!Number.isFinite(options.lossScale)) throw new Error(`eagle3: lossScale must be finite, got ${options.lossScale}`);
  const R = B * S;
  const H = c.hiddenSize;
  const I = c.intermediateSize;
  const D = c.draftVocabSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const eps = c.rmsNormEps;
  const dims: Eagle3Dims = { batch: B, seqLen: S, rows: R, tttLength: L };
  // Weights and activations may be split into row parts (linear.ts); unsplit, this is one matmul.
  const linear = (x: Tensor, weight: Tensor, y: Tensor, outDim: number, inDim: number, beta = 0) =>
    linearForward(gpu, x, weight, y, { rows: R, inFeatures: inDim, outFeatures: outDim }, { beta });

  // Step k rotates row t by position t + k: one positions tensor per step, one pair of tables.
  const positions = params.rope.stepPositions(B, S, L);
  const ropeTables = params.rope.tables(S + L - 1);
  const teacher = {
    p: gpu.tensor([R, D], 'f32', 'eagle3.teacher.p'),
    pTilde: gpu.tensor([R, D], 'f32', 'eagle3.teacher.pTilde'),
    tok: gpu.tensor([R], 'i32', 'eagle3.teacher.tok'),
    positionMask: gpu.tensor([R], 'i32', 'eagle3.teacher.positionMask'),
  };
  await buildTeacher(
    gpu,
    { logits: inputs.target, t2d: params.t2d, used: params.used, lossMask: inputs.lossMask, ...teacher },
    { rows: R, vocab: c.vocabSize, draftVocab: D },
  );

  const hidden0 = gpu.tensor([R, H], 'f32', 'eagle3.hidden0');
  await linear(inputs.hiddenStates, w.fc.value, hidden0, H, 3 * c.targetHiddenSize);
  const kCache = gpu.tensor([L, B, S, c.numKvHeads, c.headDim], 'f32', 'eagle3.kCache');
  const vCache = gpu.tensor([L, B, S, c.numKvHeads, c.headDim], 'f32', 'eagle3.vCache');
  const lossOut = gpu.zeros([L + 1], 'f32', 'eagle3.losses');
  const metricsOut = gpu.zeros([4 * L], 'f32', 'eagle3.metrics');
  const state: Eagle3ForwardState = {
    dims,
    inputs,
    lossScale: options.lossScale,
    positions,
    ropeInverse: ropeTables.inverse,
    hidden0,
    kCache,
    vCache,
    teacher,
    steps: [],
    lossOut,
    metricsOut,
    captured: options.capture ? { logits: [], hidden: [] } : undefined,
  };
  const slot = R * kvDim;
  const shiftedIds = L > 1 ? gpu.tensor([B, S], 'i32', 'eagle3.ids.shifted') : undefined;

  let hIn = hidden0;
  for (let k = 0; k < L; k++) {
    let ids = inputs.inputIds;
    if (k > 0 && shiftedIds) {
      shiftRowsLeft(gpu, inputs.inputIds, shiftedIds, B, S, k);
      ids = shiftedIds;
    }
    const emb = gpu.tensor([R, H], 'f32', `eagle3.s${k}.emb`);
    await embeddingForward(gpu, ids, params.embed, emb, { n: R, vocab: c.vocabSize, hidden: H });

    const z = gpu.tensor([R, 2 * H], 'f32', `eagle3.s${k}.z`);
    const invRmsEmb = gpu.tensor([R], 'f32', `eagle3.s${k}.invRmsEmb`);
    const invRmsHidden = gpu.tensor([R], 'f32', `eagle3.s${k}.invRmsHidden`);
    await rmsnormForward(gpu, emb, w.inputNorm.value, z, invRmsEmb, { rows: R, hidden: H, eps, strideY: 2 * H });
    if (canViewAt(gpu, H)) {
      const zHidden = elementView(gpu, z, H, R * 2 * H - H, `eagle3.s${k}.z.hidden`);
      await rmsnormForward(gpu, hIn, w.hiddenNorm.value, zHidden, invRmsHidden, { rows: R, hidden: H, eps, strideY: 2 * H });
    } else {
      // The hidden half of z cannot be bound on its own (H · 4 bytes is off the binding alignment):
      // normalise into a scratch tensor and place it with a strided copy.
      const hNorm = gpu.tensor([R, H], 'f32', `eagle3.s${k}.hiddenNorm`);
      await rmsnormForward(gpu, hIn, w.hiddenNorm.value, hNorm, invRmsHidden, { rows: R, hidden: H, eps });
      await copyStrided(gpu, hNorm, z, { rows: R, width: H, dstStride: 2 * H, dstOffset: H });
      gpu.release(hNorm);
    }

    const rope = (heads: number) => ({ rows: R, nHeads: heads, headDim: c.headDim });
    const q = gpu.tensor([R, qDim], 'f32', `eagle3.s${k}.q`);
    const qRot = gpu.tensor([R, qDim], 'f32', `eagle3.s${k}.qRot`);
    await linear(z, w.q.value, q, qDim, 2 * H);
    await ropeTableForward(gpu, q, positions[k], ropeTables.forward, qRot, rope(c.numHeads));
    const kv = gpu.tensor([R, kvDim], 'f32', `eagle3.s${k}.k`);
    const kRot = gpu.tensor([R, kvDim], 'f32', `eagle3.s${k}.kRot`);
    await linear(z, w.k.value, kv, kvDim, 2 * H);
    await ropeTableForward(gpu, kv, positions[k], ropeTables.forward, kRot, rope(c.numKvHeads));
    copyElements(gpu, kRot, 0, kCache, k * slot, slot);
    await linear(z, w.v.value, kv, kvDim, 2 * H);
    copyElements(gpu, kv, 0, vCache, k * slot, slot);
    gpu.release(q, kv, kRot);

    const o = gpu.tensor([R, qDim], 'f32', `eagle3.s${k}.o`);
    const lse = gpu.tensor([B, c.numHeads, S], 'f32', `eagle3.s${k}.lse`);
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
    const h1 = gpu.clone(hIn, `eagle3.s${k}.h1`);
    await linear(o, w.o.value, h1, H, qDim, 1);

    const n = gpu.tensor([R, H], 'f32', `eagle3.s${k}.n`);
    const invRmsPost = gpu.tensor([R], 'f32', `eagle3.s${k}.invRmsPost`);
    await rmsnormForward(gpu, h1, w.postNorm.value, n, invRmsPost, { rows: R, hidden: H, eps });
    const gate = gpu.tensor([R, I], 'f32', `eagle3.s${k}.gate`);
    const up = gpu.tensor([R, I], 'f32', `eagle3.s${k}.up`);
    const act = gpu.tensor([R, I], 'f32', `eagle3.s${k}.act`);
    await linear(n, w.gate.value, gate, I, H);
    await linear(n, w.up.value, up, I, H);
    await swigluForward(gpu, gate, up, act, { rows: R, inter: I });
    const hOut = gpu.clone(h1, `eagle3.s${k}.hOut`);
    await linear(act, w.down.value, hOut, H, I, 1);

    const f = gpu.tensor([R, H], 'f32', `eagle3.s${k}.f`);
    const invRmsFinal = gpu.tensor([R], 'f32', `eagle3.s${k}.invRmsFinal`);
    await rmsnormForward(gpu, hOut, w.norm.value, f, invRmsFinal, { rows: R, hidden: H, eps });
    const logits = gpu.tensor([R, D], 'f32', `eagle3.s${k}.logits`);
    await linear(f, w.lmHead.value, logits, D, H);
    if (state.captured) {
      state.captured.logits.push(gpu.readLater(logits) as Promise<Float32Array>);
      state.captured.hidden.push(gpu.readLater(hOut) as Promise<Float32Array>);
    }

    // Metrics read the logits, so they go before the in-place loss gradient overwrites them.
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
        grad: 'in-place',
        gradScale: options.lossScale * PLOSS_DECAY ** k,
        slot: k,
        total: { slot: L, weight: PLOSS_DECAY ** k, accumulate: k > 0 },
      },
    );
    // The loss gradient of this step is final now: fold it through lm_head at once, so the step
    // keeps dF [R, H] instead of the [R, D] logits (D is 32000 for Llama-3 drafts).
    const dF = gpu.tensor([R, H], 'f32', `eagle3.s${k}.dF`);
    await lmHeadBackward(gpu, params, logits, f, dF, R);
    gpu.release(logits, f);
    state.steps.push({ emb, invRmsEmb, z, invRmsHidden, hIn, qRot, o, lse, h1, invRmsPost, n, gate, up, act, hOut, invRmsFinal, dF });
    hIn = hOut;
  }
  if (shiftedIds) gpu.release(shiftedIds);
  return state;
}

/** Release every tensor the forward allocated (inputs excluded). */
export function releaseForwardState(gpu: Gpu, s: Eagle3ForwardState): void {
  gpu.release(
    ...s.positions,
    s.hidden0,
    s.kCache,
    s.vCache,
    s.teacher.p,
    s.teacher.pTilde,
    s.teacher.tok,
    s.teacher.positionMask,
    s.lossOut,
    s.metricsOut,
  );
  for (const a of s.steps) {
    // hIn is hidden0 or the previous step's hOut, both released elsewhere.
    gpu.release(
      a.emb,
      a.invRmsEmb,
      a.z,
      a.invRmsHidden,
      a.qRot,
      a.o,
      a.lse,
      a.h1,
      a.invRmsPost,
      a.n,
      a.gate,
      a.up,
      a.act,
      a.hOut,
      a.invRmsFinal,
      a.dF,
    );
  }
  s.steps.length = 0;
}
