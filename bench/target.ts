/**
 * Target-model throughput, end to end (wall clock, host overhead and readbacks included):
 *   forward — batched forward over B × S tokens with logits at every position (the capture path);
 *   prefill — the generation prefill into a KV cache, logits at each prompt's last token only;
 *   decode  — KV-cache generation, one token per sequence per step, logits read back every step.
 * Decode at batch 1 is also put against the memory-bandwidth limit: f32 weight bytes read per decoded
 * token (every layer weight, the final norm, the whole lm_head, one embedding row; the KV cache is
 * left out) over the copyBufferToBuffer bandwidth measured in the same run.
 *
 *   npx tsx scripts/embed-shaders.ts && npx tsx bench/target.ts [--model hf/llama-tiny] [--batch 8]
 *       [--seq 128] [--new 64] [--reps 3]
 *   npx tsx bench/target.ts --shape llama-3.2-1b [--layers N] --batch 1 --seq 64 --new 4 --reps 1
 *       [--precision f32|f16|both]
 * --precision sets the target's weight storage (f16: matrices stored as f16, f32 arithmetic);
 * `both` measures f32 then f16 in one run (one model on the GPU at a time) and adds the GPU weight
 * bytes ratio and the logits difference of f16 vs f32 on the same tokens: per row of the forward's
 * logits (batch × seq rows) the relative error ‖l16 − l32‖₂ / ‖l32‖₂, its max and mean over rows.
 * --model reads an HF directory from the fixtures folder ($SPECLAB_FIXTURES or ../shared/fixtures);
 * --shape builds a published shape with random weights instead (bench/target-shapes.ts), --layers
 * overriding its layer count. The same command runs on any WebGPU device.
 */
import { loadHfCheckpoint, type WeightPrecision } from '../src/formats/hf-checkpoint.ts';
import { Gpu } from '../src/gpu/gpu.ts';
import type { Tensor } from '../src/gpu/tensor.ts';
import { TargetModel } from '../src/model/target/model.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { Rng } from '../src/util/random.ts';
import { benchCopy } from './copy.ts';
import { median } from './record.ts';
import { randomCheckpoint, shapeConfig } from './target-shapes.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback?: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const shape = opt('--shape');
const layers = opt('--layers');
const modelDir = opt('--model', 'hf/llama-tiny')!;
const batch = Number(opt('--batch', '8'));
const seq = Number(opt('--seq', '128'));
const newTokens = Number(opt('--new', '64'));
const reps = Number(opt('--reps', '3'));
const promptLen = Math.min(12, seq);
const precisionArg = opt('--precision', 'f32')!;
if (!['f32', 'f16', 'both'].includes(precisionArg)) throw new Error(`--precision must be f32, f16 or both, got ${precisionArg}`);
const precisions: WeightPrecision[] = precisionArg === 'both' ? ['f32', 'f16'] : [precisionArg as WeightPrecision];

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
// Copy bandwidth first, while no model weights occupy memory.
const copy = await benchCopy(gpu, [16, 64]);
const copyGbps = Math.max(...copy.map((r) => r.gbps ?? 0));

const loadStart = performance.now();
const checkpoint = shape
  ? randomCheckpoint(shapeConfig(shape, layers === undefined ? undefined : Number(layers)))
  : await loadHfCheckpoint(nodePlatform.files(nodePlatform.env('SPECLAB_FIXTURES') ?? '../shared/fixtures'), modelDir);
let model = TargetModel.create(gpu, checkpoint, { weightPrecision: precisions[0] });
await gpu.sync();
let loadSeconds = (performance.now() - loadStart) / 1000;
const config = checkpoint.config;
const V = config.vocabSize;
const rng = new Rng(1);
const ids = Array.from({ length: batch * seq }, () => rng.int(0, V));

/** Weight bytes one batch-1 decode step reads: every weight but the embedding, of which it reads one row. */
function decodeWeightBytes(): { bytes: number; params: number } {
  const w = model.weights;
  const all = new Set<Tensor>([w.finalNorm, w.lmHead]);
  for (const l of w.layers) for (const t of Object.values(l)) if (t) all.add(t);
  let bytes = config.hiddenSize * 4;
  for (const t of all) bytes += t.byteLength;
  const params = new Set<Tensor>([...all, w.embedTokens]);
  return { bytes, params: [...params].reduce((n, t) => n + t.numel, 0) };
}

async function timeForward(): Promise<number> {
  const start = performance.now();
  const out = await model.forward({ inputIds: ids, batch, seqLen: seq });
  await gpu.read(out.logits!);
  gpu.release(out.logits!);
  return (performance.now() - start) / 1000;
}

async function timeCachePrefill(): Promise<number> {
  const cache = model.createKvCache(batch, seq);
  const prompts = Array.from({ length: batch }, (_, b) => ids.slice(b * seq, (b + 1) * seq));
  const start = performance.now();
  const logits = await model.prefill(cache, prompts);
  await gpu.read(logits);
  const seconds = (performance.now() - start) / 1000;
  gpu.release(logits);
  cache.release(gpu);
  return seconds;
}

