/**
 * EAGLE3 draft training throughput through the real training path (bench/train-rig.ts:
 * Eagle3DraftModel + Eagle3TrainStrategy + AdamWBackend with SpecForge's optimizer defaults +
 * TrainerCore), one optimizer step per micro-batch, random weights and random features
 * (throughput does not depend on values).
 *
 *   npx tsx scripts/embed-shaders.ts
 *   npx tsx bench/train.ts --config mid --batch 1 --seq 128 [--ttt 7] [--steps 2] [--recompute]
 *   npx tsx bench/train.ts --config llama-3.1-8b --batch 1 --seq 32 --ttt 7 --steps 1   (about 9 GB of device memory)
 *
 * Prints one JSON line: the first step (shader compilation included), the median of `--steps`
 * further steps as tokens/s (B·S tokens per optimizer step: forward + backward through the TTT
 * unroll + AdamW), a separately timed optimizer step, the modelled matmul FLOPs per step and the
 * GPU memory the parameters take, which tensors exceed one storage binding (they are split into
 * row parts, and the draft's linear layers take them split: src/kernels/linear.ts), and the GPU
 * bytes the device held: after setup, and the peak over the first step and over the timed steps
 * (gpu.memoryStats: every buffer, pooled free ones included).
 */
import { Gpu } from '../src/gpu/gpu.ts';
import { planRowChunks } from '../src/gpu/tensor.ts';
import { EMBED_NAME, eagle3ParameterShapes, type Eagle3Config } from '../src/config/eagle3-config.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { MID_DRAFT } from './step-configs.ts';
import { buildTrainRig } from './train-rig.ts';

/** Draft shapes of SpecForge's reference throughput runs (the target hidden size equals the draft's). */
const CONFIGS: Readonly<Record<string, Eagle3Config>> = {
  mid: MID_DRAFT,
  'llama-3.1-8b': {
    hiddenSize: 4096,
    intermediateSize: 14336,
    numHeads: 32,
    numKvHeads: 8,
    headDim: 128,
    vocabSize: 128256,
    draftVocabSize: 32000,
    targetHiddenSize: 4096,
    rmsNormEps: 1e-5,
    ropeTheta: 500000,
    maxPositionEmbeddings: 4096,
  },
};

const args = nodePlatform.args();
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const configName = opt('--config', 'mid');
const fullConfig = CONFIGS[configName];
if (!fullConfig) throw new Error(`bench/train.ts: unknown --config "${configName}" (known: ${Object.keys(CONFIGS).join(', ')})`);
// --shrink K divides the widths (hidden, intermediate, heads, vocabularies) by K, head_dim kept: the
// same code path at a size a CPU adapter finishes in seconds (bench/gpu.sh --small).
const shrink = Number(opt('--shrink', '1'));
if (!Number.isInteger(shrink) || shrink < 1)
  throw new Error(`bench/train.ts: --shrink must be a positive integer, got ${opt('--shrink', '1')}`);
const narrow = (n: number) => Math.max(1, Math.floor(n / shrink));
const config: Eagle3Config =
  shrink === 1
    ? fullConfig
    : {
        ...fullConfig,
        numHeads: narrow(fullConfig.numHeads),
        numKvHeads: Math.max(1, Math.floor(fullConfig.numKvHeads / shrink)),
        hiddenSize: narrow(fullConfig.numHeads) * fullConfig.headDim,
        targetHiddenSize: narrow(fullConfig.numHeads) * fullConfig.headDim,
        intermediateSize: narrow(fullConfig.intermediateSize),
        vocabSize: narrow(fullConfig.vocabSize),
        draftVocabSize: narrow(fullConfig.draftVocabSize),
      };
if (config.numHeads % config.numKvHeads !== 0)
  throw new Error(`bench/train.ts: --shrink ${shrink} leaves ${config.numHeads} heads for ${config.numKvHeads} KV heads`);
// Features as the feature store would hold them: f32, or f16 (--feature-precision f16), widened to
// f32 on the GPU by the strategy right before the draft forward.
const featurePrecision = opt('--feature-precision', 'f32');
if (featurePrecision !== 'f32' && featurePrecision !== 'f16')
  throw new Error(`bench/train.ts: --feature-precision must be f32 or f16, got ${featurePrecision}`);
