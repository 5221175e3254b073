/**
 * Which chat template renders a dataset's conversations, and the markers that find the assistant
 * replies in what it renders (`--chat-template`).
 *
 * By default the target's own tokenizer_config.json `chat_template` (what the target was tuned on,
 * so what it will see when serving); a built-in by name (`llama3`, `qwen`, `speclab`) for a target
 * whose config has none or the wrong one; or the text of a Jinja template file. The markers of a
 * built-in are fixed; those of any other template are found by rendering a probe conversation and
 * checked on a two-reply one, so a template whose replies cannot be found is refused up front
 * rather than producing empty or wrong loss masks.
 */
import {
  CHAT_MARKERS,
  ChatTemplate,
  assistantSpans,
  type ChatMarkers,
  type ChatMessage,
  type ChatTokenizer,
} from '../formats/tokenizer.ts';
import { CHATML_TEMPLATE } from './bpe-trainer.ts';

/** Meta-Llama-3-8B-Instruct's template, verbatim: note it trims every message's content. */
const LLAMA3_TEMPLATE =
  "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}" +
  '{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}' +
  "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

/** Qwen2-Instruct's template, verbatim (ChatML with SpecForge's default system prompt when none is given). */
const QWEN_TEMPLATE =
  "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}" +
  "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface BuiltinChatTemplate {
  readonly description: string;
  readonly text: string;
  readonly markers: ChatMarkers;
}

export const BUILTIN_CHAT_TEMPLATES = {
  llama3: { description: 'Llama 3 Instruct (<|start_header_id|> … <|eot_id|>)', text: LLAMA3_TEMPLATE, markers: CHAT_MARKERS.llama3 },
  qwen: { description: 'Qwen2 ChatML (<|im_start|> … <|im_end|>, default system prompt)', text: QWEN_TEMPLATE, markers: CHAT_MARKERS.qwen },
  speclab: { description: 'the lab target: plain ChatML, no default system prompt', text: CHATML_TEMPLATE, markers: CHAT_MARKERS.qwen },
} as const satisfies Record<string, BuiltinChatTemplate>;

export type BuiltinChatTemplateName = keyof typeof BUILTIN_CHAT_TEMPLATES;

export interface ResolvedChatTemplate {
  /** A built-in's name, the template file, or `<tokenizer>/tokenizer_config.json`: for messages. */
  readonly name: string;
  readonly template: ChatTemplate;
  readonly markers: ChatMarkers;
}

/** A `--chat-template` value: a built-in name, a template's text, or a template file and its text. */
export type ChatTemplateChoice = string | { readonly file: string; readonly text: string };

const BUILTIN_NAMES = Object.keys(BUILTIN_CHAT_TEMPLATES).join(', ');

/**
 * The template and markers to render `tokenizer`'s training conversations with. `choice` undefined:
 * the tokenizer_config.json chat_template; a built-in name; Jinja text (anything with `{{` or `{%`);
 * or `{file, text}` for a template file (the caller reads it; errors name the file).
 */
export function resolveChatTemplate(choice: ChatTemplateChoice | undefined, tokenizer: ChatTokenizer): ResolvedChatTemplate {
  let resolved: ResolvedChatTemplate;
  if (choice === undefined) {
    const template = tokenizer.chatTemplate;
    if (!template)
      throw new Error(
        `${tokenizer.source}/tokenizer_config.json: no chat_template; pass --chat-template with one of ${BUILTIN_NAMES} or a Jinja template file`,
      );
    resolved = { name: template.source, template, markers: inferChatMarkers(template, tokenizer.templateVariables) };
  } else if (typeof choice === 'string' && Object.hasOwn(BUILTIN_CHAT_TEMPLATES, choice)) {
    const builtin = BUILTIN_CHAT_TEMPLATES[choice as BuiltinChatTemplateName];
    resolved = { name: choice, template: new ChatTemplate(builtin.text, `built-in chat template ${choice}`), markers: builtin.markers };
  } else if (typeof choice === 'string' && !/\{\{|\{%/.test(choice)) {
    throw new Error(`--chat-template: unknown template "${choice}"; pick one of ${BUILTIN_NAMES}, or give a Jinja template file`);
  } else {
    const { file, text } = typeof choice === 'string' ? { file: 'chat template', text: choice } : choice;
    const template = new ChatTemplate(text, file);
    resolved = { name: file, template, markers: inferChatMarkers(template, tokenizer.templateVariables) };
  }
  checkMarkerTokens(resolved, tokenizer);
  return resolved;
}

const PROBE: readonly ChatMessage[] = [
  { role: 'user', content: 'Name a colour.' },
  { role: 'assistant', content: 'Blue.' },
  { role: 'user', content: 'Another one?' },
  { role: 'assistant', content: 'Green.' },
];

/** Whether `markers` find exactly the probe's two replies, each ending in its content + end of turn. */
function markersFit(text: string, markers: ChatMarkers): boolean {
  const replies = PROBE.filter((m) => m.role === 'assistant');
  const spans = assistantSpans(text, markers);
  // A template may put text of its own before a reply (Qwen3's empty <think> block): that is part of
  // the turn as rendered, so only the reply's end is pinned.
  return (
    spans.length === replies.length && spans.every((s, i) => text.slice(s.start, s.end).endsWith(replies[i].content + markers.endOfTurn))
  );
}

/**
 * The assistant header and end-of-turn marker of `template`: a known family's when they fit, else
 * read off the template itself (generation prompt = header; what follows a reply = end of turn),
 * then checked on the two-reply probe. Throws when no markers fit.
 */
export function inferChatMarkers(template: ChatTemplate, variables: Readonly<Record<string, unknown>>): ChatMarkers {
  const render = (messages: readonly ChatMessage[], generationPrompt = false): string => {
    try {
      return template.render(messages, variables, generationPrompt);
    } catch (err) {
      throw new Error(`${template.source}: chat template does not render a probe conversation (${(err as Error).message})`, { cause: err });
    }
  };
  const probe = render(PROBE);
  for (const markers of Object.values(CHAT_MARKERS)) if (markersFit(probe, markers)) return markers;
  const [user, reply] = PROBE;
  const bare = render([user]);
  const prompted = render([user], true);
  const answered = render([user, reply]);
  if (prompted.length > bare.length && prompted.startsWith(bare) && answered.startsWith(prompted + reply.content)) {
    const endOfTurn = answered.slice(prompted.length + reply.content.length);
    const markers = { assistantHeader: prompted.slice(bare.length), endOfTurn };
    if (endOfTurn !== '' && markersFit(probe, markers)) return markers;
  }
  throw new Error(
    `${template.source}: cannot find the assistant replies in what this chat template renders (no known assistant header / end-of-turn marker fits); pick a built-in with --chat-template (${BUILTIN_NAMES})`,
  );
}

/** Every `<|…|>` special token in the markers must be one token of the tokenizer: else the template is another model's. */
function checkMarkerTokens(resolved: ResolvedChatTemplate, tokenizer: ChatTokenizer): void {
  const specials = `${resolved.markers.assistantHeader}${resolved.markers.endOfTurn}`.match(/<\|[^|<>]+\|>/g) ?? [];
  for (const token of specials) {
    if (tokenizer.tokenId(token) === undefined) {
      throw new Error(
        `${resolved.name}: the chat template's marker ${token} is not a token of ${tokenizer.source}; the template belongs to another model (pick another --chat-template)`,
      );
    }
  }
}
