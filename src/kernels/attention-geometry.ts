/**
 * Launch geometry of the flash attention kernels (src/kernels/attention.ts): the named geometry
 * records, the kernels specialised to each, and the pure policy that picks one per shape and
 * device. Split from attention.ts so that the encode functions and their checks stay readable.
 */
import type { KernelDef } from '../gpu/kernel-def.ts';
import { storageBindings } from '../gpu/pipeline-cache.ts';
import { shaderSource } from './shader-source.ts';
/**
 * Launch geometry of the flash kernels. Each shader receives the fields it uses as WGSL constants
 * (shaderSource), and the grids, the LANE_DIMS override and the device checks below are computed
 * from the same record, so a geometry lives in exactly one place.
 */
export interface FlashGeometry {
  /** Query rows per forward / dq workgroup. */
  readonly BR: number;
  /** Key rows per dkv workgroup. */
  readonly BK: number;
  /** Invocations sharing one query (or key) row; each owns head dims d ≡ lane (mod TPR). 1, 2, 4 or 8. */
  readonly TPR: number;
  /** Keys per tile that forward / dq stream through workgroup memory. */
  readonly BC: number;
  /** Query rows per tile that dkv streams through workgroup memory. */
  readonly BQ: number;
  /** Largest head dim served: the row stride of the staged tiles; MAX_HD / TPR sizes the per-row registers. */
  readonly MAX_HD: number;
  /** Invocations of a prep workgroup, one per (b, t, h) row. */
  readonly PREP_WG: number;
}

export type AttentionGeometryName = 'flash' | 'hd32' | 'hd64' | 'hd128';

/**
 * The named geometries. `flash` is the original one (every head dim up to 128 through 128-wide
 * tiles, 4 invocations per row), kept selectable and bit-for-bit as it was. The `hd*` ones are
 * sized to the head dim: tiles and registers as wide as the head (not 128), and at small heads
 * fewer invocations per row, so each does more of the dot product itself and fewer partial sums
 * cross workgroup memory; wider key / query tiles mean fewer barriers per row block (llvmpipe runs
 * a workgroup on one CPU thread, where every barrier is a switch between invocation groups).
 * Measured in bench/kernels/attention.ts (see chooseAttentionGeometry).
 */
export const ATTENTION_GEOMETRIES: Readonly<Record<AttentionGeometryName, FlashGeometry>> = {
  flash: { BR: 16, BK: 16, TPR: 4, BC: 8, BQ: 8, MAX_HD: 128, PREP_WG: 64 },
  hd32: { BR: 16, BK: 16, TPR: 1, BC: 16, BQ: 16, MAX_HD: 32, PREP_WG: 64 },
  hd64: { BR: 16, BK: 16, TPR: 2, BC: 16, BQ: 16, MAX_HD: 64, PREP_WG: 64 },
  hd128: { BR: 16, BK: 16, TPR: 4, BC: 8, BQ: 8, MAX_HD: 128, PREP_WG: 64 },
};

/** The original geometry (kept as a named export: tests and benchmarks compare against it). */
export const FLASH_GEOMETRY: FlashGeometry = ATTENTION_GEOMETRIES.flash;

export interface FlashKernels {
  forward: KernelDef;
  prep: KernelDef;
  dq: KernelDef;
  dkv: KernelDef;
  /**
   * prep and dq in one dispatch (the lanes variant's attention/dq-lanes-prep). It binds nine storage
   * buffers, one past WebGPU's default, so a backward runs it only where the device binds that many.
   */
  dqPrep?: KernelDef;
}

/**
 * The four kernels specialised to `geometry`. The `flash` geometry keeps the plain shader names
 * (the registry lists those); any other gets its fields in the kernel name, because the pipeline
 * cache keys on name + override constants and each geometry is a different source.
 */
