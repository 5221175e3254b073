/**
 * Attention benchmark: GFLOP/s of the flash forward and backward, plain causal (step 0) and at a
 * TTT step with diagonal keys, with the geometry the policy picks; and benchAttentionGeometries,
 * which times several geometries interleaved (round-robin, one call each per round) so that load
 * on a shared machine hits them alike and their ratios mean something.
 *
 * Useful work counted per visible (query, key) pair and head: forward 4·hd (q·k and p·v), backward
 * 10·hd (q·k recomputed, dO·v, dQ, dK, dV) — the usual FlashAttention convention of backward =
 * 2.5 x forward. Causal pairs per (b, h): S(S+1)/2 (padding-free inputs), plus S·step diagonal ones.
 *
 * bench/attention-geometry.ts runs the comparison from the command line.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import {
  attentionDeviceFacts,
  attentionVariantUnsupported,
  ATTENTION_VARIANTS,
  chooseAttentionGeometry,
  chooseAttentionVariant,
  tttAttentionBackward,
  tttAttentionForward,
  type AttentionDims,
  type AttentionForwardOptions,
  type FlashGeometry,
  type GeometryChoice,
} from '../../src/kernels/attention.ts';
import { storageLimitUnfit } from '../../src/gpu/pipeline-cache.ts';
import { LANES_KERNELS } from '../../src/kernels/attention-lanes.ts';
import { Rng } from '../../src/util/random.ts';
import { median, medianSeconds, type BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';

/** A Llama-3-8B-shaped draft layer (32 heads, 8 kv heads, hd 128) at S 1024, batch 2. */
export const ATTENTION_BENCH_SHAPE: AttentionDims = { batch: 2, seq: 1024, heads: 32, kvHeads: 8, headDim: 128 };

/**
 * Shapes of the EAGLE3 drafts SpecLab trains, with the TTT step the benchmark adds (length − 1), and
 * one 128-wide-head shape, where the lanes variant runs its 128-slot kernels.
 */
export const DRAFT_ATTENTION_SHAPES: Readonly<Record<string, { dims: AttentionDims; tttStep: number }>> = {
  /** The lab target's draft (assets/lab-target: 4/2 heads, hd 32) at batch 4 × 56, TTT 4. */
  lab: { dims: { batch: 4, seq: 56, heads: 4, kvHeads: 2, headDim: 32 }, tttStep: 3 },
  /** The SpecForge fixture (fixtures/eagle3: 4/2 heads, hd 16) at its batch 2 × 40, TTT 4. */
  fixture: { dims: { batch: 2, seq: 40, heads: 4, kvHeads: 2, headDim: 16 }, tttStep: 3 },
  /** bench/train.ts's `mid` draft (16/4 heads, hd 64) at batch 1 × 128, TTT 7. */
  mid: { dims: { batch: 1, seq: 128, heads: 16, kvHeads: 4, headDim: 64 }, tttStep: 6 },
  /**
   * 16/8 heads of 128 (Qwen3-0.6B's attention) over 256 tokens: at step 0 a target's capture
   * forward, at step 6 a draft with heads that wide (a Llama-3.1-8B draft's are 32/8 of 128).
   */
  hd128: { dims: { batch: 1, seq: 256, heads: 16, kvHeads: 8, headDim: 128 }, tttStep: 6 },
};

interface Operands {
  fwd: { q: Tensor; kCache: Tensor; vCache: Tensor; mask: Tensor; o: Tensor; lse: Tensor };
  bwd: Operands['fwd'] & { dO: Tensor; dQ: Tensor; dKCache: Tensor; dVCache: Tensor };
  release(): void;
}

