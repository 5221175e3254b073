/**
 * Conversations in the lab: a dropped or picked chat file (JSONL, JSON or Parquet) read in the worker
 * with the loaded target's tokenizer and chat template — the same readers, template and loss mask as
 * `speclab train --data` (conversationFile in src/training/run/conversation-data.ts), so a row the CLI
 * refuses or skips is refused or skipped here with the same words — then split into the rows the draft
 * trains on and the last N, held out, that score it.
 *
 * The file is kept in the tab's storage (speclab-lab-data: its bytes, and a sealed record of its name,
 * size, CRC-32 and the held-out count), so a reload finds it again; the saved run records which file it
 * trains on, and continuing it with other data is refused. Discarding a run keeps the data; "Use the
 * bundled prompts" removes it.
 */
import { DEFAULT_MAX_LENGTH, type ChatSample } from '../../src/corpus/chat-samples.ts';
import { resolveChatTemplate } from '../../src/corpus/chat-templates.ts';
import { conversationFile, promptOf } from '../../src/training/run/conversation-data.ts';
import type { TrainSequence } from '../../src/contracts/index.ts';
import { crc32 } from '../../src/util/crc32.ts';
import { openSealedJson, sealJson } from '../../src/util/sealed-json.ts';
import { adapterLimitsOf, LAB_ROUND_PROMPTS, type DataSummary, type LabDataRef } from './protocol.ts';
import { lab, platform, post, readSavedRun, type LabData } from './worker-state.ts';

export const DATA_STORE = 'speclab-lab-data';
const BYTES_FILE = 'conversations.bin';
const META_FILE = 'conversations.json';
/** Skipped rows listed on the page (the count covers the rest). */
const SHOWN_SKIPPED = 20;

const store = () => platform.files(DATA_STORE);
const sequence = (s: ChatSample): TrainSequence => ({ inputIds: s.inputIds, lossMask: s.lossMask });

/** The training rows (at most `cap`), the held-out rows with their replies, and the held-out prompts. */
export function dataSplit(data: LabData, cap = Infinity): { train: TrainSequence[]; held: TrainSequence[]; heldPrompts: number[][] } {
  const cut = data.samples.length - data.ref.heldOut;
  const held = data.samples.slice(cut);
  return { train: data.samples.slice(0, Math.min(cut, cap)).map(sequence), held: held.map(sequence), heldPrompts: held.map(promptOf) };
}

function checkHeldOut(heldOut: number, usable: number, file: string): void {
  if (!Number.isInteger(heldOut) || heldOut < 1 || heldOut >= usable)
    throw new Error(`${file}: held-out conversations must be a whole number from 1 to ${usable - 1} (${usable} usable), got ${heldOut}`);
}

/** Reads, renders and masks `bytes` with the loaded target's tokenizer; throws naming the file and line. */
async function parse(bytes: Uint8Array, ref: LabDataRef): Promise<LabData> {
  const m = lab.model;
  if (!m) throw new Error('load a model before its conversations');
  if (!m.tokenizer) throw new Error(`${ref.file}: ${m.id} has no tokenizer.json, so its chat template cannot render conversations`);
  const chat = resolveChatTemplate(undefined, m.tokenizer);
  const maxLength = Math.min(DEFAULT_MAX_LENGTH, m.config.maxPositionEmbeddings);
  const { samples, summary } = await conversationFile(bytes, ref.file, m.tokenizer, chat, m.config.vocabSize, maxLength);
  if (samples.length < 2)
    throw new Error(`${ref.file}: ${samples.length} usable conversations; the lab needs at least 2 (one to train on, one held out)`);
  checkHeldOut(ref.heldOut, samples.length, ref.file);
  return {
    ref,
    samples,
    summary: {
      file: ref.file,
      rows: summary.rows,
      usable: samples.length,
      skipped: summary.skipped.slice(0, SHOWN_SKIPPED).map((s) => ({ line: s.line, reason: s.reason })),
      skippedCount: summary.skipped.length,
      truncated: summary.truncated,
      lossTokens: summary.lossTokens,
      template: chat.name,
      maxLength,
    },
  };
}

/** The loaded data's summary with its split, for the page. */
function currentSummary(): DataSummary | undefined {
  const d = lab.data;
  if (!d) return undefined;
  const split = dataSplit(d);
  return { ...d.summary, train: split.train.length, held: split.held.length, heldOut: d.ref.heldOut };
}

/** The page's view of the data now (and of the held-out prompts and memory basis that follow from it). */
export function reportData(): void {
  const summary = currentSummary();
  if (!summary) {
    post({ type: 'data', state: 'none', message: 'No conversations: the run trains on the bundled prompts, continued by the target.' });
  } else {
    post({
      type: 'data',
      state: 'ready',
      summary,
      message: `${summary.file}: ${summary.rows} rows read, ${summary.usable} usable, ${summary.skippedCount} skipped; ${summary.train} to train on, the last ${summary.held} held out`,
    });
  }
  reportPrompts();
}

/** A refusal; the data in use (if any) stays, and its summary with it. */
function refuse(err: unknown): void {
  post({ type: 'data', state: 'error', message: `refused: ${(err as Error).message}`, summary: currentSummary() });
}

