/**
 * Parameter arenas: the trainable tensors packed side by side into a few GPU buffers ("slabs"), so the
 * optimizer step runs one sum-of-squares, one AdamW and one clear per slab instead of per tensor. At
 * the fixture's size (13 tensors) that is 3 dispatches where there were 39, and a dispatch costs more
 * than its work at such sizes.
 *
 * Each parameter gets four views at the same byte offset of four slabs (value, grad, m, v), so the
 * model's kernels see ordinary tensors. Offsets are multiples of 256 bytes (ARENA_ALIGN_BYTES); the
 * gaps between views are zero in all four slabs and AdamW keeps them zero (grad 0, m 0, v 0 give an
 * update of exactly 0), so they add nothing to the gradient norm. A parameter larger than one binding
 * keeps its own row-split buffers and is a slab of its own.
 */
import type { Gpu } from '../gpu/gpu.ts';
import { Tensor, numelOf } from '../gpu/tensor.ts';

/**
 * Offsets of views in a slab. WebGPU caps minStorageBufferOffsetAlignment at 256 bytes, so this fits
 * every adapter, and one layout on every adapter keeps the norm's sum order (and the memory plan) the same.
 */
export const ARENA_ALIGN_BYTES = 256;

/**
 * Slabs end on a multiple of this many bytes (one vec4<f32>); the padding is a gap like any other,
 * zero in all four slabs and kept zero.
 */
export const SLAB_GRAIN_BYTES = 16;

export interface ParameterSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly init: ArrayLike<number>;
}

/** Where a plan puts each parameter: in packed slab `slab` at byte `byteOffset`, or alone (`slab` = -1). */
export interface ArenaPlacement {
  readonly slab: number;
  readonly byteOffset: number;
}

export interface ArenaPlan {
  /** Byte length of every packed slab. */
  readonly slabBytes: number[];
  /** One placement per input size, in input order. */
  readonly placements: ArenaPlacement[];
}

/**
 * Pack f32 tensors of `byteSizes` in order, each at a multiple of `align`, into slabs of at most
 * `maxSlabBytes`; a tensor larger than that is placed alone. A pure function of its inputs, so the
 * layout (and with it the order of the norm's sum) is fixed by the model's shapes.
 */
export function planArena(byteSizes: readonly number[], maxSlabBytes: number, align = ARENA_ALIGN_BYTES): ArenaPlan {
  const slabBytes: number[] = [];
  const placements: ArenaPlacement[] = [];
  for (const bytes of byteSizes) {
    if (bytes > maxSlabBytes) {
      placements.push({ slab: -1, byteOffset: 0 });
      continue;
    }
    const last = slabBytes.length - 1;
    const offset = last < 0 ? 0 : Math.ceil(slabBytes[last] / align) * align;
    if (last >= 0 && offset + bytes <= maxSlabBytes) {
      placements.push({ slab: last, byteOffset: offset });
      slabBytes[last] = offset + bytes;
    } else {
      placements.push({ slab: slabBytes.length, byteOffset: 0 });
      slabBytes.push(bytes);
    }
  }
  // Whole vec4s: AdamW then runs four elements per invocation over the slab (optim/adamw-vec4).
  return {
    slabBytes: slabBytes.map((bytes) => Math.min(maxSlabBytes, Math.ceil(bytes / SLAB_GRAIN_BYTES) * SLAB_GRAIN_BYTES)),
    placements,
  };
}

/** Bytes of one f32 parameter of `shape` (a binding holds at least 4). */
export function parameterBytes(shape: readonly number[]): number {
  return Math.max(4, numelOf(shape) * 4);
}

/** The four tensors the optimizer updates together: one packed slab (flat) or one lone parameter. */
export interface OptimizerSlab {
  readonly value: Tensor;
  readonly grad: Tensor;
  readonly m: Tensor;
  readonly v: Tensor;
}

export interface ArenaParameter {
  readonly name: string;
  readonly value: Tensor;
  readonly grad: Tensor;
  readonly m: Tensor;
  readonly v: Tensor;
}

const ROLES = ['value', 'grad', 'm', 'v'] as const;

function view(slab: Tensor, shape: readonly number[], byteOffset: number, label: string): Tensor {
  const numel = numelOf(shape);
  const rows = shape.length === 0 ? 1 : shape[0];
  const part = slab.part;
  return new Tensor(
    shape,
    'f32',
    [{ buffer: part.buffer, byteOffset: part.byteOffset + byteOffset, byteLength: Math.max(4, numel * 4), rowStart: 0, rowCount: rows }],
    label,
  );
}

/**
 * Allocate `specs` as arena views (values written from `init`, gradients and moments zeroed).
 * Returns the parameters in spec order and the slabs the optimizer steps over.
 */
export function allocateArena(gpu: Gpu, specs: readonly ParameterSpec[]): { params: ArenaParameter[]; slabs: OptimizerSlab[] } {
  for (const s of specs) {
    if (s.init.length !== numelOf(s.shape))
      throw new Error(`parameter ${s.name}: ${s.init.length} initial values for shape [${s.shape.join(', ')}]`);
  }
  const plan = planArena(
    specs.map((s) => parameterBytes(s.shape)),
    gpu.maxBindingBytes,
  );
  const packed: OptimizerSlab[] = plan.slabBytes.map((bytes, i) => {
    const [value, grad, m, v] = ROLES.map((role) => gpu.zeros([bytes / 4], 'f32', `arena${i}.${role}`));
    return { value, grad, m, v };
  });
  const lone: OptimizerSlab[] = [];
  const params = specs.map((s, i): ArenaParameter => {
    const { slab, byteOffset } = plan.placements[i];
    let p: ArenaParameter;
    if (slab < 0) {
      const [value, grad, m, v] = ROLES.map((role) => gpu.zeros(s.shape, 'f32', role === 'value' ? s.name : `${s.name}.${role}`));
      p = { name: s.name, value, grad, m, v };
      lone.push(p);
    } else {
      const at = packed[slab];
      p = {
        name: s.name,
        value: view(at.value, s.shape, byteOffset, s.name),
        grad: view(at.grad, s.shape, byteOffset, `${s.name}.grad`),
        m: view(at.m, s.shape, byteOffset, `${s.name}.m`),
        v: view(at.v, s.shape, byteOffset, `${s.name}.v`),
      };
    }
    gpu.write(p.value, s.init);
    return p;
  });
  return { params, slabs: [...packed, ...lone] };
}