function operands(gpu: Gpu, shape: AttentionDims, tttStep: number): Operands {
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D } = shape;
  const rng = new Rng(31);
  const slots = tttStep + 1;
  const nq = B * S * H * D;
  const nkv = B * S * G * D;
  const fwd = {
    q: gpu.upload([B * S, H * D], 'f32', rng.floats(nq), 'q'),
    kCache: gpu.upload([slots, B, S, G, D], 'f32', rng.floats(slots * nkv), 'kCache'),
    vCache: gpu.upload([slots, B, S, G, D], 'f32', rng.floats(slots * nkv), 'vCache'),
    mask: gpu.upload([B, S], 'i32', new Int32Array(B * S).fill(1), 'mask'),
    o: gpu.tensor([B * S, H * D], 'f32', 'o'),
    lse: gpu.tensor([B, H, S], 'f32', 'lse'),
  };
  const bwd = {
    ...fwd,
    dO: gpu.upload([B * S, H * D], 'f32', rng.floats(nq), 'dO'),
    dQ: gpu.tensor([B * S, H * D], 'f32', 'dQ'),
    dKCache: gpu.tensor([slots, B, S, G, D], 'f32', 'dKCache'),
    dVCache: gpu.tensor([slots, B, S, G, D], 'f32', 'dVCache'),
  };
  return { fwd, bwd, release: () => gpu.release(...Object.values(bwd)) };
}

const pairsOf = (d: AttentionDims, step: number) => d.batch * d.heads * ((d.seq * (d.seq + 1)) / 2 + d.seq * step);
const labelOf = (d: AttentionDims) => `B${d.batch} S${d.seq} H${d.heads}/${d.kvHeads} hd${d.headDim}`;

/**
 * The flash forward and backward (with `geometry`, default the geometry policy's) and every other
 * variant this device can run, plain causal and at `tttStep`. Flash's records keep their plain
 * names (`fwd`, `ttt3-bwd`); another variant's carry its name first (`lanes ttt3-fwd`).
 */
export async function benchAttention(
  gpu: Gpu,
  shape: AttentionDims = ATTENTION_BENCH_SHAPE,
  reps = 5,
  tttStep = 3,
  geometry?: GeometryChoice,
): Promise<BenchRecord[]> {
  const ops = operands(gpu, shape, tttStep);
  const out: BenchRecord[] = [];
  const facts = attentionDeviceFacts(gpu.ctx);
  for (const variant of ATTENTION_VARIANTS) {
    if (attentionVariantUnsupported(variant, shape, gpu.ctx.features, facts, gpu.ctx.limits) !== undefined) continue;
    const options: AttentionForwardOptions = variant === 'flash' ? { variant, geometry } : { variant };
    const prefix = variant === 'flash' ? '' : `${variant} `;
    for (const step of [0, tttStep]) {
      const dims = { ...shape, step };
      const pairs = pairsOf(shape, step);
      const tag = `${prefix}${step === 0 ? '' : `ttt${step}-`}`;
      const fwd = await medianSeconds(gpu, () => tttAttentionForward(gpu, ops.fwd, dims, options), reps);
      out.push({
        family: 'attention',
        variant: `${tag}fwd`,
        shape: labelOf(shape),
        ms: fwd * 1e3,
        gflops: (4 * shape.headDim * pairs) / fwd / 1e9,
      });
      // The backward needs this step's lse; the forward above left it in place.
      const bwd = await medianSeconds(gpu, () => tttAttentionBackward(gpu, ops.bwd, dims, options), reps);
      out.push({
        family: 'attention',
        variant: `${tag}bwd`,
        shape: labelOf(shape),
        ms: bwd * 1e3,
        gflops: (10 * shape.headDim * pairs) / bwd / 1e9,
      });
    }
  }
  ops.release();
  return out;
}

/**
 * The lanes backward with attention/dq-lanes-prep (prep and dq in one dispatch) against prep then
 * dq-lanes, interleaved, at the drafts' shapes and TTT steps; nothing where lanes cannot run.
 */
