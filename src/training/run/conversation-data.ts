/**
 * The training data of a run made from chat datasets (`speclab train --data FILE…`): conversation
 * files read (JSONL, JSON or Parquet), rendered with the chat template, tokenized and loss-masked on
 * exactly the assistant tokens (src/corpus/), then split into training and held-out sets.
 *
 * Two modes, as SpecForge has them:
 *   - the dataset's own replies are the training targets (the default);
 *   - `--regenerate`: the target writes the replies itself (its own distribution, which is what the
 *     draft must predict), turn by turn (src/training/sequences/regenerate.ts).
 * The held-out rows give the acceptance measurement its prompts: the same prefix, continued by the
 * target and the draft.
 *
 * Nothing here writes: a refused file leaves the run folder as it was.
 */
import { tokenizeConversations, type ChatSample } from '../../corpus/chat-samples.ts';
import { resolveChatTemplate, type ChatTemplateChoice, type ResolvedChatTemplate } from '../../corpus/chat-templates.ts';
import { conversationFormat, readConversations, type SkippedRow } from '../../corpus/conversations.ts';
import { ChatTokenizer } from '../../formats/tokenizer.ts';
import { splitPath } from '../../util/paths.ts';
import { READ_BUDGETS, type ReadBudget } from '../../ports/read-budget.ts';
import type { TrainSequence } from '../sequences/eagle3-data.ts';
import type { FileRoots } from './run-plan.ts';

export interface ConversationDataSettings {
  /** Conversation files whose rows are concatenated in order. */
  readonly data: readonly string[];
  /** Held-out conversations; without it the last `evalPrompts` rows of `data` are held out. */
  readonly evalData?: string;
  readonly evalPrompts: number;
  /** At most this many training rows (after the held-out ones are taken); absent: every usable one. */
  readonly trainPrompts?: number;
  /** A built-in template name or a Jinja file; default the target's tokenizer_config.json template. */
  readonly chatTemplate?: string;
  readonly maxLength: number;
}

export interface FileSummary {
  readonly file: string;
  readonly rows: number;
  readonly samples: number;
  readonly skipped: readonly SkippedRow[];
  readonly truncated: number;
  readonly lossTokens: number;
}

export interface ConversationData {
  /** The dataset's rows as training sequences (their own replies masked). */
  readonly train: TrainSequence[];
  /** Each training row's prompt: its tokens before the first reply (for evaluation). */
  readonly trainPrompts: number[][];
  readonly heldPrompts: number[][];
  /** The held-out rows with their own replies (scored while training). */
  readonly held: TrainSequence[];
  readonly template: string;
  /** The template's end-of-turn token (e.g. <|im_end|>), where it is one token: a regenerated reply stops there. */
  readonly endOfTurnIds: number[];
  readonly files: readonly FileSummary[];
  /** The rows read, used, held out and skipped, and why each limit applied (describeSplit). */
  readonly split: DataSplit;
}

/** How the conversations were split, with the reason of each count (for the `phase data` line). */
export interface DataSplit {
  /** Rows of the --data files; the usable ones (rendered, with a reply within --max-length); the skipped. */
  readonly read: number;
  readonly usable: number;
  readonly skipped: number;
  readonly train: number;
  /** Why `train` is that many: every usable row left, or the --train-prompts cap. */
  readonly trainWhy: string;
  readonly held: number;
  /** Where the held-out rows come from and what limited them. */
  readonly heldWhy: string;
}

/** Tokens before the first loss-masked one: the conversation up to its first assistant reply. */
export function promptOf(sample: Pick<ChatSample, 'inputIds' | 'lossMask' | 'id'>): number[] {
  const first = sample.lossMask.indexOf(1);
  if (first <= 0) throw new Error(`conversation ${sample.id}: no prompt before its first reply`);
  return sample.inputIds.slice(0, first);
}

/**
 * One conversation file read, rendered and masked: its usable samples and its summary (rows read,
 * skipped rows by line and reason, truncated rows, loss tokens). Malformed rows throw naming the
 * file and line (readConversations). The CLI's `--data` files and the lab's dropped file both go
 * through here, so both refuse and skip the same rows with the same words.
 */
export async function conversationFile(
  bytes: Uint8Array,
  file: string,
  tokenizer: ChatTokenizer,
  chat: ResolvedChatTemplate,
  vocabSize: number,
  maxLength: number,
): Promise<{ samples: ChatSample[]; summary: FileSummary }> {
  const rows = await readConversations(bytes, file);
  const t = tokenizeConversations(tokenizer, rows.rows, { vocabSize, maxLength, file, chat });
  const skipped = [...rows.skipped, ...t.skipped].sort((a, b) => a.line - b.line);
  return {
    samples: t.samples,
    summary: {
      file,
      rows: rows.rows.length + rows.skipped.length,
      samples: t.samples.length,
      skipped,
      truncated: t.truncated,
      lossTokens: t.lossTokens,
    },
  };
}

/**
 * The read budget of a conversation file, by its format; a file of no known format is refused here,
 * before a byte of it is read (`--data /dev/zero`).
 */
