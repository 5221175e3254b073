/**
 * Conversations → token ids + loss masks (src/corpus/chat-samples.ts, chat-templates.ts): the
 * committed sample through the lab target, the Llama 3 and Qwen built-ins on small tokenizers
 * trained here with those families' special tokens, a template file whose markers are read off
 * the template, the refusals, and the committed lab chat file.
 *
 * How the masks are proven exact: templateMask below computes the mask without the markers the
 * library uses. For the k-th message, when it is an assistant reply, the template's own rendering
 * of messages[0..k) with the generation prompt is the text right before the reply, and its
 * rendering of messages[0..k] the text through the reply's end of turn; both must be prefixes of
 * the whole rendering, and their token encodings prefixes of the whole token ids (so each is a
 * token boundary), and the reply's tokens are the positions between the two prefix lengths. The
 * library's mask must equal the union of those ranges position by position, and each masked run
 * must decode to the reply (as the template renders it) plus its end-of-turn marker.
 */
import { buildTokenizerConfig, buildTokenizerJson, byteToUnicode, trainByteLevelBpe } from '../../src/corpus/bpe-trainer.ts';
import { tokenizeConversations, type ChatSample } from '../../src/corpus/chat-samples.ts';
import { BUILTIN_CHAT_TEMPLATES, resolveChatTemplate, type ResolvedChatTemplate } from '../../src/corpus/chat-templates.ts';
import { readConversations, type Conversation } from '../../src/corpus/conversations.ts';
import { CHAT_MARKERS, ChatTokenizer, type ChatMessage } from '../../src/formats/tokenizer.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { repoAssets, SAMPLE_FILE } from './conversations.test.ts';

/** Maximal runs of 1s in a mask, as [start, end). */
function runs(mask: readonly number[]): [number, number][] {
  const out: [number, number][] = [];
  mask.forEach((v, i) => {
    if (v && (i === 0 || !mask[i - 1])) out.push([i, i]);
    if (v) out[out.length - 1][1] = i + 1;
  });
  return out;
}

const isPrefix = (prefix: readonly number[], of: readonly number[]): boolean =>
  prefix.length <= of.length && prefix.every((id, i) => of[i] === id);

/** The loss mask from the template's own prefixes, independently of the markers (see the file comment). */
export function templateMask(tokenizer: ChatTokenizer, chat: ResolvedChatTemplate, messages: readonly ChatMessage[]): number[] {
  const render = (upTo: number, prompt = false) => chat.template.render(messages.slice(0, upTo), tokenizer.templateVariables, prompt);
  const whole = render(messages.length);
  const ids = tokenizer.encode(whole);
  const mask = new Array<number>(ids.length).fill(0);
  messages.forEach((m, k) => {
    if (m.role !== 'assistant') return;
    const before = render(k, true);
    const through = render(k + 1);
    assert(through.startsWith(before) && whole.startsWith(through), `message ${k}: the template's renderings are prefixes of the whole`);
    const [p, q] = [tokenizer.encode(before), tokenizer.encode(through)];
    assert(isPrefix(p, ids) && isPrefix(q, ids), `message ${k}: reply edges fall on token boundaries`);
    mask.fill(1, p.length, q.length);
  });
  return mask;
}

/** Masked runs of one sample, decoded. */
const maskedTexts = (tokenizer: ChatTokenizer, s: ChatSample) => runs(s.lossMask).map(([a, b]) => tokenizer.decode(s.inputIds.slice(a, b)));

const row = (messages: ChatMessage[], line = 1): Conversation => ({ id: `c${line}`, line, messages });

const TWO_REPLIES: ChatMessage[] = [
  { role: 'user', content: 'Who came to the meeting?' },
  { role: 'assistant', content: ' About forty men came.\n' }, // edge whitespace: Llama 3 trims it, ChatML keeps it
  { role: 'user', content: 'Was the mayor there?' },
  { role: 'assistant', content: 'He was not.' },
];

/** A small byte-level BPE trained here, with a family's special tokens (the last one is eos). */
function familyTokenizer(specials: string[], config: Record<string, unknown>, name: string): ChatTokenizer {
  const texts = [
    'Who came to the meeting? About forty men came to the meeting. Was the mayor there? He was not there.',
    'The jury said the men came to the city and the mayor was there.',
  ];
  const trained = trainByteLevelBpe(texts, { vocabSize: 400, specialTokens: specials });
  const eos = specials[specials.length - 1];
  return new ChatTokenizer(
    buildTokenizerJson(trained),
    { ...buildTokenizerConfig(trained, { eosToken: eos, padToken: eos }), ...config },
    name,
  );
}