const B = Number(opt('--batch', '1'));
const S = Number(opt('--seq', '128'));
const L = Number(opt('--ttt', '7'));
const steps = Number(opt('--steps', '2'));
const R = B * S;

const shapes = eagle3ParameterShapes(config);
const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const trainableParams = shapes.reduce((n, [, s]) => n + numel(s), 0);
const GB = 1e9;

/**
 * Matmul FLOPs of one step, from the shapes (2 per multiply-add): fc once; per TTT step q/k/v on the
 * 2H-wide input, o, gate/up/down and lm_head. The backward costs two such products per weight
 * (input and weight gradients) except fc, whose input (the target's hidden states) needs no gradient.
 * Attention and the elementwise kernels are left out.
 */
function matmulFlopsPerStep(c: Eagle3Config): number {
  const H = c.hiddenSize;
  const q = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  const perStep = 2 * R * (2 * H * (q + 2 * kv) + q * H + 3 * H * c.intermediateSize + H * c.draftVocabSize);
  const fc = 2 * R * 3 * c.targetHiddenSize * H;
  return 3 * L * perStep + 2 * fc;
}

const featureBytes = featurePrecision === 'f16' ? 2 : 4;

/** Bytes of the GPU tensors that live for the whole run: value, grad and two moments per trainable parameter; the frozen embedding; the batch. */
function residentBytes(c: Eagle3Config): Record<string, number> {
  return {
    trainable: 16 * trainableParams,
    embedding: 4 * c.vocabSize * c.hiddenSize,
    hiddenStates: featureBytes * R * 3 * c.targetHiddenSize,
    targetLogits: featureBytes * R * c.vocabSize,
  };
}

/**
 * SpecForge's measured throughput at its reference shapes (one H200, bf16; ../shared/fixtures/README.md),
 * reported beside ours when this run has the same config and shape.
 */
const SPECFORGE_TOKENS_PER_SECOND: Readonly<Record<string, { batch: number; seq: number; ttt: number; tokensPerSecond: number }>> = {
  mid: { batch: 4, seq: 1024, ttt: 7, tokensPerSecond: 47023 },
  'llama-3.1-8b': { batch: 1, seq: 2048, ttt: 7, tokensPerSecond: 17357 },
};

function specForgeComparison(tokensPerSecond: number): Record<string, number> {
  const ref = SPECFORGE_TOKENS_PER_SECOND[configName];
  if (!ref || shrink !== 1 || ref.batch !== B || ref.seq !== S || ref.ttt !== L) return {};
  return { specForgeTokensPerSecond: ref.tokensPerSecond, ratioToSpecForge: +(tokensPerSecond / ref.tokensPerSecond).toFixed(4) };
}

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
const header: Record<string, unknown> = {
  adapter: `${ctx.record.description || ctx.record.vendor} (fallback: ${ctx.record.isFallbackAdapter})`,
  config: configName,
  ...(shrink > 1 ? { shrink } : {}),
  featurePrecision,
  recompute: args.includes('--recompute'),
  draft: config,
  batch: B,
  seq: S,
  ttt: L,
  trainableParams,
  residentGB: Object.fromEntries(Object.entries(residentBytes(config)).map(([k, v]) => [k, +(v / GB).toFixed(3)])),
  matmulGflopPerStep: +(matmulFlopsPerStep(config) / GB).toFixed(1),
};

// Tensors larger than one binding are split into row parts by gpu.tensor (weights, their grads and
// both AdamW moments alike); the draft's linear layers take them split. Listed so a run says what
// it split and into how many parts.
const maxBinding = gpu.maxBindingBytes;
const activations: [string, number[]][] = [
  ['hidden_state', [B, S, 3 * config.targetHiddenSize]],
  ['target', [B, S, config.vocabSize]],
  ['MLP activations', [R, config.intermediateSize]],
  ['draft logits', [R, config.draftVocabSize]],
];
const splitTensors = [
  [EMBED_NAME, [config.vocabSize, config.hiddenSize]] as [string, number[]],
  ...shapes.map(([n, s]) => [n, [...s]] as [string, number[]]),
  ...activations,
]
  .filter(([, s]) => 4 * numel(s) > maxBinding)
  .map(
    ([name, s]) =>
      `${name} [${s.join(', ')}] ${((4 * numel(s)) / 2 ** 20).toFixed(0)} MiB in ${planRowChunks(s, 'f32', maxBinding).length} parts`,
  );
