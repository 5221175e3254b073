/**
 * Tokenizer + chat template for building training samples: wraps `@huggingface/tokenizers`
 * (tokenizer.json + tokenizer_config.json) and renders the model's Jinja chat template with
 * `@huggingface/jinja`.
 *
 * Loss masks follow SpecForge's general parser: the rendered conversation is tokenized whole (no
 * special tokens added); every assistant span runs from just after the assistant header up to and
 * including the next end-of-turn marker (or the end of the text); a span's token range is
 * [len(encode(text before span)), len(encode(text through span))) — prefix lengths rather than
 * offset mappings, which the JS tokenizer does not provide. Tokens in a span get 1, all others 0.
 * A prefix length is a token boundary of the whole text only when the prefix tokenizes to the
 * whole text's first tokens; when a token straddles the span edge instead (a header and a reply
 * that merge into one token), the token counts as inside the span (SpecForge's offset rule: a
 * token is masked when it overlaps the span).
 */
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import type { FileStore } from '../ports/storage.ts';
import { READ_BUDGETS, type ReadBudget } from '../ports/read-budget.ts';

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

/** The literal strings that delimit an assistant turn in a rendered template. */
export interface ChatMarkers {
  readonly assistantHeader: string;
  readonly endOfTurn: string;
}

/** Markers of common template families (as SpecForge names them). */
export const CHAT_MARKERS = {
  /** ChatML (Qwen 2/2.5/3 without thinking). */
  qwen: { assistantHeader: '<|im_start|>assistant\n', endOfTurn: '<|im_end|>\n' },
  llama3: { assistantHeader: '<|start_header_id|>assistant<|end_header_id|>\n\n', endOfTurn: '<|eot_id|>' },
} as const satisfies Record<string, ChatMarkers>;

export interface TrainingSample {
  readonly text: string;
  readonly inputIds: Int32Array;
  /** 1 on assistant response tokens (including their end-of-turn marker), 0 elsewhere. */
  readonly lossMask: Uint8Array;
}

export interface SampleOptions {
  /** Truncate ids and mask to this many tokens. */
  readonly maxLength?: number;
  /** Mask only the final assistant turn. */
  readonly onlyLastTurn?: boolean;
  /** Render with this template instead of the tokenizer_config.json one (`--chat-template`). */
  readonly template?: ChatTemplate;
}

/** A parsed Jinja chat template; `source` (a file, or a built-in's name) prefixes its errors. */
export class ChatTemplate {
  private readonly parsed: Template;

  constructor(
    readonly text: string,
    readonly source: string,
  ) {
    try {
      this.parsed = new Template(text);
    } catch (err) {
      throw new Error(`${source}: chat_template does not parse (${(err as Error).message})`, { cause: err });
    }
  }

  /** HF `apply_chat_template(tokenize=False)`: `variables` are the special tokens (bos_token, …). */
  render(messages: readonly ChatMessage[], variables: Readonly<Record<string, unknown>>, addGenerationPrompt = false): string {
    return this.parsed.render({ ...variables, messages, add_generation_prompt: addGenerationPrompt });
  }
}

type Json = Record<string, unknown>;

