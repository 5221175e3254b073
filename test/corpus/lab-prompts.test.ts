/**
 * The browser lab's bundled prompts (assets/lab-target/lab-prompts.json): the committed file is
 * exactly what scripts/build-lab-prompts.ts makes from the corpus (so the tab trains on the same
 * prompts as `speclab train`), and malformed files are refused naming the file and the field.
 */
import { validateTrainConfig } from '../../src/cli/train.ts';
import { labCorpusPrompts, LAB_TARGET_DIR } from '../../src/training/run/run-plan.ts';
import { ChatTokenizer } from '../../src/formats/tokenizer.ts';
import { buildLabPromptsFile, LAB_PROMPTS_FILE, parseLabPrompts } from '../../src/corpus/lab-prompts.ts';
import { assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const encode = (value: unknown) => new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));

export default defineSuite('corpus/lab-prompts', (t) => {
  t.test(
    'the committed file equals a rebuild from the corpus',
    async (ctx) => {
      const lab = ctx.platform.files(LAB_TARGET_DIR);
      const committed = await lab.read(LAB_PROMPTS_FILE);
      const parsed = parseLabPrompts(committed, LAB_PROMPTS_FILE, 2048);
      const { train, held } = await labCorpusPrompts(
        ctx.platform,
        validateTrainConfig({
          trainPrompts: parsed.train.length,
          evalPrompts: parsed.heldOut.length,
          promptLength: parsed.train[0].ids.length,
        }),
      );
      const tokenizer = await ChatTokenizer.load(lab, '');
      const rebuilt = buildLabPromptsFile(train, held, (ids) => tokenizer.decode(ids));
      assertEqual(new TextDecoder().decode(rebuilt), new TextDecoder().decode(committed), 'byte-identical rebuild');
    },
    { only: ['node', 'deno'], timeoutMs: 120_000 },
  );

  t.test('malformed files are refused naming the file and the field', () => {
    assertThrows(() => parseLabPrompts(encode('{'), 'p.json', 10), /p\.json: not valid JSON/, 'bad JSON');
    assertThrows(
      () => parseLabPrompts(encode({ source: 's', train: [], heldOut: [{ ids: [1], text: 'a' }] }), 'p.json', 10),
      /p\.json: train: /,
      'empty train',
    );
    assertThrows(
      () =>
        parseLabPrompts(encode({ source: 's', train: [{ ids: [1, 'x'], text: 'a' }], heldOut: [{ ids: [1], text: 'a' }] }), 'p.json', 10),
      /p\.json: train\.0\.ids\.1/,
      'non-integer id',
    );
    assertThrows(
      () => parseLabPrompts(encode({ source: 's', train: [{ ids: [1], text: 'a' }], heldOut: [{ ids: [12], text: 'b' }] }), 'p.json', 10),
      /p\.json: heldOut\.0: token id 12 outside the vocabulary \[0, 10\)/,
      'id outside the vocabulary',
    );
  });
});
