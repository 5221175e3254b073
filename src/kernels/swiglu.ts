/**
 * SwiGLU gate of the LLaMA MLP: h = silu(gate) ⊙ up on [rows, inter], and its backward (dgate, dup).
 * Element-wise; each operand may have padded rows (its own row stride). Gradients share the layout
 * of what they differentiate (dgate with gate, dup with up), dh the layout of h.
 *
 * The packed layout (`swigluForwardPacked`, `swigluBackwardPacked`) takes gate and up as one
 * [rows, 2·inter] tensor, gate then up in each row, and gives dgate and dup the same way: what one
 * matmul against the stacked [W_gate; W_up] produces and consumes, so the EAGLE3 draft's MLP runs
 * one projection where it ran two (model/eagle3/mlp-chunks.ts). WebGPU forbids two writable
 * bindings of one buffer, hence a kernel of its own rather than strided views of one tensor. When
 * inter is a multiple of 4 (every real model), the packed pair runs four columns per invocation
 * (the -vec4 kernels, the same bits).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import {
  checkInt,
  checkNoAlias,
  checkSinglePart,
  checkStride,
  ELEMENTWISE_CONSTANTS,
  elementGrid,
  stridedExtent,
} from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

export const SWIGLU_KERNELS = {
  forward: {
    name: 'swiglu/forward',
    source: shaderSource('swiglu/forward', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'read', 'write'],
  },
  backward: {
    name: 'swiglu/backward',
    source: shaderSource('swiglu/backward', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'read', 'read', 'write', 'write'],
  },
  forwardPacked: {
    name: 'swiglu/forward-packed',
    source: shaderSource('swiglu/forward-packed', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'write'],
  },
  backwardPacked: {
    name: 'swiglu/backward-packed',
    source: shaderSource('swiglu/backward-packed', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'read', 'write'],
  },
  forwardPackedVec4: {
    name: 'swiglu/forward-packed-vec4',
    source: shaderSource('swiglu/forward-packed-vec4', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'write'],
  },
  backwardPackedVec4: {
    name: 'swiglu/backward-packed-vec4',
    source: shaderSource('swiglu/backward-packed-vec4', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'read', 'write'],
  },
} as const satisfies Record<string, KernelDef>;

export interface SwigluArgs {
  rows: number;
  inter: number;
  /** Row strides in elements; each defaults to inter. */
  strideGate?: number;
  strideUp?: number;
  strideH?: number;
}

/** Validate the arguments; returns the elements each operand must hold, the uniform block and the element count. */
function resolve(op: string, args: SwigluArgs) {
  checkInt(`${op}: rows`, args.rows, 0);
  checkInt(`${op}: inter`, args.inter);
  const strideGate = args.strideGate ?? args.inter;
  const strideUp = args.strideUp ?? args.inter;
  const strideH = args.strideH ?? args.inter;
  checkStride(op, 'strideGate', strideGate, args.inter);
  checkStride(op, 'strideUp', strideUp, args.inter);
  checkStride(op, 'strideH', strideH, args.inter);
  const extent = (stride: number) => stridedExtent(args.rows, args.inter, stride);
  const uniforms = new UniformWriter().u32(args.rows).u32(args.inter).u32(strideGate).u32(strideUp).u32(strideH).finish();
  return {
    gateExtent: extent(strideGate),
    upExtent: extent(strideUp),
    hExtent: extent(strideH),
    uniforms,
    elements: args.rows * args.inter,
  };
}

/** Encode h = silu(gate) ⊙ up (no submit). */
export async function swigluForward(gpu: Gpu, gate: Tensor, up: Tensor, h: Tensor, args: SwigluArgs): Promise<void> {
  const op = 'swigluForward';
  const r = resolve(op, args);
  checkSinglePart(op, 'gate', gate, 'f32', r.gateExtent);
  checkSinglePart(op, 'up', up, 'f32', r.upExtent);
  checkSinglePart(op, 'h', h, 'f32', r.hExtent);
  checkNoAlias(
    op,
    h,
    [
      ['gate', gate],
      ['up', up],
    ],
    'h',
  );
  const kernel = await gpu.pipelines.get(SWIGLU_KERNELS.forward);
  gpu.batcher.dispatch(kernel, r.uniforms, [gate.binding(), up.binding(), h.binding()], elementGrid(gpu, r.elements));
}

