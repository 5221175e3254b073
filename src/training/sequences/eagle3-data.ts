/**
 * The data of an EAGLE3 run on a target model: its training sequences, from one of three sources
 * (sessionSequences): a chat dataset's own sequences (`--data`), a dataset whose replies the target
 * rewrites (`--regenerate`, ./regenerate.ts), or prompts the target continues (greedily unless a
 * temperature is set), the last two cached in the run's `sequences.json` so a resume trains on the
 * same ones; then the draft vocabulary over their loss-masked tokens and the draft's shape derived
 * from the target's. Shared by `speclab train`, `speclab prepare` and the browser lab.
 */
import { parseEagle3Config, type Eagle3Config } from '../../config/eagle3-config.ts';
import { generate } from '../../model/target/generate.ts';
import type { TargetModel } from '../../model/target/model.ts';
import { buildVocabMapping, countLossTokens, type VocabMapping } from '../../model/eagle3/vocab-mapping.ts';
import type { FileStore } from '../../ports/storage.ts';
import { openSealedJson, sealJson } from '../../util/sealed-json.ts';
import { stableHash } from '../../util/stable-hash.ts';
import type { ProgressDisplay, ProgressTask } from '../../ports/progress.ts';
import { formatDuration } from '../../util/format.ts';
import { regenerateReplies } from './regenerate.ts';
import type { Continuation, TrainSequence } from '../../contracts/train-sequence.ts';

export type { Continuation, TrainSequence } from '../../contracts/train-sequence.ts';

/** Called after each batched generation: sequences done of all, and the tokens generated so far. */
export type GenerationProgress = (done: number, total: number, tokens: number) => void;

/** Continuations of `prompts` by the target (greedy unless sampled), `chunk` prompts per batched generation. */
export async function continueWithTarget(
  target: TargetModel,
  prompts: readonly number[][],
  responseLength: number,
  chunk = 16,
  how: Continuation = {},
  onProgress?: GenerationProgress,
): Promise<TrainSequence[]> {
  const out: TrainSequence[] = [];
  let tokens = 0;
  for (let i = 0; i < prompts.length; i += chunk) {
    const part = prompts.slice(i, i + chunk);
    const responses = await generate(target, part, {
      maxNewTokens: responseLength,
      temperature: how.temperature,
      seed: (how.seed ?? 0) + i,
      eosTokenIds: how.eosTokenIds,
    });
    part.forEach((p, j) => out.push({ inputIds: [...p, ...responses[j]], lossMask: [...p.map(() => 0), ...responses[j].map(() => 1)] }));
    tokens += responses.reduce((a, r) => a + r.length, 0);
    onProgress?.(out.length, prompts.length, tokens);
  }
  target.gpu.trimPool(); // the generation's buffers, sized by its prompt lengths (Gpu.trimPool)
  return out;
}

/** Vocabulary mapping over the sequences' loss-masked tokens, and the share of those tokens it covers. */
export function draftVocab(sequences: readonly TrainSequence[], vocab: number, draftVocabSize: number): DraftVocab {
  return vocabFromCounts(
    countLossTokens(
      sequences.flatMap((s) => s.inputIds),
      sequences.flatMap((s) => s.lossMask),
      vocab,
    ),
    vocab,
    draftVocabSize,
  );
}

export interface DraftVocab {
  mapping: VocabMapping;
  /** Share of the loss-masked tokens inside the draft vocabulary. */
  coverage: number;
  distinct: number;
}

