/**
 * Byte-level BPE trainer that writes a standard Hugging Face `tokenizer.json` (model BPE, ByteLevel
 * pre-tokenizer and decoder, special tokens as added_tokens) and a `tokenizer_config.json` with a
 * ChatML chat template, loadable by `@huggingface/tokenizers` (src/formats/tokenizer.ts) and by
 * Python `transformers`.
 *
 * Algorithm (GPT-2 style):
 * 1. Cut each text at special-token literals (they never take part in merges), split the pieces
 *    with the ByteLevel pre-tokenizer regex (words with an optional leading space, numbers,
 *    punctuation runs, whitespace), and count each distinct piece ("word").
 * 2. A word starts as its UTF-8 bytes; byte b is vocabulary id b, written as the GPT-2 printable
 *    character for b (printable Latin-1 maps to itself, the rest to U+0100 onwards).
 * 3. Repeatedly merge the most frequent adjacent pair, counted over distinct words weighted by
 *    their counts. Ties go to the pair with the smaller left id, then the smaller right id, so
 *    the result depends only on the input texts and options. Pair counts are updated
 *    incrementally: a merge revisits only the words that contain the pair (an index pair → words)
 *    and a max-heap with lazy deletion yields the next best pair.
 * 4. Training stops at the requested vocabulary size (BPE tokens + special tokens) or when no
 *    pair occurs at least `minFrequency` times.
 */

/** Pre-tokenizer of the HF ByteLevel pre-tokenizer with use_regex (GPT-2's pattern). */
export const BYTE_LEVEL_PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

export const DEFAULT_SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;

/** ChatML, rendering exactly the markers of CHAT_MARKERS.qwen in src/formats/tokenizer.ts. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** GPT-2's byte → printable character table (index = byte value). */
export function byteToUnicode(): string[] {
  const table: string[] = [];
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table.push(String.fromCodePoint(printable ? b : next++));
  }
  return table;
}

export interface BpeTrainOptions {
  /** Target vocabulary size including the special tokens; at least 256 + specials. */
  readonly vocabSize: number;
  /** Added after the BPE tokens, in this order. Default DEFAULT_SPECIAL_TOKENS. */
  readonly specialTokens?: readonly string[];
  /** A pair must occur at least this often to be merged; default 2. */
  readonly minFrequency?: number;
}

export interface TrainedBpe {
  /** BPE tokens by id (byte-level strings): the 256 bytes, then merge results. */
  readonly tokens: readonly string[];
  /** Merges in rank order, as [left, right] byte-level strings. */
  readonly merges: readonly (readonly [string, string])[];
  /** Special tokens; token i has id tokens.length + i. */
  readonly specialTokens: readonly string[];
  /** Distinct pre-tokenized words and their total count, for reporting. */
  readonly stats: { readonly distinctWords: number; readonly totalWords: number };
}

/** Largest id a pair key can hold; keys are left * ID_LIMIT + right (< 2^40, exact in a double). */
const ID_LIMIT = 1 << 20;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Counts pre-tokenized words over all texts, with special-token literals cut out. The result is
 * sorted by word (code-unit order) so later steps never depend on Map insertion order.
 */
