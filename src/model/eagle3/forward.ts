/**
 * EAGLE3 draft forward over the TTT unroll on the GPU (docs/eagle3.md §3–§6; the float64 twin is
 * src/reference/eagle3.ts), in two modes that issue the same kernels in the same order on the same
 * operands, so their losses and metric sums are the same bits (test/training/held-out-eval.test.ts,
 * test/model/eagle3-split.test.ts):
 *   - training, `eagle3Forward`: every activation the backward needs is kept in `Eagle3ForwardState`
 *     (forward-state.ts); nothing is read back except what the caller asks to capture;
 *   - gradient-free, `eagle3EvalForward`: what SpecForge's evaluator runs under torch.no_grad
 *     (specforge/eval/evaluator.py, forward_fn = strategy.forward_loss). The soft cross-entropy runs
 *     with grad 'none', there is no lm_head backward (no grad buffer is touched), and each step's
 *     activations are released as soon as the next kernel has read them, so memory is one step's
 *     activations plus the K/V caches.
 *
 * Per step k (rows r = b·S + t, layouts row-major):
 *   idsᵏ            ids shifted left by k per sequence (copies + clears)
 *   emb  [R, H]     embedding of idsᵏ (frozen table)
 *   z    [R, 2H]    [input_layernorm(emb) | hidden_norm(h_in)] — both RMSNorms write straight into
 *                   their half of z with a row stride of 2H, so there is no concat pass; they run as
 *                   one dispatch where the embedding table is one binding (rmsnormPairForward, which
 *                   gathers emb itself), else as two (when H · 4 bytes is then off the binding
 *                   alignment, the hidden half goes through a strided copy)
 *   qRot [R, nH·hd] RoPE(z·Wqᵀ) at t + k (cos/sin tables, rope.ts);  RoPE(z·Wkᵀ) and z·Wvᵀ go
 *                   into cache slot k
 *   o, lse          TTT attention over cache slots 0..k
 *   h1   [R, H]     h_in + o·Woᵀ (matmul with beta = 1 onto a copy of h_in)
 *   n, gate, up, act, h_out = h1 + act·Wdᵀ, f = norm(h_out), logits = f·W_lmᵀ
 * The head (final norm, logits, metrics, loss; step-head.ts) runs here in the gradient-free mode. In
 * training it runs in the backward, step by step from the last (backward.ts): the loss gradient is
 * written in place into the logits buffer (SpecForge's fused-kernel behaviour), scaled by
 * lossScale · 0.8ᵏ, after the metrics read the logits, and goes straight through lm_head
 * (lm-head.ts `lmHeadBackward`); so no step keeps a vocabulary-sized tensor, and the gradient at
 * norm(h_out) lives for one step, not L. Where the heads are small (at most 4 MiB of logits for all
 * steps), training runs them all at once instead, before the first body (step-heads-batched.ts).
 * The losses and metric sums are the same bits in both modes: each step's come from the same kernels
 * on the same operands, and the weighted total is summed in step order in both.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { elementView } from '../../gpu/tensor-views.ts';
import { rmsnormForward } from '../../kernels/rmsnorm.ts';
import { encodeStepBody, releaseStepBody, type StepContext } from './step-body.ts';
import { fcChunkRows, fcForward } from './fc-chunks.ts';
import { mlpChunkRows } from './mlp-chunks.ts';
import { encodeStepHead, headChunkRows } from './step-head.ts';
import { batchedHeadsFit } from './step-heads-batched.ts';
import { TeacherSource } from './teacher-source.ts';
import { readUnrollResults, releaseUnrollTensors, unrollResults, type Eagle3Dims, type Eagle3ForwardState } from './forward-state.ts';
import { checkEagle3Inputs, type Eagle3Inputs } from './inputs.ts';
import type { Eagle3Parameters } from './parameters.ts';

export interface Eagle3ForwardOptions {
  tttLength: number;
  /** Multiplies every gradient (1 / accumulation steps); the reported losses are unscaled. */
  lossScale: number;
  /** Read back each step's logits and hidden output (tests, debugging). */
  capture?: boolean;
  /**
   * Activation recompute: keep only each step's h_in and h_out, and let the backward
   * encode each step's body again (step-body.ts). Same bits, one step's activations at a time.
   */
  recompute?: boolean;
  /** Rows per chunk of each step's head (step-head.ts); default `headChunkRows` for the device's bindings. */
  headChunkRows?: number;
  /** Rows per chunk of each step's MLP (mlp-chunks.ts); default `mlpChunkRows` for the device's bindings. */
  mlpChunkRows?: number;
  /** Rows per chunk of the fc over f16 features (fc-chunks.ts); default `fcChunkRows` for the device's bindings. */
  fcChunkRows?: number;
  /** false: one head per step even where `batchedHeadsFit` would batch them (step-heads-batched.ts). Default true. */
  batchHeads?: boolean;
}

