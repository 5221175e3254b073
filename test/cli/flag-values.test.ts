/**
 * Numeric flags of `speclab eval`, `prepare`, `pretrain` and `generate` (src/cli/flag-values.ts,
 * read as commander argParsers): text `Number()` would take ("0x10" → 16, "0b11" → 3, " " → 0) and
 * values past a flag's bound ("1e9" tokens) are refused by the pure argv parsers, before any file is
 * read, with a one-line error naming the flag; decimal values in range still parse, as `--flag value`
 * or `--flag=value`. No GPU needed.
 */
import { parseEvalArgs } from '../../src/cli/eval.ts';
import { checkPositions, decimalFloat, decimalInt, decimalNumber, tokenIdList } from '../../src/cli/flag-values.ts';
import { parsePrepareFlags } from '../../src/cli/prepare.ts';
import { parseGenerateArgs, parsePretrainArgs } from '../../src/cli/pretrain.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** The argv parsers need commander: Node and Deno (a browser tab has no command line). */
const SERVER = { only: ['node', 'deno'] as const };
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The error starts with the flag (prepare's schema errors name it as "field (--flag): ..."), on one line. */
function refuses(parse: () => unknown, flag: string, what: string): void {
  const err = assertThrows(parse, new RegExp(`(^|\\()${escape(flag)}\\)?: `), what);
  assert(!err.message.includes('\n'), `${what}: expected a one-line error, got ${JSON.stringify(err.message)}`);
}

/** Values every numeric flag refuses; "1e9" is over every count bound (seeds take up to 2^32 − 1, so they get 1e10). */
const badValues = (flag: string) => ['0x10', '0b11', ' ', '', 'Infinity', /seed/.test(flag) ? '1e10' : '1e9'];

const evalArgs = (...more: string[]) => ['--target', 't', '--draft', 'd', '--prompt', '1', ...more];

export default defineSuite('cli/flag-values', (t) => {
  t.test('helpers: decimal text only, bounds, token id lists', () => {
    for (const [text, value] of [
      ['12', 12],
      ['-2.5', -2.5],
      ['.5', 0.5],
      ['1e-3', 0.001],
      ['3E2', 300],
    ] as const)
      assertEqual(decimalNumber('--x', text), value, `decimal ${text}`);
    for (const text of ['0x10', '0b11', '0o7', ' ', '', ' 5', '1_000', 'Infinity', 'NaN', '1e', '--1']) {
      assertThrows(
        () => decimalNumber('--x', text),
        new RegExp(`^--x: ${escape(JSON.stringify(text))} is not a decimal number$`),
        `refuses ${JSON.stringify(text)}`,
      );
    }
    assertEqual(decimalInt('--n', '64', { min: 1, max: 64 }), 64, 'the bound itself is allowed');
    assertThrows(
      () => decimalInt('--max-new-tokens', '1e9', { min: 1, max: 65536 }),
      /^--max-new-tokens: 1000000000 is over the limit 65536$/,
      'over the limit',
    );
    assertThrows(() => decimalInt('--n', '0', { min: 1, max: 64 }), /^--n: 0 is under the minimum 1$/, 'under the minimum');
    assertThrows(() => decimalInt('--n', '2.5', { min: 1, max: 64 }), /^--n: 2\.5 is not an integer$/, 'fraction');
    assertThrows(() => decimalFloat('--p', '0', { min: 0, exclusiveMin: true, max: 1 }), /^--p: 0 must be above 0$/, 'open lower end');
    assertThrows(() => decimalFloat('--w', '1', { min: 0, max: 1, exclusiveMax: true }), /^--w: 1 must be under 1$/, 'open upper end');
    assertThrows(
      () => decimalFloat('--x', '1e400', { min: 0, max: 1e6 }),
      /^--x: Infinity is over the limit 1000000$/,
      'an exponent overflowing to Infinity',
    );
    assertDeepEqual(tokenIdList('--prompt', ' 1, 2 3,,4 '), [1, 2, 3, 4], 'commas and blanks separate ids');
    for (const item of ['0x10', '-1', '1.5', '1e3', 'a'])
      assertThrows(
        () => tokenIdList('--prompt', `1,${item}`),
        new RegExp(`^--prompt: ${escape(JSON.stringify(item))} is not a token id`),
        `token id ${item}`,
      );
    assertThrows(() => tokenIdList('--eos', '99999999999'), /^--eos: 99999999999 is over the limit 2147483647$/, 'token id beyond Int32');
  });

  t.test('checkPositions: prompt + generated tokens within max_position_embeddings, naming the flag', () => {
    checkPositions(
      [
        [1, 2],
        [1, 2, 3],
      ],
      5,
      8,
      { flag: '--max-new-tokens' },
    );
    const train = { flag: '--response-length', which: 'training', promptFlag: '--prompt-length' };
    assertThrows(
      () => checkPositions([[1], [1, 2, 3]], 300, 256, train),
      /^--response-length 300: the longest training prompt \(3 tokens\) plus 300 generated tokens is 303, over the target's max_position_embeddings 256; lower --response-length or use shorter prompts \(--prompt-length\)$/,
      'train message',
    );
    assertThrows(
      () => checkPositions([[1, 2, 3]], 6, 8, { flag: '--max-new-tokens' }),
      /^--max-new-tokens 6: the longest prompt \(3 tokens\) plus 6 generated tokens is 9, over the target's max_position_embeddings 8; lower --max-new-tokens or use shorter prompts$/,
      'eval message',
    );
  });

  t.test(
    'speclab eval: numeric flags decimal and bounded',
    () => {
      const a = parseEvalArgs(
        evalArgs('--prompt', '5, 6 7', '--max-new-tokens', '12', '--num-draft-tokens', '64', '--aux-layers', '1,2,2', '--eos', '0,3'),
      );
      assertDeepEqual(a.prompts, [[1], [5, 6, 7]], 'prompts');
      assertEqual(a.maxNewTokens, 12, 'max new tokens');
      assertEqual(a.numDraftTokens, 64, 'draft tokens at the bound');
      assertDeepEqual(a.auxLayers, [1, 2, 2], 'aux layers');
      assertDeepEqual(a.eos, [0, 3], 'eos');
      for (const flag of ['--max-new-tokens', '--num-draft-tokens']) {
        for (const value of [...badValues(flag), '0', '-1', '2.5'])
          refuses(() => parseEvalArgs(evalArgs(flag, value)), flag, `${flag} ${JSON.stringify(value)}`);
      }
      assertThrows(
        () => parseEvalArgs(evalArgs('--num-draft-tokens', '65')),
        /^--num-draft-tokens: 65 is over the limit 64$/,
        'the train bound on draft tokens',
      );
      for (const value of ['0x10', '0b11', '1e9', '-1']) refuses(() => parseEvalArgs(evalArgs('--eos', value)), '--eos', `--eos ${value}`);
      // A prompt of digits, commas and blanks is token ids, bounded like --eos; anything else is text.
      for (const value of ['99999999999', '1, 2147483648'])
        refuses(() => parseEvalArgs(evalArgs('--prompt', value)), '--prompt', `--prompt ${value}`);
      refuses(() => parseEvalArgs(evalArgs('--prompt', ' ')), '--prompt', 'a blank prompt');
      assertDeepEqual(parseEvalArgs(evalArgs('--prompt=0x10')).prompts, [[1], '0x10'], '"0x10" is text now, not the id 16');
      for (const value of ['1,0x1,2', '1,2', '1,2,3,4', '1,2,1024', ' '])
        refuses(() => parseEvalArgs(evalArgs('--aux-layers', value)), '--aux-layers', `--aux-layers ${JSON.stringify(value)}`);
    },
    SERVER,
  );

  t.test(
    'speclab eval: --temperature, --top-p, --top-k, --seed (greedy by default), refused naming the flag',
    () => {
      const d = parseEvalArgs(evalArgs());
      assertDeepEqual([d.temperature, d.topP, d.topK, d.seed], [0, 1, 0, 0], 'defaults: greedy');
      const s = parseEvalArgs(evalArgs('--temperature', '0.7', '--top-p=0.9', '--top-k', '40', '--seed', '4294967295'));
      assertDeepEqual([s.temperature, s.topP, s.topK, s.seed], [0.7, 0.9, 40, 4294967295], 'sampling flags');
      for (const flag of ['--temperature', '--top-p', '--top-k', '--seed']) {
        for (const value of [...badValues(flag), '-1'])
          refuses(() => parseEvalArgs(evalArgs(flag, value)), flag, `${flag} ${JSON.stringify(value)}`);
      }
      assertThrows(
        () => parseEvalArgs(evalArgs('--temperature', '101')),
        /^--temperature: 101 is over the limit 100$/,
        'temperature bound',
      );
      assertThrows(() => parseEvalArgs(evalArgs('--top-p', '0')), /^--top-p: 0 must be above 0$/, 'top-p open at 0');
      assertThrows(() => parseEvalArgs(evalArgs('--top-p', '1.5')), /^--top-p: 1\.5 is over the limit 1$/, 'top-p at most 1');
      assertThrows(() => parseEvalArgs(evalArgs('--top-k', '2.5')), /^--top-k: 2\.5 is not an integer$/, 'top-k integer');
      assertThrows(
        () => parseEvalArgs(evalArgs('--seed', '4294967296')),
        /^--seed: 4294967296 is over the limit 4294967295$/,
        'seed 32-bit',
      );
    },
    SERVER,
  );

  t.test(
    'speclab prepare: numeric flags decimal and within the train bounds',
    () => {
      const c = parsePrepareFlags([
        '--train-prompts',
        '4',
        '--eval-prompts',
        '1',
        '--prompt-length',
        '5',
        '--response-length',
        '6',
        '--aux-layers',
        '1, 2,3',
        '--seed',
        '4294967295',
      ]);
      assertEqual(c.trainPrompts, 4, 'train prompts');
      assertEqual(c.responseLength, 6, 'response length');
      assertDeepEqual(c.auxLayers, [1, 2, 3], 'aux layers');
      assertEqual(c.seed, 2 ** 32 - 1, 'largest seed');
      assertEqual(parsePrepareFlags([]).promptLength, 8, 'default prompt length');
      for (const flag of ['--train-prompts', '--eval-prompts', '--prompt-length', '--response-length', '--seed']) {
        for (const value of badValues(flag)) refuses(() => parsePrepareFlags([flag, value]), flag, `${flag} ${JSON.stringify(value)}`);
      }
      for (const value of ['1,0x2,3', '1,2,1e9', '1,,3'])
        refuses(() => parsePrepareFlags(['--aux-layers', value]), '--aux-layers', `--aux-layers ${value}`);
    },
    SERVER,
  );

  t.test(
    'speclab pretrain: numeric flags decimal and bounded',
    () => {
      const o = parsePretrainArgs([
        '--layers',
        '2',
        '--hidden',
        '128',
        '--heads',
        '4',
        '--kv-heads',
        '2',
        '--intermediate',
        '256',
        '--steps',
        '1100',
        '--batch-size',
        '16',
        '--seq',
        '128',
        '--lr',
        '4e-3',
        '--warmup-ratio',
        '0.03',
        '--weight-decay',
        '0.01',
        '--max-grad-norm',
        '1',
        '--seed',
        '0',
        '--log-every',
        '10',
        '--max-minutes',
        '38',
      ]);
      assertEqual(o.steps, 1100, 'the lab target recipe parses');
      assertEqual(o.lr, 0.004, 'lr with an exponent');
      assertEqual(o.maxMinutes, 38, 'max minutes');
      assertDeepEqual([o.batch, o.warmup, o.clip], [16, 0.03, 1], 'batch, warmup, clip under the names train uses');
      const old = parsePretrainArgs(['--batch', '16', '--warmup', '0.03', '--clip', '2']);
      assertDeepEqual([old.batch, old.warmup, old.clip], [16, 0.03, 2], 'the old names still work (deprecated)');
      const numeric = [
        '--layers',
        '--hidden',
        '--heads',
        '--kv-heads',
        '--intermediate',
        '--steps',
        '--batch-size',
        '--seq',
        '--lr',
        '--warmup-ratio',
        '--weight-decay',
        '--max-grad-norm',
        '--seed',
        '--log-every',
        '--max-minutes',
      ];
      for (const flag of numeric) {
        for (const value of [...badValues(flag), '-1'])
          refuses(() => parsePretrainArgs([flag, value]), flag, `${flag} ${JSON.stringify(value)}`);
      }
      for (const [flag, value] of [
        ['--layers', '0'],
        ['--layers', '257'],
        ['--steps', '1.5'],
        ['--lr', '0'],
        ['--warmup-ratio', '1'],
        ['--max-grad-norm', '0'],
        ['--seed', '4294967296'],
      ]) {
        refuses(() => parsePretrainArgs([flag, value]), flag, `${flag} ${value}`);
      }
      assertThrows(
        () => parsePretrainArgs(['--hidden', '65536', '--heads', '2', '--kv-heads', '1']),
        /head dim 32768 .* over the limit 1024/,
        'head dim beyond what the HF config allows',
      );
    },
    SERVER,
  );

  t.test(
    'speclab generate: numeric flags decimal and bounded',
    () => {
      const o = parseGenerateArgs([
        '--prompt',
        'Hi',
        '--max-new-tokens',
        '5',
        '--temperature',
        '0.7',
        '--top-p',
        '0.9',
        '--top-k',
        '40',
        '--seed',
        '4294967295',
      ]);
      assertDeepEqual([o.maxNewTokens, o.temperature, o.topP, o.topK, o.seed], [5, 0.7, 0.9, 40, 2 ** 32 - 1], 'sampling settings');
      assertEqual(parseGenerateArgs(['--prompt=Hi', '--max-new=7']).maxNewTokens, 7, 'the old --max-new still works (deprecated)');
      assertEqual(
        parseGenerateArgs(['--prompt', 'Hi', '--top-p', '1', '--temperature', '0', '--top-k', '0']).topP,
        1,
        'the bounds themselves',
      );
      for (const flag of ['--max-new-tokens', '--temperature', '--top-p', '--top-k', '--seed']) {
        for (const value of [...badValues(flag), '-1'])
          refuses(() => parseGenerateArgs(['--prompt', 'Hi', flag, value]), flag, `${flag} ${JSON.stringify(value)}`);
      }
      for (const [flag, value] of [
        ['--max-new-tokens', '0'],
        ['--max-new-tokens', '2.5'],
        ['--max-new', '0'],
        ['--top-p', '0'],
        ['--top-p', '1.01'],
        ['--top-k', '1.5'],
        ['--seed', '4294967296'],
      ]) {
        refuses(() => parseGenerateArgs(['--prompt', 'Hi', flag, value]), flag, `${flag} ${value}`);
      }
    },
    SERVER,
  );
});
