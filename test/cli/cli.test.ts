/**
 * The `speclab` command line on commander (src/cli/options.ts, main.ts): every command answers
 * --help (each option with its type, range and default) and --version with exit 0; `--flag=value`
 * equals `--flag value`; a usage error is one line naming the flag, exit 2; the help's ranges and
 * defaults of `train` are the settings schema's; config files take camelCase, snake_case and
 * SpecForge keys and refuse unknown ones naming the file and key; `eval --prompt` takes text or token
 * ids; and SIGINT during `train` stops at a step boundary with a checkpoint (exit 130) that --resume
 * continues. Node and Deno (a browser tab has no command line).
 */
import pkg from '../../package.json' with { type: 'json' };
import { commandDefs, runCli } from '../../src/cli/main.ts';
import { parsePromptArg, parseEvalArgs, encodePrompts } from '../../src/cli/eval.ts';
import { commandHelp, UsageError } from '../../src/cli/options.ts';
import { normalizeConfigKeys, TRAIN_DEF, TRAIN_OPTIONS } from '../../src/cli/train-options.ts';
import { loadTrainConfig, parseTrainFlags, trainCommand, trainConfigSchema, validateTrainConfig } from '../../src/cli/train.ts';
import { ChatTokenizer } from '../../src/formats/tokenizer.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../model/synthetic-checkpoint.ts';

const SERVER = { only: ['node', 'deno'] as const };
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

/** Runs the CLI in this process, capturing what it prints. */
async function cli(platform: Platform, argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const [log, error] = [console.log, console.error];
  console.log = (...a: unknown[]) => out.push(a.join(' '));
  console.error = (...a: unknown[]) => err.push(a.join(' '));
  try {
    return { code: await runCli(platform, argv), out, err };
  } finally {
    [console.log, console.error] = [log, error];
  }
}