/** Special-token fields in tokenizer_config.json are either strings or {content: string}. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as Json).content === 'string') return (value as Json).content as string;
  return undefined;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export class ChatTokenizer {
  private readonly tokenizer: Tokenizer;
  /** tokenizer_config.json's chat_template, if it has one. */
  readonly chatTemplate: ChatTemplate | undefined;
  private readonly specialTokens: Record<string, string>;

  /** `source` names the tokenizer's folder in errors. */
  constructor(
    tokenizerJson: unknown,
    tokenizerConfig: unknown,
    readonly source = 'tokenizer',
  ) {
    if (!tokenizerJson || typeof tokenizerJson !== 'object') throw new Error(`${source}/tokenizer.json: must be a JSON object`);
    if (!tokenizerConfig || typeof tokenizerConfig !== 'object') throw new Error(`${source}/tokenizer_config.json: must be a JSON object`);
    const config = tokenizerConfig as Json;
    try {
      this.tokenizer = new Tokenizer(tokenizerJson, config);
    } catch (err) {
      throw new Error(`${source}/tokenizer.json: cannot build tokenizer (${(err as Error).message})`, { cause: err });
    }
    this.specialTokens = {};
    for (const key of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
      const text = tokenText(config[key]);
      if (text !== undefined) this.specialTokens[key] = text;
    }
    const templateText = ChatTokenizer.pickTemplate(config.chat_template, source);
    if (templateText !== undefined) this.chatTemplate = new ChatTemplate(templateText, `${source}/tokenizer_config.json`);
  }

  /** bos_token, eos_token, pad_token and unk_token of tokenizer_config.json, as templates see them. */
  get templateVariables(): Readonly<Record<string, string>> {
    return this.specialTokens;
  }

  /** Loads tokenizer.json and tokenizer_config.json from `dir` of a FileStore. */
  static async load(store: FileStore, dir: string): Promise<ChatTokenizer> {
    const prefix = dir === '' ? '' : `${dir.replace(/\/+$/, '')}/`;
    const readJson = async (file: string, budget: ReadBudget): Promise<unknown> => {
      const path = `${prefix}${file}`;
      if (!(await store.exists(path))) throw new Error(`${store.root}/${path}: not found`);
      const bytes = await store.read(path, budget);
      try {
        return JSON.parse(new TextDecoder().decode(bytes));
      } catch (err) {
        throw new Error(`${store.root}/${path}: not valid JSON (${(err as Error).message})`, { cause: err });
      }
    };
    return new ChatTokenizer(
      await readJson('tokenizer.json', READ_BUDGETS.tokenizer),
      await readJson('tokenizer_config.json', READ_BUDGETS.config),
      `${store.root}/${prefix}`.replace(/\/$/, ''),
    );
  }

  /** chat_template is a string, or a list of {name, template} of which "default" is the chat one. */
  private static pickTemplate(value: unknown, source: string): string | undefined {
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'string') return value;
    if (Array.isArray(value)) {
      const named = value.find((t) => t && typeof t === 'object' && (t as Json).name === 'default');
      if (named && typeof (named as Json).template === 'string') return (named as Json).template as string;
    }
    throw new Error(`${source}/tokenizer_config.json: chat_template must be a string or a list with a "default" entry`);
  }

  encode(text: string, options: { addSpecialTokens?: boolean } = {}): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: options.addSpecialTokens ?? false }).ids;
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    if (ids.length === 0) return '';
    return this.tokenizer.decode([...ids], {
      skip_special_tokens: options.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
  }

  tokenId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }

  /** Renders messages with the model's chat template (HF `apply_chat_template(tokenize=False)`), or with `options.template`. */
  applyChatTemplate(messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean; template?: ChatTemplate } = {}): string {
    const template = options.template ?? this.chatTemplate;
    if (!template) throw new Error(`${this.source}/tokenizer_config.json: no chat_template`);
    return template.render(messages, this.specialTokens, options.addGenerationPrompt ?? false);
  }

  /** Renders, tokenizes and masks one conversation (see the file comment for the mask rule). */
  buildTrainingSample(messages: readonly ChatMessage[], markers: ChatMarkers, options: SampleOptions = {}): TrainingSample {
    checkTurnOrder(messages, this.source);
    return this.maskRenderedConversation(this.applyChatTemplate(messages, { template: options.template }), markers, options);
  }

  /** Tokenizes an already rendered conversation and masks its assistant spans (see the file comment). */
  maskRenderedConversation(text: string, markers: ChatMarkers, options: Omit<SampleOptions, 'template'> = {}): TrainingSample {
    const ids = this.encode(text);
    const length = Math.min(ids.length, options.maxLength ?? ids.length);
    const lossMask = new Uint8Array(length);
    let spans = assistantSpans(text, markers);
    if (spans.length === 0)
      throw new Error(
        `${this.source}: rendered conversation has no assistant header ${JSON.stringify(markers.assistantHeader)}; wrong chat markers?`,
      );
    if (options.onlyLastTurn) spans = spans.slice(-1);
    for (const span of spans) {
      const start = this.tokenBoundary(ids, text, span.start);
      if (start.index >= length) break; // this span and every later one lie past the truncation
      const end = this.tokenBoundary(ids, text, span.end);
      lossMask.fill(1, start.index, Math.min(end.index + (end.straddles ? 1 : 0), length));
    }
    return { text, inputIds: Int32Array.from(ids.slice(0, length)), lossMask };
  }

  /**
   * How many tokens of `ids` (the tokens of `text`) lie wholly before character `char`, and whether
   * the next one straddles it. Usually the prefix's own tokens are the first tokens of the whole
   * text; otherwise BPE merged across `char` and the whole tokens are counted by decoding.
   */
  private tokenBoundary(ids: readonly number[], text: string, char: number): { index: number; straddles: boolean } {
    const prefixText = text.slice(0, char);
    const prefix = this.encode(prefixText);
    let common = 0;
    while (common < prefix.length && common < ids.length && prefix[common] === ids[common]) common++;
    if (common === prefix.length) return { index: common, straddles: false };
    while (common < ids.length && prefixText.startsWith(this.decode(ids.slice(0, common + 1)))) common++;
    return { index: common, straddles: this.decode(ids.slice(0, common)) !== prefixText };
  }
}

/**
 * Character spans [start, end) of the assistant replies in a rendered conversation: from just after
 * each assistant header through its end-of-turn marker (or the end of the text, for an unfinished turn).
 */
export function assistantSpans(text: string, markers: ChatMarkers): { start: number; end: number }[] {
  // Lazy match up to and including the end-of-turn marker, or to the end for an unfinished turn.
  const pattern = new RegExp(`${escapeRegExp(markers.assistantHeader)}([\\s\\S]*?(?:${escapeRegExp(markers.endOfTurn)}|$))`, 'g');
  return [...text.matchAll(pattern)].map((m) => {
    const start = m.index + markers.assistantHeader.length;
    return { start, end: start + m[1].length };
  });
}

/** Optional system first, then user/assistant alternating from a user turn, with at least one assistant turn. */
function checkTurnOrder(messages: readonly ChatMessage[], source: string): void {
  const turns = messages[0]?.role === 'system' ? messages.slice(1) : messages;
  turns.forEach((m, i) => {
    const want = i % 2 === 0 ? 'user' : 'assistant';
    if (m.role !== want)
      throw new Error(
        `${source}: message ${messages.indexOf(m)} has role "${m.role}", expected "${want}" (turns alternate user/assistant after an optional system message)`,
      );
    if (typeof m.content !== 'string') throw new Error(`${source}: message ${messages.indexOf(m)} has no string content`);
  });
  if (!turns.some((m) => m.role === 'assistant')) throw new Error(`${source}: conversation has no assistant turn to train on`);
}