export async function benchLanesPrep(gpu: Gpu, rounds = 7): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const facts = attentionDeviceFacts(gpu.ctx);
  for (const [name, { dims: shape, tttStep }] of Object.entries(DRAFT_ATTENTION_SHAPES)) {
    if (name === 'hd128' || attentionVariantUnsupported('lanes', shape, gpu.ctx.features, facts, gpu.ctx.limits)) continue;
    // Where nine storage buffers do not bind, both candidates would run prep + dq-lanes.
    if (storageLimitUnfit(LANES_KERNELS.dqPrep, gpu.ctx.limits) !== undefined) continue;
    const ops = operands(gpu, shape, tttStep);
    try {
      const dims = { ...shape, step: tttStep };
      await tttAttentionForward(gpu, ops.fwd, dims, { variant: 'lanes' });
      const bwd = (separatePrep: boolean) => () => tttAttentionBackward(gpu, ops.bwd, dims, { variant: 'lanes', separatePrep });
      const ms = await interleavedMedians(
        gpu,
        new Map([
          ['lanes bwd, dq-lanes-prep', bwd(false)],
          ['lanes bwd, prep + dq-lanes', bwd(true)],
        ]),
        rounds,
      );
      const flop = 10 * shape.headDim * pairsOf(shape, tttStep);
      for (const [variant, s] of ms)
        out.push({ family: 'attention', variant, shape: `${name} ${labelOf(shape)} ttt${tttStep}`, ms: s * 1e3, gflops: flop / s / 1e9 });
    } finally {
      ops.release();
    }
  }
  return out;
}

/** One geometry's median forward and backward at one shape and TTT step, from an interleaved run. */
export interface GeometryTiming {
  geometry: string;
  /** Wall milliseconds of the first forward + backward: pipeline compilation, mostly. */
  firstCallMs: number;
  shape: string;
  step: number;
  fwdMs: number;
  bwdMs: number;
  fwdGflops: number;
  bwdGflops: number;
}

/**
 * Time each of `geometries` (a flash geometry's name or record, `lanes` for the lanes variant, or
 * `policy` for what the variant and geometry policies pick on this device) on `shape` at
 * TTT step `step`: one warm-up call each (compiles), then `reps` rounds that time every geometry's
 * forward and backward once, in turn. Medians per geometry.
 */
export async function benchAttentionGeometries(
  gpu: Gpu,
  shape: AttentionDims,
  step: number,
  geometries: readonly (string | FlashGeometry)[],
  reps = 5,
): Promise<GeometryTiming[]> {
  const ops = operands(gpu, shape, step);
  const dims = { ...shape, step };
  const policyVariant = chooseAttentionVariant(shape, gpu.ctx.features, gpu.ctx.limits, attentionDeviceFacts(gpu.ctx));
  const policyName = policyVariant === 'flash' ? chooseAttentionGeometry(shape, gpu.ctx.limits) : policyVariant;
  const resolve = (g: string | FlashGeometry): AttentionForwardOptions =>
    g === 'policy' ? {} : g === 'lanes' ? { variant: 'lanes' } : { variant: 'flash', geometry: g as GeometryChoice };
  const nameOf = (g: string | FlashGeometry) =>
    typeof g !== 'string'
      ? Object.entries(g)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')
      : g === 'policy'
        ? `policy (${policyName})`
        : g;
  const samples = geometries.map(() => ({ fwd: [] as number[], bwd: [] as number[] }));
  const fwd = (g: string | FlashGeometry) => tttAttentionForward(gpu, ops.fwd, dims, resolve(g));
  const bwd = (g: string | FlashGeometry) => tttAttentionBackward(gpu, ops.bwd, dims, resolve(g));
  // The first calls compile the geometry's four pipelines (llvmpipe JIT-compiles on first use).
  const firstMs: number[] = [];
  for (const g of geometries) {
    const start = performance.now();
    await fwd(g);
    await bwd(g);
    await gpu.sync();
    firstMs.push(performance.now() - start);
  }
  for (let r = 0; r < reps; r++) {
    for (const [i, g] of geometries.entries()) {
      samples[i].fwd.push((await gpu.timer.time(() => fwd(g))).seconds);
      // Each geometry's backward reads the lse its own forward just wrote.
      samples[i].bwd.push((await gpu.timer.time(() => bwd(g))).seconds);
    }
  }
  ops.release();
  const pairs = pairsOf(shape, step);
  return geometries.map((g, i) => {
    const f = median(samples[i].fwd);
    const b = median(samples[i].bwd);
    return {
      geometry: nameOf(g),
      firstCallMs: firstMs[i],
      shape: labelOf(shape),
      step,
      fwdMs: f * 1e3,
      bwdMs: b * 1e3,
      fwdGflops: (4 * shape.headDim * pairs) / f / 1e9,
      bwdGflops: (10 * shape.headDim * pairs) / b / 1e9,
    };
  });
}
