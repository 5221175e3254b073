/* eslint-disable max-lines -- the forward keeps exactly the activations its hand-written backward reads; neither half checks alone */
/**
 * Causal-LM training of a target model (Llama architecture) on the GPU: forward with every
 * activation the backward needs kept, hard cross-entropy on next tokens, a hand-written backward
 * through the whole model, and AdamW through `AdamWBackend` (f32 masters under their HF names).
 *
 * Forward (rows r = b·S + t, row-major; positions t in every row, no padding):
 *   h₀ = embed[ids]
 *   per layer:  x₁ = RMSNorm(h) → q, k, v = x₁·Wᵀ → RoPE(q), RoPE(k) → causal GQA attention → o
 *               h₁ = h + o·W_oᵀ;  x₂ = RMSNorm(h₁) → act = silu(x₂·W_gᵀ) ⊙ x₂·W_uᵀ
 *               h' = h₁ + act·W_dᵀ
 *   f = RMSNorm(h_N);  logits = f·W_lmᵀ;  loss = mean CE(logits[r], labels[r]) over labels ≥ 0
 * The loss gradient goes straight through lm_head (dW_lm += dlogitsᵀ·f, df = dlogits·W_lm), so the
 * vocabulary-sized logits are freed before the layers are walked back. RoPE's backward is the
 * rotation by −angle (inverse table). With tied embeddings the lm_head gradient and the embedding
 * scatter-add both accumulate into the one `model.embed_tokens.weight` gradient.
 *
 * Labels are the caller's: for next-token prediction labels[b, t] = ids[b, t + 1], and −1 where
 * there is no next token (or it must not be learned). Gradients accumulate (matmul beta = 1) until
 * `step()` runs the optimizer, so several micro-batches can form one step with `lossScale`.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { attentionBackward, attentionForward } from '../../kernels/attention.ts';
import { embeddingBackward, embeddingForward } from '../../kernels/embedding.ts';
import { hardCrossEntropy } from '../../kernels/loss.ts';
import { matmul } from '../../kernels/matmul.ts';
import { rmsnormBackward, rmsnormForward } from '../../kernels/rmsnorm.ts';
import { buildRopeTable, inverseRopeTable, ropeTableForward } from '../../kernels/rope-table.ts';
import { swigluBackward, swigluForward } from '../../kernels/swiglu.ts';
import type { LayerWeights, TargetWeights } from '../../formats/hf-checkpoint.ts';
import type { TargetModelConfig } from '../../config/hf-config.ts';
import type { Rng } from '../../util/random.ts';
import type { AdamWBackend, Parameter, StepReport } from '../../optim/adamw-backend.ts';

/** Trainable handles of one decoder layer. */
export interface TrainLayer {
  inputNorm: Parameter;
  q: Parameter;
  k: Parameter;
  v: Parameter;
  o: Parameter;
  postNorm: Parameter;
  gate: Parameter;
  up: Parameter;
  down: Parameter;
}

export interface TrainParameters {
  embed: Parameter;
  layers: TrainLayer[];
  finalNorm: Parameter;
  /** The same Parameter as `embed` under tied embeddings. */
  lmHead: Parameter;
}

/** One micro-batch: ids and labels, row-major [batch, seqLen]; labels < 0 are ignored. */
export interface TargetBatch {
  readonly inputIds: ArrayLike<number>;
  readonly labels: ArrayLike<number>;
  readonly batch: number;
  readonly seqLen: number;
}

export interface TargetStepResult {
  /** Mean cross-entropy of the batch (before the update). */
  loss: number;
  /** Labels that counted. */
  tokens: number;
}

/** Every HF tensor name a trainable Llama config has, with its shape, in checkpoint order. */
export function targetParameterShapes(c: TargetModelConfig): [string, number[]][] {
  checkTrainableConfig(c);
  const H = c.hiddenSize;
  const qw = c.numHeads * c.headDim;
  const kvw = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const out: [string, number[]][] = [['model.embed_tokens.weight', [c.vocabSize, H]]];
  for (let l = 0; l < c.numLayers; l++) {
    const p = `model.layers.${l}`;
    out.push(
      [`${p}.input_layernorm.weight`, [H]],
      [`${p}.self_attn.q_proj.weight`, [qw, H]],
      [`${p}.self_attn.k_proj.weight`, [kvw, H]],
      [`${p}.self_attn.v_proj.weight`, [kvw, H]],
      [`${p}.self_attn.o_proj.weight`, [H, qw]],
      [`${p}.post_attention_layernorm.weight`, [H]],
      [`${p}.mlp.gate_proj.weight`, [I, H]],
      [`${p}.mlp.up_proj.weight`, [I, H]],
      [`${p}.mlp.down_proj.weight`, [H, I]],
    );
  }
  out.push(['model.norm.weight', [H]]);
  if (!c.tieWordEmbeddings) out.push(['lm_head.weight', [c.vocabSize, H]]);
  return out;
}

