/**
 * The run plan shared by `speclab train`, `speclab prepare` and the browser lab
 * (src/training/run/run-plan.ts, src/training/sequences/draft-shape.ts): aux layers and draft vocabulary with errors naming the setting, the
 * small-target rule of each caller, random prompts and --prompts-file prompts, and the run-folder
 * policy for an earlier run in --out (src/training/run/run-folder.ts). Also the path and duration helpers the commands share.
 */
import { lockRunFolder, prepareRunFolder, RUN_LOCK } from '../../../src/training/run/run-folder.ts';
import { auxLayersLine, resolveAuxLayers, resolveDraftVocabSize } from '../../../src/training/sequences/draft-shape.ts';
import { choosePrompts, usesLabCorpus, LAB_TARGET_DIR } from '../../../src/training/run/run-plan.ts';
import { formatDuration } from '../../../src/util/format.ts';
import { splitPath } from '../../../src/util/paths.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

export default defineSuite('training/run/run-plan', (t) => {
  t.test(
    "the run folder lock: a second holder is refused naming the owner; a dead owner's lock is taken over",
    async ({ platform }) => {
      const tmp = tempStore(platform, 'run-lock');
      try {
        const first = await lockRunFolder(tmp.files);
        await assertRejects(
          () => lockRunFolder(tmp.files),
          new RegExp(`${RUN_LOCK}: this run folder is in use by process \\d+ on .* \\(since .*\\); wait for it to finish`),
          'a second trainer on a live run',
        );
        await first.release();
        const again = await lockRunFolder(tmp.files);
        await again.release();
        // A lock left by a killed trainer: its pid runs no more on this machine.
        const stale = JSON.parse(
          new TextDecoder().decode(
            await (async () => {
              const l = await lockRunFolder(tmp.files);
              const b = await tmp.files.read(RUN_LOCK);
              await l.release();
              return b;
            })(),
          ),
        ) as { host: string };
        await tmp.files.writeAtomic(RUN_LOCK, encode({ pid: 2147483646, host: stale.host, since: '2026-01-01T00:00:00.000Z' }));
        // Node probes the owner with signal 0. Deno looks into /proc, which it opens only under
        // --allow-all; without it the owner cannot be judged and the lock is refused, never stolen.
        const outcome = await lockRunFolder(tmp.files).then(
          (l) => l,
          (e: Error) => e,
        );
        if (outcome instanceof Error) {
          assert(platform.name === 'deno', `only Deno without --allow-all may refuse a dead owner's lock: ${outcome.message}`);
          assert(/in use by process 2147483646 .*delete the lock file if that process is gone/.test(outcome.message), outcome.message);
          await tmp.files.remove(RUN_LOCK);
        } else {
          assert(!new TextDecoder().decode(await tmp.files.read(RUN_LOCK)).includes('2147483646'), 'the stale lock was replaced by ours');
          await outcome.release();
        }
        await tmp.files.writeAtomic(RUN_LOCK, encode({ pid: 1, host: 'another-machine', since: '2026-01-01T00:00:00.000Z' }));
        await assertRejects(
          () => lockRunFolder(tmp.files),
          /in use by process 1 on another-machine/,
          'a lock of another machine is never stolen',
        );
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );

  t.test('aux layers: given ids, SpecForge rule where servable, distinct capturable layers from 4, first-second-last below', () => {
    assertDeepEqual(resolveAuxLayers(undefined, 6), [0, 2, 4], '6 layers: SpecForge rule [1, 2, 2] repeats a layer; [0, 2, 4] instead');
    assertDeepEqual(
      resolveAuxLayers([0, 1, 1], 2),
      [0, 1, 1],
      'given ids kept (a 2-layer target has no servable set: warned, not refused)',
    );
    assertDeepEqual(resolveAuxLayers(undefined, 3), [0, 1, 2], 'a 3-layer target: first, second, last');
    assertThrows(() => resolveAuxLayers([1, 2, 9], 6), /^auxLayers \(--aux-layers\): layer 9 outside 0\.\.5$/, 'out of range, flag named');
    assertThrows(() => resolveAuxLayers([1, 2, 9], 6, { field: 'auxLayers' }), /^auxLayers: layer 9 outside 0\.\.5$/, 'session field name');
    assertDeepEqual(resolveAuxLayers(undefined, 2), [0, 1, 1], 'the bundled 2-layer target: [0, 1, 1]');
    assertDeepEqual(resolveAuxLayers(undefined, 1), [0, 0, 0], '1 layer');
    assertDeepEqual(resolveAuxLayers(undefined, 8), [1, 3, 4], 'SpecForge from 7 layers on');
    // Sets SGLang cannot capture, on targets that have a set it can: refused before training, naming the flag.
    assertThrows(
      () => resolveAuxLayers([1, 2, 2], 6),
      /^auxLayers \(--aux-layers\): aux layers \[1, 2, 2\]: layer 2 repeated .*; give 3 distinct layers below 5$/,
      'a repeated layer',
    );
    assertThrows(
      () => resolveAuxLayers([1, 15, 31], 32),
      /layer 31 of a 32-layer target is not capturable \(SGLang captures layer i as the input of layer i \+ 1, so at most 30\)/,
      'the last layer',
    );
    assertEqual(auxLayersLine([1, 15, 28], 32), 'aux layers [1, 15, 28]', 'a servable set: one line');
    assert(
      /^aux layers \[0, 1, 1\]\nwarning: aux layers \[0, 1, 1\]: .*a 2-layer target has no 3 distinct layers SGLang or vLLM can capture/.test(
        auxLayersLine([0, 1, 1], 2),
      ),
      'the lab target: warned',
    );
  });

  t.test('draft vocabulary: default capped at 32000, never above the target', () => {
    assertEqual(resolveDraftVocabSize(undefined, 384), 384, 'default = the target vocabulary');
    assertEqual(resolveDraftVocabSize(undefined, 128_000), 32000, 'default capped');
    assertEqual(resolveDraftVocabSize(96, 384), 96, 'given');
    assertThrows(
      () => resolveDraftVocabSize(500, 384),
      /^draftVocabSize \(--draft-vocab-size\) 500 exceeds the target vocabulary 384$/,
      'flag named',
    );
    assertThrows(
      () => resolveDraftVocabSize(500, 384, 'draft vocab size'),
      /^draft vocab size 500 exceeds the target vocabulary 384$/,
      'lab wording',
    );
  });

  t.test('prompts: seeded random, --prompts-file with held-out tail, lab corpus only for the lab target', async (ctx) => {
    assert(usesLabCorpus(LAB_TARGET_DIR, undefined), 'lab target, no prompts file');
    assert(!usesLabCorpus(LAB_TARGET_DIR, 'p.json'), 'a prompts file wins');
    assert(!usesLabCorpus('other', undefined), 'another target');
    const settings = { trainPrompts: 3, evalPrompts: 2, promptLength: 5, seed: 7 };
    const a = await choosePrompts(ctx.platform, settings, 50, false);
    const b = await choosePrompts(ctx.platform, settings, 50, false);
    assertDeepEqual(a, b, 'random prompts are seeded');
    assertEqual(a.source, 'random tokens (seed 7)', 'source');
    assertDeepEqual([a.train.length, a.held.length, a.train[0].length], [3, 2, 5], 'counts and length');
    const tmp = tempStore(ctx.platform, 'run-plan-prompts');
    try {
      await tmp.files.writeAtomic('p.json', encode([[1], [2], [3], [4], [5]]));
      const file = `${tmp.files.root}/p.json`;
      const p = await choosePrompts(ctx.platform, { ...settings, promptsFile: file }, 50, true);
      assertDeepEqual([p.train, p.held, p.source], [[[1], [2], [3]], [[4], [5]], file], 'last evalPrompts held out');
      await assertRejects(
        () => choosePrompts(ctx.platform, { ...settings, evalPrompts: 5, promptsFile: file }, 50, false),
        /5 prompts, need more than evalPrompts \(--eval-prompts\) = 5/,
        'too few prompts',
      );
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('run folder: an earlier run is refused, continued with --resume, deleted with --fresh', async (ctx) => {
    const tmp = tempStore(ctx.platform, 'run-plan-folder');
    try {
      const out = tmp.files;
      await assertRejects(() => prepareRunFolder(out, { resume: true, fresh: true }), /--resume and --fresh contradict/, 'both flags');
      await assertRejects(
        () => prepareRunFolder(out, { resume: true, fresh: false }),
        /--resume: .* holds no run to resume/,
        'nothing to resume',
      );
      await prepareRunFolder(out, { resume: false, fresh: false });
      await out.writeAtomic('checkpoints/x', encode(1));
      await out.writeAtomic('summary.json', encode({}));
      await assertRejects(
        () => prepareRunFolder(out, { resume: false, fresh: false }),
        /already holds a run \(checkpoints\/\): pass --resume .* --fresh/,
        'existing run refused',
      );
      await prepareRunFolder(out, { resume: true, fresh: false });
      assert(await out.exists('summary.json'), '--resume keeps the run');
      await prepareRunFolder(out, { resume: false, fresh: true });
      assert(!(await out.exists('summary.json')) && (await out.list('checkpoints')).length === 0, '--fresh deletes the run');
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('shared helpers: splitPath and both duration styles', () => {
    assertDeepEqual(splitPath('a/b/c.json'), ['a/b', 'c.json'], 'nested');
    assertDeepEqual(splitPath('c.json'), ['.', 'c.json'], 'bare name');
    assertDeepEqual(splitPath('/c.json'), ['/', 'c.json'], 'root');
    assertDeepEqual(splitPath('a/b/'), ['a/b', ''], 'a file path keeps its trailing slash');
    assertDeepEqual(splitPath('a/b/', { ignoreTrailingSlash: true }), ['a', 'b'], 'a directory path drops it');
    assertDeepEqual(splitPath('/', { ignoreTrailingSlash: true }), ['/', ''], 'the root itself');
    assertDeepEqual(
      [formatDuration(Number.NaN), formatDuration(12.34), formatDuration(185), formatDuration(3 * 3600 + 125)],
      ['?', '12.3s', '3m5s', '3h2m'],
      'compact',
    );
    assertDeepEqual(
      [
        formatDuration(Infinity, 'clock'),
        formatDuration(5.4, 'clock'),
        formatDuration(185, 'clock'),
        formatDuration(3 * 3600 + 125, 'clock'),
      ],
      ['?', '0m05s', '3m05s', '3h02m'],
      'clock',
    );
  });
});
