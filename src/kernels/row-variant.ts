/**
 * Layout variants of the row kernels (RMSNorm forward / backward, the cross-entropy losses, the
 * teacher and the metrics): kernels that reduce each row of a [rows, width] tensor to a few numbers.
 *
 *   wide     — one 256-invocation workgroup per row, fixed halving tree in workgroup memory (about
 *              9 barriers per reduction). The original layout; the default on GPUs.
 *   rows     — ROWS rows per workgroup, LANES lanes per row, a log2(LANES)-step halving tree per
 *              row in workgroup memory: the no-feature variant, sized to narrow rows.
 *   subgroup — one LANES-lane subgroup per workgroup reducing ROWS rows one after another with
 *              subgroup operations and no barrier at all (needs `subgroups` at least LANES wide).
 *
 * Each family owns its geometry record (RMSNORM_ROW_GEOMETRY, LOSS_ROW_GEOMETRY), which reaches the
 * shaders as WGSL constants. Sums in `rows` and `subgroup` follow the same fixed order (per-lane
 * sums over columns lane, lane + LANES, …, then a halving tree / the matching xor butterfly), so
 * with equal LANES the two give bit-identical results; `wide` differs only in rounding.
 * `chooseRowVariant` is the policy, a pure function of the row shape, features and device facts.
 */
import type { GpuContext } from '../gpu/context.ts';
import { foldGrid } from './elementwise-common.ts';

export type RowVariant = 'wide' | 'rows' | 'subgroup';

/** Every variant, the original first (the order tests and benchmarks use). */
export const ROW_VARIANTS: readonly RowVariant[] = ['wide', 'rows', 'subgroup'];

/** LANES invocations reduce one row; a workgroup handles ROWS rows. */
export type RowGeometry = Readonly<Record<'LANES' | 'ROWS', number>>;

/** Geometry of the two sized variants of one family (`wide` has its own fixed 256-lane layout). */
export type RowGeometries = Readonly<Record<Exclude<RowVariant, 'wide'>, RowGeometry>>;

/** What the policy knows about the device besides its features (from the adapter record). */
export interface RowDeviceFacts {
  /** A software (CPU) adapter: workgroups run on CPU threads, invocations are SIMD lanes. */
  fallbackAdapter?: boolean;
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
}

export function rowDeviceFacts(ctx: GpuContext): RowDeviceFacts {
  return {
    fallbackAdapter: ctx.record.isFallbackAdapter,
    subgroupMinSize: ctx.record.subgroupMinSize,
    subgroupMaxSize: ctx.record.subgroupMaxSize,
  };
}

/** Fail unless every geometry is a power-of-two LANES (the halving tree) and a positive ROWS. */
export function checkRowGeometries(family: string, g: RowGeometries): RowGeometries {
  for (const [variant, { LANES, ROWS }] of Object.entries(g)) {
    const pow2 = Number.isInteger(LANES) && LANES >= 1 && (LANES & (LANES - 1)) === 0;
    if (!pow2 || !Number.isInteger(ROWS) || ROWS < 1)
      throw new Error(`${family} row geometry ${variant}: LANES must be a power of two and ROWS ≥ 1, got ${LANES} x ${ROWS}`);
  }
  return g;
}

/** Why `variant` cannot run on this device, or undefined when it can. */
export function rowVariantUnsupported(
  family: string,
  variant: RowVariant,
  geometry: RowGeometries,
  features: ReadonlySet<string>,
  facts: RowDeviceFacts,
): string | undefined {
  if (!ROW_VARIANTS.includes(variant)) return `${family} variant must be one of ${ROW_VARIANTS.join(', ')}, got ${String(variant)}`;
  if (variant !== 'subgroup') return undefined;
  if (!features.has('subgroups')) return `${family} variant subgroup needs the WebGPU feature "subgroups"`;
  // The shaders assume the whole workgroup (LANES invocations) is one subgroup with lanes 0..LANES-1.
  const lanes = geometry.subgroup.LANES;
  if (!((facts.subgroupMinSize ?? 0) >= lanes)) {
    return `${family} variant subgroup needs subgroups of at least ${lanes} invocations (device minimum: ${facts.subgroupMinSize ?? 'unknown'})`;
  }
  return undefined;
}

/** The variants this device can run, the original first. */
export function availableRowVariants(
  family: string,
  geometry: RowGeometries,
  features: ReadonlySet<string>,
  facts: RowDeviceFacts = {},
): RowVariant[] {
  return ROW_VARIANTS.filter((v) => rowVariantUnsupported(family, v, geometry, features, facts) === undefined);
}

export interface RowShape {
  /** Elements reduced per row (hidden size, vocabulary). */
  width: number;
  rows: number;
}

/**
 * - CPU adapters (llvmpipe, SwiftShader; measured in bench/RESULTS.md "Row kernels"): `subgroup`
 *   where it can run, else `rows`, at every shape. A workgroup runs on one CPU thread whatever its
 *   size, so the 256-lane layout buys no parallelism there and pays ~9 barriers (thread switches)
 *   per reduction; the sized variants pay none or log2(LANES) + 2.
 * - GPUs: `wide` (256 lanes per row keeps a GPU's wide workgroups busy), except rows of at most
 *   64 elements, where it would leave at least three quarters of its lanes without a column.
 */
export function chooseRowVariant(
  shape: RowShape,
  geometry: RowGeometries,
  features: ReadonlySet<string> = new Set(),
  facts: RowDeviceFacts = {},
): RowVariant {
  if (facts.fallbackAdapter) return rowVariantUnsupported('row', 'subgroup', geometry, features, facts) === undefined ? 'subgroup' : 'rows';
  return shape.width <= 64 ? 'rows' : 'wide';
}

/**
 * The variant `op` runs: the caller's override when given (refused, naming `op`, when this device
 * cannot run it), else the policy's.
 */
export function resolveRowVariant(
  op: string,
  family: string,
  ctx: GpuContext,
  shape: RowShape,
  geometry: RowGeometries,
  override?: RowVariant,
): RowVariant {
  const facts = rowDeviceFacts(ctx);
  const variant = override ?? chooseRowVariant(shape, geometry, ctx.features, facts);
  const unsupported = rowVariantUnsupported(family, variant, geometry, ctx.features, facts);
  if (unsupported) throw new Error(`${op}: ${unsupported}`);
  return variant;
}

/** Workgroups for `rows` rows in `variant`'s layout, folded into (x, y) (shaders read wg.x + wg.y · num_workgroups.x). */
export function rowLayoutGrid(ctx: GpuContext, rows: number, variant: RowVariant, geometry: RowGeometries): [number, number, number] {
  const workgroups = variant === 'wide' ? rows : Math.ceil(rows / geometry[variant].ROWS);
  return [...foldGrid(workgroups, ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535), 1];
}
