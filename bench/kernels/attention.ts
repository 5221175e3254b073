/**
 * Attention benchmark: GFLOP/s of the flash forward and backward, plain causal (step 0) and at a
 * TTT step with diagonal keys.
 *
 * Useful work counted per visible (query, key) pair and head: forward 4·hd (q·k and p·v), backward
 * 10·hd (q·k recomputed, dO·v, dQ, dK, dV) — the usual FlashAttention convention of backward =
 * 2.5 x forward. Causal pairs per (b, h): S(S+1)/2 (padding-free inputs), plus S·step diagonal ones.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { tttAttentionBackward, tttAttentionForward, type AttentionDims } from '../../src/kernels/attention.ts';
import { Rng } from '../../src/util/random.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

/** A Llama-3-8B-shaped draft layer (32 heads, 8 kv heads, hd 128) at S 1024, batch 2. */
export const ATTENTION_BENCH_SHAPE: AttentionDims = { batch: 2, seq: 1024, heads: 32, kvHeads: 8, headDim: 128 };

export async function benchAttention(gpu: Gpu, shape: AttentionDims = ATTENTION_BENCH_SHAPE, reps = 5, tttStep = 3): Promise<BenchRecord[]> {
  const { batch: B, seq: S, heads: H, kvHeads: G, headDim: D } = shape;
  const rng = new Rng(31);
  const slots = tttStep + 1;
  const nq = B * S * H * D;
  const nkv = B * S * G * D;
  const q = gpu.upload([B * S, H * D], 'f32', rng.floats(nq), 'q');
  const kCache = gpu.upload([slots, B, S, G, D], 'f32', rng.floats(slots * nkv), 'kCache');
  const vCache = gpu.upload([slots, B, S, G, D], 'f32', rng.floats(slots * nkv), 'vCache');
  const mask = gpu.upload([B, S], 'i32', new Int32Array(B * S).fill(1), 'mask');
  const dO = gpu.upload([B * S, H * D], 'f32', rng.floats(nq), 'dO');
  const o = gpu.tensor([B * S, H * D], 'f32', 'o');
  const lse = gpu.tensor([B, H, S], 'f32', 'lse');
  const dQ = gpu.tensor([B * S, H * D], 'f32', 'dQ');
  const dKCache = gpu.tensor([slots, B, S, G, D], 'f32', 'dKCache');
  const dVCache = gpu.tensor([slots, B, S, G, D], 'f32', 'dVCache');
  const fwdT = { q, kCache, vCache, mask, o, lse };
  const bwdT = { ...fwdT, dO, dQ, dKCache, dVCache };
  const label = `B${B} S${S} H${H}/${G} hd${D}`;
  const out: BenchRecord[] = [];
  for (const step of [0, tttStep]) {
    const dims = { ...shape, step };
    const pairs = B * H * ((S * (S + 1)) / 2 + S * step);
    const tag = step === 0 ? '' : `ttt${step}-`;
    const fwd = await medianSeconds(gpu, () => tttAttentionForward(gpu, fwdT, dims), reps);
    out.push({ family: 'attention', variant: `${tag}fwd`, shape: label, ms: fwd * 1e3, gflops: (4 * D * pairs) / fwd / 1e9 });
    // The backward needs this step's lse; the forward above left it in place.
    const bwd = await medianSeconds(gpu, () => tttAttentionBackward(gpu, bwdT, dims), reps);
    out.push({ family: 'attention', variant: `${tag}bwd`, shape: label, ms: bwd * 1e3, gflops: (10 * D * pairs) / bwd / 1e9 });
  }
  gpu.release(q, kCache, vCache, mask, dO, o, lse, dQ, dKCache, dVCache);
  return out;
}
