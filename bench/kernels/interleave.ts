/**
 * Interleaved timing of alternatives (kernel variants): each round times every candidate once, in
 * turn, and the median per candidate is taken over the rounds, so load changes on a shared machine
 * hit every candidate alike and their ratios stay meaningful.
 */
import type { Gpu } from '../../src/gpu/gpu.ts';

/** Median seconds per candidate over `rounds` interleaved rounds (after one warm-up run each, which also compiles). */
export async function interleavedMedians(
  gpu: Gpu,
  candidates: ReadonlyMap<string, () => Promise<void>>,
  rounds = 7,
): Promise<Map<string, number>> {
  const samples = new Map<string, number[]>();
  for (const [name, encode] of candidates) {
    await encode();
    await gpu.sync();
    samples.set(name, []);
  }
  for (let i = 0; i < rounds; i++) {
    for (const [name, encode] of candidates) samples.get(name)!.push((await gpu.timer.time(encode)).seconds);
  }
  return new Map([...samples].map(([name, s]) => [name, s.sort((a, b) => a - b)[Math.floor(s.length / 2)]]));
}