/** The trainer covers the plain Llama layer; other features are refused by name. */
export function checkTrainableConfig(c: TargetModelConfig): void {
  const unsupported: string[] = [];
  if (c.qkvBias) unsupported.push('q/k/v biases');
  if (c.oBias) unsupported.push('o_proj bias');
  if (c.mlpBias) unsupported.push('MLP biases');
  if (c.qkNorm) unsupported.push('q/k norms (Qwen3)');
  if (unsupported.length)
    throw new Error(
      `target trainer: ${c.architecture} config uses ${unsupported.join(', ')}, which the trainer does not support (Llama without biases only)`,
    );
  if (c.headDim % 2 !== 0) throw new Error(`target trainer: head_dim must be even for RoPE, got ${c.headDim}`);
}

/**
 * Fresh weights by the HF LlamaPreTrainedModel convention: Linear and embedding ~ N(0, range²),
 * RMSNorm weights 1. `residualScale` (GPT-2 style) divides o_proj and down_proj by √(2·layers) so
 * the residual stream starts at unit scale; HF's Llama init does not, so it defaults to false.
 */
export function initialTargetWeights(
  c: TargetModelConfig,
  rng: Rng,
  options: { initializerRange?: number; residualScale?: boolean } = {},
): Record<string, Float32Array> {
  const range = options.initializerRange ?? 0.02;
  if (!(range > 0)) throw new Error(`initialTargetWeights: initializerRange must be positive, got ${range}`);
  const out: Record<string, Float32Array> = {};
  const residual = options.residualScale ? 1 / Math.sqrt(2 * c.numLayers) : 1;
  for (const [name, shape] of targetParameterShapes(c)) {
    const n = shape.reduce((a, b) => a * b, 1);
    if (shape.length === 1) {
      out[name] = new Float32Array(n).fill(1);
      continue;
    }
    const scale = /o_proj|down_proj/.test(name) ? range * residual : range;
    out[name] = Float32Array.from({ length: n }, () => rng.normal() * scale);
  }
  return out;
}

/** Registers every tensor of `values` (targetParameterShapes' names) in the backend. */
export function registerTargetParameters(
  backend: AdamWBackend,
  c: TargetModelConfig,
  values: Readonly<Record<string, ArrayLike<number>>>,
): TrainParameters {
  const byName = new Map<string, Parameter>();
  for (const [name, shape] of targetParameterShapes(c)) {
    const v = values[name];
    if (!v) throw new Error(`target trainer: initial value of ${name} is missing`);
    const n = shape.reduce((a, b) => a * b, 1);
    if (v.length !== n) throw new Error(`target trainer: ${name} has ${v.length} values, shape [${shape.join(', ')}] needs ${n}`);
  }
  const registered = backend.addParameters(targetParameterShapes(c).map(([name, shape]) => ({ name, shape, init: values[name] })));
  for (const p of registered) byName.set(p.name, p);
  const get = (name: string): Parameter => byName.get(name)!;
  const layers: TrainLayer[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const p = `model.layers.${l}`;
    layers.push({
      inputNorm: get(`${p}.input_layernorm.weight`),
      q: get(`${p}.self_attn.q_proj.weight`),
      k: get(`${p}.self_attn.k_proj.weight`),
      v: get(`${p}.self_attn.v_proj.weight`),
      o: get(`${p}.self_attn.o_proj.weight`),
      postNorm: get(`${p}.post_attention_layernorm.weight`),
      gate: get(`${p}.mlp.gate_proj.weight`),
      up: get(`${p}.mlp.up_proj.weight`),
      down: get(`${p}.mlp.down_proj.weight`),
    });
  }
  const embed = get('model.embed_tokens.weight');
  for (const p of byName.values()) {
    if (p.value.isChunked)
      throw new Error(
        `target trainer: ${p.name} [${p.value.shape.join(', ')}] exceeds one GPU binding; the trainer needs every weight in one buffer`,
      );
  }
  return { embed, layers, finalNorm: get('model.norm.weight'), lmHead: c.tieWordEmbeddings ? embed : get('lm_head.weight') };
}