async function labTarget(ctx: Parameters<typeof repoAssets>[0]): Promise<{ tokenizer: ChatTokenizer; vocabSize: number }> {
  const assets = repoAssets(ctx);
  const tokenizer = await ChatTokenizer.load(assets, 'lab-target');
  const config = JSON.parse(new TextDecoder().decode(await assets.read('lab-target/config.json'))) as { vocab_size: number };
  return { tokenizer, vocabSize: config.vocab_size };
}

export default defineSuite('corpus/chat-samples', (t) => {
  t.test('the committed sample through the lab target at max length 64: counts, and every mask position proven', async (ctx) => {
    const { tokenizer, vocabSize } = await labTarget(ctx);
    const chat = resolveChatTemplate(undefined, tokenizer);
    assertDeepEqual(chat.markers, CHAT_MARKERS.qwen, 'the lab tokenizer_config.json template is ChatML');
    const file = await readConversations(await repoAssets(ctx).read(SAMPLE_FILE), 'sample.jsonl');
    const out = tokenizeConversations(tokenizer, file.rows, { vocabSize, maxLength: 64, file: 'sample.jsonl', chat });
    assertEqual(out.rows, 11, 'conversations in');
    assertDeepEqual(
      out.skipped,
      [{ line: 9, reason: 'no assistant token within the first 64 tokens (max length)' }],
      'long-question: its reply lies past 64 tokens',
    );
    assertEqual(out.truncated, 3, 'rows over 64 tokens (long-reply, long-question, four-replies)');
    assertEqual(out.samples.length, 10, 'samples out');
    assertEqual(out.lossTokens, 169, 'loss tokens');
    assertDeepEqual(
      out.samples.map((s) => s.lossMask.reduce((a, v) => a + v, 0)),
      [18, 16, 13, 20, 12, 45, 7, 8, 14, 16],
      'loss tokens per sample',
    );
    for (const s of out.samples) {
      const messages = file.rows.find((r) => r.line === s.line)!.messages;
      const ids = tokenizer.encode(chat.template.render(messages, tokenizer.templateVariables));
      assertDeepEqual(s.inputIds, ids.slice(0, 64), `${s.id}: ids are the whole rendering tokenized, cut at 64`);
      assertDeepEqual(s.lossMask, templateMask(tokenizer, chat, messages).slice(0, 64), `${s.id}: mask = the template's reply ranges`);
      const replies = messages.filter((m) => m.role === 'assistant').map((m) => `${m.content}<|im_end|>\n`);
      const texts = maskedTexts(tokenizer, s);
      if (ids.length <= 64) assertDeepEqual(texts, replies, `${s.id}: masked runs are the replies + <|im_end|>\\n`);
      else
        assert(
          texts.every((text, i) => replies[i].startsWith(text)),
          `${s.id}: cut masked runs are starts of the replies`,
        );
    }
    const cut = out.samples.find((s) => s.id === 'four-replies')!;
    assertDeepEqual(
      maskedTexts(tokenizer, cut),
      ['Yes.<|im_end|>\n', 'No.<|im_end|>\n', 'Maybe.<|im_end|>\n'],
      'four-replies: the fourth reply lies past token 64',
    );
    const long = out.samples.find((s) => s.id === 'long-reply')!;
    assertDeepEqual(runs(long.lossMask), [[19, 64]], 'long-reply: the reply is cut at token 64');

    const builtin = tokenizeConversations(tokenizer, file.rows, {
      vocabSize,
      maxLength: 64,
      file: 'sample.jsonl',
      chat: resolveChatTemplate('speclab', tokenizer),
    });
    assertDeepEqual(builtin, out, '--chat-template speclab is the lab target config template');
    const whole = tokenizeConversations(tokenizer, file.rows, { vocabSize, file: 'sample.jsonl' });
    assertDeepEqual(
      [whole.samples.length, whole.truncated, whole.skipped.length, whole.lossTokens],
      [11, 0, 0, 229],
      'default max length 2048: nothing cut',
    );
  });

  t.test('Llama 3 and Qwen built-ins: exact rendering; the mask is each reply and its end of turn', () => {
    const families = [
      {
        name: 'llama3' as const,
        tokenizer: familyTokenizer(
          ['<|begin_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>'],
          { bos_token: '<|begin_of_text|>', chat_template: BUILTIN_CHAT_TEMPLATES.llama3.text },
          'llama',
        ),
        text:
          '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWho came to the meeting?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nAbout forty men came.<|eot_id|>' +
          '<|start_header_id|>user<|end_header_id|>\n\nWas the mayor there?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHe was not.<|eot_id|>',
        masked: ['About forty men came.<|eot_id|>', 'He was not.<|eot_id|>'],
        endOfTurnTokens: 1,
      },
      {
        name: 'qwen' as const,
        tokenizer: familyTokenizer(
          ['<|endoftext|>', '<|im_start|>', '<|im_end|>'],
          { chat_template: BUILTIN_CHAT_TEMPLATES.qwen.text },
          'qwen',
        ),
        text:
          '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWho came to the meeting?<|im_end|>\n<|im_start|>assistant\n About forty men came.\n<|im_end|>\n' +
          '<|im_start|>user\nWas the mayor there?<|im_end|>\n<|im_start|>assistant\nHe was not.<|im_end|>\n',
        masked: [' About forty men came.\n<|im_end|>\n', 'He was not.<|im_end|>\n'],
        endOfTurnTokens: 2, // <|im_end|> and the newline after it, as SpecForge's qwen template marks them
      },
    ];
    for (const f of families) {
      const chat = resolveChatTemplate(f.name, f.tokenizer);
      assertDeepEqual(
        resolveChatTemplate(undefined, f.tokenizer).markers,
        BUILTIN_CHAT_TEMPLATES[f.name].markers,
        `${f.name}: markers found in the tokenizer_config.json template`,
      );
      assertEqual(chat.template.render(TWO_REPLIES, f.tokenizer.templateVariables), f.text, `${f.name}: rendering`);
      const [s] = tokenizeConversations(f.tokenizer, [row(TWO_REPLIES)], { vocabSize: 400, chat }).samples;
      assertDeepEqual(s.inputIds, f.tokenizer.encode(f.text), `${f.name}: ids`);
      assertDeepEqual(maskedTexts(f.tokenizer, s), f.masked, `${f.name}: masked runs`);
      assertDeepEqual(s.lossMask, templateMask(f.tokenizer, chat, TWO_REPLIES), `${f.name}: mask = the template's reply ranges`);
      const contentTokens = f.masked.map(
        (m, i) => f.tokenizer.encode(f.name === 'llama3' ? TWO_REPLIES[2 * i + 1].content.trim() : TWO_REPLIES[2 * i + 1].content).length,
      );
      assertDeepEqual(
        runs(s.lossMask).map(([a, b]) => b - a),
        contentTokens.map((n) => n + f.endOfTurnTokens),
        `${f.name}: reply tokens + end-of-turn tokens`,
      );
    }
  });

  t.test("a template file's markers are read off the template; a token straddling a reply's edge is masked", () => {
    // Bytes plus one merge, ':"', so the header's ':' and a reply's opening quote become one token.
    const tokens = [...byteToUnicode(), ':"'];
    const tokenizer = new ChatTokenizer(
      buildTokenizerJson({ tokens, merges: [[':', '"']], specialTokens: ['<|endoftext|>'], stats: { distinctWords: 0, totalWords: 0 } }),
      { eos_token: '<|endoftext|>' },
      'bytes',
    );
    const text =
      "{% for m in messages %}{{ m['role'] + ':' + m['content'] + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}";
    const chat = resolveChatTemplate({ file: 'plain.jinja', text }, tokenizer);
    assertDeepEqual(
      chat.markers,
      { assistantHeader: 'assistant:', endOfTurn: '\n' },
      'header = generation prompt, end of turn = what follows a reply',
    );
    assertEqual(chat.name, 'plain.jinja', 'named by its file');
    const [s] = tokenizeConversations(
      tokenizer,
      [
        row([
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: '"Yes," he said.' },
        ]),
      ],
      { vocabSize: 257, chat },
    ).samples;
    const straddling = s.inputIds.indexOf(256);
    assertEqual(tokenizer.decode(s.inputIds.slice(0, straddling)), 'user:Hi\nassistant', 'the merged token starts inside the header');
    // Prefix lengths alone would start the mask one token late, after ':"', and lose the reply's quote.
    assertEqual(runs(s.lossMask)[0][0], straddling, 'a token overlapping the reply is masked');
    assertDeepEqual(maskedTexts(tokenizer, s), [':"Yes," he said.\n'], 'masked run');
  });

  t.test('refusals name the file, the row and the cause', async (ctx) => {
    const { tokenizer, vocabSize } = await labTarget(ctx);
    const rows = [row(TWO_REPLIES, 1), row([{ role: 'system', content: 'Be brief.' }, ...TWO_REPLIES], 2)];
    const noSystem =
      "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}";
    const chat = resolveChatTemplate({ file: 'nosys.jinja', text: noSystem }, tokenizer);
    assertThrows(
      () => tokenizeConversations(tokenizer, rows, { vocabSize, file: 'chats.jsonl', chat }),
      /^chats\.jsonl:2: chat template nosys\.jinja does not render this conversation \(System role not supported\)$/,
      'template error',
    );
    const err = assertThrows(
      () => tokenizeConversations(tokenizer, rows, { vocabSize: 300, file: 'chats.jsonl' }),
      /^chats\.jsonl:1: token \d+ \(position \d+\) is outside the target's vocabulary \[0, 300\); the tokenizer does not belong to the target$/,
      'vocabulary',
    );
    assert(Number(/token (\d+)/.exec(err.message)![1]) >= 300, 'the id named is the first one outside');
    assertThrows(
      () => tokenizeConversations(tokenizer, rows, { vocabSize, maxLength: 0 }),
      /^tokenizeConversations: maxLength must be a positive integer, got 0$/,
      'max length',
    );
    assertThrows(
      () => resolveChatTemplate('chatml', tokenizer),
      /^--chat-template: unknown template "chatml"; pick one of llama3, qwen, speclab, or give a Jinja template file$/,
      'unknown name',
    );
    assertThrows(
      () => resolveChatTemplate('llama3', tokenizer),
      /^llama3: the chat template's marker <\|start_header_id\|> is not a token of .*lab-target; the template belongs to another model/,
      "another model's template",
    );
    assertThrows(
      () => resolveChatTemplate({ file: 'flat.jinja', text: '{% for m in messages %}{{ m.content }} {% endfor %}' }, tokenizer),
      /^flat\.jinja: cannot find the assistant replies in what this chat template renders/,
      'no markers',
    );
    assertThrows(
      () => resolveChatTemplate({ file: 'bad.jinja', text: '{% for %}' }, tokenizer),
      /^bad\.jinja: chat_template does not parse/,
      'does not parse',
    );
    const bare = new ChatTokenizer(
      buildTokenizerJson(trainByteLevelBpe(['a b'], { vocabSize: 300 })),
      { eos_token: '<|endoftext|>' },
      'bare',
    );
    assertThrows(
      () => resolveChatTemplate(undefined, bare),
      /^bare\/tokenizer_config\.json: no chat_template; pass --chat-template with one of llama3, qwen, speclab or a Jinja template file$/,
      'no template at all',
    );
  });

  t.test('assets/lab-target/lab-chats.jsonl: 400 training and 32 held-out rows, each within 120 lab tokens', async (ctx) => {
    const { tokenizer, vocabSize } = await labTarget(ctx);
    const file = await readConversations(await repoAssets(ctx).read('lab-target/lab-chats.jsonl'), 'lab-chats.jsonl');
    assertDeepEqual(
      [
        file.rows.filter((r) => r.id.startsWith('train-')).length,
        file.rows.filter((r) => r.id.startsWith('held-')).length,
        file.skipped.length,
      ],
      [400, 32, 0],
      'rows',
    );
    assert(
      file.rows.every((r) => r.messages.length === 2 && r.messages[0].content.startsWith('Continue the text: ')),
      'one "Continue the text" exchange per row',
    );
    const out = tokenizeConversations(tokenizer, file.rows, { vocabSize, maxLength: 120, file: 'lab-chats.jsonl' });
    assertDeepEqual([out.samples.length, out.truncated, out.skipped.length], [432, 0, 0], 'every row fits in 120 tokens');
    ctx.note('lossTokens', out.lossTokens);
    ctx.note('longest', Math.max(...out.samples.map((s) => s.inputIds.length)));
  });
});
