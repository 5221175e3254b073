/**
 * src/training/run/run-settings.ts and run-folder.ts (the keys a command gave: src/cli/run-settings.ts):
 * `speclab train --out DIR --resume` continues with the settings the run stored (its latest
 * checkpoint's extra.settings, else DIR/settings.json); a given setting that shapes the run and differs is refused naming both values, an overridable one is taken; a start
 * that fails before its first step leaves --out absent or as it was, so the next start needs no
 * --fresh; an interrupted run prints `node bin/speclab.mjs train --out DIR --resume`, which continues it; a
 * `--data` run keeps its stored --train-prompts choice (none: every usable conversation).
 */
import { configFromFlags, parseTrainFlags, trainCommand, validateTrainConfig } from '../../../src/cli/train.ts';
import { openRunFolder, resumeCommand, storedRunSettings, withStoredSettings } from '../../../src/cli/run-settings.ts';
import type { Platform } from '../../../src/cli/platform.ts';
import type { FileStore } from '../../../src/ports/storage.ts';
import { RUN_SETTINGS } from '../../../src/training/run/run-folder.ts';
import { crc32 } from '../../../src/util/crc32.ts';
import { assert, assertEqual, assertRejects } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** This command's settings as runTrainCli makes them: flags (and --config) over the stored ones. */
async function resumed(platform: Platform, args: string[]) {
  const flags = parseTrainFlags(args);
  return withStoredSettings(platform, flags, await configFromFlags(platform, flags), validateTrainConfig);
}

/** Every file and folder under `dir` of the store, with the files' bytes, for a before/after comparison. */
async function snapshot(store: FileStore, dir: string): Promise<string> {
  const out: string[] = [];
  const walk = async (path: string): Promise<void> => {
    for (const name of await store.list(path)) {
      const p = `${path}/${name}`;
      const bytes = await store.read(p).catch(() => undefined);
      if (bytes) out.push(`${p}=${decode(bytes)}`);
      else {
        out.push(`${p}/`);
        await walk(p);
      }
    }
  };
  await walk(dir);
  return out.join('\n');
}

/** A complete checkpoint folder whose state.json carries `settings` (what eagle3RunExtras keeps). */
async function fakeCheckpoint(store: FileStore, dir: string, step: number, settings: unknown): Promise<void> {
  const state = encode({ globalStep: step, extra: { settings, mode: 'online' } });
  await store.writeAtomic(`${dir}/state.json`, state);
  await store.writeAtomic(`${dir}/COMPLETE`, encode({ step, files: { 'state.json': { bytes: state.byteLength, crc32: crc32(state) } } }));
}

