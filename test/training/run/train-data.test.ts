/**
 * `speclab train --data` (src/training/run/train-data.ts, src/training/run/conversation-data.ts): the committed
 * conversation file trains, its sequences' loss masks are the template's assistant tokens position
 * by position, and each kind of bad input is refused naming the file, line and field, before the
 * run folder is touched. Every usable conversation trains unless --train-prompts is given, the data
 * line says how many were read, used, held out and skipped and why, and a resume keeps that choice.
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
const WORDS = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];
/** `n` short distinct conversations (more than the 32 prompts a run without --data continues). */
const manyChats = (n: number) =>
  Array.from({ length: n }, (_, i) => {
    const [a, b] = [WORDS[i % 10], WORDS[Math.floor(i / 10) % 10]];
    const turns = [
      { role: 'user', content: `Tell me about ${a} and ${b}.` },
      { role: 'assistant', content: `The ${a} came before the ${b}, and the house was quiet.` },
    ];
    return JSON.stringify({ conversations: turns });
  }).join('\n');
/** The train steps a run logged: each step's sample count, by step. */
async function loggedSamples(store: { read(path: string): Promise<Uint8Array> }, path: string): Promise<Map<number, number>> {
  const steps = new Map<number, number>();
  for (const line of new TextDecoder().decode(await store.read(path)).split('\n')) {
    if (!line.includes('"phase":"train"')) continue;
    const r = JSON.parse(line) as { step: number; samples: number };
    steps.set(r.step, r.samples);
  }
  return steps;
}

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
    '--data trains every usable conversation unless --train-prompts caps it; the data line says why',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'train-data-all');
      try {
        await tmp.files.writeAtomic('chats.jsonl', encode(`${manyChats(40)}\n{"conversations": []}\n`));
        const lab = ctx.platform.files(LAB);
        const tc = parseHfConfig(new TextDecoder().decode(await lab.read('config.json')));
        const settings = {
          data: [`${tmp.files.root}/chats.jsonl`],
          chatTemplate: 'speclab',
          maxLength: 64,
          regenerate: false,
          temperature: 0,
          evalPrompts: 2,
          promptLength: 8,
          responseLength: 8,
          maxNewTokens: 4,
          seed: 0,
        };
        const all = await trainingData(ctx.platform, settings, LAB, tc, false);
        assertEqual(all.trainSequences?.length, 38, 'every usable row but the 2 held out trains (more than the 32 of a prompt run)');
        assertEqual(
          all.lines[0],
          "41 conversations read from --data, 40 usable, 1 skipped; 38 train (all), 2 held out (the last --eval-prompts 2); chat template speclab, --max-length 64; training on the dataset's own replies",
          'the data line: read, usable, skipped, trained and held out, each with its reason',
        );
        const capped = await trainingData(ctx.platform, { ...settings, trainPrompts: 10 }, LAB, tc, false);
        assertEqual(capped.trainSequences?.length, 10, 'an explicit --train-prompts caps');
        assertDeepEqual(capped.trainSequences, all.trainSequences!.slice(0, 10), 'the first rows, in file order');
        assert(capped.lines[0].includes('; 10 train (--train-prompts 10 of 38), 2 held out'), capped.lines[0]);
        const roomy = await trainingData(ctx.platform, { ...settings, trainPrompts: 100 }, LAB, tc, false);
        assert(roomy.lines[0].includes('; 38 train (all, within --train-prompts 100),'), roomy.lines[0]);
        await tmp.files.writeAtomic('held.jsonl', encode(manyChats(3)));
        const held = await trainingData(
          ctx.platform,
          { ...settings, evalData: `${tmp.files.root}/held.jsonl`, evalPrompts: 4 },
          LAB,
          tc,
          false,
        );
        assertEqual(held.trainSequences?.length, 40, 'with --eval-data every usable --data row trains');
        assert(
          held.lines[0].includes(
            `; 40 train (all), 3 held out (all 3 usable in --eval-data ${tmp.files.root}/held.jsonl, fewer than --eval-prompts 4)`,
          ),
          held.lines[0],
        );
        // Without --data the target still continues 32 prompts by default.
        const prompts = await trainingData(ctx.platform, { ...settings, data: undefined, chatTemplate: undefined }, LAB, tc, false);
        assertEqual(prompts.trainPrompts?.length, 32, 'random prompts: the default 32');
      } finally {
        await tmp.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    'train --data: all 38 conversations train, steps hold what the train line says; an interrupted run resumes with the same ones, a capped one with its cap',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'train-data-resume');
      const root = tmp.files.root;
      try {
        await tmp.files.writeAtomic('chats.jsonl', encode(manyChats(40)));
        const data = ['--data', `${root}/chats.jsonl`, '--chat-template', 'speclab', '--max-length', '64', '--epochs', '1'];
        const quick = [
          '--max-new-tokens',
          '4',
          '--eval-train-prompts',
          '0',
          '--eval-prompts',
          '2',
          '--eval-every',
          '0',
          '--log-every',
          '100',
        ];
        const base = [...data, ...quick];
        const run = async (out: string, extra: string[], stopAtStep1: boolean) => {
          let interrupt: ((signal: 'SIGINT' | 'SIGTERM') => void) | undefined;
          const platform = { ...ctx.platform, onInterrupt: (h: typeof interrupt) => ((interrupt = h), () => (interrupt = undefined)) };
          const lines: string[] = [];
          const code = await trainCommand(
            platform,
            ['--out', `${root}/${out}`, ...extra],
            (l) => {
              lines.push(l);
              if (stopAtStep1 && /^phase train {2}step 1\//.test(l)) interrupt?.('SIGINT');
            },
            ctx.gpu,
          );
          return { code, lines, text: lines.join('\n') };
        };

        // 38 conversations, batch 8, rounds of 16: steps of 8, 8 | 8, 8 | 6.
        const first = await run('all', [...base, '--batch-size', '8', '--round-prompts', '16'], true);
        assertEqual(first.code, 130, `interrupted\n${first.text}`);
        assert(
          first.text.includes('phase data: 40 conversations read from --data, 40 usable, 0 skipped; 38 train (all), 2 held out'),
          first.text,
        );
        assert(
          first.text.includes('phase train: 1 epochs × 38 sequences') &&
            first.text.includes(
              '5 steps (4 of 8 samples, 1 of 6 samples: --batch-size 8, and a step never spans two rounds of --round-prompts 16)',
            ),
          `the train line states what the steps hold:\n${first.text}`,
        );
        const resumed = await run('all', ['--resume'], false);
        assertEqual(resumed.code, 0, `resumed\n${resumed.text}`);
        assert(
          resumed.text.includes('38 train (all)') && resumed.text.includes('× 38 sequences'),
          `the resume trains all 38 again:\n${resumed.text}`,
        );
        const samples = await loggedSamples(tmp.files, 'all/metrics.jsonl');
        assertDeepEqual(
          [...samples.entries()].sort((a, b) => a[0] - b[0]).map(([, n]) => n),
          [8, 8, 8, 8, 6],
          'the samples each step held',
        );

        // An explicit --train-prompts caps, says so, and the resume keeps the cap (stored).
        const cappedRun = await run('capped', [...base, '--batch-size', '2', '--train-prompts', '6'], true);
        assertEqual(cappedRun.code, 130, `interrupted\n${cappedRun.text}`);
        assert(cappedRun.text.includes('; 6 train (--train-prompts 6 of 38), 2 held out'), cappedRun.text);
        assert(cappedRun.text.includes('× 6 sequences (') && cappedRun.text.includes('3 steps of 2 samples'), cappedRun.text);
        const cappedResume = await run('capped', ['--resume'], false);
        assertEqual(cappedResume.code, 0, `resumed\n${cappedResume.text}`);
        assert(cappedResume.text.includes('; 6 train (--train-prompts 6 of 38)'), `the resume keeps the cap:\n${cappedResume.text}`);
        assertEqual((await loggedSamples(tmp.files, 'capped/metrics.jsonl')).size, 3, 'three steps of 2');
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
