/**
 * A small, real strategy: a linear probe that learns to predict `labels` from the `hidden_state`
 * features of a target (logits = h · Wᵀ, hard-label cross-entropy, mean over labelled tokens).
 * It exercises the whole runtime (rollout → store → loader → core → backend → durable ack) with the
 * same kernels the EAGLE3 strategy uses (matmul, cross-entropy, AdamW), before EAGLE3 itself.
 *
 * Features: hidden_state f32 [B, S, H], labels i32 [B, S] (−1 = ignore; pad labels with −1).
 */
import type { TrainBatch } from '../../contracts/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { hardCrossEntropy } from '../../kernels/loss.ts';
import { matmul } from '../../kernels/matmul.ts';
import type { AdamWBackend, Parameter } from '../../optim/adamw-backend.ts';
import { requireFeatures, type DraftTrainStrategy, type StepOutput } from '../loop/strategy.ts';

export class LinearProbeStrategy implements DraftTrainStrategy {
  readonly name = 'linear-probe';
  readonly requiredFeatures = ['hidden_state', 'labels'] as const;
  readonly weight: Parameter;

  constructor(
    private readonly gpu: Gpu,
    backend: AdamWBackend,
    readonly hidden: number,
    readonly classes: number,
    init: ArrayLike<number>,
  ) {
    this.weight = backend.addParameter('probe.weight', [classes, hidden], init);
  }

  validateBatch(batch: TrainBatch<Tensor>): void {
    requireFeatures(this.name, batch, this.requiredFeatures);
    const h = batch.tensors.hidden_state;
    if (h.shape[h.shape.length - 1] !== this.hidden)
      throw new Error(`${this.name}: hidden_state width ${h.shape.at(-1)} != probe input ${this.hidden}`);
  }

  async forwardBackward(batch: TrainBatch<Tensor>, lossScale: number): Promise<StepOutput> {
    const gpu = this.gpu;
    const x = batch.tensors.hidden_state;
    const rows = x.numel / this.hidden;
    const logits = gpu.tensor([rows, this.classes], 'f32', 'probe.logits');
    const dlogits = gpu.tensor([rows, this.classes], 'f32', 'probe.dlogits');
    const lossOut = gpu.zeros([2], 'f32', 'probe.loss');
    await matmul(gpu, x, this.weight.value, logits, { M: rows, N: this.classes, K: this.hidden }, { transB: true });
    await hardCrossEntropy(
      gpu,
      { logits, labels: batch.tensors.labels, dlogits, lossOut },
      { rows, vocab: this.classes, grad: 'separate', gradScale: lossScale, slot: 0 },
    );
    // dW [C, H] += dlogitsᵀ · X, with dlogits stored [rows, C] (the transposed-A layout).
    await matmul(gpu, dlogits, x, this.weight.grad, { M: this.classes, N: this.hidden, K: rows }, { transA: true, beta: 1 });
    const read = gpu.readLater(lossOut);
    gpu.release(logits, dlogits, lossOut);
    return {
      loss: read.then((v) => v[0]),
      metrics: read.then((v) => ({ labelled_tokens: v[1] })),
    };
  }
}
