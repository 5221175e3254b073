/**
 * Host memory of loading a target: the weights streamed from the files onto the GPU slice by slice
 * (TargetModel.load), as every run loads them. Prints one JSON line:
 *   fileBytes, largestTensorBytes (the largest tensor as stored on the GPU), gpuPeakBytes (every GPU
 *   buffer the load created, from the Gpu's memory counter), maxRssBytes (the process's peak resident
 *   set), hostBytes = maxRssBytes − gpuPeakBytes, and the bound of issue "a real model end to end"
 *   (1.5 × the largest tensor + 384 MiB) with whether the host side stays inside it.
 * On a CPU adapter (llvmpipe, SwiftShader) GPU buffers live in the process and count in its resident
 * set, hence the subtraction; on a GPU maxRssBytes is the host side alone.
 *
 *   npx tsx bench/random-target.ts --shape llama-3.2-1b --out /tmp/llama-1b
 *   npx tsx bench/target-load.ts --target /tmp/llama-1b --precision f16
 *   /usr/bin/time -v npx tsx bench/target-load.ts --target /tmp/llama-1b --precision f16   # the same peak, from the OS
 */
import process from 'node:process';
import { HfCheckpointSource } from '../src/formats/hf-checkpoint-source.ts';
import { isMatrixWeight, type WeightPrecision } from '../src/formats/hf-checkpoint.ts';
import { Gpu } from '../src/gpu/gpu.ts';
import { TargetModel } from '../src/model/target/model.ts';
import { nodePlatform } from '../src/platform/node.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback?: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const dir = opt('--target');
if (!dir) throw new Error('bench/target-load: --target DIR is required (a Hugging Face model folder)');
const precision = opt('--precision', 'f16') as WeightPrecision;
if (precision !== 'f32' && precision !== 'f16') throw new Error(`bench/target-load: --precision must be f32 or f16, got ${precision}`);

const MiB = 2 ** 20;
const source = await HfCheckpointSource.open(nodePlatform.files(dir), '');
const storedBytes = (name: string, shape: readonly number[]) =>
  shape.reduce((a, d) => a * d, 1) * (precision === 'f16' && isMatrixWeight(name) ? 2 : 4);
const largest = source.tensors.reduce((a, t) => Math.max(a, storedBytes(t.name, t.shape)), 0);

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
const started = performance.now();
const model = await TargetModel.load(gpu, source, { weightPrecision: precision });
await gpu.sync();
const seconds = (performance.now() - started) / 1000;
const gpuPeakBytes = gpu.memoryStats().peakBytes;
const maxRssBytes = process.resourceUsage().maxRSS * 1024;
const hostBytes = maxRssBytes - gpuPeakBytes;
const boundBytes = 1.5 * largest + 384 * MiB;
console.log(
  JSON.stringify({
    bench: 'target-load',
    target: dir,
    precision,
    layers: source.config.numLayers,
    hidden: source.config.hiddenSize,
    vocab: source.config.vocabSize,
    fileBytes: source.totalBytes,
    largestTensorBytes: largest,
    gpuPeakBytes,
    maxRssBytes,
    hostBytes,
    boundBytes,
    withinBound: hostBytes <= boundBytes,
    seconds: Number(seconds.toFixed(1)),
  }),
);
model.destroy();
gpu.destroy();
await nodePlatform.exit(0);