export interface Eagle3EvalOutput {
  /** [L + 1]: ploss_0..ploss_{L−1}, total = Σ 0.8ᵏ ploss_k. */
  losses: Promise<Float32Array>;
  /** [4·L]: per step correct, denom, acceptSum, acceptCount (src/kernels/metrics.ts). */
  metricSums: Promise<Float32Array>;
  /** B·S, as Eagle3TrainOutput.lossDenominator. */
  lossDenominator: number;
}

/**
 * Read-only taps into the gradient-free forward (the lab's draft insight, src/training/evaluation/draft-insight.ts).
 * Each is called while its tensors are live and may only encode work that reads them (and writes its
 * own tensors); the forward's own kernels, operands and order are the same with or without taps.
 */
export interface Eagle3EvalTaps {
  /** After the teacher is built: tok [R] (argmax target ids) and positionMask [R]. */
  teacher?(t: { tok: Tensor; positionMask: Tensor }): Promise<void>;
  /** After step k's attention: its RoPE'd queries, the K cache (slots 0..k written), the mask and its lse. */
  attention?(k: number, t: { q: Tensor; kCache: Tensor; mask: Tensor; lse: Tensor }): Promise<void>;
  /**
   * After each chunk of step k's logits is computed (rows [firstRow, firstRow + n) of [R, D], as
   * [n, D]; one chunk of all R rows unless the head is chunked), before the metric and loss kernels read it.
   */
  logits?(k: number, logits: Tensor, firstRow: number): Promise<void>;
}

/** Training: the forward `eagle3Backward` continues from. Every activation it reads is kept in the state. */
export async function eagle3Forward(
  gpu: Gpu,
  params: Eagle3Parameters,
  inputs: Eagle3Inputs,
  options: Eagle3ForwardOptions,
): Promise<Eagle3ForwardState> {
  return encodeUnroll(gpu, params, inputs, options.tttLength, {
    gradient: { lossScale: options.lossScale, capture: options.capture ?? false, recompute: options.recompute ?? false },
    taps: {},
    headChunkRows: options.headChunkRows,
    mlpChunkRows: options.mlpChunkRows,
    fcChunkRows: options.fcChunkRows,
    batchHeads: options.batchHeads,
  });
}

/**
 * The gradient-free mode: the forward of one batch with its loss and metric kernels and no
 * gradient (SpecForge's evaluator under torch.no_grad). The results come back as pending reads;
 * everything the forward allocated is released before this returns (reads are queued first).
 */
export async function eagle3EvalForward(
  gpu: Gpu,
  params: Eagle3Parameters,
  inputs: Eagle3Inputs,
  tttLength: number,
  taps: Eagle3EvalTaps = {},
  chunks: { headChunkRows?: number; mlpChunkRows?: number; fcChunkRows?: number } = {},
): Promise<Eagle3EvalOutput> {
  const s = await encodeUnroll(gpu, params, inputs, tttLength, { gradient: undefined, taps, ...chunks });
  const out: Eagle3EvalOutput = {
    ...readUnrollResults(gpu, s),
    lossDenominator: s.dims.rows,
  };
  // Reads are queued before the release, and any reuse of these buffers is ordered after them.
  releaseUnrollTensors(gpu, s);
  return out;
}

