/**
 * `speclab train` (src/cli/train.ts): settings validation with errors naming the field, and a tiny
 * online run on the llama-tiny fixture (target-generated continuations → rollout worker → feature
 * store → trainer, through the DataFlowController) that writes the metrics log and an SGLang export
 * `readEagle3Export` loads, with the trained draft accepting more than the untrained one; an existing
 * run in --out is refused without --resume/--fresh.
 */
import { loadTrainConfig, parseTrainFlags, trainCommand, validateTrainConfig, type TrainSummary } from '../../src/cli/train.ts';
import { labCorpusPrompts, parsePromptsJson } from '../../src/training/run/run-plan.ts';
import { readEagle3Export } from '../../src/model/eagle3/export.ts';
import { parseMetricsLine } from '../../src/contracts/metrics-record.ts';
import { assert, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../model/synthetic-checkpoint.ts';

/** The argv parsers need commander: Node and Deno (a browser tab has no command line). */
const SERVER = { only: ['node', 'deno'] as const };
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

export default defineSuite('cli/train', (t) => {
  t.test(
    'settings: defaults, flags over --config, errors naming the field',
    async (ctx) => {
      const d = validateTrainConfig({});
      assertEqual(d.batchSize, 4, 'default batch');
      assertEqual(d.out, 'runs/train', 'default out');
      const f = parseTrainFlags(['--lr', '1e-2', '--aux-layers', '1,2,3', '--target', 'x']);
      assertEqual(f.values.lr, 0.01, 'lr parsed');
      assertEqual(validateTrainConfig(f.values).auxLayers?.join(','), '1,2,3', 'aux layers');
      assertThrows(() => validateTrainConfig({ batchSize: 1.5 }), /batchSize \(--batch-size\)/, 'fractional batch names the field');
      assertThrows(() => validateTrainConfig({ lr: Number.NaN }), /lr \(--lr\)/, 'bad lr names the field');
      assertThrows(() => validateTrainConfig({ bacthSize: 2 }), /bacthSize/, 'unknown config key named');
      assertThrows(() => validateTrainConfig({ auxLayers: [1, 2] }), /auxLayers/, 'three aux layers');
      assertThrows(() => parseTrainFlags(['--bach-size', '2']), /unknown option --bach-size/, 'typo flag');
      assertThrows(
        () => parseTrainFlags(['--epochs', '0x10']),
        /--epochs: "0x10" is not a decimal number/,
        'hexadecimal refused (Number() took it as 16)',
      );
      assertThrows(
        () => parseTrainFlags(['--aux-layers', '1,0b1,2']),
        /--aux-layers: "0b1" is not a decimal number/,
        'binary refused in a list',
      );
      for (const [key, value] of [
        ['epochs', 1e9],
        ['tttLength', 1e6],
        ['responseLength', 1e9],
        ['maxNewTokens', 1e9],
        ['numDraftTokens', 1e9],
        ['lr', 1e300],
      ] as const) {
        assertThrows(
          () => validateTrainConfig({ [key]: value }),
          new RegExp(`${key} \\(--[a-z-]+\\): Too big`),
          `${key} ${value} refused before anything runs`,
        );
      }
      assertThrows(() => parseTrainFlags(['--epochs']), /--epochs: missing value/, 'missing value');
      assertThrows(
        () =>
          parsePromptsJson(
            [
              [1, 2],
              [3, 999],
            ],
            384,
            'p.json',
          ),
        /p\.json: prompt 1\[1\] = 999/,
        'id outside vocab',
      );
      const tmp = tempStore(ctx.platform, 'train-config');
      try {
        await tmp.files.writeAtomic('c.json', encode({ epochs: 3, lr: 0.5 }));
        const c = await loadTrainConfig(ctx.platform, ['--config', `${tmp.files.root}/c.json`, '--lr', '0.25']);
        assertEqual(c.epochs, 3, 'epochs from the file');
        assertEqual(c.lr, 0.25, 'flag overrides the file');
        await tmp.files.writeAtomic('bad.json', encode({ epochs: 'many' }));
        let message = '';
        await loadTrainConfig(ctx.platform, ['--config', `${tmp.files.root}/bad.json`]).catch((e: Error) => (message = e.message));
        assert(/bad\.json \+ flags: epochs \(--epochs\)/.test(message), `config file error names file and field: ${message}`);
      } finally {
        await tmp.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    'lab corpus prompts: training prompts from the train split, held-out ones from the held-out split',
    async (ctx) => {
      const p = await labCorpusPrompts(ctx.platform, validateTrainConfig({ trainPrompts: 20, evalPrompts: 3, promptLength: 12 }));
      assertEqual(p.train.length, 20, 'training prompts');
      assertEqual(p.held.length, 3, 'held-out prompts');
      for (const prompt of [...p.train, ...p.held]) {
        assertEqual(prompt.length, 12, 'prompt length');
        assert(
          prompt.every((id) => Number.isInteger(id) && id >= 0 && id < 2048),
          'ids inside the lab vocabulary',
        );
      }
      const train = new Set(p.train.map((x) => x.join(',')));
      assert(
        p.held.every((x) => !train.has(x.join(','))),
        'held-out prompts differ from training prompts',
      );
    },
    { only: ['node', 'deno'], timeoutMs: 120_000 },
  );

  t.test(
    'a tiny online run on llama-tiny: metrics log, loadable export, trained draft accepts more',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'train');
      const root = tmp.files.root;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const settings = {
          target: `${root}/target`,
          out: `${root}/run`,
          trainPrompts: 12,
          evalPrompts: 2,
          responseLength: 32,
          epochs: 12,
          roundPrompts: 12,
          batchSize: 4,
          lr: 1e-2,
          maxNewTokens: 24,
          evalTrainPrompts: 4,
          logEvery: 12,
          seed: 0,
        };
        await tmp.files.writeAtomic('train.json', encode(settings));
        const lines: string[] = [];
        const code = await trainCommand(ctx.platform, ['--config', `${root}/train.json`], (l) => lines.push(l), ctx.gpu);
        assertEqual(code, 0, `exit code (lossless)\n${lines.join('\n')}`);
        assert(
          lines.some((l) => /^phase train {2}step 36\/36 {2}\d+ tokens\/s {2}loss \d+\.\d+ {2}acc_0 \d\.\d+ .*ETA/.test(l)),
          `progress lines:\n${lines.join('\n')}`,
        );
        assert(
          lines.some((l) => /acceptance length \(held-out\): +\d\.\d+ → \d\.\d+/.test(l)),
          'summary line',
        );

        const log = new TextDecoder()
          .decode(await tmp.files.read('run/metrics.jsonl'))
          .trim()
          .split('\n')
          .map((l, i) => parseMetricsLine(l, `metrics.jsonl line ${i + 1}`) as Record<string, unknown>); // every line as the schema says
        assertEqual(log.filter((r) => r.phase === 'train').length, 36, 'one metrics record per step');
        for (const phase of ['config', 'data', 'eval-before', 'eval-after', 'summary'])
          assert(
            log.some((r) => r.phase === phase),
            `metrics has ${phase}`,
          );

        let refused = '';
        await trainCommand(ctx.platform, ['--config', `${root}/train.json`], () => undefined, ctx.gpu).catch(
          (e: Error) => (refused = e.message),
        );
        assert(/already holds a run .*--resume.*--fresh/.test(refused), `an existing run is not overwritten: ${refused}`);
        let tooLong = '';
        await trainCommand(
          ctx.platform,
          ['--config', `${root}/train.json`, '--out', `${root}/long`, '--response-length', '300'],
          () => undefined,
          ctx.gpu,
        ).catch((e: Error) => (tooLong = e.message));
        assert(
          /--response-length 300: the longest training prompt \(\d+ tokens\) plus 300 generated tokens is \d+, over the target's max_position_embeddings 256/.test(
            tooLong,
          ),
          `prompt + response beyond the positions: ${tooLong}`,
        );
        let nothing = '';
        await trainCommand(
          ctx.platform,
          ['--config', `${root}/train.json`, '--out', `${root}/empty`, '--resume'],
          () => undefined,
          ctx.gpu,
        ).catch((e: Error) => (nothing = e.message));
        assert(/--resume: .*empty holds no run to resume/.test(nothing), `resume without a run: ${nothing}`);

        const summary = JSON.parse(new TextDecoder().decode(await tmp.files.read('run/summary.json'))) as TrainSummary;
        // Resuming the finished run trains nothing; its summary keeps the final loss (it was rewritten as null).
        assertEqual(
          await trainCommand(ctx.platform, ['--config', `${root}/train.json`, '--resume'], () => undefined, ctx.gpu),
          0,
          'resume of a finished run',
        );
        const again = JSON.parse(new TextDecoder().decode(await tmp.files.read('run/summary.json'))) as TrainSummary;
        assert(
          Number.isFinite(again.finalLoss) && again.finalLoss === summary.finalLoss,
          `final loss kept: ${again.finalLoss} vs ${summary.finalLoss}`,
        );
        const steps = new TextDecoder()
          .decode(await tmp.files.read('run/metrics.jsonl'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { phase?: string })
          .filter((r) => r.phase === 'train');
        assertEqual(steps.length, 36, 'no step logged twice by the resume');
        let drifted = '';
        await trainCommand(
          ctx.platform,
          ['--config', `${root}/train.json`, '--resume', '--response-length', '31'],
          () => undefined,
          ctx.gpu,
        ).catch((e: Error) => (drifted = e.message));
        assert(
          /^--resume: .*run was trained with --response-length 32; this command says --response-length 31 \(drop that flag to continue, or --fresh to start over\)$/.test(
            drifted,
          ),
          `a resume on another data stream is refused by the setting, before any contract hash: ${drifted}`,
        );
        const imported = await readEagle3Export(tmp.files, 'run/draft', new Float32Array(384 * 64));
        assertEqual(imported.config.vocabSize, 384, 'export vocab');
        assertEqual(imported.config.hiddenSize, 64, 'export hidden');
        const before = summary.before!.train!.acceptanceLength;
        const after = summary.after!.train!.acceptanceLength;
        ctx.note('acceptanceBefore', before);
        ctx.note('acceptanceAfter', after);
        ctx.note('acceptanceHeldOutAfter', summary.after!.heldOut.acceptanceLength);
        assert(
          after > before + 0.1,
          `trained draft's acceptance length on the training prompts ${after} should beat the untrained ${before}`,
        );
        assert(summary.after!.train!.lossless && summary.after!.heldOut.lossless, 'speculative decoding stays lossless');
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );
});
