/**
 * Optimizer kernels: global gradient L2 norm with the clip coefficient computed on the GPU, in-place
 * gradient clipping, and a fused AdamW step that reads the clip coefficient from the GPU (no
 * readback anywhere in the step).
 *
 * Kernels (shaders/optim/*.wgsl):
 *   sumsq    — per-workgroup partial sums of g² for one tensor (part), into a shared partials array
 *              (sumsq-vec4: the same, four elements per load, where a part's count is a multiple of 4);
 *   finalize — one workgroup: norm = sqrt(Σ partials), coef = min(1, maxNorm / (norm + 1e-6));
 *   scale    — g *= coef (torch clip_grad_norm_ semantics);
 *   adamw    — PyTorch AdamW (decoupled decay, bias-corrected), optionally scaling g by coef;
 *   adamw-vec4 — the same, four elements per invocation, where a part's count is a multiple of 4.
 * The partial layout depends only on the tensors' sizes, so the norm is deterministic.
 * Every kernel dispatches once per row part, so vocab-sized tensors split over bindings work.
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type Tensor, type TensorPart } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import {
  checkFinite,
  checkInt,
  checkNoAlias,
  checkSinglePart,
  checkTensor,
  ELEMENTWISE_CONSTANTS,
  elementGrid,
} from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

/**
 * Invocations per sumsq workgroup (the shader's WG); with ELEMENTS_PER_INVOCATION it fixes the grid.
 * Few invocations and many elements each: the halving tree's barriers are paid once per workgroup,
 * and on a CPU adapter each barrier switches every SIMD batch of the workgroup in and out. Against
 * 256 invocations of 8 elements, 64 of 256 took the pass 3.6–4.7× less time on 2.9 M elements and
 * 3.2–4.4× less on the fixture draft's 64.7 k (bench/RESULTS.md, "Fewer barriers, wider loads").
 */
const SUMSQ_WG = 64;

export const OPTIM_KERNELS = {
  sumsq: { name: 'optim/sumsq', source: shaderSource('optim/sumsq', { WG: SUMSQ_WG }), bindings: ['uniform', 'read', 'write'] },
  sumsqVec4: {
    name: 'optim/sumsq-vec4',
    source: shaderSource('optim/sumsq-vec4', { WG: SUMSQ_WG }),
    bindings: ['uniform', 'read', 'write'],
  },
  finalize: { name: 'optim/finalize', source: shaderSource('optim/finalize'), bindings: ['uniform', 'read', 'write'] },
  scale: { name: 'optim/scale', source: shaderSource('optim/scale', ELEMENTWISE_CONSTANTS), bindings: ['uniform', 'read', 'write'] },
  adamw: {
    name: 'optim/adamw',
    source: shaderSource('optim/adamw', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'read', 'write', 'write', 'write'],
  },
  adamwVec4: {
    name: 'optim/adamw-vec4',
    source: shaderSource('optim/adamw-vec4', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'read', 'write', 'write', 'write'],
  },
} as const satisfies Record<string, KernelDef>;

/** Each sumsq invocation handles about this many elements before the tree reduction. */
const ELEMENTS_PER_INVOCATION = 256;
const MAX_SUMSQ_WORKGROUPS = 4096;

function partElements(t: Tensor, part: TensorPart): number {
  return part.rowCount * t.rowElements;
}

function binding(part: TensorPart): GPUBufferBinding {
  return { buffer: part.buffer, offset: part.byteOffset, size: part.byteLength };
}

/**
 * Whether a dispatch over `elements` f32 elements at these byte offsets can read them as vec4s
 * (optim/sumsq-vec4, optim/adamw-vec4): a whole number of vec4s, each binding starting on one.
 * Storage binding offsets are multiples of 256, so in practice the count alone decides, and a
 * model's gradient norm always sums in the same order.
 */
function wholeVec4s(elements: number, byteOffsets: readonly number[]): boolean {
  return elements % 4 === 0 && byteOffsets.every((offset) => offset % 16 === 0);
}

/** Workgroups of the sumsq pass for `n` elements: a pure function of n (keeps the sum order fixed). */
export function sumsqWorkgroups(n: number): number {
  return Math.min(MAX_SUMSQ_WORKGROUPS, Math.max(1, Math.ceil(n / (SUMSQ_WG * ELEMENTS_PER_INVOCATION))));
}