/** What the unroll is encoded for: training (with the loss gradient) or the gradient-free mode. */
interface UnrollMode {
  /** Training: the loss gradient's scale, and whether to read back each step's logits and hidden output. */
  gradient: { lossScale: number; capture: boolean; recompute: boolean } | undefined;
  taps: Eagle3EvalTaps;
  headChunkRows?: number;
  mlpChunkRows?: number;
  fcChunkRows?: number;
  batchHeads?: boolean;
}

/**
 * Both modes: the same kernels, in the same order, on the same operands. Without `gradient`, the
 * state's `steps` stay empty: each activation is released once the last kernel reading it is
 * encoded (hidden0 and every step's output included; the four RMSNorms of a step share one 1/rms
 * buffer, which nothing reads back), and the loss kernel writes no gradient. On a throw in the
 * gradient-free mode, the unroll's tensors are released before the error propagates.
 */
async function encodeUnroll(
  gpu: Gpu,
  params: Eagle3Parameters,
  inputs: Eagle3Inputs,
  L: number,
  mode: UnrollMode,
): Promise<Eagle3ForwardState> {
  const c = params.config;
  const w = params.weights;
  const { batch: B, seqLen: S } = checkEagle3Inputs(c, inputs);
  if (!Number.isInteger(L) || L < 1) throw new Error(`eagle3: tttLength must be a positive integer, got ${L}`);
  const train = mode.gradient;
  if (train && !Number.isFinite(train.lossScale)) throw new Error(`eagle3: lossScale must be finite, got ${train.lossScale}`);
  const taps = mode.taps;
  const R = B * S;
  const H = c.hiddenSize;
  const D = c.draftVocabSize;
  const eps = c.rmsNormEps;
  const dims: Eagle3Dims = { batch: B, seqLen: S, rows: R, tttLength: L };
  const tag = train ? 'eagle3' : 'eagle3.eval';
  // Gradient-free, a tensor is released as soon as its last reader is encoded; training keeps it.
  const done = (...tensors: Tensor[]) => {
    if (!train) gpu.release(...tensors);
  };

  // Step k rotates row t by position t + k: one positions tensor per step, one pair of tables.
  const positions = params.rope.stepPositions(B, S, L);
  const ropeTables = params.rope.tables(S + L - 1);
  const maxBinding = gpu.maxBindingBytes;
  const chunkRows = mode.headChunkRows ?? headChunkRows(R, D, maxBinding);
  const mlpRows = mode.mlpChunkRows ?? mlpChunkRows(R, c.intermediateSize, maxBinding);
  const fcRows = mode.fcChunkRows ?? fcChunkRows(R, 3 * c.targetHiddenSize, maxBinding);
  for (const [name, value] of [
    ['headChunkRows', chunkRows],
    ['mlpChunkRows', mlpRows],
    ['fcChunkRows', fcRows],
  ] as const)
    if (!Number.isInteger(value) || value < 1) throw new Error(`eagle3: ${name} must be a positive integer, got ${value}`);
  const tok = gpu.tensor([R], 'i32', `${tag}.teacher.tok`);
  const positionMask = gpu.tensor([R], 'i32', `${tag}.teacher.positionMask`);
  const teacher = new TeacherSource(gpu, params, inputs, R, tok, positionMask, tag);
  const state: Eagle3ForwardState = {
    dims,
    inputs,
    lossScale: train ? train.lossScale : 0,
    positions,
    ropeForward: ropeTables.forward,
    ropeInverse: ropeTables.inverse,
    teacher,
    hidden0: gpu.tensor([R, H], 'f32', `${tag}.hidden0`),
    kCache: gpu.tensor([L, B, S, c.numKvHeads, c.headDim], 'f32', `${tag}.kCache`),
    vCache: gpu.tensor([L, B, S, c.numKvHeads, c.headDim], 'f32', `${tag}.vCache`),
    steps: [],
    mlpChunkRows: mlpRows,
    headChunkRows: chunkRows,
    fcChunkRows: fcRows,
    batchedHeads: train !== undefined && mode.batchHeads !== false && chunkRows >= R && batchedHeadsFit(R, L, D, H, maxBinding),
    hOutStack: undefined,
    ...unrollResults(gpu, L, tag),
    captured: train?.capture ? { logits: [], hidden: [] } : undefined,
  };
  const { kCache, vCache, lossOut, metricsOut } = state;
  // Batched heads norm every step's h_out in one dispatch: the steps write theirs into one stack.
  if (state.batchedHeads) state.hOutStack = gpu.tensor([L * R, H], 'f32', `${tag}.hOuts`);
  // The hidden the next step reads: hidden0, then each step's hOut.
  let hidden = state.hidden0;
  try {
    await teacher.prepare(chunkRows < R);
    const fc = { rows: R, inFeatures: 3 * c.targetHiddenSize, outFeatures: H, chunkRows: fcRows };
    await fcForward(gpu, inputs.hiddenStates, w.fc.value, state.hidden0, fc, tag);

    const stepContext: StepContext = {
      gpu,
      params,
      inputs,
      dims,
      positions,
      ropeForward: ropeTables.forward,
      kCache,
      vCache,
      mlpChunkRows: mlpRows,
      tag,
    };
    for (let k = 0; k < L; k++) {
      const s = `${tag}.s${k}`;
      const hIn = hidden;
      const stack = state.hOutStack;
      const { body, hOut: out } = await encodeStepBody(stepContext, k, hIn, {
        keep: train !== undefined,
        recompute: false,
        hOutInto: stack && elementView(gpu, stack, k * R * H, R * H, `${s}.hOut`, [R, H]),
        afterAttention: taps.attention ? (t) => taps.attention!(k, t) : undefined,
      });
      const hOut = out!;
      hidden = hOut;
      if (train) {
        // Training runs each step's head in the backward (backward.ts), so its dF lives for one step
        // (every step's dF through the backward where the heads run at once, step-heads-batched.ts).
        if (train.recompute) releaseStepBody(gpu, body);
        state.steps.push({ hIn, hOut, body: train.recompute ? undefined : body });
        state.captured?.hidden.push(gpu.readLater(hOut) as Promise<Float32Array>);
        continue;
      }
      // Gradient-free: the final norm and the head here; the body's four norms shared one 1/rms buffer.
      const f = gpu.tensor([R, H], 'f32', `${s}.f`);
      await rmsnormForward(gpu, hOut, w.norm.value, f, body.invRmsEmb, { rows: R, hidden: H, eps });
      await encodeStepHead(
        {
          gpu,
          params,
          inputs,
          dims,
          teacher,
          chunkRows,
          lossOut,
          metricsOut,
          lossScale: undefined,
          onLogits: taps.logits ? (logits, firstRow) => taps.logits!(k, logits, firstRow) : undefined,
        },
        k,
        f,
        undefined,
      );
      // The whole teacher's tok and position mask are complete after step 0's head (chunked: its windows cover every row).
      if (k === 0) await taps.teacher?.({ tok: teacher.tok, positionMask: teacher.positionMask });
      gpu.release(f, body.invRmsEmb);
    }
  } catch (err) {
    // The gradient-free mode owns the unroll's tensors (a training state is the caller's to release).
    if (!train) {
      gpu.release(hidden);
      releaseUnrollTensors(gpu, state);
    }
    throw err;
  }
  // Gradient-free, the last step's output is read by nothing more (its final norm is encoded).
  done(hidden);
  return state;
}