/** Host copies of trained weights as the `TargetWeights` the loader and the reference use. */
export function toTargetWeights(c: TargetModelConfig, values: Readonly<Record<string, Float32Array>>): TargetWeights {
  const layers: LayerWeights[] = [];
  for (let l = 0; l < c.numLayers; l++) {
    const p = `model.layers.${l}`;
    layers.push({
      inputNorm: values[`${p}.input_layernorm.weight`],
      qProj: values[`${p}.self_attn.q_proj.weight`],
      kProj: values[`${p}.self_attn.k_proj.weight`],
      vProj: values[`${p}.self_attn.v_proj.weight`],
      oProj: values[`${p}.self_attn.o_proj.weight`],
      postAttentionNorm: values[`${p}.post_attention_layernorm.weight`],
      gateProj: values[`${p}.mlp.gate_proj.weight`],
      upProj: values[`${p}.mlp.up_proj.weight`],
      downProj: values[`${p}.mlp.down_proj.weight`],
    });
  }
  const embedTokens = values['model.embed_tokens.weight'];
  return {
    embedTokens,
    layers,
    finalNorm: values['model.norm.weight'],
    lmHead: c.tieWordEmbeddings ? embedTokens : values['lm_head.weight'],
  };
}

/** What one layer keeps for the backward. */
interface LayerActivations {
  hIn: Tensor;
  x1: Tensor;
  invRms1: Tensor;
  q: Tensor;
  k: Tensor;
  v: Tensor;
  o: Tensor;
  lse: Tensor;
  h1: Tensor;
  x2: Tensor;
  invRms2: Tensor;
  gate: Tensor;
  up: Tensor;
  act: Tensor;
}

export class TargetTrainer {
  readonly params: TrainParameters;
  private ropeRows = 0;
  private rope?: Tensor;
  private ropeInverse?: Tensor;

  constructor(
    readonly gpu: Gpu,
    readonly backend: AdamWBackend,
    readonly config: TargetModelConfig,
    initial: Readonly<Record<string, ArrayLike<number>>>,
  ) {
    checkTrainableConfig(config);
    this.params = registerTargetParameters(backend, config, initial);
  }

  destroy(): void {
    if (this.rope) this.gpu.release(this.rope);
    if (this.ropeInverse) this.gpu.release(this.ropeInverse);
    this.rope = this.ropeInverse = undefined;
  }

  /**
   * Forward + backward of one micro-batch: adds d(lossScale · loss)/dθ into every gradient and
   * returns the (unscaled) mean loss. Does not step the optimizer.
   */
  async accumulate(batch: TargetBatch, lossScale = 1): Promise<TargetStepResult> {
    const lossOut = await this.forwardBackward(batch, lossScale, true);
    const r = (await this.gpu.read(lossOut)) as Float32Array;
    this.gpu.release(lossOut);
    return { loss: r[0], tokens: r[1] };
  }

  /** Loss only (no gradients), e.g. held-out evaluation: returns the mean CE and the label count. */
  async evaluate(batch: TargetBatch): Promise<TargetStepResult> {
    const lossOut = await this.forwardBackward(batch, 1, false);
    const r = (await this.gpu.read(lossOut)) as Float32Array;
    this.gpu.release(lossOut);
    return { loss: r[0], tokens: r[1] };
  }

  /** Clip, AdamW, zero the gradients. */
  step(): Promise<StepReport> {
    return this.backend.optimizerStep();
  }

  /** Reads every trained weight back to the host, by HF name. */
  async readWeights(): Promise<Record<string, Float32Array>> {
    const out: Record<string, Float32Array> = {};
    for (const p of this.backend.params) out[p.name] = (await this.gpu.read(p.value)) as Float32Array;
    return out;
  }

  // ---------------------------------------------------------------------------------------------