/** Length of the f32 `partials` workspace globalGradNorm needs for these gradients. */
export function gradNormWorkspaceSize(grads: readonly Tensor[]): number {
  let total = 0;
  for (const g of grads) for (const part of g.parts) total += sumsqWorkgroups(partElements(g, part));
  return total;
}

export interface GradNormOptions {
  /** Clip threshold (SpecForge: 0.5); Infinity gives coefficient 1. */
  maxNorm: number;
}

/**
 * Encode result[0] = ‖(g₁, g₂, …)‖₂ over all gradients and result[1] = min(1, maxNorm / (norm + 1e-6))
 * (no submit, no readback). `partials` is an f32 workspace of gradNormWorkspaceSize(grads) elements.
 */
export async function globalGradNorm(
  gpu: Gpu,
  grads: readonly Tensor[],
  partials: Tensor,
  result: Tensor,
  options: GradNormOptions,
): Promise<void> {
  const op = 'globalGradNorm';
  if (grads.length === 0) throw new Error(`${op}: no gradients given`);
  if (Number.isNaN(options.maxNorm) || options.maxNorm <= 0) throw new Error(`${op}: maxNorm must be > 0, got ${options.maxNorm}`);
  grads.forEach((g, i) => {
    checkTensor(op, `grads[${i}]`, g, 'f32', 0);
    checkNoAlias(op, partials, [[`grads[${i}]`, g]], 'partials');
  });
  const count = gradNormWorkspaceSize(grads);
  checkSinglePart(op, 'partials', partials, 'f32', count);
  checkSinglePart(op, 'result', result, 'f32', 2);
  checkNoAlias(op, result, [['partials', partials]], 'result');
  const [sumsq, sumsqVec4, finalize] = await Promise.all(
    [OPTIM_KERNELS.sumsq, OPTIM_KERNELS.sumsqVec4, OPTIM_KERNELS.finalize].map((def) => gpu.pipelines.get(def)),
  );
  let offset = 0;
  for (const g of grads) {
    for (const part of g.parts) {
      const n = partElements(g, part);
      const workgroups = sumsqWorkgroups(n);
      const wide = wholeVec4s(n, [part.byteOffset]);
      const uniforms = new UniformWriter()
        .u32(wide ? n / 4 : n)
        .u32(offset)
        .finish();
      gpu.batcher.dispatch(wide ? sumsqVec4 : sumsq, uniforms, [binding(part), partials.binding()], [workgroups]);
      offset += workgroups;
    }
  }
  gpu.batcher.dispatch(finalize, new UniformWriter().u32(count).f32(options.maxNorm).finish(), [partials.binding(), result.binding()], [1]);
}

/** Encode g *= result[1] for every gradient, in place (the clip of torch clip_grad_norm_). */
export async function clipGradients(gpu: Gpu, grads: readonly Tensor[], result: Tensor): Promise<void> {
  const op = 'clipGradients';
  checkSinglePart(op, 'result', result, 'f32', 2);
  grads.forEach((g, i) => {
    checkTensor(op, `grads[${i}]`, g, 'f32', 0);
    checkNoAlias(op, g, [['result', result]], `grads[${i}]`);
  });
  const kernel = await gpu.pipelines.get(OPTIM_KERNELS.scale);
  for (const g of grads) {
    for (const part of g.parts) {
      const n = partElements(g, part);
      gpu.batcher.dispatch(kernel, new UniformWriter().u32(n).finish(), [result.binding(), binding(part)], elementGrid(gpu, n));
    }
  }
}

export interface AdamwOptions {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** 1-based step count after this update (PyTorch increments before computing bias corrections). */
  step: number;
  /** result of globalGradNorm: when given, the gradient is scaled by its clip coefficient. */
  clip?: Tensor;
}

/** The uniform scalars of one AdamW step, computed in float64 like PyTorch's Python-side math. */
export function adamwScalars(o: AdamwOptions): { decay: number; stepSize: number; bc2Sqrt: number } {
  return {
    decay: 1 - o.lr * o.weightDecay,
    stepSize: o.lr / (1 - o.beta1 ** o.step),
    bc2Sqrt: Math.sqrt(1 - o.beta2 ** o.step),
  };
}

