/**
 * Float64 reference of one EAGLE3 training micro-step (docs/eagle3.md §3–§6): the draft forward
 * over L test-time-training (TTT) steps with the cache_hidden attention, the teacher, the per-step
 * losses and metrics, and the backward written out by hand through the whole unroll.
 *
 * Forward, step k = 0..L−1 (rows r = b·S + t):
 *   h_in⁰ = fc(Haux);  h_inᵏ = h_outᵏ⁻¹ (the raw previous output, not normalised)
 *   e = Embed(idsᵏ)            idsᵏ[b, t] = ids[b, t + k] (0 past the end of the row)
 *   z = [input_layernorm(e) | hidden_norm(h_in)]            (width 2H, embedding half first)
 *   q, k, v = z·Wqᵀ, z·Wkᵀ, z·Wvᵀ;  RoPE on q and k at position t + k
 *   o = TTT attention over the caches K₀..Kₖ, V₀..Vₖ;       h1 = h_in + o·Woᵀ
 *   n = post_attention_layernorm(h1);  h_out = h1 + down(silu(gate(n)) ⊙ up(n))
 *   logitsᵏ = lm_head(norm(h_out))
 *   loss = Σ_k 0.8ᵏ · ploss_k
 *
 * Backward walks the steps in reverse. Two things make it more than L independent layer backwards:
 *   - the recurrent hidden: ∂/∂h_outᵏ also receives ∂/∂h_inᵏ⁺¹ from the step after it;
 *   - the caches: Kⱼ, Vⱼ (made at step j) are read by every step k ≥ j, so their gradients are
 *     summed over those steps before flowing back into step j's projections. Walking k downwards,
 *     the sum for slot j is complete exactly when step j is reached.
 * The frozen embedding gets no gradient. Built from the existing references (matmul, rmsnorm, rope,
 * swiglu, attention, loss) so each piece is the one already checked on its own.
 */

import { tttAttentionBackwardRef, tttAttentionRef, type TttDims } from './attention.ts';
import { embeddingForwardRef } from './embedding.ts';
import { eagle3StepRef, shiftRowsRef, softCrossEntropyRef, teacherRef } from './loss.ts';
import { matmulRef } from './matmul.ts';
import { rmsnormBackwardRef, rmsnormForwardRef } from './rmsnorm.ts';
import { ropeBackwardRef, ropeForwardRef } from './rope.ts';
import { swigluBackwardRef, swigluForwardRef } from './swiglu.ts';

/**
 * The draft's sizes as this oracle reads them (SpecForge's `LlamaForCausalLMEagle3` config).
 * Declared here, like the parameter table below, so the oracle depends on nothing it checks;
 * SpecLab's parsed `Eagle3Config` fits it structurally.
 */
export interface Eagle3Config {
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  readonly draftVocabSize: number;
  readonly targetHiddenSize: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
}

/** The frozen target embedding's state-dict name. */
const EMBED_NAME = 'embed_tokens.weight';

/** SpecForge's per-step loss weight: total = Σ_k 0.8^k · ploss_k. */
const PLOSS_DECAY = 0.8;

/** SpecForge's trainable draft parameters, state-dict order, PyTorch [out, in] shapes. */
function eagle3ParameterShapes(c: Eagle3Config): [string, number[]][] {
  const { hiddenSize: h, intermediateSize: i, targetHiddenSize: ht } = c;
  const q = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  const attn = 'midlayer.self_attn.';
  const mlp = 'midlayer.mlp.';
  return [
    ['fc.weight', [h, 3 * ht]],
    ['midlayer.hidden_norm.weight', [h]],
    ['midlayer.input_layernorm.weight', [h]],
    [`${attn}q_proj.weight`, [q, 2 * h]],
    [`${attn}k_proj.weight`, [kv, 2 * h]],
    [`${attn}v_proj.weight`, [kv, 2 * h]],
    [`${attn}o_proj.weight`, [h, q]],
    ['midlayer.post_attention_layernorm.weight', [h]],
    [`${mlp}gate_proj.weight`, [i, h]],
    [`${mlp}up_proj.weight`, [i, h]],
    [`${mlp}down_proj.weight`, [h, i]],
    ['norm.weight', [h]],
    ['lm_head.weight', [c.draftVocabSize, h]],
  ];
}