export function flashKernels(geometry: FlashGeometry): FlashKernels {
  const g = geometry;
  const same = (Object.keys(FLASH_GEOMETRY) as (keyof FlashGeometry)[]).every((k) => g[k] === FLASH_GEOMETRY[k]);
  const tag = same ? '' : `@br${g.BR}bk${g.BK}tpr${g.TPR}bc${g.BC}bq${g.BQ}hd${g.MAX_HD}wg${g.PREP_WG}`;
  const rows = { TPR: g.TPR, MAX_HD: g.MAX_HD };
  return {
    forward: {
      name: `attention/forward${tag}`,
      source: shaderSource('attention/forward', { BR: g.BR, BC: g.BC, ...rows }),
      bindings: ['uniform', 'read', 'read', 'read', 'read', 'write', 'write'],
    },
    prep: {
      name: `attention/prep${tag}`,
      source: shaderSource('attention/prep', { WG: g.PREP_WG }),
      bindings: ['uniform', 'read', 'read', 'read', 'write'],
    },
    dq: {
      name: `attention/dq${tag}`,
      source: shaderSource('attention/dq', { BR: g.BR, BC: g.BC, ...rows }),
      bindings: ['uniform', 'read', 'read', 'read', 'read', 'read', 'read', 'write'],
    },
    dkv: {
      name: `attention/dkv${tag}`,
      source: shaderSource('attention/dkv', { BK: g.BK, BQ: g.BQ, ...rows }),
      bindings: ['uniform', 'read', 'read', 'read', 'read', 'read', 'read', 'write', 'write'],
    },
  };
}

/** The kernels of the `flash` geometry: the ones the registry compiles on every runtime. */
export const ATTENTION_KERNELS: FlashKernels = flashKernels(FLASH_GEOMETRY);

/** Kernel sets already specialised, so a geometry's KernelDefs are built once. */
const KERNELS_BY_GEOMETRY = new Map<FlashGeometry, FlashKernels>([[FLASH_GEOMETRY, ATTENTION_KERNELS]]);

export function kernelsFor(geometry: FlashGeometry): FlashKernels {
  let k = KERNELS_BY_GEOMETRY.get(geometry);
  if (!k) {
    k = flashKernels(geometry);
    KERNELS_BY_GEOMETRY.set(geometry, k);
  }
  return k;
}

/**
 * Workgroup memory of a geometry's largest kernel, from the var<workgroup> declarations of each
 * shader (4-byte words):
 * forward  Ks, Vs [BC][MAX_HD], Ps [BR][BC][TPR], keyOk [BC];
 * dq       Ks, Vs [BC][MAX_HD], Ps, DPs [BR][BC][TPR], keyOk [BC];
 * dkv      Qs, Gs [BQ][MAX_HD], Ps, DPs [BK][BQ][TPR], rowL, rowD [BQ].
 */
export function flashWorkgroupBytes(g: FlashGeometry): number {
  return 4 * Math.max(2 * g.BC * g.MAX_HD + 2 * g.BR * g.BC * g.TPR + g.BC, 2 * g.BQ * g.MAX_HD + 2 * g.BK * g.BQ * g.TPR + 2 * g.BQ);
}

/** Storage buffers the widest of `kernels` binds. */
export function storageBuffersOf(kernels: FlashKernels): number {
  // Not dqPrep: a device that cannot bind it runs prep and dq instead.
  return Math.max(...[kernels.forward, kernels.prep, kernels.dq, kernels.dkv].map((k) => storageBindings(k)));
}

/** Storage buffers of the widest kernel (dkv: 8), the same for every geometry. */
const FLASH_STORAGE_BUFFERS = storageBuffersOf(ATTENTION_KERNELS);

/**
 * The largest grid dimension any of the four kernels launched with `g` uses on `dims`: forward / dq
 * row blocks, dkv key blocks, prep's rows / PREP_WG, heads, batch (the grids of src/kernels/attention.ts).
 */
export function largestGridDimension(g: FlashGeometry, dims: AttentionDims): number {
  return Math.max(Math.ceil(dims.seq / Math.min(g.BR, g.BK)), Math.ceil((dims.seq * dims.heads) / g.PREP_WG), dims.heads, dims.batch);
}

export interface AttentionDims {
  batch: number;
  seq: number;
  heads: number;
  kvHeads: number;
  headDim: number;
}

export interface TttAttentionDims extends AttentionDims {
  /** TTT unroll step k (0-based); uses cache slots 0..k. */
  step: number;
}

export interface AttentionLimits {
  maxComputeWorkgroupStorageSize?: number;
  maxStorageBuffersPerShaderStage?: number;
  maxComputeWorkgroupsPerDimension?: number;
}