export function dataFileBudget(path: string): ReadBudget {
  const format = conversationFormat(path);
  return format === 'jsonl' ? READ_BUDGETS.jsonlData : format === 'json' ? READ_BUDGETS.jsonData : READ_BUDGETS.parquetData;
}

async function readTemplate(roots: FileRoots, choice: string | undefined): Promise<ChatTemplateChoice | undefined> {
  if (choice === undefined || !/[/\\]|\.jinja2?$/.test(choice)) return choice;
  const [dir, name] = splitPath(choice);
  return { file: choice, text: new TextDecoder().decode(await roots.files(dir).read(name, READ_BUDGETS.chatTemplate)) };
}

/** Reads, renders and masks the conversation files; refusals name the file, line and field. */
export async function loadConversationData(
  roots: FileRoots,
  targetDir: string,
  vocabSize: number,
  settings: ConversationDataSettings,
): Promise<ConversationData> {
  if (settings.data.length === 0) throw new Error('--data: no conversation file given');
  const tokenizer = await ChatTokenizer.load(roots.files(targetDir), '');
  const chat = resolveChatTemplate(await readTemplate(roots, settings.chatTemplate), tokenizer);
  const files: FileSummary[] = [];
  const read = async (path: string): Promise<ChatSample[]> => {
    const [dir, name] = splitPath(path);
    const bytes = await roots.files(dir).read(name, dataFileBudget(path));
    const file = await conversationFile(bytes, path, tokenizer, chat, vocabSize, settings.maxLength);
    files.push(file.summary);
    return file.samples;
  };
  const all: ChatSample[] = [];
  for (const path of settings.data) all.push(...(await read(path)));
  const dataFiles = files.slice();
  let held: ChatSample[];
  let train: ChatSample[];
  let heldWhy = `the last --eval-prompts ${settings.evalPrompts}`;
  if (settings.evalData) {
    const usable = await read(settings.evalData);
    held = usable.slice(0, settings.evalPrompts);
    heldWhy =
      usable.length > settings.evalPrompts
        ? `the first --eval-prompts ${settings.evalPrompts} of ${usable.length} usable in --eval-data ${settings.evalData}`
        : `all ${usable.length} usable in --eval-data ${settings.evalData}${usable.length < settings.evalPrompts ? `, fewer than --eval-prompts ${settings.evalPrompts}` : ''}`;
    train = all;
  } else {
    if (all.length <= settings.evalPrompts)
      throw new Error(
        `--data: ${all.length} usable conversations, need more than --eval-prompts ${settings.evalPrompts} (the last ones are held out; or give --eval-data)`,
      );
    held = all.slice(all.length - settings.evalPrompts);
    train = all.slice(0, all.length - settings.evalPrompts);
  }
  if (held.length === 0 && settings.evalPrompts > 0) throw new Error(`--eval-data ${settings.evalData}: no usable conversation`);
  if (settings.evalPrompts === 0) heldWhy = 'none (--eval-prompts 0)';
  const cap = settings.trainPrompts;
  const trainWhy =
    cap === undefined ? 'all' : cap < train.length ? `--train-prompts ${cap} of ${train.length}` : `all, within --train-prompts ${cap}`;
  train = train.slice(0, cap ?? train.length);
  const split: DataSplit = {
    read: dataFiles.reduce((a, f) => a + f.rows, 0),
    usable: all.length,
    skipped: dataFiles.reduce((a, f) => a + f.skipped.length, 0),
    train: train.length,
    trainWhy,
    held: held.length,
    heldWhy,
  };
  return {
    train: train.map((s) => ({ inputIds: s.inputIds, lossMask: s.lossMask })),
    trainPrompts: train.map(promptOf),
    heldPrompts: held.map(promptOf),
    held: held.map((s) => ({ inputIds: s.inputIds, lossMask: s.lossMask })),
    template: chat.name,
    endOfTurnIds: endOfTurnIds(tokenizer, chat.markers.endOfTurn),
    files,
    split,
  };
}

function endOfTurnIds(tokenizer: ChatTokenizer, endOfTurn: string): number[] {
  const id = tokenizer.tokenId(endOfTurn.trim());
  return id === undefined ? [] : [id];
}

/**
 * The split in one line, each count with what decided it, e.g. `64 conversations read from --data, 64
 * usable, 0 skipped; 60 train (all), 4 held out (the last --eval-prompts 4)`.
 */
export function describeSplit(s: DataSplit): string {
  return `${s.read} conversations read from --data, ${s.usable} usable, ${s.skipped} skipped; ${s.train} train (${s.trainWhy}), ${s.held} held out (${s.heldWhy})`;
}

/** One line per file: rows read, samples, skipped rows by line and reason, truncated, loss tokens. */
export function describeConversationData(data: ConversationData): string[] {
  return data.files.map((f) => {
    const shown = f.skipped.slice(0, 8).map((s) => `line ${s.line}: ${s.reason}`);
    const more = f.skipped.length > shown.length ? `; … ${f.skipped.length - shown.length} more` : '';
    const skipped = f.skipped.length > 0 ? `; skipped ${f.skipped.length} (${shown.join('; ')}${more})` : '; skipped 0';
    return `${f.file}: ${f.rows} rows read, ${f.samples} used${skipped}; ${f.truncated} truncated; ${f.lossTokens} loss tokens`;
  });
}