/** The held-out prompts of the speculative and insight panels: the conversations' when loaded. */
export function heldOutPrompts(): number[][] {
  return lab.data ? dataSplit(lab.data).heldPrompts : (lab.model?.heldOut ?? []);
}

/** The held-out prompts' text, and what the page's memory plan needs (it is computed there, on every settings change). */
function reportPrompts(): void {
  const m = lab.model;
  if (!m) return;
  const text = (ids: number[]) => (m.tokenizer ? m.tokenizer.decode(ids) : ids.join(' '));
  const held = heldOutPrompts();
  post({ type: 'prompts', heldOut: lab.data ? held.map(text) : m.heldText });
  const train = lab.data ? dataSplit(lab.data).train : undefined;
  post({
    type: 'memory-basis',
    target: m.config,
    trainPromptLengths: m.train.map((p) => p.length),
    sequenceLengths: train?.map((t) => t.inputIds.length),
    heldOut: held.length,
    roundPrompts: LAB_ROUND_PROMPTS,
    limits: adapterLimitsOf(lab.gpu!.ctx.limits),
  });
}

async function refuseWhileSavedRun(what: string): Promise<void> {
  if (lab.running) throw new Error(`stop the training run before ${what}`);
  if (await readSavedRun()) throw new Error(`a saved run exists: discard it before ${what}`);
}

/** A dropped or picked file: parsed first (a refused file changes nothing), then kept. */
export async function loadData(file: File, heldOut: number | undefined): Promise<void> {
  try {
    await refuseWhileSavedRun('bringing other conversations');
    const bytes = new Uint8Array(await file.arrayBuffer());
    const ref: LabDataRef = { file: file.name, bytes: bytes.byteLength, crc32: crc32(bytes), heldOut: 1 };
    // The held-out count given, else a fifth of the usable rows, from 1 to 8.
    const probe = await parse(bytes, ref);
    ref.heldOut = heldOut ?? Math.min(8, Math.max(1, Math.floor(probe.samples.length / 5)));
    checkHeldOut(ref.heldOut, probe.samples.length, ref.file);
    await store().writeAtomic(BYTES_FILE, bytes);
    await store().writeAtomic(META_FILE, sealJson(ref));
    lab.data = { ...probe, ref };
    lab.dataError = undefined;
    reportData();
  } catch (err) {
    refuse(err);
  }
}

/** The visitor's held-out count (the last N usable rows). */
export async function setHeldOut(heldOut: number): Promise<void> {
  try {
    const d = lab.data;
    if (!d) throw new Error('no conversations are loaded');
    await refuseWhileSavedRun('changing the held-out conversations');
    checkHeldOut(heldOut, d.samples.length, d.ref.file);
    const ref = { ...d.ref, heldOut };
    await store().writeAtomic(META_FILE, sealJson(ref));
    lab.data = { ...d, ref };
    reportData();
  } catch (err) {
    refuse(err);
  }
}

/** Back to the bundled prompts. */
export async function clearData(): Promise<void> {
  try {
    await refuseWhileSavedRun('removing its conversations');
    for (const name of await store().list('')) await store().remove(name);
    lab.data = undefined;
    lab.dataError = undefined;
    reportData();
  } catch (err) {
    refuse(err);
  }
}

/**
 * The kept conversations, read again for the model just loaded (after a reload, or another model).
 * A damaged file is reported naming it, and nothing trains on it until it is replaced or removed.
 */
export async function restoreData(): Promise<void> {
  lab.data = undefined;
  lab.dataError = undefined;
  try {
    if (await store().exists(META_FILE)) {
      const source = `${DATA_STORE}/${META_FILE}`;
      const ref = openSealedJson(await store().read(META_FILE), source, 'the kept conversations') as LabDataRef;
      const bytes = await store().read(BYTES_FILE);
      if (bytes.byteLength !== ref.bytes || crc32(bytes) !== ref.crc32)
        throw new Error(
          `${DATA_STORE}/${BYTES_FILE}: the kept copy of ${ref.file} is damaged (size or CRC-32 differs); bring the file again`,
        );
      lab.data = await parse(bytes, ref);
    }
  } catch (err) {
    lab.dataError = (err as Error).message;
    post({ type: 'data', state: 'error', message: `refused: ${lab.dataError}` });
    reportPrompts();
    return;
  }
  reportData();
}

/** Throws unless the loaded data is the saved run's (both undefined: the bundled prompts). */
export function checkRunData(saved: LabDataRef | undefined): void {
  if (lab.dataError) throw new Error(`the conversations cannot be used: ${lab.dataError}`);
  const now = lab.data?.ref;
  const name = (r: LabDataRef | undefined) => (r ? `${r.file} (${r.bytes} bytes, held out ${r.heldOut})` : 'the bundled prompts');
  const same =
    saved === undefined
      ? now === undefined
      : now !== undefined && now.crc32 === saved.crc32 && now.bytes === saved.bytes && now.heldOut === saved.heldOut;
  if (!same) throw new Error(`the saved run trains on ${name(saved)}, but ${name(now)} is loaded`);
}