/** The mapping from loss-token counts (in first-seen order: ties break by it), with its coverage. */
export function vocabFromCounts(counts: ReadonlyMap<number, number>, vocab: number, draftVocabSize: number): DraftVocab {
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
export function draftConfigFor(target: Pick<TargetModel, 'config'>, draftVocabSize: number): Eagle3Config {
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

/** A seeded Fisher–Yates permutation of 0..n-1 (the data order of one epoch). */
export function shuffledIndices(n: number, rng: { int(lo: number, hi: number): number }): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(0, i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

const SEQUENCES_FILE = 'sequences.json';

/** The sequences of an earlier open of this run when their prompts match; else generated and saved. */
export async function loadOrGenerateSequences(
  files: FileStore,
  target: TargetModel,
  prompts: readonly number[][],
  responseLength: number,
  how: Continuation = {},
  progress?: ProgressDisplay,
): Promise<TrainSequence[]> {
  // Greedy runs keep the key they always had, so their sequences.json still matches.
  const key = JSON.stringify({ prompts, responseLength, target: target.config, ...(Object.keys(how).length > 0 ? { how } : {}) });
  return cachedSequences(files, key, () =>
    withProgress(progress, { label: 'continuing prompts', total: prompts.length, unit: 'prompts' }, (report) =>
      continueWithTarget(target, prompts, responseLength, 16, how, report),
    ),
  );
}

/** The sequences saved under `key` by an earlier open of this run, else `make()`'s, saved sealed. */
async function cachedSequences(files: FileStore, key: string, make: () => Promise<TrainSequence[]>): Promise<TrainSequence[]> {
  if (await files.exists(SEQUENCES_FILE)) {
    // Sealed: a flipped loss-mask bit or a cut file is refused, never trained on.
    const saved = openSealedJson(await files.read(SEQUENCES_FILE), `${files.root}/${SEQUENCES_FILE}`, "the run's training sequences") as {
      key?: string;
      sequences?: TrainSequence[];
    };
    if (saved.key === key && Array.isArray(saved.sequences)) return saved.sequences;
  }
  const sequences = await make();
  await files.writeAtomic(SEQUENCES_FILE, sealJson({ key, sequences }));
  return sequences;
}

/**
 * Where a session's sequences come from (exactly one): prompts the target continues, a dataset's
 * rows whose replies the target rewrites turn by turn (`regenerate`), or ready sequences.
 */
export interface SequenceSource {
  trainPrompts?: readonly number[][];
  regenerate?: readonly TrainSequence[];
  continuation?: Continuation;
  trainSequences?: readonly TrainSequence[];
}

/** A session's training sequences: copies of the given ones, or the target's (cached in sequences.json). */
export async function sessionSequences(
  files: FileStore,
  target: TargetModel | undefined,
  from: SequenceSource,
  responseLength: number,
  say: (detail: string) => void,
  progress?: ProgressDisplay,
): Promise<TrainSequence[]> {
  const given = [from.trainPrompts, from.regenerate, from.trainSequences].filter((x) => x !== undefined);
  if (given.length !== 1) throw new Error('training data: give one of trainPrompts, regenerate or trainSequences');
  if (given[0].length === 0) throw new Error('training data: none given');
  if (from.trainSequences) {
    say(`${from.trainSequences.length} sequences from the dataset`);
    return from.trainSequences.map((s) => ({ inputIds: [...s.inputIds], lossMask: [...s.lossMask] }));
  }
  if (!target) throw new Error('training data: the target writes these sequences, and only its tables were loaded');
  if (from.regenerate) {
    const rows = from.regenerate;
    say(`${rows.length} conversations, every reply regenerated by the target (up to ${responseLength} tokens each)`);
    const key = JSON.stringify({ regenerate: stableHash(rows), responseLength, target: target.config, how: from.continuation ?? {} });
    return cachedSequences(files, key, () =>
      withProgress(progress, { label: 'regenerating replies', total: rows.length, unit: 'conversations' }, (report) =>
        regenerateReplies(target, rows, responseLength, from.continuation, 16, report),
      ),
    );
  }
  say(`${from.trainPrompts!.length} prompts, ${responseLength} target tokens each`);
  return loadOrGenerateSequences(files, target, from.trainPrompts!, responseLength, from.continuation, progress);
}

/** Runs a generation with its progress shown on `progress` (conversations or prompts done, tokens so far). */
export async function withProgress<T>(
  progress: ProgressDisplay | undefined,
  task: ProgressTask,
  run: (report: GenerationProgress) => Promise<T>,
): Promise<T> {
  const bar = progress?.start(task);
  const started = performance.now();
  let generated = 0;
  try {
    const out = await run((done, _total, tokens) => {
      generated = tokens;
      bar?.update(done, `${tokens} tokens`);
    });
    const seconds = (performance.now() - started) / 1000;
    bar?.end(
      `${task.label}: ${task.total} ${task.unit}, ${generated} tokens in ${formatDuration(seconds)} (${(generated / seconds).toFixed(1)} tokens/s)`,
    );
    return out;
  } catch (err) {
    bar?.end();
    throw err;
  }
}
