/**
 * Self-contained training checkpoints and `exportRunCheckpoint` (src/training/checkpoints/checkpoint-export.ts):
 *   - the online session on llama-tiny: every checkpoint holds the draft config (the config.json the
 *     export writes), t2d/d2t and the settings; each step folder, exported alone, is byte for byte
 *     the export of the draft as it stood at that step, and the run folder exports its last step;
 *   - `speclab train` end to end: exporting its run folder (function and `speclab export`) gives the
 *     run's own <out>/draft, byte for byte;
 *   - refusals: a folder without a complete checkpoint is named, an old checkpoint without the draft
 *     config or the vocabulary is refused saying so, a folder with two runs' checkpoints is ambiguous.
 */
import { runCli } from '../../../src/cli/main.ts';
import { trainCommand } from '../../../src/cli/train.ts';
import { FileMetadataStore } from '../../../src/control/file-metadata-store.ts';
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { writeEagle3Export } from '../../../src/model/eagle3/export.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import { AdamWBackend, SPECFORGE_OPTIMIZER } from '../../../src/optim/adamw-backend.ts';
import type { FileStore } from '../../../src/ports/storage.ts';
import { exportRunCheckpoint, resolveRunCheckpoint } from '../../../src/training/checkpoints/checkpoint-export.ts';
import { Eagle3TrainingSession, sessionSettingsSchema } from '../../../src/training/session/eagle3-session.ts';
import { COMPLETE_MARKER, listCheckpoints, loadCheckpoint, saveCheckpoint } from '../../../src/training/checkpoints/train-checkpoint.ts';
import { Rng } from '../../../src/util/random.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

const SETTINGS = sessionSettingsSchema.parse({
  epochs: 2,
  roundPrompts: 6,
  batchSize: 2,
  tttLength: 2,
  lr: 1e-2,
  responseLength: 8,
  checkpointEvery: 2,
  rolloutWorkers: 1,
  seed: 5,
});
const RUN = 'export-test';
const EXPORT_FILES = ['config.json', 'model.safetensors'];

/** Throws naming the first file of an export that differs between `a` and `b`. */
async function assertSameExport(files: FileStore, a: string, b: string, what: string): Promise<void> {
  for (const name of EXPORT_FILES) {
    const x = await files.read(`${a}/${name}`);
    const y = await files.read(`${b}/${name}`);
    assert(
      x.length === y.length && x.every((v, i) => v === y[i]),
      `${what}: ${a}/${name} (${x.length} bytes) differs from ${b}/${name} (${y.length} bytes)`,
    );
  }
}