export default defineSuite('training/run/run-settings', (t) => {
  t.test(
    '--resume: stored settings reused; a contradicting one refused by name, an overridable one taken',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'run-settings');
      const root = tmp.files.root;
      const dir = `${root}/run`;
      try {
        // A run that never checkpointed: settings.json (sealed) and a ledger.
        const original = validateTrainConfig({ target: `${root}/target`, out: dir, batchSize: 4, epochs: 2, logEvery: 5 });
        const folder = await openRunFolder(ctx.platform, original);
        await tmp.files.writeAtomic('run/metadata/journal', encode('x'));
        await folder.release();
        assert(await tmp.files.exists(`run/${RUN_SETTINGS}`), 'settings.json written at start');

        const c = await resumed(ctx.platform, ['--out', dir, '--resume']);
        assertEqual(c.target, `${root}/target`, 'target from the stored settings');
        assertEqual(c.batchSize, 4, 'batch size from the stored settings');
        assertEqual(c.epochs, 2, 'epochs from the stored settings');
        assertEqual(c.logEvery, 5, 'an overridable setting not given: the stored one');
        assert(c.resume && !c.fresh && c.out === dir, 'resume into the given folder');

        const agreeing = await resumed(ctx.platform, [
          '--out',
          dir,
          '--resume',
          '--batch-size',
          '4',
          '--lr',
          '0.003',
          '--log-every',
          '1',
          '--max-new-tokens',
          '7',
          '--recompute',
          'on',
        ]);
        assertEqual(agreeing.logEvery, 1, 'overridable --log-every taken');
        assertEqual(agreeing.recompute, 'on', 'overridable --recompute taken (the same bits either way)');
        assertEqual(agreeing.maxNewTokens, 7, 'overridable eval setting taken');
        assertEqual(agreeing.epochs, 2, 'the rest stored');

        const refused = await assertRejects(
          () => resumed(ctx.platform, ['--out', dir, '--resume', '--batch-size', '8', '--lr', '0.01']),
          /^--resume:/,
          'contradicting flags',
        );
        assertEqual(
          refused.message,
          `--resume: ${tmp.files.root}/run was trained with --batch-size 4 and --lr 0.003; this command says --batch-size 8 and --lr 0.01 (drop those flags to continue, or --fresh to start over)`,
          'the refusal names each differing setting with both values',
        );
        await tmp.files.writeAtomic('c.json', encode({ num_epochs: 3, batch_size: 4, aux_hidden_state_layer_ids: [1, 2, 3] }));
        const fromFile = await assertRejects(
          () => resumed(ctx.platform, ['--config', `${root}/c.json`, '--out', dir, '--resume']),
          /--resume/,
          'a --config file contradicting',
        );
        assert(
          /trained with --epochs 2 and --aux-layers \(not set\); this command says --epochs 3 and --aux-layers 1,2,3 \(drop those flags/.test(
            fromFile.message,
          ),
          fromFile.message,
        );
        const single = await assertRejects(
          () => resumed(ctx.platform, ['--out', dir, '--resume', '--target', `${root}/other`]),
          /--resume/,
          'another target',
        );
        assert(
          single.message.includes(`--target ${root}/target; this command says --target ${root}/other (drop that flag`),
          single.message,
        );
        assertEqual(
          (await resumed(ctx.platform, ['--out', dir, '--resume', '--fresh'])).fresh,
          true,
          '--resume --fresh left to prepareRunFolder',
        );
        assertEqual((await resumed(ctx.platform, ['--out', dir, '--batch-size', '8'])).batchSize, 8, 'without --resume: this command only');

        // A cluster run before its first checkpoint (its ledger is in Redis): resumable; its Redis may
        // have moved, its run name may not change.
        const clusterDir = `${root}/cluster-run`;
        await (
          await openRunFolder(
            ctx.platform,
            validateTrainConfig({ target: `${root}/target`, out: clusterDir, cluster: 'redis://127.0.0.1:7001', run: 'r1' }),
          )
        ).release();
        const moved = await resumed(ctx.platform, ['--out', clusterDir, '--resume', '--cluster', 'redis://127.0.0.1:7002', '--run', 'r1']);
        assertEqual(moved.cluster, 'redis://127.0.0.1:7002', '--cluster taken on --resume');
        await (await openRunFolder(ctx.platform, moved)).release();
        const renamed = await assertRejects(
          () => resumed(ctx.platform, ['--out', clusterDir, '--resume', '--cluster', 'redis://127.0.0.1:7002', '--run', 'r2']),
          /--resume/,
          'another run name',
        );
        assert(renamed.message.includes('--run r1; this command says --run r2'), renamed.message);

        // The latest complete checkpoint's settings win over settings.json.
        await fakeCheckpoint(tmp.files, 'run/checkpoints/speclab-train-step3', 3, {
          ...original,
          batchSize: 2,
          draftVocabSize: 300,
          auxLayers: [0, 1, 2],
          evalNewTokens: 9,
        });
        const stored = await storedRunSettings(ctx.platform, dir);
        assert(stored?.source.endsWith('speclab-train-step3/state.json') === true, `source: ${stored?.source}`);
        const fromCheckpoint = await resumed(ctx.platform, ['--out', dir, '--resume', '--aux-layers', '0,1,2']);
        assertEqual(fromCheckpoint.batchSize, 2, 'checkpoint settings');
        assertEqual(fromCheckpoint.draftVocabSize, 300, 'resolved draft vocab kept');
        await tmp.files.writeAtomic('run/checkpoints/speclab-train-step3/state.json', encode({ extra: { settings: { batchSize: 64 } } }));
        await assertRejects(
          () => resumed(ctx.platform, ['--out', dir, '--resume']),
          /speclab-train-step3\/state\.json: does not match its COMPLETE marker \(damaged\)/,
          'a damaged state.json is refused by name',
        );
        await tmp.files.remove('run/checkpoints');
        await tmp.files.writeAtomic(`run/${RUN_SETTINGS}`, encode({ batchSize: 1 }));
        await assertRejects(
          () => resumed(ctx.platform, ['--out', dir, '--resume']),
          /settings\.json: the run settings is damaged/,
          'an unsealed settings file is refused',
        );

        assertEqual(
          resumeCommand('runs/a'),
          'node bin/speclab.mjs train --out runs/a --resume',
          'resume command: the form that runs from a clone',
        );
        assertEqual(resumeCommand("runs/it's here"), "node bin/speclab.mjs train --out 'runs/it'\\''s here' --resume", 'quoted');
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );

  t.test(
    '--resume of a --data run keeps its stored --train-prompts choice: absent (every usable conversation) or a number',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'run-settings-data');
      const root = tmp.files.root;
      try {
        assertEqual(validateTrainConfig({}).trainPrompts, 32, 'without --data: 32 prompts continued by the target');
        assertEqual(validateTrainConfig({ promptsFile: 'p.json' }).trainPrompts, 32, 'a prompts file: 32 as before');
        assertEqual(validateTrainConfig({ data: 'c.jsonl' }).trainPrompts, undefined, 'with --data and no --train-prompts: no cap');
        assertEqual(validateTrainConfig({ data: 'c.jsonl', trainPrompts: 32 }).trainPrompts, 32, 'with --data, given: that cap');

        // A --data run started without --train-prompts stores no cap, in settings.json and in its checkpoints.
        const all = validateTrainConfig({ data: 'c.jsonl', out: `${root}/all`, batchSize: 4 });
        const folder = await openRunFolder(ctx.platform, all);
        await tmp.files.writeAtomic('all/metadata/journal', encode('x'));
        await folder.release();
        const stored = await storedRunSettings(ctx.platform, `${root}/all`);
        assert(stored !== undefined && !('trainPrompts' in stored.settings), `no cap stored: ${JSON.stringify(stored?.settings)}`);
        assertEqual((await resumed(ctx.platform, ['--out', `${root}/all`, '--resume'])).trainPrompts, undefined, 'resumed: still no cap');
        await fakeCheckpoint(tmp.files, 'all/checkpoints/speclab-train-step2', 2, JSON.parse(JSON.stringify(all)));
        const fromCheckpoint = await resumed(ctx.platform, ['--out', `${root}/all`, '--resume']);
        assertEqual(fromCheckpoint.trainPrompts, undefined, "resumed from a checkpoint's settings: still no cap");
        assertEqual(fromCheckpoint.data?.join(), 'c.jsonl', 'and the same data');
        const capped = await assertRejects(
          () => resumed(ctx.platform, ['--out', `${root}/all`, '--resume', '--train-prompts', '32']),
          /^--resume:/,
          'a cap given on the resume of an uncapped run',
        );
        assert(/--train-prompts \(not set\); this command says --train-prompts 32/.test(capped.message), capped.message);

        // A run that stored a number (given, or the default 32 an earlier version stored) keeps it.
        await fakeCheckpoint(tmp.files, 'old/checkpoints/speclab-train-step2', 2, { data: ['c.jsonl'], trainPrompts: 32, batchSize: 4 });
        assertEqual((await resumed(ctx.platform, ['--out', `${root}/old`, '--resume'])).trainPrompts, 32, 'a stored 32 stays 32');
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );

  t.test(
    'an abandoned start takes back only what it created',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'run-attempt');
      const root = tmp.files.root;
      try {
        await tmp.files.writeAtomic('keep.txt', encode('parent'));
        // A folder that did not exist: gone again.
        const fresh = await openRunFolder(ctx.platform, { out: `${root}/new`, resume: false, fresh: false });
        await tmp.files.writeAtomic('new/metadata/journal', encode('j'));
        await tmp.files.writeAtomic('new/metrics.jsonl', encode({ phase: 'config' }));
        await fresh.abandon();
        await fresh.release();
        assertEqual((await tmp.files.list('')).join(), 'keep.txt', 'the folder this attempt made is removed');

        // A folder with files of its own (no run): exactly as it was, appended-to files restored.
        await tmp.files.writeAtomic('own/notes.txt', encode('mine'));
        await tmp.files.writeAtomic('own/metrics.jsonl', new TextEncoder().encode('{"phase":"config"}\n'));
        const before = await snapshot(tmp.files, 'own');
        const own = await openRunFolder(ctx.platform, { out: `${root}/own`, resume: false, fresh: false });
        const log = await tmp.files.openAppendLog('own/metrics.jsonl');
        await log.append(new TextEncoder().encode('{"phase":"data"}\n'));
        await log.close();
        await tmp.files.writeAtomic('own/spill/x', encode(1));
        await own.abandon();
        await own.release();
        assertEqual(await snapshot(tmp.files, 'own'), before, 'listing and bytes as before');

        // A step trained (a step folder): the run is resumable and kept.
        const trained = await openRunFolder(ctx.platform, { out: `${root}/trained`, resume: false, fresh: false });
        await tmp.files.writeAtomic('trained/checkpoints/speclab-train-step1/state.json', encode({}));
        await trained.abandon();
        await trained.release();
        assert(await tmp.files.exists(`trained/${RUN_SETTINGS}`), 'kept after a step');
        // A resume is never taken back.
        const resume = await openRunFolder(ctx.platform, { out: `${root}/trained`, resume: true, fresh: false });
        await resume.abandon();
        await resume.release();
        assert(await tmp.files.exists('trained/checkpoints/speclab-train-step1/state.json'), 'a resume keeps the run');
        // A refused start (nothing to resume) leaves no folder behind.
        await assertRejects(
          () => openRunFolder(ctx.platform, { out: `${root}/none`, resume: true, fresh: false }),
          /holds no run to resume/,
          'nothing to resume',
        );
        assert(!(await tmp.files.exists('none')), 'no folder left by the refusal');
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );

  t.test(
    'on llama-tiny: a failed start leaves nothing, the next one needs no --fresh; Ctrl-C prints `--out DIR --resume`, which continues',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'run-settings-gpu');
      const root = tmp.files.root;
      const dir = `${root}/run`;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const args = [
          '--target',
          `${root}/target`,
          '--out',
          dir,
          '--train-prompts',
          '8',
          '--eval-prompts',
          '1',
          '--epochs',
          '1',
          '--round-prompts',
          '8',
          '--batch-size',
          '4',
          '--max-new-tokens',
          '8',
          '--eval-train-prompts',
          '0',
          '--checkpoint-every',
          '1',
          '--log-every',
          '1',
        ];
        const good = [...args, '--response-length', '16'];
        const quiet = () => undefined;

        // Fails validation after the folder was prepared: prompt + response past max_position_embeddings 256.
        await assertRejects(
          () => trainCommand(ctx.platform, [...args, '--response-length', '300'], quiet, ctx.gpu),
          /--response-length 300: .*over the target's max_position_embeddings 256/,
          'too long',
        );
        assertEqual(
          (await tmp.files.list('')).join(),
          'target',
          `--out is absent after the failed start: ${(await tmp.files.list('run')).join()}`,
        );
        // An existing folder with a file of its own: a bad aux layer leaves it exactly as it was.
        await tmp.files.writeAtomic('run/notes.txt', encode('mine'));
        const before = await snapshot(tmp.files, 'run');
        await assertRejects(
          () => trainCommand(ctx.platform, [...good, '--aux-layers', '0,1,99'], quiet, ctx.gpu),
          /auxLayers \(--aux-layers\): layer 99 outside/,
          'bad aux layer',
        );
        assertEqual(await snapshot(tmp.files, 'run'), before, 'the folder as it was');

        // A good start needs no --fresh; Ctrl-C at step 1 stops there with the short resume command.
        let interrupt: ((signal: 'SIGINT' | 'SIGTERM') => void) | undefined;
        const platform: Platform = { ...ctx.platform, onInterrupt: (handler) => ((interrupt = handler), () => (interrupt = undefined)) };
        const lines: string[] = [];
        const code = await trainCommand(
          platform,
          good,
          (l) => {
            lines.push(l);
            if (/^phase train {2}step 1\//.test(l)) interrupt?.('SIGINT');
          },
          ctx.gpu,
        );
        assertEqual(code, 130, `interrupted\n${lines.join('\n')}`);
        assert(
          lines.includes(`interrupted at step 1; resume with: node bin/speclab.mjs train --out ${dir} --resume`),
          `resume command:\n${lines.join('\n')}`,
        );

        // That command, nothing else: the stored settings (target, lengths, batch) continue the run.
        const resumeLines: string[] = [];
        assertEqual(
          await trainCommand(ctx.platform, ['--out', dir, '--resume'], (l) => resumeLines.push(l), ctx.gpu),
          0,
          `resume\n${resumeLines.join('\n')}`,
        );
        assert(
          resumeLines.some((l) => /^resume: settings of .*speclab-train-step1\/state\.json$/.test(l)),
          `settings source:\n${resumeLines.join('\n')}`,
        );
        assert(
          resumeLines.some((l) => /resuming after step 1/.test(l)),
          `resumed after step 1:\n${resumeLines.join('\n')}`,
        );
        const steps = decode(await tmp.files.read('run/metrics.jsonl'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { phase?: string; step?: number; replay?: boolean })
          .filter((r) => r.phase === 'train' && !r.replay);
        assertEqual(steps.map((r) => r.step).join(), '1,2', 'every step once');
        assert(await tmp.files.exists('run/notes.txt'), "the folder's own file kept");

        // A settings change is refused by name, before any drift hash.
        const refused = await assertRejects(
          () => trainCommand(ctx.platform, ['--out', dir, '--resume', '--batch-size', '8', '--lr', '0.01'], quiet, ctx.gpu),
          /^--resume:/,
          'changed settings',
        );
        assertEqual(
          refused.message,
          `--resume: ${dir} was trained with --batch-size 4 and --lr 0.003; this command says --batch-size 8 and --lr 0.01 (drop those flags to continue, or --fresh to start over)`,
          'refusal',
        );
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );
});