  private async forwardBackward(batch: TargetBatch, lossScale: number, withGrad: boolean): Promise<Tensor> {
    const c = this.config;
    const gpu = this.gpu;
    const { batch: B, seqLen: S } = batch;
    for (const [name, v] of [
      ['batch', B],
      ['seqLen', S],
    ] as const) {
      if (!Number.isInteger(v) || v < 1) throw new Error(`target trainer: ${name} must be a positive integer, got ${v}`);
    }
    const R = B * S;
    if (batch.inputIds.length !== R)
      throw new Error(`target trainer: inputIds has ${batch.inputIds.length} ids, batch ${B} × seqLen ${S} needs ${R}`);
    if (batch.labels.length !== R)
      throw new Error(`target trainer: labels has ${batch.labels.length} values, batch ${B} × seqLen ${S} needs ${R}`);
    for (let i = 0; i < R; i++) {
      const id = batch.inputIds[i];
      if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize)
        throw new Error(`target trainer: token id ${id} at index ${i} outside the vocabulary [0, ${c.vocabSize})`);
      const label = batch.labels[i];
      if (!Number.isInteger(label) || label >= c.vocabSize)
        throw new Error(
          `target trainer: label ${label} at index ${i} outside the vocabulary [0, ${c.vocabSize}) (use a negative label to ignore a position)`,
        );
    }
    if (!Number.isFinite(lossScale)) throw new Error(`target trainer: lossScale must be finite, got ${lossScale}`);
    this.ensureRope(S);
    const H = c.hiddenSize;
    const I = c.intermediateSize;
    const V = c.vocabSize;
    const qw = c.numHeads * c.headDim;
    const kvw = c.numKvHeads * c.headDim;
    const eps = c.rmsNormEps;
    const P = this.params;
    const linear = (x: Tensor, w: Tensor, y: Tensor, outDim: number, inDim: number, beta = 0) =>
      matmul(gpu, x, w, y, { M: R, N: outDim, K: inDim }, { transB: true, beta });
    const positions = new Int32Array(R);
    for (let b = 0; b < B; b++) for (let t = 0; t < S; t++) positions[b * S + t] = t;