export function countWords(texts: Iterable<string>, specialTokens: readonly string[] = DEFAULT_SPECIAL_TOKENS): [string, number][] {
  const counts = new Map<string, number>();
  const specials =
    specialTokens.length > 0
      ? new RegExp(
          [...specialTokens]
            .sort((a, b) => b.length - a.length)
            .map(escapeRegExp)
            .join('|'),
          'g',
        )
      : undefined;
  for (const text of texts) {
    const pieces = specials ? text.split(specials) : [text];
    for (const piece of pieces) {
      for (const m of piece.matchAll(BYTE_LEVEL_PATTERN)) counts.set(m[0], (counts.get(m[0]) ?? 0) + 1);
    }
  }
  return [...counts].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/** Binary max-heap of [count, pairKey]: higher count first, then smaller key. */
class PairHeap {
  private readonly counts: number[] = [];
  private readonly keys: number[] = [];

  get size(): number {
    return this.keys.length;
  }

  private before(i: number, j: number): boolean {
    return this.counts[i] > this.counts[j] || (this.counts[i] === this.counts[j] && this.keys[i] < this.keys[j]);
  }

  private swap(i: number, j: number): void {
    [this.counts[i], this.counts[j]] = [this.counts[j], this.counts[i]];
    [this.keys[i], this.keys[j]] = [this.keys[j], this.keys[i]];
  }

  push(count: number, key: number): void {
    this.counts.push(count);
    this.keys.push(key);
    let i = this.keys.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** Removes and returns the top [count, key]. */
  pop(): [number, number] {
    const top: [number, number] = [this.counts[0], this.keys[0]];
    const lastCount = this.counts.pop()!;
    const lastKey = this.keys.pop()!;
    if (this.keys.length > 0) {
      this.counts[0] = lastCount;
      this.keys[0] = lastKey;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < this.keys.length && this.before(l, best)) best = l;
        if (r < this.keys.length && this.before(r, best)) best = r;
        if (best === i) break;
        this.swap(i, best);
        i = best;
      }
    }
    return top;
  }
}

/** Trains byte-level BPE on `texts` (see the file comment). */
export function trainByteLevelBpe(texts: Iterable<string>, options: BpeTrainOptions): TrainedBpe {
  const specialTokens = [...(options.specialTokens ?? DEFAULT_SPECIAL_TOKENS)];
  const minFrequency = options.minFrequency ?? 2;
  const { vocabSize } = options;
  if (new Set(specialTokens).size !== specialTokens.length)
    throw new Error(`trainByteLevelBpe: duplicate special tokens ${JSON.stringify(specialTokens)}`);
  if (specialTokens.some((t) => t === '')) throw new Error('trainByteLevelBpe: empty special token');
  if (!Number.isInteger(vocabSize) || vocabSize < 256 + specialTokens.length || vocabSize > ID_LIMIT) {
    throw new Error(
      `trainByteLevelBpe: vocabSize must be an integer in [${256 + specialTokens.length}, ${ID_LIMIT}] (256 bytes + ${specialTokens.length} special tokens), got ${vocabSize}`,
    );
  }
  if (!Number.isInteger(minFrequency) || minFrequency < 1)
    throw new Error(`trainByteLevelBpe: minFrequency must be a positive integer, got ${minFrequency}`);

  const bytes = byteToUnicode();
  const tokens: string[] = [...bytes];
  const tokenIds = new Map<string, number>(tokens.map((t, i) => [t, i]));
  const merges: [string, string][] = [];
  const bpeTarget = vocabSize - specialTokens.length;

  // Distinct words as byte-id sequences, with their counts.
  const encoder = new TextEncoder();
  const counted = countWords(texts, specialTokens);
  const symbols: number[][] = counted.map(([word]) => Array.from(encoder.encode(word)));
  const freq: number[] = counted.map(([, n]) => n);
  let totalWords = 0;
  for (const n of freq) totalWords += n;

  // Pair counts and, per pair, the words that (may) contain it; a merge re-checks each word.
  const pairCounts = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  for (let w = 0; w < symbols.length; w++) {
    const s = symbols[w];
    for (let i = 0; i + 1 < s.length; i++) {
      const key = s[i] * ID_LIMIT + s[i + 1];
      pairCounts.set(key, (pairCounts.get(key) ?? 0) + freq[w]);
      let set = pairWords.get(key);
      if (!set) pairWords.set(key, (set = new Set()));
      set.add(w);
    }
  }
  const heap = new PairHeap();
  for (const [key, count] of pairCounts) heap.push(count, key);

  while (tokens.length < bpeTarget && heap.size > 0) {
    const [count, key] = heap.pop();
    if (pairCounts.get(key) !== count) continue; // stale entry: the count changed since it was pushed
    if (count < minFrequency) break;
    const left = Math.floor(key / ID_LIMIT);
    const right = key % ID_LIMIT;
    const merged = tokens[left] + tokens[right];
    let id = tokenIds.get(merged);
    if (id === undefined) {
      id = tokens.length;
      tokens.push(merged);
      tokenIds.set(merged, id);
    }
    merges.push([tokens[left], tokens[right]]);

    const delta = new Map<number, number>();
    const addPairs = (s: readonly number[], weight: number, w: number | undefined): void => {
      for (let i = 0; i + 1 < s.length; i++) {
        const k = s[i] * ID_LIMIT + s[i + 1];
        delta.set(k, (delta.get(k) ?? 0) + weight);
        if (w !== undefined) {
          let set = pairWords.get(k);
          if (!set) pairWords.set(k, (set = new Set()));
          set.add(w);
        }
      }
    };
    const affected = [...(pairWords.get(key) ?? [])];
    pairWords.delete(key);
    for (const w of affected) {
      const s = symbols[w];
      const next: number[] = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === left && s[i + 1] === right) {
          next.push(id);
          i++;
        } else {
          next.push(s[i]);
        }
      }
      if (next.length === s.length) continue; // the word no longer holds the pair
      addPairs(s, -freq[w], undefined);
      addPairs(next, freq[w], w);
      symbols[w] = next;
    }
    for (const [k, d] of delta) {
      if (d === 0) continue;
      const updated = (pairCounts.get(k) ?? 0) + d;
      if (updated > 0) {
        pairCounts.set(k, updated);
        heap.push(updated, k);
      } else {
        pairCounts.delete(k);
        pairWords.delete(k);
      }
    }
  }

  for (const special of specialTokens) {
    if (tokenIds.has(special)) throw new Error(`trainByteLevelBpe: special token ${JSON.stringify(special)} is also a BPE token`);
  }
  return { tokens, merges, specialTokens, stats: { distinctWords: symbols.length, totalWords } };
}