const MiB = 2 ** 20;
const memoryMiB = () => {
  const m = gpu.memoryStats();
  return { liveMiB: Math.round(m.liveBytes / MiB), peakMiB: Math.round(m.peakBytes / MiB), peakBytes: m.peakBytes };
};
Object.assign(header, { maxStorageBufferBindingMiB: maxBinding / MiB, splitTensors });

// The draft, optimizer, trainer and one random batch: bench/train-rig.ts, as the roofline and
// profile benchmarks build them. setupSeconds covers all of it, random weights included.
const setupStart = performance.now();
const recompute = args.includes('--recompute');
const rig = await buildTrainRig(gpu, config, { batch: B, seq: S, ttt: L }, { featurePrecision, recompute });
const setupSeconds = (performance.now() - setupStart) / 1000;
const afterSetup = memoryMiB();

/** Wall seconds of one optimizer step, until the GPU has finished it; also its loss. */
async function timedStep(): Promise<{ seconds: number; loss: number; gradNorm: number }> {
  const { seconds, loss, gradNorm } = await rig.step();
  return { seconds, loss, gradNorm };
}

let first: Awaited<ReturnType<typeof timedStep>>;
const timed: Awaited<ReturnType<typeof timedStep>>[] = [];
let firstStepMemory: ReturnType<typeof memoryMiB>;
let stepsMemory: ReturnType<typeof memoryMiB> | undefined;
try {
  gpu.resetMemoryPeak();
  first = await timedStep();
  firstStepMemory = memoryMiB();
  gpu.resetMemoryPeak();
  for (let i = 0; i < steps; i++) timed.push(await timedStep());
  if (steps > 0) stepsMemory = memoryMiB();
} catch (err) {
  // E.g. running out of device memory: report, then exit through the platform so the device is
  // destroyed and the process ends.
  console.log(JSON.stringify({ ...header, fits: false, setupSeconds: +setupSeconds.toFixed(1), error: (err as Error).message }));
  await nodePlatform.exit(1);
  throw err;
}
const seconds = timed.map((t) => t.seconds).sort((a, b) => a - b);
const median = seconds.length > 0 ? seconds[Math.floor(seconds.length / 2)] : first.seconds;

// The optimizer step alone (global norm + clip + AdamW + zero grads), on the zero gradients left behind.
const optStart = performance.now();
await rig.optimizerStep();
const optimizerSeconds = (performance.now() - optStart) / 1000;

const flops = matmulFlopsPerStep(config);
console.log(
  JSON.stringify({
    ...header,
    fits: true,
    setupSeconds: +setupSeconds.toFixed(1),
    firstStep: {
      seconds: +first.seconds.toFixed(2),
      tokensPerSecond: +(R / first.seconds).toFixed(2),
      loss: +first.loss.toFixed(4),
      gradNorm: +first.gradNorm.toFixed(4),
      note: 'includes shader compilation',
    },
    steps: timed.map((t) => ({ seconds: +t.seconds.toFixed(2), loss: +t.loss.toFixed(4), gradNorm: +t.gradNorm.toFixed(4) })),
    step: { seconds: +median.toFixed(2), tokensPerSecond: +(R / median).toFixed(2), matmulGflops: +(flops / median / GB).toFixed(2) },
    optimizerStep: { seconds: +optimizerSeconds.toFixed(3), fractionOfStep: +(optimizerSeconds / median).toFixed(3) },
    gpuMemory: { afterSetup, firstStep: firstStepMemory, timedSteps: stepsMemory },
    lossesFinite: [first, ...timed].every((t) => Number.isFinite(t.loss) && Number.isFinite(t.gradNorm)),
    ...specForgeComparison(R / median),
  }),
);
rig.destroy();
gpu.destroy();
await nodePlatform.exit(0);