/**
 * The geometry for a shape on a device. Pure. `flash` by default; the geometry sized to the head dim
 * (hd ≤ 32, ≤ 64, ≤ 128) only where the device's workgroup memory cannot hold flash's 128-wide
 * tiles. Why not the sized ones everywhere: they run the lab's TTT forward 6.9x faster on llvmpipe
 * (backward 1.24x; bench/attention-geometry.ts), but each lane keeps head_dim / TPR values in
 * registers (32 for hd32 at head dim 32, against flash's 8), and compiling them cold on llvmpipe
 * took minutes, long enough to time out a first training step. Sequence length enters through the
 * device checks only. An error names attention when neither geometry can run the shape.
 */
export function chooseAttentionGeometry(dims: AttentionDims, limits: AttentionLimits): AttentionGeometryName {
  const sized: AttentionGeometryName = dims.headDim <= 32 ? 'hd32' : dims.headDim <= 64 ? 'hd64' : 'hd128';
  const storage = limits.maxComputeWorkgroupStorageSize ?? 16384;
  const name: AttentionGeometryName = flashWorkgroupBytes(ATTENTION_GEOMETRIES.flash) <= storage ? 'flash' : sized;
  checkGeometry(ATTENTION_GEOMETRIES[name], name, dims, limits);
  return name;
}

/** Throw (naming attention, the geometry and the limit) unless `g` can run `dims` on the device. */
export function checkGeometry(g: FlashGeometry, name: string, dims: AttentionDims, limits: AttentionLimits): void {
  const largest = ATTENTION_GEOMETRIES.hd128.MAX_HD;
  if (dims.headDim > largest)
    throw new Error(`attention: head dim ${dims.headDim} exceeds ${largest}, the largest any attention variant supports`);
  if (dims.headDim > g.MAX_HD)
    throw new Error(`attention: head dim ${dims.headDim} exceeds ${g.MAX_HD}, the largest geometry ${name} serves`);
  const bytes = flashWorkgroupBytes(g);
  const storage = limits.maxComputeWorkgroupStorageSize ?? 16384;
  if (storage < bytes)
    throw new Error(
      `attention: the flash kernels (geometry ${name}) need ${bytes} bytes of workgroup memory, the device allows ${storage}`,
    );
  const buffers = limits.maxStorageBuffersPerShaderStage ?? 8;
  if (buffers < FLASH_STORAGE_BUFFERS) {
    throw new Error(`attention: the flash kernels bind ${FLASH_STORAGE_BUFFERS} storage buffers, the device allows ${buffers}`);
  }
  const perDim = limits.maxComputeWorkgroupsPerDimension ?? 65535;
  const grid = largestGridDimension(g, dims);
  if (grid > perDim) {
    throw new Error(
      `attention: a grid dimension of ${grid} workgroups (seq ${dims.seq}, heads ${dims.heads}, batch ${dims.batch}) exceeds the device's ${perDim}`,
    );
  }
}

/**
 * A geometry by name, or a record (benchmarks try unnamed ones), checked against the shape and
 * device; undefined means chooseAttentionGeometry's.
 */
export type GeometryChoice = AttentionGeometryName | FlashGeometry | undefined;

export function resolveGeometry(choice: GeometryChoice, dims: AttentionDims, limits: AttentionLimits): FlashGeometry {
  if (choice === undefined) return ATTENTION_GEOMETRIES[chooseAttentionGeometry(dims, limits)];
  if (typeof choice === 'string') {
    const g = ATTENTION_GEOMETRIES[choice];
    if (!g) throw new Error(`attention: unknown geometry "${choice}" (known: ${Object.keys(ATTENTION_GEOMETRIES).join(', ')})`);
    checkGeometry(g, choice, dims, limits);
    return g;
  }
  for (const [k, v] of Object.entries(choice)) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`attention: geometry field ${k} must be a positive integer, got ${v}`);
  }
  if (![1, 2, 4, 8].includes(choice.TPR)) throw new Error(`attention: geometry field TPR must be 1, 2, 4 or 8, got ${choice.TPR}`);
  checkGeometry(choice, 'given', dims, limits);
  return choice;
}
