/**
 * The read budgets of `speclab train --data` (src/training/run/conversation-data.ts): a data file of
 * no known format (`--data /dev/zero`) is refused before a byte of it is read, and an endless stream
 * behind a .jsonl name is refused at the 64 MiB line budget, naming the file and line, where the
 * reader used to take the whole stream into memory until it ran out (7.2 GB in 37 s, no output).
 * In process (Node and Deno), and as a real `speclab train` child process (Node) that must exit 1
 * with the refusal within seconds. A chat template and a prompts file over their budgets are
 * refused by name too.
 */
import { loadConversationData } from '../../../src/training/run/conversation-data.ts';
import { readJson } from '../../../src/training/run/run-plan.ts';
import { ChatTokenizer } from '../../../src/formats/tokenizer.ts';
import { readHfConfig } from '../../../src/formats/hf-checkpoint-source.ts';
import { READ_BUDGETS } from '../../../src/ports/read-budget.ts';
import { assert, assertEqual, assertRejects } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { nodeOnlyImport } from '../../dataplane/backends.test.ts';

const LAB = 'assets/lab-target';
const SETTINGS = { evalPrompts: 1, maxLength: 64 };
const NOT_A_FORMAT = /^\/dev\/zero: unknown conversation file type \(no extension\)/;
const ENDLESS_LINE = /endless\.jsonl: more than 64 MiB in one line \(line 1\), the limit for a JSONL data file$/;

type Fs = typeof import('node:fs');
type CliProcesses = typeof import('../../cli/cli-process.ts');

export default defineSuite('training/run/conversation-data', (t) => {
  t.test(
    '--data /dev/zero is refused by its name before it is read',
    async ({ platform }) => {
      const t0 = performance.now();
      await assertRejects(() => loadConversationData(platform, LAB, 384, { ...SETTINGS, data: ['/dev/zero'] }), NOT_A_FORMAT, '/dev/zero');
      assert(performance.now() - t0 < 5000, 'at once');
    },
    { only: ['node', 'deno'] },
  );

  t.test(
    'an endless stream named .jsonl, a tokenizer, a config, a chat template and a prompts file: each refused at its budget',
    async ({ platform }) => {
      const { symlinkSync } = await nodeOnlyImport<Fs>('node:fs');
      const tmp = tempStore(platform, 'data-budget');
      try {
        await tmp.files.writeAtomic('keep', new Uint8Array(0));
        const root = tmp.files.root;
        symlinkSync('/dev/zero', `${root}/endless.jsonl`);
        const t0 = performance.now();
        await assertRejects(
          () => loadConversationData(platform, LAB, 384, { ...SETTINGS, data: [`${root}/endless.jsonl`] }),
          ENDLESS_LINE,
          'an endless JSONL line',
        );
        assert(performance.now() - t0 < 10_000, `refused in ${(performance.now() - t0).toFixed(0)} ms`);
        // A target folder whose tokenizer.json and config.json never end.
        for (const name of ['tokenizer.json', 'tokenizer_config.json', 'config.json']) symlinkSync('/dev/zero', `${root}/${name}`);
        await assertRejects(
          () => ChatTokenizer.load(tmp.files, ''),
          /tokenizer\.json: larger than the 256 MiB limit for a tokenizer file/,
          'tokenizer.json',
        );
        await assertRejects(
          () => readHfConfig(tmp.files, ''),
          /config\.json: larger than the 64 MiB limit for a configuration file/,
          'config.json',
        );
        await assertRejects(
          () => readJson(platform, `${root}/config.json`, READ_BUDGETS.promptsFile),
          /config\.json: larger than the 256 MiB limit for a prompts file/,
          'a prompts file',
        );
        symlinkSync('/dev/zero', `${root}/chat.jinja`);
        await assertRejects(
          () =>
            loadConversationData(platform, LAB, 384, {
              ...SETTINGS,
              data: ['assets/conversations/sample.jsonl'],
              chatTemplate: `${root}/chat.jinja`,
            }),
          /chat\.jinja: larger than the 4 MiB limit for a chat template/,
          'a chat template',
        );
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node'], timeoutMs: 60_000 },
  );

  t.test(
    'speclab train --data /dev/zero, or an endless .jsonl, exits 1 with the refusal within seconds',
    async ({ platform }) => {
      const { symlinkSync } = await nodeOnlyImport<Fs>('node:fs');
      const { startCli } = await nodeOnlyImport<CliProcesses>('../cli/cli-process.ts'); // resolved from test/dataplane/;
      const tmp = tempStore(platform, 'data-budget-cli');
      try {
        await tmp.files.writeAtomic('keep', new Uint8Array(0));
        const root = tmp.files.root;
        symlinkSync('/dev/zero', `${root}/endless.jsonl`);
        for (const [data, refusal] of [
          ['/dev/zero', NOT_A_FORMAT],
          [`${root}/endless.jsonl`, ENDLESS_LINE],
        ] as const) {
          const t0 = performance.now();
          const run = await startCli(['train', '--target', LAB, '--data', data, '--out', `${root}/run`, '--fresh'], 30_000).exited;
          const seconds = (performance.now() - t0) / 1000;
          assertEqual(run.code, 1, `--data ${data}: exit code\n${run.output.slice(-800)}`);
          const line = run.output.split('\n').find((l) => l.startsWith('speclab train: ')) ?? '';
          assert(refusal.test(line.slice('speclab train: '.length)), `--data ${data}: the refusal, got ${JSON.stringify(line)}`);
          assert(seconds < 10, `--data ${data}: exited in ${seconds.toFixed(1)} s`);
        }
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node'], timeoutMs: 60_000 },
  );
});