export default defineSuite('cli/cli', (t) => {
  t.test(
    '--help of speclab and of every command exits 0 and shows each option with its type and default',
    async ({ platform }) => {
      const root = await cli(platform, ['--help']);
      assertEqual(root.code, 0, 'speclab --help');
      for (const def of commandDefs()) {
        assert(root.out.join('\n').includes(def.name), `speclab --help lists ${def.name}`);
        const r = await cli(platform, [def.name, '--help']);
        assertEqual(r.code, 0, `speclab ${def.name} --help exit code (${r.err.join('\n')})`);
        const text = r.out.join('\n');
        assertEqual(text.trimEnd(), commandHelp(def).trimEnd(), `${def.name}: the help printed`);
        assert(text.includes(`Usage: speclab ${def.name} [options]`) && /--version/.test(text), `${def.name}: usage line and --version`);
        for (const spec of def.options) {
          const help = text.replace(/\s+/g, ' ');
          assert(
            help.includes(spec.placeholder ? `${spec.flag} <${spec.placeholder}>` : spec.flag),
            `${def.name}: ${spec.flag} listed with its placeholder`,
          );
          if (spec.defaultText !== undefined)
            assert(help.includes(`default: ${spec.defaultText}`), `${def.name}: ${spec.flag} shows its default ${spec.defaultText}`);
          if (spec.type) assert(help.includes(spec.type), `${def.name}: ${spec.flag} shows ${spec.type}`);
          for (const old of spec.deprecated ?? [])
            assert(!new RegExp(`${old}\\b(?!-)`).test(help), `${def.name}: the deprecated ${old} is hidden`);
        }
        assertEqual((await cli(platform, [def.name, '--epochs', '0x1', '-h'])).code, 0, `${def.name}: --help wins over a bad value`);
      }
      assertEqual(
        (await cli(platform, ['help', 'train'])).out.join('\n').trimEnd(),
        commandHelp(TRAIN_DEF).trimEnd(),
        'speclab help train',
      );
      const none = await cli(platform, []);
      assertEqual(none.code, 2, 'no command: usage on stderr, exit 2');
      assert(none.err.join('\n').includes('Usage: speclab <command>'), 'no command prints the usage');
    },
    SERVER,
  );

  t.test(
    "--version of speclab and of every command prints package.json's version, exit 0",
    async ({ platform }) => {
      for (const argv of [['--version'], ['-V'], ...commandDefs().map((d) => [d.name, '--version'])]) {
        const r = await cli(platform, argv);
        assertEqual(r.code, 0, `${argv.join(' ')} exit code`);
        assertDeepEqual(r.out, [pkg.version], `${argv.join(' ')} prints the version`);
      }
    },
    SERVER,
  );

  t.test(
    'usage errors: one line naming the flag, exit 2; --flag=value equals --flag value',
    async ({ platform }) => {
      for (const [argv, pattern] of [
        [['train', '--bogus-flag', '1'], /^speclab train: unknown option --bogus-flag; see node bin\/speclab\.mjs train --help$/],
        [['train', '--bach-size=2'], /^speclab train: unknown option --bach-size \(did you mean --batch-size\?\)/],
        [['train', '--epochs'], /^speclab train: --epochs: missing value/],
        [['train', '--epochs=0x10'], /^speclab train: --epochs: "0x10" is not a decimal number/],
        [['train', '--lr', '2'], /^speclab train: train flags: lr \(--lr\): Too big/],
        [['train', 'stray'], /^speclab train: unexpected argument "stray"/],
        [['eval', '--target', 't'], /^speclab eval: --draft is required/],
        [
          ['eval', '--target=t', '--draft=d', '--max-new-tokens=0', '--prompt', '1'],
          /^speclab eval: --max-new-tokens: 0 is under the minimum 1/,
        ],
        [['generate', '--prompt', 'Hi', '--top-p', '1.5'], /^speclab generate: --top-p: 1\.5 is over the limit 1/],
        [['pretrain', '--dtype', 'bf16'], /^speclab pretrain: --dtype: must be f32 or f16/],
        [['export', '--checkpoint', 'x'], /^speclab export: --out is required/],
        [['prepare', '--train-prompts', '0'], /^speclab prepare: prepare flags: trainPrompts \(--train-prompts\)/],
        [['selfcheck', '--fast'], /^speclab selfcheck: unknown option --fast/],
        [['--bogus'], /^speclab: unknown option --bogus/],
        [['trian'], /^speclab: unknown command "trian"/],
      ] as [string[], RegExp][]) {
        const r = await cli(platform, argv);
        assertEqual(r.code, 2, `${argv.join(' ')}: exit code (${r.err.join(' | ')})`);
        assertEqual(r.err.length, 1, `${argv.join(' ')}: one line on stderr, got ${JSON.stringify(r.err)}`);
        assert(pattern.test(r.err[0]) && !r.err[0].includes('\n'), `${argv.join(' ')}: ${r.err[0]} should match ${pattern}`);
        assertEqual(r.out.length, 0, `${argv.join(' ')}: nothing on stdout`);
      }
      const a = parseTrainFlags(['--lr=0.5', '--out=runs/x y', '--aux-layers=1,2,3', '--resume', '--config=c.json']);
      const b = parseTrainFlags(['--lr', '0.5', '--out', 'runs/x y', '--aux-layers', '1,2,3', '--resume', '--config', 'c.json']);
      assertDeepEqual(a.values, b.values, '--x=y and --x y give the same values');
      assertDeepEqual(a.values, { lr: 0.5, out: 'runs/x y', auxLayers: [1, 2, 3], resume: true }, 'values');
      assertEqual(a.configFile, 'c.json', '--config=FILE');
      const e = parseEvalArgs(['--target=t', '--draft=d', '--prompt=1,2', '--max-new-tokens=12']);
      assertEqual(e.maxNewTokens, 12, 'eval --max-new-tokens=12');
    },
    SERVER,
  );

  t.test(
    'one name per setting: --max-new-tokens everywhere, old names hidden and deprecated',
    () => {
      const old = parseTrainFlags(['--eval-new-tokens', '5']);
      assertDeepEqual(old.values, { maxNewTokens: 5 }, 'train --eval-new-tokens sets maxNewTokens');
      assertDeepEqual(old.notices, ['speclab train: --eval-new-tokens is deprecated; use --max-new-tokens'], 'one-line notice');
      assertDeepEqual(parseTrainFlags(['--max-new-tokens', '5']).notices, [], 'no notice for the name');
      assertEqual(validateTrainConfig(parseTrainFlags(['--max-new-tokens=7']).values).maxNewTokens, 7, 'train --max-new-tokens');
      for (const def of commandDefs()) {
        for (const spec of def.options)
          assert(!/^--(max-new|eval-new-tokens)$/.test(spec.flag), `${def.name}: ${spec.flag} is an old name`);
      }
    },
    SERVER,
  );

  t.test("train's help shows the settings schema's ranges and defaults", () => {
    const defaults = validateTrainConfig({});
    let checked = 0;
    for (const spec of TRAIN_OPTIONS) {
      const m = /^(integer|number) in ([[(])(\S+), (\S+)([\])])$/.exec(spec.type ?? '');
      if (!m) continue;
      checked++;
      const [, kind, open, lo, hi, close] = m;
      const [min, max] = [Number(lo), Number(hi)];
      const accepts = (v: number) => trainConfigSchema.safeParse({ [spec.key]: v }).success;
      const step = kind === 'integer' ? 1 : Math.max(Math.abs(max), 1) * 1e-9;
      assertEqual(accepts(min), open === '[', `${spec.flag}: min ${min} ${open === '[' ? 'allowed' : 'excluded'}`);
      assert(!accepts(min - step), `${spec.flag}: below ${min} refused`);
      assertEqual(accepts(max), close === ']', `${spec.flag}: max ${max} ${close === ']' ? 'allowed' : 'excluded'}`);
      assert(!accepts(max + step), `${spec.flag}: above ${max} refused`);
      if (kind === 'integer') assert(!accepts(min + 0.5), `${spec.flag}: integers only`);
      const d = (defaults as Record<string, unknown>)[spec.key];
      if (d !== undefined) assertEqual(String(d), spec.defaultText, `${spec.flag}: default`);
    }
    assert(checked >= 20, `numeric settings checked: ${checked}`);
    const shape = Object.keys(trainConfigSchema.shape).sort();
    assertDeepEqual(
      TRAIN_OPTIONS.map((o) => o.key)
        .filter((k) => k !== 'config')
        .sort(),
      shape,
      'every setting has a flag, every flag a setting',
    );
  });

  t.test(
    'config files: camelCase, snake_case and SpecForge keys; unknown keys refused naming file and key',
    async ({ platform }) => {
      const specforge = normalizeConfigKeys(
        {
          learning_rate: 0.01,
          num_epochs: 2,
          batch_size: 3,
          ttt_length: 5,
          warmup_ratio: 0.1,
          max_grad_norm: 0.5,
          draft_vocab_size: 100,
          save_interval: 4,
          log_interval: 2,
          seed: 7,
          output_dir: 'o',
        },
        'c.json',
      );
      assertDeepEqual(
        specforge,
        {
          lr: 0.01,
          epochs: 2,
          batchSize: 3,
          tttLength: 5,
          warmupRatio: 0.1,
          maxGradNorm: 0.5,
          draftVocabSize: 100,
          checkpointEvery: 4,
          logEvery: 2,
          seed: 7,
          out: 'o',
        },
        'SpecForge names',
      );
      assertDeepEqual(
        normalizeConfigKeys({ train_prompts: 8, max_new_tokens: 9, roundPrompts: 4 }, 'c.json'),
        { trainPrompts: 8, maxNewTokens: 9, roundPrompts: 4 },
        'snake_case and camelCase',
      );
      const notices: string[] = [];
      assertDeepEqual(normalizeConfigKeys({ evalNewTokens: 3 }, 'c.json', notices), { maxNewTokens: 3 }, 'old key read');
      assertEqual(notices.length, 1, 'with a notice');
      assertThrows(
        () => normalizeConfigKeys({ learnig_rate: 1 }, 'runs/c.json'),
        /^runs\/c\.json: unknown key "learnig_rate"/,
        'unknown key',
      );
      assertThrows(
        () => normalizeConfigKeys({ lr: 1, learning_rate: 2 }, 'c.json'),
        /^c\.json: "lr" and "learning_rate" are the same setting/,
        'two names for one setting',
      );
      const tmp = tempStore(platform, 'cli-config');
      try {
        await tmp.files.writeAtomic('sf.json', encode({ num_epochs: 3, learning_rate: 0.5, batch_size: 2, max_new_tokens: 6 }));
        const c = await loadTrainConfig(platform, ['--config', `${tmp.files.root}/sf.json`, '--batch-size=5']);
        assertDeepEqual([c.epochs, c.lr, c.batchSize, c.maxNewTokens], [3, 0.5, 5, 6], 'file values, flag over the file');
        await tmp.files.writeAtomic('bad.json', encode({ num_epochs: 3, bogus_key: 1 }));
        const r = await cli(platform, ['train', '--config', `${tmp.files.root}/bad.json`]);
        assertEqual(r.code, 2, 'unknown key: usage error');
        assert(r.err.length === 1 && r.err[0].includes('bad.json: unknown key "bogus_key"'), `names file and key: ${r.err.join(' | ')}`);
        let failed: unknown;
        await loadTrainConfig(platform, ['--config', `${tmp.files.root}/bad.json`]).catch((e: unknown) => (failed = e));
        assert(failed instanceof UsageError, 'a UsageError');
      } finally {
        await tmp.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    'eval prompts: digits, commas and blanks are token ids; anything else is text for the tokenizer',
    async ({ platform }) => {
      assertDeepEqual(parsePromptArg('--prompt', '1, 2 3'), [1, 2, 3], 'ids');
      assertDeepEqual(parsePromptArg('--prompt', ' 42 '), [42], 'one id');
      assertEqual(parsePromptArg('--prompt', 'The jury said'), 'The jury said', 'text');
      assertEqual(parsePromptArg('--prompt', '1, 2, and 3'), '1, 2, and 3', 'text with digits');
      assertThrows(() => parsePromptArg('--prompt', '  '), /^--prompt: an empty prompt$/, 'blank');
      const a = parseEvalArgs(['--target', 't', '--draft', 'd', '--prompt', 'Hello there', '--prompt=5 6']);
      assertDeepEqual(a.prompts, ['Hello there', [5, 6]], 'text and ids, in order');
      const lab = platform.files('assets/lab-target');
      const tokenizer = await ChatTokenizer.load(lab, '');
      const bos = (JSON.parse(new TextDecoder().decode(await lab.read('config.json'))) as { bos_token_id: number }).bos_token_id;
      const [text, ids] = await encodePrompts(lab, ['The jury said', [5, 6]]);
      assertDeepEqual(text, [bos, ...tokenizer.encode('The jury said')], 'text: BOS then the tokenizer ids (as generate does)');
      assertDeepEqual(ids, [5, 6], 'ids unchanged');
      const r = await cli(platform, ['eval', '--target', '.speclab/no-such-target', '--draft', 'd', '--prompt', '1']);
      assertEqual(r.code, 1, `a failed run exits 1 (${r.err.join(' | ')})`);
    },
    SERVER,
  );

  t.test(
    'SIGINT during train: the step finishes, a checkpoint is written, exit 130 with the resume command; --resume completes',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'cli-interrupt');
      const root = tmp.files.root;
      let handler: ((signal: 'SIGINT' | 'SIGTERM') => void) | undefined;
      let exited: number | undefined;
      const platform: Platform = {
        ...ctx.platform,
        onInterrupt: (h) => {
          handler = h;
          return () => (handler = undefined);
        },
        exit: (code) => {
          exited = code;
          return new Promise<never>(() => undefined);
        },
      };
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const args = [
          '--target',
          `${root}/target`,
          '--out',
          `${root}/run`,
          '--train-prompts',
          '4',
          '--eval-prompts',
          '1',
          '--response-length',
          '16',
          '--epochs',
          '2',
          '--round-prompts',
          '4',
          '--batch-size',
          '2',
          '--max-new-tokens',
          '8',
          '--eval-train-prompts',
          '0',
          '--log-every',
          '1',
        ];
        const lines: string[] = [];
        const code = await trainCommand(
          platform,
          [...args, '--fresh'],
          (l) => {
            lines.push(l);
            if (/^phase train {2}step 1\//.test(l)) handler?.('SIGINT');
          },
          ctx.gpu,
        );
        assertEqual(code, 130, `exit code\n${lines.join('\n')}`);
        assertEqual(exited, undefined, 'the first interrupt does not exit at once');
        assertEqual(handler, undefined, 'the handler is removed after the run');
        const last = lines[lines.length - 1];
        assert(
          /^interrupted at step 1; resume with: node bin\/speclab\.mjs train --out \S+\/run --resume$/.test(last),
          `resume hint (the settings are stored): ${last}`,
        );
        assert(!lines.some((l) => /step 2\//.test(l)), 'no step after the interrupted one');
        assert(
          await tmp.files.exists('run/checkpoints/speclab-train-step1'),
          `checkpoint of step 1: ${(await tmp.files.list('run/checkpoints')).join(', ')}`,
        );

        // Resumed: steps 2..4 only. An interrupt outside the steps (here before them) exits at once.
        const again: string[] = [];
        const resumed = await trainCommand(
          platform,
          [...args, '--resume'],
          (l) => {
            again.push(l);
            if (/^phase train: /.test(l)) handler?.('SIGTERM');
          },
          ctx.gpu,
        );
        assertEqual(exited, 130, 'an interrupt outside the optimizer steps exits at once');
        assertEqual(resumed, 0, `resumed run\n${again.join('\n')}`);
        const steps = new TextDecoder()
          .decode(await tmp.files.read('run/metrics.jsonl'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { phase?: string; step?: number; replay?: boolean })
          .filter((r) => r.phase === 'train');
        assertDeepEqual(
          steps.map((s) => s.step),
          [1, 2, 3, 4],
          'every step logged once',
        );
        assert(
          steps.every((s) => !s.replay),
          'no step trained twice',
        );
      } finally {
        await tmp.cleanup();
      }
    },
    { ...SERVER, timeoutMs: 300_000 },
  );
});
