/**
 * Target-model throughput, end to end (wall clock, host overhead and readbacks included):
 *   prefill — batched forward over B × S tokens with logits at every position (the capture path);
 *   decode  — KV-cache generation, one token per sequence per step, logits read back every step.
 *
 *   npx tsx scripts/embed-shaders.ts && npx tsx bench/target.ts [--model hf/llama-tiny] [--batch 8]
 *       [--seq 128] [--new 64]
 * The model directory is read from the fixtures folder ($SPECLAB_FIXTURES or ../shared/fixtures).
 */
import { loadHfCheckpoint } from '../src/data/checkpoint.ts';
import { Gpu } from '../src/gpu/gpu.ts';
import { TargetModel } from '../src/model/target/model.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { Rng } from '../src/reference/random.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const modelDir = opt('--model', 'hf/llama-tiny');
const batch = Number(opt('--batch', '8'));
const seq = Number(opt('--seq', '128'));
const newTokens = Number(opt('--new', '64'));

const fixtures = nodePlatform.env('SPECLAB_FIXTURES') ?? '../shared/fixtures';
const checkpoint = await loadHfCheckpoint(nodePlatform.files(fixtures), modelDir);
const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
const model = TargetModel.create(gpu, checkpoint);
const V = checkpoint.config.vocabSize;
const rng = new Rng(1);
const ids = Array.from({ length: batch * seq }, () => rng.int(0, V));

async function timePrefill(): Promise<number> {
  const start = performance.now();
  const out = await model.forward({ inputIds: ids, batch, seqLen: seq });
  await gpu.read(out.logits!);
  gpu.release(out.logits!);
  return (performance.now() - start) / 1000;
}

/** Seconds for `steps` decode steps after a prefill of `promptLen` tokens per sequence (greedy, read back each step). */
async function timeDecode(rows: number, promptLen: number, steps: number): Promise<number> {
  const cache = model.createKvCache(rows, promptLen + steps + 1);
  const prompts = Array.from({ length: rows }, (_, b) => ids.slice(b * promptLen, (b + 1) * promptLen));
  let logits = await model.prefill(cache, prompts);
  await gpu.read(logits);
  const start = performance.now();
  for (let s = 0; s < steps; s++) {
    const host = (await gpu.read(logits)) as Float32Array;
    gpu.release(logits);
    const next = prompts.map((_, b) => {
      const row = host.subarray(b * V, (b + 1) * V);
      let best = 0;
      for (let v = 1; v < V; v++) if (row[v] > row[best]) best = v;
      return best;
    });
    logits = await model.decode(cache, next);
  }
  await gpu.read(logits);
  const seconds = (performance.now() - start) / 1000;
  gpu.release(logits);
  cache.release(gpu);
  return seconds;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

await timePrefill(); // warm-up: pipeline compilation
const prefillSeconds = median([await timePrefill(), await timePrefill(), await timePrefill()]);
await timeDecode(1, 12, 4); // warm-up of the decode pipelines
const decode1 = await timeDecode(1, 12, newTokens);
const decodeB = await timeDecode(batch, 12, newTokens);
const result = {
  adapter: `${ctx.record.description || ctx.record.vendor} (fallback: ${ctx.record.isFallbackAdapter})`,
  model: modelDir,
  prefill: { batch, seq, ms: +(prefillSeconds * 1e3).toFixed(2), tokensPerSecond: Math.round((batch * seq) / prefillSeconds) },
  decode: [
    { batch: 1, steps: newTokens, msPerStep: +((decode1 / newTokens) * 1e3).toFixed(2), tokensPerSecond: Math.round(newTokens / decode1) },
    { batch, steps: newTokens, msPerStep: +((decodeB / newTokens) * 1e3).toFixed(2), tokensPerSecond: Math.round((batch * newTokens) / decodeB) },
  ],
};
console.log(JSON.stringify(result, null, 1));
model.destroy();
gpu.destroy();