    const owned: Tensor[] = [];
    const keep = <T extends Tensor>(t: T): T => {
      owned.push(t);
      return t;
    };
    const ids = keep(gpu.upload([R], 'i32', batch.inputIds, 'train.ids'));
    const labels = keep(gpu.upload([R], 'i32', batch.labels, 'train.labels'));
    const pos = keep(gpu.upload([R], 'i32', positions, 'train.positions'));
    const mask = keep(gpu.upload([B, S], 'i32', new Int32Array(R).fill(1), 'train.mask'));
    const lossOut = gpu.zeros([2], 'f32', 'train.loss');
    try {
      let h = keep(gpu.tensor([R, H], 'f32', 'train.h0'));
      await embeddingForward(gpu, ids, P.embed.value, h, { n: R, vocab: V, hidden: H });
      const acts: LayerActivations[] = [];
      const rope = (heads: number) => ({ rows: R, nHeads: heads, headDim: c.headDim });
      for (let l = 0; l < c.numLayers; l++) {
        const w = P.layers[l];
        const a: LayerActivations = {
          hIn: h,
          x1: keep(gpu.tensor([R, H], 'f32', `train.l${l}.x1`)),
          invRms1: keep(gpu.tensor([R], 'f32', `train.l${l}.invRms1`)),
          q: keep(gpu.tensor([R, qw], 'f32', `train.l${l}.q`)),
          k: keep(gpu.tensor([R, kvw], 'f32', `train.l${l}.k`)),
          v: keep(gpu.tensor([R, kvw], 'f32', `train.l${l}.v`)),
          o: keep(gpu.tensor([R, qw], 'f32', `train.l${l}.o`)),
          lse: keep(gpu.tensor([B, c.numHeads, S], 'f32', `train.l${l}.lse`)),
          h1: h, // replaced below
          x2: keep(gpu.tensor([R, H], 'f32', `train.l${l}.x2`)),
          invRms2: keep(gpu.tensor([R], 'f32', `train.l${l}.invRms2`)),
          gate: keep(gpu.tensor([R, I], 'f32', `train.l${l}.gate`)),
          up: keep(gpu.tensor([R, I], 'f32', `train.l${l}.up`)),
          act: keep(gpu.tensor([R, I], 'f32', `train.l${l}.act`)),
        };
        await rmsnormForward(gpu, h, w.inputNorm.value, a.x1, a.invRms1, { rows: R, hidden: H, eps });
        const qRaw = gpu.tensor([R, qw], 'f32', `train.l${l}.qRaw`);
        const kRaw = gpu.tensor([R, kvw], 'f32', `train.l${l}.kRaw`);
        await linear(a.x1, w.q.value, qRaw, qw, H);
        await linear(a.x1, w.k.value, kRaw, kvw, H);
        await linear(a.x1, w.v.value, a.v, kvw, H);
        await ropeTableForward(gpu, qRaw, pos, this.rope!, a.q, rope(c.numHeads));
        await ropeTableForward(gpu, kRaw, pos, this.rope!, a.k, rope(c.numKvHeads));
        gpu.release(qRaw, kRaw);
        await attentionForward(
          gpu,
          { q: a.q, k: a.k, v: a.v, mask, o: a.o, lse: a.lse },
          { batch: B, seq: S, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim },
        );
        a.h1 = keep(gpu.clone(h, `train.l${l}.h1`));
        await linear(a.o, w.o.value, a.h1, H, qw, 1);
        await rmsnormForward(gpu, a.h1, w.postNorm.value, a.x2, a.invRms2, { rows: R, hidden: H, eps });
        await linear(a.x2, w.gate.value, a.gate, I, H);
        await linear(a.x2, w.up.value, a.up, I, H);
        await swigluForward(gpu, a.gate, a.up, a.act, { rows: R, inter: I });
        const hOut = keep(gpu.clone(a.h1, `train.l${l}.hOut`));
        await linear(a.act, w.down.value, hOut, H, I, 1);
        acts.push(a);
        h = hOut;
      }
      const f = keep(gpu.tensor([R, H], 'f32', 'train.f'));
      const invRmsF = keep(gpu.tensor([R], 'f32', 'train.invRmsF'));
      await rmsnormForward(gpu, h, P.finalNorm.value, f, invRmsF, { rows: R, hidden: H, eps });
      const logits = keep(gpu.tensor([R, V], 'f32', 'train.logits'));
      await linear(f, P.lmHead.value, logits, V, H);
      await hardCrossEntropy(
        gpu,
        { logits, labels, lossOut },
        { rows: R, vocab: V, grad: withGrad ? 'in-place' : 'none', gradScale: lossScale, slot: 0 },
      );
      if (!withGrad) return lossOut;

      // ---- backward. logits now hold dLoss/dlogits (scaled by lossScale / label count).
      const dF = keep(gpu.tensor([R, H], 'f32', 'train.dF'));
      await matmul(gpu, logits, f, P.lmHead.grad, { M: V, N: H, K: R }, { transA: true, beta: 1 });
      await matmul(gpu, logits, P.lmHead.value, dF, { M: R, N: H, K: V });
      let dH = gpu.tensor([R, H], 'f32', 'train.dH');
      await rmsnormBackward(gpu, h, P.finalNorm.value, invRmsF, dF, dH, P.finalNorm.grad, { rows: R, hidden: H }, { accumulateDw: true });
      /** dX (+)= dY·W for y = x·Wᵀ. */
      const dInput = (dy: Tensor, w: Tensor, dx: Tensor, outDim: number, inDim: number, beta = 0) =>
        matmul(gpu, dy, w, dx, { M: R, N: inDim, K: outDim }, { beta });
      /** dW += dYᵀ·X. */
      const dWeight = (dy: Tensor, x: Tensor, dw: Tensor, outDim: number, inDim: number) =>
        matmul(gpu, dy, x, dw, { M: outDim, N: inDim, K: R }, { transA: true, beta: 1 });
      try {
        for (let l = c.numLayers - 1; l >= 0; l--) {
          const w = P.layers[l];
          const a = acts[l];
          // h' = h₁ + act·W_dᵀ, act = silu(x₂·W_gᵀ) ⊙ x₂·W_uᵀ, x₂ = RMSNorm(h₁).
          await dWeight(dH, a.act, w.down.grad, H, I);
          const dAct = gpu.tensor([R, I], 'f32', 'train.dAct');
          const dGate = gpu.tensor([R, I], 'f32', 'train.dGate');
          const dUp = gpu.tensor([R, I], 'f32', 'train.dUp');
          await dInput(dH, w.down.value, dAct, H, I);
          await swigluBackward(gpu, a.gate, a.up, dAct, dGate, dUp, { rows: R, inter: I });
          await dWeight(dGate, a.x2, w.gate.grad, I, H);
          await dWeight(dUp, a.x2, w.up.grad, I, H);
          const dx2 = gpu.tensor([R, H], 'f32', 'train.dx2');
          await dInput(dGate, w.gate.value, dx2, I, H);
          await dInput(dUp, w.up.value, dx2, I, H, 1);
          const dH1 = gpu.clone(dH, 'train.dH1');
          await rmsnormBackward(
            gpu,
            a.h1,
            w.postNorm.value,
            a.invRms2,
            dx2,
            dH1,
            w.postNorm.grad,
            { rows: R, hidden: H },
            { accumulateDx: true, accumulateDw: true },
          );
          gpu.release(dH, dAct, dGate, dUp, dx2);

          // h₁ = h + o·W_oᵀ, o = attention(RoPE(x₁·W_qᵀ), RoPE(x₁·W_kᵀ), x₁·W_vᵀ).
          await dWeight(dH1, a.o, w.o.grad, H, qw);
          const dO = gpu.tensor([R, qw], 'f32', 'train.dO');
          const dQ = gpu.tensor([R, qw], 'f32', 'train.dQ');
          const dK = gpu.tensor([R, kvw], 'f32', 'train.dK');
          const dV = gpu.tensor([R, kvw], 'f32', 'train.dV');
          await dInput(dH1, w.o.value, dO, H, qw);
          await attentionBackward(
            gpu,
            { q: a.q, k: a.k, v: a.v, mask, o: a.o, lse: a.lse, dO, dQ, dK, dV },
            { batch: B, seq: S, heads: c.numHeads, kvHeads: c.numKvHeads, headDim: c.headDim },
          );
          const dqRaw = gpu.tensor([R, qw], 'f32', 'train.dqRaw');
          const dkRaw = gpu.tensor([R, kvw], 'f32', 'train.dkRaw');
          await ropeTableForward(gpu, dQ, pos, this.ropeInverse!, dqRaw, rope(c.numHeads));
          await ropeTableForward(gpu, dK, pos, this.ropeInverse!, dkRaw, rope(c.numKvHeads));
          await dWeight(dqRaw, a.x1, w.q.grad, qw, H);
          await dWeight(dkRaw, a.x1, w.k.grad, kvw, H);
          await dWeight(dV, a.x1, w.v.grad, kvw, H);
          const dx1 = gpu.tensor([R, H], 'f32', 'train.dx1');
          await dInput(dqRaw, w.q.value, dx1, qw, H);
          await dInput(dkRaw, w.k.value, dx1, kvw, H, 1);
          await dInput(dV, w.v.value, dx1, kvw, H, 1);
          const dHIn = gpu.clone(dH1, 'train.dHIn');
          await rmsnormBackward(
            gpu,
            a.hIn,
            w.inputNorm.value,
            a.invRms1,
            dx1,
            dHIn,
            w.inputNorm.grad,
            { rows: R, hidden: H },
            { accumulateDx: true, accumulateDw: true },
          );
          gpu.release(dH1, dO, dQ, dK, dV, dqRaw, dkRaw, dx1);
          dH = dHIn;
        }
        const links = gpu.tensor([2 * R], 'i32', 'train.embedLinks');
        await embeddingBackward(gpu, ids, dH, P.embed.grad, links, { n: R, vocab: V, hidden: H }, { accumulate: true });
        gpu.release(links);
      } finally {
        gpu.release(dH);
      }
      return lossOut;
    } catch (err) {
      gpu.release(lossOut);
      throw err;
    } finally {
      // Released after encoding: queue order keeps any later user of a pooled buffer behind this work.
      gpu.release(...owned);
    }
  }

  private ensureRope(seq: number): void {
    if (this.rope && this.ropeRows >= seq) return;
    const rows = Math.max(seq, 2 * this.ropeRows, 128);
    if (this.rope) this.gpu.release(this.rope);
    if (this.ropeInverse) this.gpu.release(this.ropeInverse);
    const table = buildRopeTable(this.config, rows);
    const shape = [rows, this.config.headDim / 2, 2];
    this.rope = this.gpu.upload(shape, 'f32', table, 'train.ropeTable');
    this.ropeInverse = this.gpu.upload(shape, 'f32', inverseRopeTable(table), 'train.ropeInverse');
    this.ropeRows = rows;
  }
}