/**
 * The Params block of optim/adamw and optim/adamw-vec4 (include/adamw-update.wgsl) for a dispatch of
 * `lanes` invocations: f32 elements for the one, vec4 groups for the other.
 */
export function adamwUniforms(o: AdamwOptions, lanes: number): Uint8Array {
  const { decay, stepSize, bc2Sqrt } = adamwScalars(o);
  return new UniformWriter()
    .u32(lanes)
    .f32(decay)
    .f32(1 - o.beta1)
    .f32(o.beta2)
    .f32(1 - o.beta2)
    .f32(stepSize)
    .f32(bc2Sqrt)
    .f32(o.eps)
    .finish();
}

function checkAdamwOptions(op: string, o: AdamwOptions): void {
  for (const key of ['lr', 'beta1', 'beta2', 'eps', 'weightDecay'] as const) checkFinite(`${op}: ${key}`, o[key]);
  if (o.lr < 0) throw new Error(`${op}: lr must be ≥ 0, got ${o.lr}`);
  if (!(o.beta1 >= 0 && o.beta1 < 1)) throw new Error(`${op}: beta1 must be in [0, 1), got ${o.beta1}`);
  if (!(o.beta2 >= 0 && o.beta2 < 1)) throw new Error(`${op}: beta2 must be in [0, 1), got ${o.beta2}`);
  if (o.eps <= 0) throw new Error(`${op}: eps must be > 0, got ${o.eps}`);
  if (o.weightDecay < 0) throw new Error(`${op}: weightDecay must be ≥ 0, got ${o.weightDecay}`);
  checkInt(`${op}: step`, o.step, 1);
}

/** Encode one AdamW update of param with its moments m and v, in place (no submit). */
export async function adamwStep(gpu: Gpu, param: Tensor, grad: Tensor, m: Tensor, v: Tensor, options: AdamwOptions): Promise<void> {
  const op = 'adamwStep';
  checkAdamwOptions(op, options);
  checkTensor(op, 'param', param, 'f32', 0);
  for (const [name, t] of [
    ['grad', grad],
    ['m', m],
    ['v', v],
  ] as const) {
    checkTensor(op, name, t, 'f32', param.numel);
    const sameParts =
      t.numel === param.numel &&
      t.parts.length === param.parts.length &&
      t.parts.every((p, i) => p.rowCount * t.rowElements === param.parts[i].rowCount * param.rowElements);
    if (!sameParts) {
      throw new Error(
        `${op}: ${name} (${t.label} ${fmtShape(t.shape)}) must have the element count and row parts of param (${param.label} ${fmtShape(param.shape)})`,
      );
    }
  }
  checkNoAlias(
    op,
    param,
    [
      ['grad', grad],
      ['m', m],
      ['v', v],
    ],
    'param',
  );
  checkNoAlias(
    op,
    m,
    [
      ['grad', grad],
      ['v', v],
    ],
    'm',
  );
  checkNoAlias(op, v, [['grad', grad]], 'v');
  if (options.clip) {
    checkSinglePart(op, 'clip', options.clip, 'f32', 2);
    checkNoAlias(
      op,
      options.clip,
      [
        ['param', param],
        ['m', m],
        ['v', v],
      ],
      'clip',
    );
  }
  const constants = { USE_CLIP: options.clip !== undefined };
  const [scalar, vec4] = await Promise.all([
    gpu.pipelines.get(OPTIM_KERNELS.adamw, constants),
    gpu.pipelines.get(OPTIM_KERNELS.adamwVec4, constants),
  ]);
  param.parts.forEach((part, i) => {
    const n = partElements(param, part);
    const bindings = [binding(grad.parts[i]), binding(part), binding(m.parts[i]), binding(v.parts[i])];
    const wide = wholeVec4s(
      n,
      bindings.map((b) => b.offset ?? 0),
    );
    const lanes = wide ? n / 4 : n;
    const uniforms = adamwUniforms(options, lanes);
    const [g, ...state] = bindings;
    // Without clipping the shader never reads binding 2; bind the gradient there (read-only aliasing is allowed).
    const clip = options.clip ? options.clip.binding() : g;
    gpu.batcher.dispatch(wide ? vec4 : scalar, uniforms, [g, clip, ...state], elementGrid(gpu, lanes));
  });
}