export interface Eagle3RefInputs {
  batch: number;
  seqLen: number;
  /** TTT length L. */
  tttLength: number;
  /** [B, S], already shifted left once (row t holds token x[t+1]). */
  inputIds: ArrayLike<number>;
  /** [B, S], 1 = real token. */
  attentionMask: ArrayLike<number>;
  /** [B, S] (SpecForge's [B, S, 1] flattened), unshifted. */
  lossMask: ArrayLike<number>;
  /** Aux hidden states [B, S, 3·Ht]. */
  hiddenStates: ArrayLike<number>;
  /** Full-vocab target logits [B, S, V], already shifted left once. */
  target: ArrayLike<number>;
  /** [V] 0/1. */
  t2d: ArrayLike<number>;
  /** [D] offsets: target id = draft id + d2t[draft id]. */
  d2t: ArrayLike<number>;
}

/** Parameter values by SpecForge name, including `embed_tokens.weight` (frozen). */
export type Eagle3RefParams = Readonly<Record<string, ArrayLike<number>>>;

export interface Eagle3RefStep {
  logits: Float64Array;
  hidden: Float64Array;
  ploss: number;
  acc: number;
  acceptanceRate: number;
  correct: number;
  denom: number;
  acceptSum: number;
  acceptCount: number;
}

export interface Eagle3RefResult {
  steps: Eagle3RefStep[];
  totalLoss: number;
  /** Gradient of totalLoss · lossScale for every trainable parameter (no embedding). */
  grads: Record<string, Float64Array>;
}

/** Everything one step's forward produces that its backward needs. */
interface StepActivations {
  emb: Float64Array;
  hIn: Float64Array;
  z: Float64Array;
  q: Float64Array;
  kRot: Float64Array;
  v: Float64Array;
  qRot: Float64Array;
  attn: Float64Array;
  h1: Float64Array;
  n: Float64Array;
  gate: Float64Array;
  up: Float64Array;
  act: Float64Array;
  hOut: Float64Array;
  f: Float64Array;
  logits: Float64Array;
}

/** y = x · Wᵀ for a PyTorch Linear weight W [out, in]. */
function linear(x: ArrayLike<number>, w: ArrayLike<number>, rows: number, outDim: number, inDim: number): Float64Array {
  return matmulRef(x, w, undefined, { M: rows, N: outDim, K: inDim, transB: true });
}

/** dx = dy · W (the input gradient of linear). */
function linearDx(dy: ArrayLike<number>, w: ArrayLike<number>, rows: number, outDim: number, inDim: number): Float64Array {
  return matmulRef(dy, w, undefined, { M: rows, N: inDim, K: outDim });
}

/** dW += dyᵀ · x (the weight gradient of linear), in place. */
function accumulateDw(dw: Float64Array, dy: ArrayLike<number>, x: ArrayLike<number>, rows: number, outDim: number, inDim: number): void {
  const add = matmulRef(dy, x, undefined, { M: outDim, N: inDim, K: rows, transA: true });
  for (let i = 0; i < dw.length; i++) dw[i] += add[i];
}

function addInto(dst: Float64Array, src: ArrayLike<number>): void {
  for (let i = 0; i < dst.length; i++) dst[i] += src[i];
}

/** Row-wise concat [rows, a] | [rows, b] → [rows, a + b]. */
function concatRows(x: ArrayLike<number>, a: number, y: ArrayLike<number>, b: number, rows: number): Float64Array {
  const out = new Float64Array(rows * (a + b));
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < a; j++) out[r * (a + b) + j] = x[r * a + j];
    for (let j = 0; j < b; j++) out[r * (a + b) + a + j] = y[r * b + j];
  }
  return out;
}