/** The HF `tokenizer.json` object of a trained model (keys in the order HF writes them). */
export function buildTokenizerJson(trained: TrainedBpe): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  trained.tokens.forEach((t, i) => (vocab[t] = i));
  const base = trained.tokens.length;
  trained.specialTokens.forEach((t, i) => (vocab[t] = base + i));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: trained.specialTokens.map((content, i) => ({
      id: base + i,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      // "left right" strings: byte-level tokens never contain a space (it is written Ġ).
      merges: trained.merges.map(([l, r]) => `${l} ${r}`),
    },
  };
}

export interface TokenizerConfigOptions {
  /** Default '<|endoftext|>' (the document separator of plain-text pretraining). */
  readonly eosToken?: string;
  /** Default '<|endoftext|>'. */
  readonly padToken?: string;
  /** Default CHATML_TEMPLATE. */
  readonly chatTemplate?: string;
  /** Written only when given. */
  readonly modelMaxLength?: number;
}

/** The HF `tokenizer_config.json` object (PreTrainedTokenizerFast, no BOS, ChatML template). */
export function buildTokenizerConfig(trained: TrainedBpe, options: TokenizerConfigOptions = {}): Record<string, unknown> {
  const eos = options.eosToken ?? '<|endoftext|>';
  const pad = options.padToken ?? '<|endoftext|>';
  for (const [name, token] of [
    ['eosToken', eos],
    ['padToken', pad],
  ] as const) {
    if (!trained.specialTokens.includes(token))
      throw new Error(
        `buildTokenizerConfig: ${name} ${JSON.stringify(token)} is not one of the special tokens ${JSON.stringify(trained.specialTokens)}`,
      );
  }
  const base = trained.tokens.length;
  const addedTokensDecoder: Record<string, unknown> = {};
  trained.specialTokens.forEach((content, i) => {
    addedTokensDecoder[String(base + i)] = { content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
  });
  return {
    add_bos_token: false,
    add_eos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: addedTokensDecoder,
    additional_special_tokens: trained.specialTokens.filter((t) => t !== eos && t !== pad),
    bos_token: null,
    chat_template: options.chatTemplate ?? CHATML_TEMPLATE,
    clean_up_tokenization_spaces: false,
    eos_token: eos,
    errors: 'replace',
    ...(options.modelMaxLength !== undefined ? { model_max_length: options.modelMaxLength } : {}),
    pad_token: pad,
    split_special_tokens: false,
    tokenizer_class: 'PreTrainedTokenizerFast',
    unk_token: null,
  };
}

/** Stable text form of the JSON files: 2-space indent, trailing newline. */
export function formatJson(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