/** Encode dgate and dup of h = silu(gate) ⊙ up given dh (no submit). */
export async function swigluBackward(
  gpu: Gpu,
  gate: Tensor,
  up: Tensor,
  dh: Tensor,
  dgate: Tensor,
  dup: Tensor,
  args: SwigluArgs,
): Promise<void> {
  const op = 'swigluBackward';
  const r = resolve(op, args);
  checkSinglePart(op, 'gate', gate, 'f32', r.gateExtent);
  checkSinglePart(op, 'up', up, 'f32', r.upExtent);
  checkSinglePart(op, 'dh', dh, 'f32', r.hExtent);
  checkSinglePart(op, 'dgate', dgate, 'f32', r.gateExtent);
  checkSinglePart(op, 'dup', dup, 'f32', r.upExtent);
  checkNoAlias(
    op,
    dgate,
    [
      ['gate', gate],
      ['up', up],
      ['dh', dh],
      ['dup', dup],
    ],
    'dgate',
  );
  checkNoAlias(
    op,
    dup,
    [
      ['gate', gate],
      ['up', up],
      ['dh', dh],
    ],
    'dup',
  );
  const kernel = await gpu.pipelines.get(SWIGLU_KERNELS.backward);
  gpu.batcher.dispatch(
    kernel,
    r.uniforms,
    [gate.binding(), up.binding(), dh.binding(), dgate.binding(), dup.binding()],
    elementGrid(gpu, r.elements),
  );
}

/** rows × inter of the packed layout: [rows, 2·inter] gate | up. */
export interface SwigluPackedArgs {
  rows: number;
  inter: number;
}

/**
 * The packed kernels' arguments: `wide` (inter a multiple of 4) takes the -vec4 kernels, four
 * columns per invocation with the same bits; `lanes` is the invocation count either way.
 */
function resolvePacked(op: string, args: SwigluPackedArgs) {
  checkInt(`${op}: rows`, args.rows, 0);
  checkInt(`${op}: inter`, args.inter);
  const wide = args.inter % 4 === 0;
  const perRow = wide ? args.inter / 4 : args.inter;
  return {
    wide,
    uniforms: new UniformWriter().u32(args.rows).u32(perRow).finish(),
    elements: args.rows * args.inter,
    lanes: args.rows * perRow,
  };
}

/** Encode h [rows, inter] = silu(gate) ⊙ up from gu [rows, 2·inter] = gate | up (no submit). */
export async function swigluForwardPacked(gpu: Gpu, gu: Tensor, h: Tensor, args: SwigluPackedArgs): Promise<void> {
  const op = 'swigluForwardPacked';
  const r = resolvePacked(op, args);
  checkSinglePart(op, 'gu', gu, 'f32', 2 * r.elements);
  checkSinglePart(op, 'h', h, 'f32', r.elements);
  checkNoAlias(op, h, [['gu', gu]], 'h');
  const kernel = await gpu.pipelines.get(r.wide ? SWIGLU_KERNELS.forwardPackedVec4 : SWIGLU_KERNELS.forwardPacked);
  gpu.batcher.dispatch(kernel, r.uniforms, [gu.binding(), h.binding()], elementGrid(gpu, r.lanes));
}

/** Encode dgu [rows, 2·inter] = dgate | dup of swigluForwardPacked given dh [rows, inter] (no submit). */
export async function swigluBackwardPacked(gpu: Gpu, gu: Tensor, dh: Tensor, dgu: Tensor, args: SwigluPackedArgs): Promise<void> {
  const op = 'swigluBackwardPacked';
  const r = resolvePacked(op, args);
  checkSinglePart(op, 'gu', gu, 'f32', 2 * r.elements);
  checkSinglePart(op, 'dh', dh, 'f32', r.elements);
  checkSinglePart(op, 'dgu', dgu, 'f32', 2 * r.elements);
  checkNoAlias(
    op,
    dgu,
    [
      ['gu', gu],
      ['dh', dh],
    ],
    'dgu',
  );
  const kernel = await gpu.pipelines.get(r.wide ? SWIGLU_KERNELS.backwardPackedVec4 : SWIGLU_KERNELS.backwardPacked);
  gpu.batcher.dispatch(kernel, r.uniforms, [gu.binding(), dh.binding(), dgu.binding()], elementGrid(gpu, r.lanes));
}
