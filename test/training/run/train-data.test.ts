/**
 * `speclab train --data` (src/training/run/train-data.ts, src/training/run/conversation-data.ts): the committed
 * conversation file trains, its sequences' loss masks are the template's assistant tokens position
 * by position, and each kind of bad input is refused naming the file, line and field, before the
 * run folder is touched.
 */
import { trainCommand } from '../../../src/cli/train.ts';
import { trainingData } from '../../../src/training/run/train-data.ts';
import { prepareCommand } from '../../../src/cli/prepare.ts';
import { readOfflineManifest, shardPath } from '../../../src/data/offline-eagle3.ts';
import { SafetensorsFile } from '../../../src/formats/safetensors.ts';
import { resolveChatTemplate } from '../../../src/corpus/chat-templates.ts';
import { readConversations } from '../../../src/corpus/conversations.ts';
import { parseHfConfig } from '../../../src/config/hf-config.ts';
import { ChatTokenizer } from '../../../src/formats/tokenizer.ts';
import { assert, assertDeepEqual, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';
import { templateMask } from '../../corpus/chat-samples.test.ts';

const SAMPLE = 'assets/conversations/sample.jsonl';
const LAB = 'assets/lab-target';
const SERVER = { only: ['node', 'deno'] as const, timeoutMs: 300_000 };
const TINY = [
  '--epochs',
  '1',
  '--batch-size',
  '2',
  '--max-new-tokens',
  '4',
  '--eval-train-prompts',
  '0',
  '--eval-prompts',
  '2',
  '--log-every',
  '100',
];
const encode = (text: string) => new TextEncoder().encode(text);

export default defineSuite('training/run/train-data', (t) => {
  t.test(
    "the committed conversations train with the speclab template; each mask is the template's assistant tokens",
    async (ctx) => {
      const lab = ctx.platform.files(LAB);
      const tc = parseHfConfig(new TextDecoder().decode(await lab.read('config.json')));
      const settings = {
        data: [SAMPLE],
        chatTemplate: 'speclab',
        maxLength: 64,
        regenerate: false,
        temperature: 0,
        trainPrompts: 100,
        evalPrompts: 2,
        promptLength: 8,
        responseLength: 8,
        maxNewTokens: 4,
        seed: 0,
      };
      const data = await trainingData(ctx.platform, settings, LAB, tc, false);
      const tokenizer = await ChatTokenizer.load(lab, '');
      const chat = resolveChatTemplate('speclab', tokenizer);
      const rows = (await readConversations(await ctx.platform.files('assets/conversations').read('sample.jsonl'), SAMPLE)).rows;
      assertEqual(data.trainSequences?.length, 8, 'training sequences: 10 usable rows, the last 2 held out');
      assertEqual(data.heldPrompts.length, 2, 'held-out prompts');
      // The rows used, in file order: every row but the skipped ones (line 9 has no reply within 64 tokens).
      const used = rows.filter((r) => r.line !== 9);
      for (const [i, s] of data.trainSequences!.entries()) {
        const messages = used[i].messages;
        const ids = tokenizer.encode(chat.template.render(messages, tokenizer.templateVariables));
        assertDeepEqual(s.inputIds, ids.slice(0, 64), `row ${used[i].line}: ids`);
        assertDeepEqual(s.lossMask, templateMask(tokenizer, chat, messages).slice(0, 64), `row ${used[i].line}: loss mask, token by token`);
      }

      const tmp = tempStore(ctx.platform, 'train-data');
      try {
        // speclab prepare --data writes the same sequences as offline shards (their loss masks included).
        assertEqual(
          await prepareCommand(
            ctx.platform,
            [
              '--data',
              SAMPLE,
              '--chat-template',
              'speclab',
              '--max-length',
              '64',
              '--eval-prompts',
              '2',
              '--out',
              `${tmp.files.root}/prepared`,
            ],
            () => undefined,
            ctx.gpu,
          ),
          0,
          'prepare --data',
        );
        const manifest = await readOfflineManifest(ctx.platform.files(`${tmp.files.root}/prepared`));
        assertEqual(manifest.samples, 8, 'one shard per training conversation');
        assertEqual(manifest.heldOutPrompts.length, 2, 'held-out prompts recorded');
        for (const [i, s] of data.trainSequences!.entries()) {
          const shard = new SafetensorsFile(await ctx.platform.files(`${tmp.files.root}/prepared`).read(shardPath(i)), shardPath(i));
          assertDeepEqual([...shard.i32('loss_mask')], s.lossMask, `shard ${i}: the conversation's loss mask`);
        }

        const lines: string[] = [];
        const code = await trainCommand(
          ctx.platform,
          ['--data', SAMPLE, '--chat-template', 'speclab', '--max-length', '64', '--out', `${tmp.files.root}/run`, ...TINY],
          (l) => lines.push(l),
          ctx.gpu,
        );
        assertEqual(code, 0, `exit code\n${lines.join('\n')}`);
        assert(
          lines.some((l) =>
            /sample\.jsonl: 13 rows read, 10 used; skipped 3 \(line 7: no assistant turn; line 9: .*; line 14: .*\); 3 truncated; 169 loss tokens/.test(
              l,
            ),
          ),
          `the data summary names rows, skipped lines, truncation and loss tokens:\n${lines.join('\n')}`,
        );
        const steps = new TextDecoder()
          .decode(await tmp.files.read('run/metrics.jsonl'))
          .split('\n')
          .filter((l) => l.includes('"phase":"train"'));
        assertEqual(steps.length, 4, 'one epoch of 8 conversations at batch 2');
      } finally {
        await tmp.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    'bad conversation input is refused naming file, line and field; the run folder is not created',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'train-data-bad');
      const root = tmp.files.root;
      try {
        // A target whose vocabulary (384) is smaller than the lab tokenizer's (2048).
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'small');
        for (const name of ['tokenizer.json', 'tokenizer_config.json'])
          await tmp.files.writeAtomic(`small/${name}`, await ctx.platform.files(LAB).read(name));
        const good = '{"conversations": [{"role": "user", "content": "Hello there."}, {"role": "assistant", "content": "Hello."}]}';
        const cases: { name: string; file: string; bytes: Uint8Array; extra?: string[]; message: RegExp }[] = [
          {
            name: 'a malformed JSON line',
            file: 'broken.jsonl',
            bytes: encode(`${good}\n{"conversations": [\n`),
            message: /broken\.jsonl:2: .*JSON/,
          },
          {
            name: 'an unknown role',
            file: 'role.jsonl',
            bytes: encode(`${good}\n{"conversations": [{"role": "narrator", "content": "Once."}]}\n`),
            message: /role\.jsonl:2: conversations\[0\]\.role "narrator"/,
          },
          {
            name: 'content that is not a string',
            file: 'content.jsonl',
            bytes: encode(`{"messages": [{"role": "user", "content": 7}, {"role": "assistant", "content": "x"}]}\n`),
            message: /content\.jsonl:1: messages\[0\]\.content/,
          },
          {
            name: 'non-UTF-8 text',
            file: 'latin1.jsonl',
            bytes: Uint8Array.from([...encode(`${good}\n{"conversations": [{"role": "user", "content": "caf`), 0xe9, ...encode('"}]}\n')]),
            message: /latin1\.jsonl:2: .*UTF-8/,
          },
          {
            name: 'a template that fails to render',
            file: 'ok.jsonl',
            bytes: encode(`${good}\n${good}\n${good}\n`),
            extra: ['--chat-template', `${root}/bad.jinja`],
            message: /bad\.jinja/,
          },
          {
            name: 'token ids outside the vocabulary',
            file: 'ok2.jsonl',
            bytes: encode(`${good}\n${good}\n${good}\n`),
            extra: ['--target', `${root}/small`],
            message: /ok2\.jsonl:1: token \d+ \(position 0\) is outside the target.s vocabulary \[0, 384\)/,
          },
        ];
        await tmp.files.writeAtomic('bad.jinja', encode('{% for m in messages %}{{ m.content | no_such_filter }}{% endfor %}'));
        for (const c of cases) {
          await tmp.files.writeAtomic(c.file, c.bytes);
          const out = `run-${c.file.replace(/\W/g, '-')}`;
          let message = '';
          await trainCommand(
            ctx.platform,
            ['--data', `${root}/${c.file}`, '--out', `${root}/${out}`, ...TINY, ...(c.extra ?? [])],
            () => undefined,
            ctx.gpu,
          ).catch((e: Error) => (message = e.message));
          assert(c.message.test(message), `${c.name}: ${message || 'accepted'}`);
          assert(!message.includes('\n'), `${c.name}: one line`);
          assert(!(await tmp.files.exists(out)), `${c.name}: --out was not created`);
        }
      } finally {
        await tmp.cleanup();
      }
    },
    SERVER,
  );
});
