/**
 * The `lanes` attention variant (shaders/attention/{forward,dq,dkv}-lanes.wgsl): the flash
 * kernels' contract for CPU-like adapters with subgroups. A workgroup is one subgroup of 8 lanes
 * and each lane owns a whole query row (forward, dq) or key row (dkv) in registers; the rows every
 * lane needs (keys and values, or queries and dO) are loaded once per workgroup, split across the
 * lanes, and broadcast with subgroupBroadcast. No workgroup memory, no barriers: on llvmpipe each
 * barrier switches between a workgroup's SIMD vectors and every storage load is a per-lane gather,
 * which is what held the flash kernels near 0.3 GFLOP/s at the draft shapes SpecLab trains
 * (bench/attention-geometry.ts). The backward's first pass, attention/prep, is shared with flash.
 */
import type { KernelDef } from '../gpu/kernel-def.ts';
import {
  ATTENTION_KERNELS,
  FLASH_GEOMETRY,
  largestGridDimension,
  storageBuffersOf,
  type AttentionDims,
  type AttentionLimits,
  type FlashGeometry,
  type FlashKernels,
} from './attention-geometry.ts';
import { shaderSource } from './shader-source.ts';

/**
 * Launch geometry of the lanes kernels, in the flash record's terms so the host's grids are the
 * same code: BR query rows per forward / dq workgroup, BK key rows per dkv workgroup (both the 8
 * lanes of one subgroup, which the shaders assert), TPR 1 (a lane owns its row whole), MAX_HD the
 * largest head dim (the size of each lane's row registers), PREP_WG flash's prep workgroup. BC and
 * BQ are unused (no tiles), recorded as 1.
 */
export const LANES_GEOMETRY: FlashGeometry = { BR: 8, BK: 8, TPR: 1, BC: 1, BQ: 1, MAX_HD: 64, PREP_WG: FLASH_GEOMETRY.PREP_WG };

/**
 * The same kernels with row registers of 128: the head dim of most published targets (Qwen3,
 * Llama 3.1 8B) and of their drafts. A separate specialisation, so the smaller heads keep their
 * 64-slot registers: against flash at B 1 × S 256, 16/8 heads of 128, 1.47–1.50× the forward and
 * 2.50–2.74× the backward (bench/RESULTS.md, "Attention lanes for 128-wide heads").
 */
export const LANES_GEOMETRY_HD128: FlashGeometry = { ...LANES_GEOMETRY, MAX_HD: 128 };

/** Lanes a lanes workgroup spans: it must be one subgroup. */
export const LANES_SUBGROUP = LANES_GEOMETRY.BR;

const requires = ['subgroups'] as const;

/**
 * forward, dq and dkv of the lanes variant specialised to `g`, flash's prep (its PREP_WG is the lanes
 * geometries'), and dqPrep, prep and dq in one. The 64-slot kernels keep the plain names; others carry
 * their MAX_HD, since the pipeline cache keys on name + override constants and each is a different source.
 */
function lanesKernels(g: FlashGeometry): Required<FlashKernels> {
  const constants = { BR: g.BR, BK: g.BK, TPR: g.TPR, MAX_HD: g.MAX_HD };
  const tag = g.MAX_HD === LANES_GEOMETRY.MAX_HD ? '' : `@hd${g.MAX_HD}`;
  return {
    forward: {
      name: `attention/forward-lanes${tag}`,
      source: shaderSource('attention/forward-lanes', constants),
      bindings: ['uniform', 'read', 'read', 'read', 'read', 'write', 'write'],
      requires,
    },
    prep: ATTENTION_KERNELS.prep,
    dq: {
      name: `attention/dq-lanes${tag}`,
      source: shaderSource('attention/dq-lanes', constants),
      bindings: ['uniform', 'read', 'read', 'read', 'read', 'read', 'read', 'write'],
      requires,
    },
    dkv: {
      name: `attention/dkv-lanes${tag}`,
      source: shaderSource('attention/dkv-lanes', constants),
      bindings: ['uniform', 'read', 'read', 'read', 'read', 'read', 'read', 'write', 'write'],
      requires,
    },
    dqPrep: {
      name: `attention/dq-lanes-prep${tag}`,
      source: shaderSource('attention/dq-lanes-prep', constants),
      bindings: ['uniform', 'read', 'read', 'read', 'read', 'read', 'write', 'write', 'read', 'read'],
      requires,
    },
  };
}

