/**
 * TrainingBackend (docs/training.md §1, §5): owns the trainable parameters as f32 master weights on the
 * GPU with their gradients and AdamW moments, and performs the optimizer step at the accumulation
 * boundary: global gradient L2 norm → clip coefficient min(1, max / (norm + 1e-6)) → fused AdamW
 * (decoupled decay, bias correction) → zero gradients. Nothing is read back inside the step; the
 * pre-clip norm is returned as a pending read. Parameters registered together share arena slabs
 * (./parameter-arena.ts), so the step is a few dispatches per slab, not per tensor.
 *
 * A step whose norm is NaN or infinite is skipped on the GPU (optim/finalize's sentinel). The caller
 * that reads the norm reports it with markSkipped(): like PyTorch, where a skipped optimizer.step()
 * leaves AdamW's state['step'] alone while the LR scheduler moves on, the skip does not count for
 * bias correction (`appliedUpdates`) but does for the schedule (`step`).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { adamwStep, globalGradNorm, gradNormWorkspaceSize } from '../kernels/optim.ts';
import { allocateArena, type OptimizerSlab, type ParameterSpec } from './parameter-arena.ts';
import { learningRate, type ScheduleConfig } from './schedule.ts';

export interface OptimizerConfig {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  maxGradNorm: number;
  schedule: Omit<ScheduleConfig, 'baseLr'>;
}

/** SpecForge's defaults: AdamW β 0.9/0.999, ε 1e-8, no weight decay, lr 1e-4, clip 0.5, cosine, 1.5% warmup. */
export const SPECFORGE_OPTIMIZER: OptimizerConfig = {
  lr: 1e-4,
  beta1: 0.9,
  beta2: 0.999,
  eps: 1e-8,
  weightDecay: 0,
  maxGradNorm: 0.5,
  schedule: { kind: 'cosine', totalSteps: 1000, warmupRatio: 0.015 },
};

export interface Parameter {
  readonly name: string;
  readonly value: Tensor;
  readonly grad: Tensor;
  readonly m: Tensor;
  readonly v: Tensor;
}

export interface StepReport {
  /** Pre-clip global gradient norm (resolves after the step's batch is submitted). */
  gradNorm: Promise<number>;
  lr: number;
  step: number;
}

export class AdamWBackend {
  readonly params: Parameter[] = [];
  /** What the optimizer step runs over: packed slabs and lone (row-split) parameters. */
  private readonly slabs: OptimizerSlab[] = [];
  /** Optimizer steps taken so far, skipped ones included (drives the LR schedule). */
  step = 0;
  /** Of those, the steps the GPU skipped for a non-finite norm (excluded from bias correction). */
  skippedSteps = 0;
  private lastMarked = 0;
  private partials: Tensor | undefined;
  private readonly normResult: Tensor;

  constructor(
    private readonly gpu: Gpu,
    readonly config: OptimizerConfig,
  ) {
    this.normResult = gpu.zeros([2], 'f32', 'grad-norm');
  }

  /** Register a trainable parameter with its initial values (f32 master copy). */
  addParameter(name: string, shape: readonly number[], init: ArrayLike<number>): Parameter {
    return this.addParameters([{ name, shape, init }])[0];
  }

  /**
   * Register parameters together: they share arena slabs, so the optimizer step covers them with one
   * dispatch of each kernel per slab. Returns them in the order given.
   */
  addParameters(specs: readonly ParameterSpec[]): Parameter[] {
    const names = new Set(this.params.map((p) => p.name));
    for (const { name } of specs) {
      if (names.has(name)) throw new Error(`parameter ${name} registered twice`);
      names.add(name);
    }
    const { params, slabs } = allocateArena(this.gpu, specs);
    this.params.push(...params);
    this.slabs.push(...slabs);
    if (this.partials) {
      this.gpu.release(this.partials);
      this.partials = undefined;
    }
    return params;
  }

  param(name: string): Parameter {
    const p = this.params.find((x) => x.name === name);
    if (!p) throw new Error(`no parameter named ${name} (have ${this.params.map((x) => x.name).join(', ')})`);
    return p;
  }

  zeroGrad(): void {
    for (const slab of this.slabs)
      for (const part of slab.grad.parts) this.gpu.batcher.clearBuffer(part.buffer, part.byteOffset, part.byteLength);
  }

  currentLr(): number {
    return learningRate({ ...this.config.schedule, baseLr: this.config.lr }, this.step);
  }

  /** Clip by the global norm, AdamW, zero the gradients; all encoded, nothing awaited on the GPU. */
  async optimizerStep(): Promise<StepReport> {
    const grads = this.slabs.map((s) => s.grad);
    this.partials ??= this.gpu.tensor([gradNormWorkspaceSize(grads)], 'f32', 'grad-norm-partials');
    await globalGradNorm(this.gpu, grads, this.partials, this.normResult, { maxNorm: this.config.maxGradNorm });
    const gradNorm = this.gpu.readLater(this.normResult).then((r) => r[0]);
    const lr = this.currentLr();
    this.step++;
    for (const p of this.slabs) {
      await adamwStep(this.gpu, p.value, p.grad, p.m, p.v, {
        lr,
        beta1: this.config.beta1,
        beta2: this.config.beta2,
        eps: this.config.eps,
        weightDecay: this.config.weightDecay,
        step: this.appliedUpdates,
        clip: this.normResult,
      });
    }
    this.zeroGrad();
    return { gradNorm, lr, step: this.step };
  }

  /** Updates AdamW has applied, this one included: PyTorch's state['step'] for bias correction. */
  get appliedUpdates(): number {
    return this.step - this.skippedSteps;
  }

  /**
   * Records that `step`, the newest one encoded, was skipped by the GPU (its norm was not finite).
   * It must be called before the next step is encoded, or that step's bias correction would count
   * the skipped one.
   */
  markSkipped(step: number): void {
    if (step !== this.step)
      throw new Error(
        `markSkipped(${step}): the newest optimizer step is ${this.step}; a skip must be reported before the next step is encoded`,
      );
    if (step === this.lastMarked) throw new Error(`markSkipped(${step}): step ${step} is already marked skipped`);
    this.lastMarked = step;
    this.skippedSteps++;
  }

  destroy(): void {
    for (const s of this.slabs) this.gpu.release(s.value, s.grad, s.m, s.v);
    this.slabs.length = 0;
    this.params.length = 0;
    if (this.partials) this.gpu.release(this.partials);
    this.gpu.release(this.normResult);
  }
}
