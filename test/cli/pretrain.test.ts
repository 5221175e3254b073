/**
 * `speclab pretrain` / `speclab generate` (src/cli/pretrain.ts): flag parsing, window packing, f16
 * encoding, and a tiny end-to-end run on a synthetic Brown-format corpus that writes a Hugging Face
 * directory, reloads it through the normal loader and generates from it.
 */
import { loadHfCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { buildBrownDocuments, splitCorpus } from '../../src/corpus/corpus.ts';
import { f16ToF32 } from '../../src/formats/safetensors.ts';
import { ChatTokenizer } from '../../src/formats/tokenizer.ts';
import {
  f32ToF16,
  generateCommand,
  PackedWindows,
  parseGenerateArgs,
  parsePretrainArgs,
  pretrain,
  tokenStream,
  tokenizerVocabSize,
} from '../../src/cli/pretrain.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';

/** The argv parsers need commander: Node and Deno (a browser tab has no command line). */
const SERVER = { only: ['node', 'deno'] as const };
const WORDS = [
  'The/at',
  'jury/nn',
  'said/vbd',
  'that/cs',
  'the/at',
  'city/nn',
  'was/bedz',
  'well/rb',
  'run/vbn',
  'and/cc',
  'a/at',
  'new/jj',
  'law/nn',
  'came/vbd',
];

/** A Brown-format sample file: paragraphs of tagged sentences. */
function syntheticBrownFile(seed: number): string {
  const lines: string[] = [];
  for (let p = 0; p < 6; p++) {
    const sentence = Array.from({ length: 10 }, (_, i) => WORDS[(seed * 7 + p * 3 + i * 5) % WORDS.length]).join(' ');
    lines.push('', '', `\t${sentence} ./.`);
  }
  return `${lines.join('\n')}\n`;
}

export default defineSuite('cli/pretrain', (t) => {
  t.test(
    'flags: defaults, values and clear errors',
    () => {
      const o = parsePretrainArgs(['--layers', '3', '--hidden', '96', '--heads', '4', '--kv-heads', '2', '--lr', '1e-3', '--dtype', 'f16']);
      assertEqual(o.layers, 3, 'layers');
      assertEqual(o.hidden, 96, 'hidden');
      assertEqual(o.lr, 1e-3, 'lr');
      assertEqual(o.dtype, 'f16', 'dtype');
      assertThrows(() => parsePretrainArgs(['--layres', '2']), /unknown option --layres/, 'typo');
      assertThrows(() => parsePretrainArgs(['--steps', '1.5']), /--steps: 1\.5 is not an integer/, 'fractional steps');
      assertThrows(() => parsePretrainArgs(['--hidden', '100', '--heads', '3']), /multiple of --heads/, 'hidden/heads');
      assertThrows(() => parsePretrainArgs(['--heads', '4', '--kv-heads', '3', '--hidden', '128']), /multiple of --kv-heads/, 'GQA groups');
      assertThrows(() => parsePretrainArgs(['--dtype', 'bf16']), /f32 or f16/, 'dtype');
      assertThrows(() => parsePretrainArgs(['--seq']), /missing value/, 'missing value');
      assertThrows(() => parseGenerateArgs(['--max-new-tokens', '5']), /^--prompt is required$/, 'generate needs a prompt');
      assertEqual(parseGenerateArgs(['--prompt', 'Hi']).maxNewTokens, 40, 'generate default --max-new-tokens');
      assertEqual(parsePretrainArgs([]).out, 'runs/pretrained-lab-target', 'the default --out is not the bundled target');
      assertEqual(parsePretrainArgs(['--out', 'assets/lab-target']).out, 'assets/lab-target', 'the bundled target only when asked');
    },
    SERVER,
  );

  t.test('packed windows give next-token labels with stride seq', () => {
    const stream = Int32Array.from({ length: 11 }, (_, i) => 100 + i);
    const w = new PackedWindows(stream, 4);
    assertEqual(w.count, 2, 'windows of 4 in 11 tokens (each needs one extra label token)');
    const b = w.batch([1, 0]);
    assertDeepEqual(Array.from(b.inputIds), [104, 105, 106, 107, 100, 101, 102, 103], 'inputs');
    assertDeepEqual(Array.from(b.labels), [105, 106, 107, 108, 101, 102, 103, 104], 'labels');
    assertThrows(() => w.batch([2]), /window 2 outside/, 'out of range window');
  });

  t.test('f32 → f16 rounds to nearest even and saturates to infinity', () => {
    for (const x of [0, 1, -2.5, 0.1, 65504, 6.1e-5, 3e-7, -1e-3, 1234.567]) {
      const back = f16ToF32(f32ToF16(x));
      assert(Math.abs(back - x) <= Math.abs(x) * 2 ** -11 + 2 ** -25, `f16 round trip of ${x} gave ${back}`);
    }
    assertEqual(f16ToF32(f32ToF16(1e6)), Infinity, 'overflow');
    assertEqual(f32ToF16(1 + 2 ** -11), f32ToF16(1), 'tie rounds to even (down)');
    assertEqual(f32ToF16(1 + 3 * 2 ** -11), f32ToF16(1 + 2 ** -9), 'tie rounds to even (up)');
  });

  t.test(
    'a tiny pretraining run writes a loadable HF directory with a model card, and generate reads it',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'pretrain');
      const root = tmp.files.root;
      try {
        const lab = ctx.platform.files('assets/lab-target');
        for (const file of ['tokenizer.json', 'tokenizer_config.json']) await tmp.files.writeAtomic(`tok/${file}`, await lab.read(file));
        const files = ['ca01', 'ca02', 'cb01', 'cb02'].map((name, i) => ({ name, text: syntheticBrownFile(i) }));
        for (const f of files) await tmp.files.writeAtomic(`corpus/${f.name}`, new TextEncoder().encode(f.text));
        const split = splitCorpus(buildBrownDocuments(files), { seed: 0, heldOutFraction: 0.25 });
        const report = { seed: 0, heldOutFraction: 0.25, heldOutIds: split.heldOut.map((d) => d.id) };
        await tmp.files.writeAtomic('tok/corpus-split.json', new TextEncoder().encode(JSON.stringify(report)));

        const lines: string[] = [];
        const args = [
          '--layers',
          '1',
          '--hidden',
          '16',
          '--heads',
          '2',
          '--kv-heads',
          '1',
          '--intermediate',
          '32',
          '--steps',
          '4',
          '--batch-size',
          '2',
          '--seq',
          '16',
          '--log-every',
          '2',
          '--dtype',
          'f16',
        ];
        const code = await pretrain(
          ctx.platform,
          [...args, '--corpus', `${root}/corpus`, '--tokenizer', `${root}/tok`, '--out', `${root}/out`],
          (l) => lines.push(l),
          ctx.gpu,
        );
        assertEqual(code, 0, 'exit code');
        assert(
          lines.some((l) => /^step 4\/4 .*loss \d+\.\d+ .*tokens\/s .*ETA/.test(l)),
          `progress lines: ${lines.join('\n')}`,
        );
        assert(
          lines.some((l) => /^held-out: \d+ tokens, loss \d+\.\d+, perplexity \d+\.\d+/.test(l)),
          'held-out line',
        );

        const out = tmp.files;
        for (const f of [
          'config.json',
          'model.safetensors',
          'generation_config.json',
          'tokenizer.json',
          'tokenizer_config.json',
          'README.md',
        ])
          assert(await out.exists(`out/${f}`), `out/${f} written`);
        const checkpoint = await loadHfCheckpoint(out, 'out');
        assertEqual(checkpoint.config.architecture, 'LlamaForCausalLM', 'architecture');
        assertEqual(checkpoint.config.vocabSize, 2048, 'vocab');
        const tokenizer = await ChatTokenizer.load(out, 'out');
        const config = JSON.parse(new TextDecoder().decode(await out.read('out/config.json'))) as Record<string, unknown>;
        assertEqual(config.eos_token_id, tokenizer.tokenId('<|endoftext|>'), "eos id is the tokenizer's <|endoftext|>");
        assertEqual(config.torch_dtype, 'float16', 'torch_dtype');
        const card = new TextDecoder().decode(await out.read('out/README.md'));
        for (const want of [
          /Steps: 4, batch 2 × 16/,
          /Tokens seen: 1[,0-9]* /,
          /perplexity \*\*\d+\.\d+\*\*/,
          /speclab\.mjs pretrain --layers 1/,
          /Final training loss/,
        ]) {
          assert(want.test(card), `model card lacks ${want}:\n${card}`);
        }

        const printed: string[] = [];
        assertEqual(
          await generateCommand(
            ctx.platform,
            ['--prompt', 'The jury', '--max-new-tokens', '5', '--model', `${root}/out`],
            (l) => printed.push(l),
            ctx.gpu,
          ),
          0,
          'generate exit code',
        );
        assertEqual(printed.length, 1, 'one line printed');
        assert(printed[0].startsWith('The jury'), `generate prints prompt + continuation: ${printed[0]}`);
        assert(
          tokenizerVocabSize(JSON.parse(new TextDecoder().decode(await out.read('out/tokenizer.json'))), 'tokenizer.json') === 2048,
          'vocab size from tokenizer.json',
        );
        const stream = tokenStream(tokenizer, split.train, 7);
        assertEqual(stream[0], 7, 'every document starts with the separator');
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );
});