/** Columns [from, from + width) of [rows, total]. */
function sliceCols(x: ArrayLike<number>, rows: number, total: number, from: number, width: number): Float64Array {
  const out = new Float64Array(rows * width);
  for (let r = 0; r < rows; r++) for (let j = 0; j < width; j++) out[r * width + j] = x[r * total + from + j];
  return out;
}

function checkInputs(c: Eagle3Config, x: Eagle3RefInputs, params: Eagle3RefParams): void {
  const { batch: B, seqLen: S } = x;
  const expect = (name: string, got: number, want: number) => {
    if (got !== want) throw new Error(`eagle3 reference: ${name} has ${got} values, need ${want}`);
  };
  expect('inputIds', x.inputIds.length, B * S);
  expect('attentionMask', x.attentionMask.length, B * S);
  expect('lossMask', x.lossMask.length, B * S);
  expect('hiddenStates', x.hiddenStates.length, B * S * 3 * c.targetHiddenSize);
  expect('target', x.target.length, B * S * c.vocabSize);
  expect('t2d', x.t2d.length, c.vocabSize);
  expect('d2t', x.d2t.length, c.draftVocabSize);
  if (!Number.isInteger(x.tttLength) || x.tttLength < 1)
    throw new Error(`eagle3 reference: tttLength must be a positive integer, got ${x.tttLength}`);
  for (const [name, shape] of [[EMBED_NAME, [c.vocabSize, c.hiddenSize]] as [string, number[]], ...eagle3ParameterShapes(c)]) {
    const p = params[name];
    if (!p) throw new Error(`eagle3 reference: missing parameter ${name}`);
    expect(
      name,
      p.length,
      shape.reduce((a, b) => a * b, 1),
    );
  }
}

/** idsᵏ: each row shifted left by k within its sequence, zero-filled (SpecForge's `padding`). */
function shiftIds(ids: ArrayLike<number>, rows: number, S: number, k: number): Float64Array {
  return shiftRowsRef(ids, rows, 1, S, k, 0);
}

/**
 * One micro-step: forward, losses, metrics and (unless `withGrad` is false) the gradients of
 * `lossScale · total_loss`.
 */