export default defineSuite('training/checkpoints/run-export', (t) => {
  t.test(
    'session checkpoints are self-contained: each step folder exports the draft as it stood, the run folder its last step',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'run-export-session');
      const files = tmp.files;
      const gpu = new Gpu(ctx.gpu);
      let session: Eagle3TrainingSession | undefined;
      let metadata: FileMetadataStore | undefined;
      let target: TargetModel | undefined;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', files, 'target');
        const checkpoint = await loadHfCheckpoint(files, 'target');
        target = TargetModel.create(gpu, checkpoint);
        const rng = new Rng(13);
        const prompts = Array.from({ length: 6 }, () => Array.from({ length: 5 }, () => rng.int(0, checkpoint.config.vocabSize)));
        const root = `${files.root}/run`;
        metadata = await FileMetadataStore.open(ctx.platform.files(root), { dir: 'metadata' });
        const checkpoints = ctx.platform.files(`${root}/checkpoints`);
        session = await Eagle3TrainingSession.open({
          gpu,
          target,
          trainPrompts: prompts,
          settings: SETTINGS,
          runId: RUN,
          now: () => performance.now(),
          storage: { checkpoints, metadata, spill: ctx.platform.files(`${root}/spill`) },
        });
        const checkpointed: number[] = [];
        for (let st = await session.step(); st; st = await session.step()) {
          if (!st.checkpointed) continue;
          // The draft as it stands right after its checkpoint, exported the way `speclab train` writes <out>/draft.
          const n = st.globalStep;
          checkpointed.push(n);
          await writeEagle3Export(
            files,
            `live/step${n}`,
            session.draftConfig,
            await session.currentWeights(),
            { t2d: session.mapping.t2d, d2t: session.mapping.d2t },
            { auxLayerIds: session.auxLayerIds },
          );
          const { step, checkpoint: used } = await exportRunCheckpoint(
            files,
            `run/checkpoints/${RUN}-step${n}`,
            files,
            `exported/step${n}`,
          );
          assertEqual(step, n, 'the step folder exports its own step');
          assert(used.endsWith(`run/checkpoints/${RUN}-step${n}`), `the checkpoint used is named: ${used}`);
          await assertSameExport(files, `exported/step${n}`, `live/step${n}`, `step folder ${n}`);
        }
        assertEqual(session.globalStep, 6, 'two epochs of six sequences, batch 2');
        assertDeepEqual(checkpointed, [2, 3, 4, 6], 'checkpoints every 2 steps, at the round end (3) and at the last step');

        // What a checkpoint holds: the config.json the export writes, the vocabulary, the settings.
        const last = (await listCheckpoints(checkpoints, RUN)).at(-1)!;
        const loaded = await loadCheckpoint(checkpoints, last);
        const extra = loaded.state.extra as { draftConfig: unknown; auxLayerIds: number[]; settings: unknown; mode: string };
        assertDeepEqual(
          extra.draftConfig,
          JSON.parse(new TextDecoder().decode(await files.read('live/step6/config.json'))),
          'extra.draftConfig is the exported config.json',
        );
        assertDeepEqual(extra.auxLayerIds, [...session.auxLayerIds], 'aux layers');
        assertDeepEqual(extra.settings, JSON.parse(JSON.stringify(SETTINGS)), 'extra.settings: the settings the session got');
        assertEqual(extra.mode, 'online', 'mode');
        assertDeepEqual([...loaded.state.buffers].sort(), ['d2t', 't2d'], 'vocabulary buffers');
        assertDeepEqual([...loaded.weights.i32('d2t')], [...session.mapping.d2t], 'd2t saved');

        // The run folder, its checkpoints folder and its last step folder all export the last step.
        for (const path of ['run', 'run/', 'run/checkpoints', `run/checkpoints/${RUN}-step6`]) {
          const out = `final-${path.replace(/\W/g, '-')}`;
          assertEqual((await exportRunCheckpoint(files, path, files, out)).step, 6, `${path}: the latest complete step`);
          await assertSameExport(files, out, 'live/step6', `export of ${path}`);
        }
        // A save cut short at step 7 (no COMPLETE) is invisible: the run folder still exports step 6.
        await files.writeAtomic(`run/checkpoints/${RUN}-step7/state.json`, new TextEncoder().encode('{}'));
        assertEqual((await resolveRunCheckpoint(files, 'run')).step, 6, 'an incomplete newer step folder is skipped');
      } finally {
        session?.destroy();
        await metadata?.close();
        target?.destroy();
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );

  t.test(
    "speclab train: exporting its run folder gives the run's own <out>/draft, byte for byte",
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'run-export-cli');
      const root = tmp.files.root;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const settings = {
          target: `${root}/target`,
          out: `${root}/run`,
          trainPrompts: 4,
          evalPrompts: 1,
          promptLength: 5,
          responseLength: 8,
          epochs: 2,
          roundPrompts: 4,
          batchSize: 2,
          tttLength: 2,
          checkpointEvery: 3,
          evalNewTokens: 4,
          evalTrainPrompts: 0,
          seed: 1,
        };
        await tmp.files.writeAtomic('train.json', new TextEncoder().encode(JSON.stringify(settings)));
        const lines: string[] = [];
        assertEqual(
          await trainCommand(ctx.platform, ['--config', `${root}/train.json`], (l) => lines.push(l), ctx.gpu),
          0,
          `train exit code\n${lines.join('\n')}`,
        );
        assertEqual((await exportRunCheckpoint(tmp.files, 'run', tmp.files, 'exported')).step, 4, 'the last step');
        await assertSameExport(tmp.files, 'exported', 'run/draft', "exportRunCheckpoint(run folder) vs the run's own export");
        const state = JSON.parse(new TextDecoder().decode(await tmp.files.read('run/checkpoints/speclab-train-step4/state.json'))) as {
          extra: { settings: Record<string, unknown> };
        };
        assertEqual(state.extra.settings.batchSize, 2, "the run's settings are in the checkpoint");
        if (ctx.platform.name !== 'browser') {
          assertEqual(
            await runCli(ctx.platform, ['export', '--checkpoint', `${root}/run`, '--out', `${root}/cli`]),
            0,
            'speclab export of the run folder',
          );
          await assertSameExport(tmp.files, 'cli', 'run/draft', "speclab export <run> vs the run's own export");
        }
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );

  t.test(
    'refusals: no complete checkpoint names the folder; an old checkpoint without the draft config or vocabulary; two runs in one folder',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'run-export-refuse');
      const files = tmp.files;
      const gpu = new Gpu(ctx.gpu);
      const backend = new AdamWBackend(gpu, SPECFORGE_OPTIMIZER);
      try {
        backend.addParameter('fc.weight', [2, 3], [1, 2, 3, 4, 5, 6]);
        const contract = { strategy: 'eagle3', tttLength: 2, batchSize: 2, accumulationSteps: 1, draftConfigHash: 'x' };
        const save = (store: FileStore, runId: string, step: number, extra: Record<string, unknown>) =>
          saveCheckpoint(store, gpu, backend, {
            runId,
            globalStep: step,
            microStep: step,
            epoch: 0,
            data: { epochBatch: step, epochSamples: 2 * step, samplesConsumed: 2 * step },
            contract,
            extra,
          });
        const run = ctx.platform.files(`${files.root}/old-run/checkpoints`);

        await files.writeAtomic('empty/notes.txt', new TextEncoder().encode('nothing here'));
        await assertRejects(
          () => exportRunCheckpoint(files, 'empty', files, 'never'),
          /empty: no complete training checkpoint to export \(looked for <run id>-step<N> folders with a COMPLETE marker in .*empty\)/,
          'an empty folder is named',
        );
        await assertRejects(
          () => exportRunCheckpoint(files, 'missing', files, 'never'),
          /missing: no complete training checkpoint to export/,
          'a missing folder is named',
        );

        // As the session saved checkpoints before they were self-contained: aux layer ids only.
        const ref = await save(run, 'speclab-train', 2, { auxLayerIds: [1, 2, 3] });
        await assertRejects(
          () => exportRunCheckpoint(files, 'old-run', files, 'never'),
          /old-run\/checkpoints\/speclab-train-step2\/state\.json: no draft config \(extra\.draftConfig\): the checkpoint was written before checkpoints were self-contained/,
          'an old-format checkpoint says what it lacks',
        );
        const draftConfig = {
          hidden_size: 2,
          intermediate_size: 4,
          num_attention_heads: 1,
          vocab_size: 8,
          draft_vocab_size: 4,
          rms_norm_eps: 1e-6,
        };
        await assertRejects(
          () => exportRunCheckpoint(files, 'old-run', files, 'never', draftConfig),
          /weights\.safetensors: missing buffer "t2d": the checkpoint was saved without the draft vocabulary/,
          'with --draft-config, the missing vocabulary',
        );
        await assertRejects(
          () =>
            exportRunCheckpoint(files, 'old-run', files, 'never', {
              ...draftConfig,
              eagle_config: { eagle_aux_hidden_state_layer_ids: [0, 1, 2] },
            }),
          /draft config: eagle_config\.eagle_aux_hidden_state_layer_ids \[0, 1, 2\] differ from the layers .*speclab-train-step2 was trained on \[1, 2, 3\] \(state\.json extra\.auxLayerIds\)/,
          '--draft-config with other aux layers than the checkpoint was trained on',
        );

        // Only incomplete step folders: the message names the folder and them.
        await run.remove(`${ref.dir}/${COMPLETE_MARKER}`);
        await assertRejects(
          () => exportRunCheckpoint(files, 'old-run', files, 'never'),
          /old-run: no complete training checkpoint to export .*old-run\/checkpoints; 1 step folder\(s\) without a valid COMPLETE marker .*: speclab-train-step2\)/,
          'an incomplete step folder is named',
        );
        await assertRejects(
          () => exportRunCheckpoint(files, `old-run/checkpoints/${ref.dir}`, files, 'never'),
          /speclab-train-step2: not a complete checkpoint/,
          'an incomplete step folder named directly',
        );

        // Two runs' checkpoints in one folder: ambiguous.
        const mixed = ctx.platform.files(`${files.root}/mixed`);
        await save(mixed, 'a', 1, {});
        await save(mixed, 'b', 3, {});
        await assertRejects(
          () => exportRunCheckpoint(files, 'mixed', files, 'never'),
          /mixed: holds checkpoints of 2 runs \(a, b\); name the step folder/,
          'two runs',
        );
        assertEqual((await resolveRunCheckpoint(files, 'mixed/b-step3')).step, 3, 'a named step folder is fine');
      } finally {
        backend.destroy();
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );
});
