/**
 * Tokenizer + chat template + loss masks, on a tiny byte-level BPE tokenizer built here (the
 * fixtures ship none): ChatML special tokens, a few merges, and a ChatML Jinja template.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { CHAT_MARKERS, ChatTokenizer, type ChatMessage } from '../../src/formats/tokenizer.ts';
import { tempStore } from '../data/temp-store.ts';

/** GPT-2 byte → printable character table: printable Latin-1 maps to itself, the rest to U+0100 onwards. */
function byteAlphabet(): string[] {
  const table: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table.push(String.fromCodePoint(printable ? b : 256 + extra++));
  }
  return table;
}

const MERGES = [
  'h e',
  'l l',
  'he ll',
  'hell o',
  'Ġ w',
  'o r',
  'Ġw or',
  'Ġwor l',
  'Ġworl d',
  'Ġ t',
  'Ġt h',
  'Ġth e',
  'a s',
  'u s',
  'us e',
  'use r',
  'as s',
  'ass i',
  'assi s',
  'assis t',
  'assist a',
  'assista n',
  'assistan t',
];
const SPECIAL = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];

function tinyTokenizerJson(): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  for (const ch of byteAlphabet()) vocab[ch] = Object.keys(vocab).length;
  for (const m of MERGES) vocab[m.replace(' ', '')] = Object.keys(vocab).length;
  const base = Object.keys(vocab).length;
  return {
    version: '1.0',
    added_tokens: SPECIAL.map((content, i) => ({
      id: base + i,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges: MERGES,
    },
  };
}

const CHATML =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const CONFIG = { chat_template: CHATML, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', bos_token: null, model_max_length: 4096 };

const chat: ChatMessage[] = [
  { role: 'system', content: 'be kind' },
  { role: 'user', content: 'hello world' },
  { role: 'assistant', content: 'hello the world' },
  { role: 'user', content: 'the user' },
  { role: 'assistant', content: 'world!' },
];

/** Maximal runs of 1s in a mask, as [start, end). */
function runs(mask: Uint8Array): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < mask.length; i++) {
    if (mask[i] && (i === 0 || !mask[i - 1])) out.push([i, i]);
    if (mask[i]) out[out.length - 1][1] = i + 1;
  }
  return out;
}

export default defineSuite('formats/tokenizer', (t) => {
  t.test('byte-level BPE encodes with merges and round-trips text', () => {
    const tok = new ChatTokenizer(tinyTokenizerJson(), CONFIG, 'tiny');
    const ids = tok.encode('hello world');
    assertDeepEqual(ids, [tok.tokenId('hello'), tok.tokenId('Ġworld')], 'two merged tokens');
    const text = 'héllo, the wörld\n\tassistant';
    assertEqual(tok.decode(tok.encode(text)), text, 'round trip with non-ASCII and whitespace');
    assertDeepEqual(tok.encode('<|im_start|>user'), [tok.tokenId('<|im_start|>'), tok.tokenId('user')], 'special token is one id');
  });

  t.test('chat template renders ChatML; loss mask covers assistant replies and their end-of-turn', () => {
    const tok = new ChatTokenizer(tinyTokenizerJson(), CONFIG, 'tiny');
    const sample = tok.buildTrainingSample(chat, CHAT_MARKERS.qwen);
    assertEqual(
      sample.text,
      '<|im_start|>system\nbe kind<|im_end|>\n<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\nhello the world<|im_end|>\n<|im_start|>user\nthe user<|im_end|>\n<|im_start|>assistant\nworld!<|im_end|>\n',
      'rendered',
    );
    assertDeepEqual([...sample.inputIds], tok.encode(sample.text), 'ids are the whole text tokenized');
    const spans = runs(sample.lossMask);
    assertEqual(spans.length, 2, 'one masked run per assistant turn');
    const decoded = spans.map(([s, e]) => tok.decode([...sample.inputIds.subarray(s, e)]));
    assertDeepEqual(decoded, ['hello the world<|im_end|>\n', 'world!<|im_end|>\n'], 'masked tokens are exactly replies + end of turn');
    for (const [s] of spans)
      assertEqual(tok.decode([...sample.inputIds.subarray(s - 2, s)]), 'assistant\n', 'header right before each run is unmasked');
    const ones = sample.lossMask.reduce((a, v) => a + v, 0);
    assertEqual(
      ones,
      spans.reduce((a, [s, e]) => a + e - s, 0),
      'no stray ones',
    );

    const last = tok.buildTrainingSample(chat, CHAT_MARKERS.qwen, { onlyLastTurn: true });
    assertDeepEqual(runs(last.lossMask), [spans[1]], 'only the last turn');
    const cut = tok.buildTrainingSample(chat, CHAT_MARKERS.qwen, { maxLength: spans[0][0] + 2 });
    assertEqual(cut.inputIds.length, spans[0][0] + 2, 'truncated ids');
    assertDeepEqual(runs(cut.lossMask), [[spans[0][0], spans[0][0] + 2]], 'truncated mask');
  });

  t.test('generation prompt, template list form, and load from a FileStore', async ({ platform }) => {
    const tmp = tempStore(platform, 'tokenizer');
    try {
      const config = {
        ...CONFIG,
        chat_template: [
          { name: 'tool_use', template: 'x' },
          { name: 'default', template: CHATML },
        ],
      };
      await tmp.files.writeAtomic('tok/tokenizer.json', new TextEncoder().encode(JSON.stringify(tinyTokenizerJson())));
      await tmp.files.writeAtomic('tok/tokenizer_config.json', new TextEncoder().encode(JSON.stringify(config)));
      const tok = await ChatTokenizer.load(tmp.files, 'tok');
      assertEqual(
        tok.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }),
        '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
        'generation prompt',
      );
      await assertRejects(() => ChatTokenizer.load(tmp.files, 'missing'), /missing\/tokenizer\.json: not found/, 'missing files');
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('bad conversations and configs fail clearly', () => {
    const tok = new ChatTokenizer(tinyTokenizerJson(), CONFIG, 'tiny');
    assertThrows(
      () => tok.buildTrainingSample([{ role: 'assistant', content: 'x' }], CHAT_MARKERS.qwen),
      /tiny: message 0 has role "assistant", expected "user"/,
      'starts with assistant',
    );
    assertThrows(
      () => tok.buildTrainingSample([{ role: 'user', content: 'x' }], CHAT_MARKERS.qwen),
      /no assistant turn/,
      'nothing to train on',
    );
    assertThrows(() => tok.buildTrainingSample(chat, CHAT_MARKERS.llama3), /no assistant header .*wrong chat markers/, 'wrong markers');
    const noTemplate = new ChatTokenizer(tinyTokenizerJson(), { eos_token: '<|im_end|>' }, 'plain');
    assertThrows(() => noTemplate.applyChatTemplate(chat), /plain\/tokenizer_config\.json: no chat_template/, 'no template');
    assertThrows(
      () => new ChatTokenizer(tinyTokenizerJson(), { chat_template: '{% for %}' }, 'broken'),
      /broken\/tokenizer_config\.json: chat_template does not parse/,
      'bad template',
    );
    assertThrows(
      () => new ChatTokenizer({ ...tinyTokenizerJson(), model: { type: 'Nope' } }, CONFIG, 'weird'),
      /weird\/tokenizer\.json: cannot build tokenizer/,
      'bad model',
    );
    assert(tok.tokenId('<|im_end|>') !== undefined, 'special id known');
  });
});