export function eagle3StepReference(
  c: Eagle3Config,
  params: Eagle3RefParams,
  x: Eagle3RefInputs,
  options: { lossScale?: number; withGrad?: boolean } = {},
): Eagle3RefResult {
  checkInputs(c, x, params);
  const { batch: B, seqLen: S, tttLength: L } = x;
  const rows = B * S;
  const H = c.hiddenSize;
  const I = c.intermediateSize;
  const D = c.draftVocabSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const Ht3 = 3 * c.targetHiddenSize;
  const eps = c.rmsNormEps;
  const P = (name: string) => params[name];
  const positions = Float64Array.from({ length: rows }, (_, r) => r % S);
  const ropeQ = (k: number) => ({ rows, nHeads: c.numHeads, headDim: c.headDim, theta: c.ropeTheta, posOffset: k });
  const ropeK = (k: number) => ({ rows, nHeads: c.numKvHeads, headDim: c.headDim, theta: c.ropeTheta, posOffset: k });
  const attnDims = (k: number): TttDims => ({ batch: B, seq: S, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim, step: k });
  const norm = (v: ArrayLike<number>, w: string) => rmsnormForwardRef(v, P(w), { rows, hidden: H, eps }).y;

  // Teacher (docs/eagle3.md §5), built once from step 0; later steps read it shifted.
  const used = Array.from(x.d2t, (offset, i) => i + offset); // SpecForge: d2t + arange(D)
  const teacher = teacherRef(x.target, x.t2d, used, x.lossMask, rows, c.vocabSize);

  // ---- forward ----
  const acts: StepActivations[] = [];
  const kCache: Float64Array[] = [];
  const vCache: Float64Array[] = [];
  const steps: Eagle3RefStep[] = [];
  let hIn = linear(x.hiddenStates, P('fc.weight'), rows, H, Ht3);
  let totalLoss = 0;
  for (let k = 0; k < L; k++) {
    const emb = embeddingForwardRef(P(EMBED_NAME), shiftIds(x.inputIds, rows, S, k), { vocab: c.vocabSize, hidden: H });
    const z = concatRows(norm(emb, 'midlayer.input_layernorm.weight'), H, norm(hIn, 'midlayer.hidden_norm.weight'), H, rows);
    const q = linear(z, P('midlayer.self_attn.q_proj.weight'), rows, qDim, 2 * H);
    const kk = linear(z, P('midlayer.self_attn.k_proj.weight'), rows, kvDim, 2 * H);
    const v = linear(z, P('midlayer.self_attn.v_proj.weight'), rows, kvDim, 2 * H);
    const qRot = ropeForwardRef(q, positions, ropeQ(k));
    const kRot = ropeForwardRef(kk, positions, ropeK(k));
    kCache.push(kRot);
    vCache.push(v);
    const attn = tttAttentionRef(qRot, kCache, vCache, x.attentionMask, attnDims(k)).o;
    const h1 = linear(attn, P('midlayer.self_attn.o_proj.weight'), rows, H, qDim);
    addInto(h1, hIn);
    const n = norm(h1, 'midlayer.post_attention_layernorm.weight');
    const gate = linear(n, P('midlayer.mlp.gate_proj.weight'), rows, I, H);
    const up = linear(n, P('midlayer.mlp.up_proj.weight'), rows, I, H);
    const act = swigluForwardRef(gate, up);
    const hOut = linear(act, P('midlayer.mlp.down_proj.weight'), rows, H, I);
    addInto(hOut, h1);
    const f = norm(hOut, 'norm.weight');
    const logits = linear(f, P('lm_head.weight'), rows, D, H);
    acts.push({ emb, hIn, z, q, kRot, v, qRot, attn, h1, n, gate, up, act, hOut, f, logits });
    const s = eagle3StepRef(teacher, logits, x.lossMask, used, rows, S, k);
    steps.push({
      logits,
      hidden: hOut,
      ploss: s.ploss,
      acc: s.acc,
      acceptanceRate: s.acceptanceRate,
      correct: s.correct,
      denom: s.denom,
      acceptSum: s.acceptSum,
      acceptCount: s.acceptCount,
    });
    totalLoss += PLOSS_DECAY ** k * s.ploss;
    hIn = hOut;
  }
  const grads: Record<string, Float64Array> = {};
  for (const [name, shape] of eagle3ParameterShapes(c)) grads[name] = new Float64Array(shape.reduce((a, b) => a * b, 1));
  if (options.withGrad === false) return { steps, totalLoss, grads };

  // ---- backward, steps in reverse ----
  const lossScale = options.lossScale ?? 1;
  const rmsBack = (v: ArrayLike<number>, w: string, dy: ArrayLike<number>) => {
    const r = rmsnormBackwardRef(v, P(w), dy, { rows, hidden: H, eps });
    addInto(grads[w], r.dw);
    return r.dx;
  };
  const dKCache = Array.from({ length: L }, () => new Float64Array(rows * kvDim));
  const dVCache = Array.from({ length: L }, () => new Float64Array(rows * kvDim));
  /** ∂loss/∂h_inᵏ⁺¹ = the part of ∂loss/∂h_outᵏ that comes through the later steps. */
  let dFromNext: Float64Array<ArrayBufferLike> = new Float64Array(rows * H);
  for (let k = L - 1; k >= 0; k--) {
    const a = acts[k];
    // Loss of this step: d(0.8ᵏ · ploss_k)/dlogits, with the teacher and position mask shifted by k.
    const pK = shiftRowsRef(teacher.p, rows, D, S, k, 1 / D);
    const mK = shiftRowsRef(teacher.positionMask, rows, 1, S, k, 0);
    const dLogits = softCrossEntropyRef(a.logits, pK, mK, rows, D, rows, lossScale * PLOSS_DECAY ** k).grad;
    accumulateDw(grads['lm_head.weight'], dLogits, a.f, rows, D, H);
    const dHOut = rmsBack(a.hOut, 'norm.weight', linearDx(dLogits, P('lm_head.weight'), rows, D, H));
    addInto(dHOut, dFromNext);
    // MLP: h_out = h1 + down(silu(gate(n)) ⊙ up(n)).
    accumulateDw(grads['midlayer.mlp.down_proj.weight'], dHOut, a.act, rows, H, I);
    const { dgate, dup } = swigluBackwardRef(a.gate, a.up, linearDx(dHOut, P('midlayer.mlp.down_proj.weight'), rows, H, I));
    accumulateDw(grads['midlayer.mlp.gate_proj.weight'], dgate, a.n, rows, I, H);
    accumulateDw(grads['midlayer.mlp.up_proj.weight'], dup, a.n, rows, I, H);
    const dn = linearDx(dgate, P('midlayer.mlp.gate_proj.weight'), rows, I, H);
    addInto(dn, linearDx(dup, P('midlayer.mlp.up_proj.weight'), rows, I, H));
    const dH1 = rmsBack(a.h1, 'midlayer.post_attention_layernorm.weight', dn);
    addInto(dH1, dHOut);
    // Attention: h1 = h_in + o_proj(attn).
    accumulateDw(grads['midlayer.self_attn.o_proj.weight'], dH1, a.attn, rows, H, qDim);
    const dAttn = linearDx(dH1, P('midlayer.self_attn.o_proj.weight'), rows, H, qDim);
    const ag = tttAttentionBackwardRef(a.qRot, kCache, vCache, x.attentionMask, dAttn, attnDims(k));
    for (let j = 0; j <= k; j++) {
      addInto(dKCache[j], ag.dk[j]);
      addInto(dVCache[j], ag.dv[j]);
    }
    // Every step ≥ k has now added its share to cache slot k: its gradient is complete.
    const dq = ropeBackwardRef(ag.dq, positions, ropeQ(k));
    const dk = ropeBackwardRef(dKCache[k], positions, ropeK(k));
    const dv = dVCache[k];
    accumulateDw(grads['midlayer.self_attn.q_proj.weight'], dq, a.z, rows, qDim, 2 * H);
    accumulateDw(grads['midlayer.self_attn.k_proj.weight'], dk, a.z, rows, kvDim, 2 * H);
    accumulateDw(grads['midlayer.self_attn.v_proj.weight'], dv, a.z, rows, kvDim, 2 * H);
    const dz = linearDx(dq, P('midlayer.self_attn.q_proj.weight'), rows, qDim, 2 * H);
    addInto(dz, linearDx(dk, P('midlayer.self_attn.k_proj.weight'), rows, kvDim, 2 * H));
    addInto(dz, linearDx(dv, P('midlayer.self_attn.v_proj.weight'), rows, kvDim, 2 * H));
    // z = [input_layernorm(emb) | hidden_norm(h_in)]; the embedding is frozen, so only the weight
    // gradient of input_layernorm is kept.
    rmsBack(a.emb, 'midlayer.input_layernorm.weight', sliceCols(dz, rows, 2 * H, 0, H));
    const dHIn = rmsBack(a.hIn, 'midlayer.hidden_norm.weight', sliceCols(dz, rows, 2 * H, H, H));
    addInto(dHIn, dH1);
    if (k > 0) {
      dFromNext = dHIn;
    } else {
      accumulateDw(grads['fc.weight'], dHIn, x.hiddenStates, rows, H, Ht3);
    }
  }
  return { steps, totalLoss, grads };
}
