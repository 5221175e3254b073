/**
 * Conversations → training samples: token ids plus a 0/1 loss mask on exactly the tokens of the
 * assistant turns as the chat template renders them, as SpecForge's data preparation makes them.
 *
 * Each conversation is rendered whole with the chat template (no generation prompt), tokenized
 * whole without added special tokens, and masked by ChatTokenizer.maskRenderedConversation: every
 * reply from just after its assistant header through its end-of-turn marker. Then truncated to
 * `maxLength` (SpecForge's default 2048). A row left with no loss token by the truncation is
 * skipped with its reason; a template that fails on a row, or a token id the target's vocabulary
 * does not have (the tokenizer is not the target's), is refused naming the row.
 */
import type { ChatTokenizer } from '../formats/tokenizer.ts';
import { resolveChatTemplate, type ResolvedChatTemplate } from './chat-templates.ts';
import type { Conversation, SkippedRow } from './conversations.ts';

export const DEFAULT_MAX_LENGTH = 2048;

export interface ChatSample {
  readonly id: string;
  readonly line: number;
  readonly inputIds: number[];
  /** 1 on the tokens of assistant replies (with their end-of-turn marker), 0 elsewhere; same length as inputIds. */
  readonly lossMask: number[];
}

export interface TokenizeConversationsOptions {
  /** The target's vocabulary size (config.json vocab_size): every token id must lie below it. */
  readonly vocabSize: number;
  /** Truncate every sample to this many tokens; default 2048. */
  readonly maxLength?: number;
  /** The conversation file, for messages; default "conversations". */
  readonly file?: string;
  /** The template and markers (resolveChatTemplate); default the tokenizer_config.json chat_template. */
  readonly chat?: ResolvedChatTemplate;
}

export interface TokenizedConversations {
  readonly samples: ChatSample[];
  readonly skipped: SkippedRow[];
  /** Rows longer than maxLength (cut, and kept if some loss token survived). */
  readonly truncated: number;
  /** Loss-mask ones over all samples. */
  readonly lossTokens: number;
  /** Conversations given. */
  readonly rows: number;
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`tokenizeConversations: ${name} must be a positive integer, got ${value}`);
  return value;
}

export function tokenizeConversations(
  tokenizer: ChatTokenizer,
  rows: readonly Conversation[],
  options: TokenizeConversationsOptions,
): TokenizedConversations {
  const vocabSize = positiveInteger(options.vocabSize, 'vocabSize');
  const maxLength = positiveInteger(options.maxLength ?? DEFAULT_MAX_LENGTH, 'maxLength');
  const file = options.file ?? 'conversations';
  const chat = options.chat ?? resolveChatTemplate(undefined, tokenizer);
  const samples: ChatSample[] = [];
  const skipped: SkippedRow[] = [];
  let truncated = 0;
  let lossTokens = 0;
  for (const row of rows) {
    const where = `${file}:${row.line}`;
    let text: string;
    try {
      text = chat.template.render(row.messages, tokenizer.templateVariables);
    } catch (err) {
      throw new Error(`${where}: chat template ${chat.name} does not render this conversation (${(err as Error).message})`, { cause: err });
    }
    let full;
    try {
      full = tokenizer.maskRenderedConversation(text, chat.markers);
    } catch (err) {
      throw new Error(`${where}: ${(err as Error).message}`, { cause: err });
    }
    const length = Math.min(full.inputIds.length, maxLength);
    if (full.inputIds.length > maxLength) truncated++;
    const inputIds = Array.from(full.inputIds.subarray(0, length));
    const bad = inputIds.findIndex((id) => id < 0 || id >= vocabSize);
    if (bad >= 0) {
      throw new Error(
        `${where}: token ${inputIds[bad]} (position ${bad}) is outside the target's vocabulary [0, ${vocabSize}); the tokenizer does not belong to the target`,
      );
    }
    const lossMask = Array.from(full.lossMask.subarray(0, length));
    const ones = lossMask.reduce((a, v) => a + v, 0);
    if (ones === 0) {
      skipped.push({ line: row.line, reason: `no assistant token within the first ${maxLength} tokens (max length)` });
      continue;
    }
    lossTokens += ones;
    samples.push({ id: row.id, line: row.line, inputIds, lossMask });
  }
  return { samples, skipped, truncated, lossTokens, rows: rows.length };
}