/** Seconds for `steps` decode steps after a prefill of `promptLen` tokens per sequence (greedy, read back each step). */
async function timeDecode(rows: number, steps: number): Promise<number> {
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

const repeat = async (f: () => Promise<number>): Promise<number> => {
  const xs: number[] = [];
  for (let i = 0; i < reps; i++) xs.push(await f());
  return median(xs);
};
const rate = (tokens: number, seconds: number) => ({ ms: +(seconds * 1e3).toFixed(1), tokensPerSecond: +(tokens / seconds).toFixed(2) });

/** One precision's measurements, and the forward logits (for the f16 vs f32 comparison). */
async function measure(precision: WeightPrecision): Promise<{ result: Record<string, unknown>; logits: Float32Array }> {
  const forwardWarmup = await timeForward(); // includes pipeline compilation
  const forwardSeconds = await repeat(timeForward);
  await timeDecode(1, Math.min(2, newTokens)); // warm-up of the decode pipelines
  const prefillSeconds = await repeat(timeCachePrefill);
  const decode1 = await timeDecode(1, newTokens);
  const decodeB = batch > 1 ? await timeDecode(batch, newTokens) : undefined;

  const fixed = await model.forward({ inputIds: ids, batch, seqLen: seq });
  const logits = (await gpu.read(fixed.logits!)) as Float32Array;
  gpu.release(fixed.logits!);
  const { bytes, params } = decodeWeightBytes();
  const perToken = decode1 / newTokens;
  const decodeGbps = bytes / perToken / 1e9;
  const result = {
    adapter: `${ctx.record.description || ctx.record.vendor} (fallback: ${ctx.record.isFallbackAdapter})`,
    model: shape ? `${shape} (random weights${layers === undefined ? '' : `, ${config.numLayers} layers`})` : modelDir,
    weightPrecision: precision,
    gpuWeightBytes: model.weightBytes,
    config: {
      layers: config.numLayers,
      hidden: config.hiddenSize,
      heads: `${config.numHeads}/${config.numKvHeads}`,
      headDim: config.headDim,
      intermediate: config.intermediateSize,
      vocab: V,
      tied: config.tieWordEmbeddings,
      rope: config.ropeScaling.type,
      params,
    },
    loadSeconds: +loadSeconds.toFixed(1),
    copy: copy.map((r) => ({ shape: r.shape, ms: +r.ms.toFixed(3), gbps: +(r.gbps ?? 0).toFixed(2) })),
    forward: { batch, seq, warmupMs: +(forwardWarmup * 1e3).toFixed(1), ...rate(batch * seq, forwardSeconds) },
    prefill: { batch, seq, ...rate(batch * seq, prefillSeconds) },
    decode: [
      { batch: 1, steps: newTokens, msPerStep: +(perToken * 1e3).toFixed(1), tokensPerSecond: +(1 / perToken).toFixed(3) },
      ...(decodeB === undefined
        ? []
        : [
            {
              batch,
              steps: newTokens,
              msPerStep: +((decodeB / newTokens) * 1e3).toFixed(1),
              tokensPerSecond: +((batch * newTokens) / decodeB).toFixed(2),
            },
          ]),
    ],
    decodeBandwidth: {
      weightBytesPerToken: bytes,
      gbps: +decodeGbps.toFixed(3),
      copyGbps: +copyGbps.toFixed(2),
      fractionOfCopy: +(decodeGbps / copyGbps).toFixed(4),
      boundTokensPerSecond: +((copyGbps * 1e9) / bytes).toFixed(2),
    },
  };
  return { result, logits };
}

const runs: Record<string, unknown>[] = [];
const logitsOf: Float32Array[] = [];
for (const [i, precision] of precisions.entries()) {
  if (i > 0) {
    const start = performance.now();
    model = TargetModel.create(gpu, checkpoint, { weightPrecision: precision });
    await gpu.sync();
    loadSeconds = (performance.now() - start) / 1000;
  }
  const { result, logits } = await measure(precision);
  runs.push(result);
  logitsOf.push(logits);
  if (i + 1 < precisions.length) model.destroy();
}
if (runs.length === 1) {
  console.log(JSON.stringify(runs[0]));
} else {
  const [l32, l16] = logitsOf;
  const rowErr: number[] = [];
  for (let r = 0; r < batch * seq; r++) {
    let d = 0;
    let n = 0;
    for (let v = r * V; v < (r + 1) * V; v++) {
      d += (l16[v] - l32[v]) ** 2;
      n += l32[v] ** 2;
    }
    rowErr.push(Math.sqrt(d / n));
  }
  const [b32, b16] = runs.map((r) => r.gpuWeightBytes as number);
  const summary = (r: Record<string, unknown>) => ({
    gpuWeightBytes: r.gpuWeightBytes,
    loadSeconds: r.loadSeconds,
    prefill: r.prefill,
    decode: r.decode,
    decodeBandwidth: r.decodeBandwidth,
    forward: r.forward,
  });
  console.log(
    JSON.stringify({
      adapter: runs[0].adapter,
      model: runs[0].model,
      config: runs[0].config,
      f32: summary(runs[0]),
      f16: summary(runs[1]),
      f16VsF32: {
        gpuBytesRatio: +(b16 / b32).toFixed(4),
        prefillSpeedup: +(
          (runs[1].prefill as { tokensPerSecond: number }).tokensPerSecond /
          (runs[0].prefill as { tokensPerSecond: number }).tokensPerSecond
        ).toFixed(3),
        decodeSpeedup: +(
          (runs[1].decode as { tokensPerSecond: number }[])[0].tokensPerSecond /
          (runs[0].decode as { tokensPerSecond: number }[])[0].tokensPerSecond
        ).toFixed(3),
        logitsRowRelDiff: { max: Math.max(...rowErr), mean: rowErr.reduce((a, b) => a + b, 0) / rowErr.length, rows: rowErr.length },
      },
    }),
  );
}
model.destroy();
gpu.destroy();
await nodePlatform.exit(0);