/** The lanes kernels with 64-slot row registers (head dims up to 64). */
export const LANES_KERNELS: Required<FlashKernels> = lanesKernels(LANES_GEOMETRY);
/** The lanes kernels with 128-slot row registers (head dims 65 to 128). */
export const LANES_KERNELS_HD128: Required<FlashKernels> = lanesKernels(LANES_GEOMETRY_HD128);

/** The lanes geometry and kernels that serve `headDim`: the smallest registers that hold a row. */
export function lanesFor(headDim: number): { geometry: FlashGeometry; kernels: FlashKernels } {
  return headDim <= LANES_GEOMETRY.MAX_HD
    ? { geometry: LANES_GEOMETRY, kernels: LANES_KERNELS }
    : { geometry: LANES_GEOMETRY_HD128, kernels: LANES_KERNELS_HD128 };
}

/** Storage buffers of the widest lanes kernel a backward cannot do without (dkv: 8; dqPrep's nine are optional). */
const LANES_STORAGE_BUFFERS = storageBuffersOf(LANES_KERNELS);

/**
 * The lanes kernels the registry lists, one per shader as for flash's geometries: the 64-slot ones
 * (the 128-slot ones are the same sources with another MAX_HD; prep is flash's, listed there).
 */
export const LANES_ONLY_KERNELS: readonly KernelDef[] = [LANES_KERNELS.forward, LANES_KERNELS.dq, LANES_KERNELS.dkv, LANES_KERNELS.dqPrep];

/** What the attention policy knows about the device besides its features and limits. */
export interface AttentionDeviceFacts {
  /** A software (CPU) adapter: workgroups run on CPU threads, invocations are SIMD lanes. */
  fallbackAdapter?: boolean;
  subgroupMinSize?: number;
}

/** Why the lanes kernels cannot run `dims` on this device, or undefined when they can. */
export function lanesUnsupported(
  dims: AttentionDims,
  features: ReadonlySet<string>,
  facts: AttentionDeviceFacts,
  limits: AttentionLimits,
): string | undefined {
  if (!features.has('subgroups')) return 'attention variant lanes needs the WebGPU feature "subgroups"';
  if (!((facts.subgroupMinSize ?? 0) >= LANES_SUBGROUP)) {
    return `attention variant lanes needs subgroups of at least ${LANES_SUBGROUP} invocations (device minimum: ${facts.subgroupMinSize ?? 'unknown'})`;
  }
  if (dims.headDim > LANES_GEOMETRY_HD128.MAX_HD)
    return `attention variant lanes serves head dims up to ${LANES_GEOMETRY_HD128.MAX_HD}, got ${dims.headDim}`;
  const buffers = limits.maxStorageBuffersPerShaderStage ?? 8;
  if (buffers < LANES_STORAGE_BUFFERS)
    return `attention variant lanes binds ${LANES_STORAGE_BUFFERS} storage buffers, the device allows ${buffers}`;
  const perDim = limits.maxComputeWorkgroupsPerDimension ?? 65535;
  const grid = largestGridDimension(LANES_GEOMETRY, dims);
  if (grid > perDim) {
    return `attention variant lanes: a grid dimension of ${grid} workgroups (seq ${dims.seq}, heads ${dims.heads}, batch ${dims.batch}) exceeds the device's ${perDim}`;
  }
  return undefined;
}
