/**
 * Offline EAGLE3 training (`speclab prepare` → shards → `speclab train --offline`) on hf/llama-tiny:
 *   - the proof: online training (features captured live by the rollout worker) and offline training
 *     (prepared shards, the normaliser of docs/features.md §5, the target head on the GPU) fed the same samples in the
 *     same order from the same init give the same loss at every step (≤ 1e-6 relative); offline, the
 *     shards made compact on the trainer (the default) and projected to full logits train the same bits;
 *   - checkpoints and resume: a run stopped after step 3 and reopened on its checkpoints resumes from
 *     step 2 and gives the losses, weights and export bytes of an uninterrupted run; a resume whose
 *     settings drifted is refused naming the field;
 *   - the CLI end to end: prepare, train --offline, a loadable SGLang export (the bytes `speclab export`
 *     writes from the run folder), a metrics record per step, --resume after a kill and of a finished run;
 *   - loud errors: bad prepare settings, a missing target dir, an already prepared --out, a missing
 *     manifest, and a shard without one of its tensors (the message names the file).
 */
import { prepareCommand, parsePrepareFlags, runPrepare } from '../../../src/cli/prepare.ts';
import { trainCommand } from '../../../src/cli/train.ts';
import { DataFlowController } from '../../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import type { SampleRef } from '../../../src/contracts/index.ts';
import { parseMetricsLine } from '../../../src/contracts/metrics-record.ts';
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { FeatureDataLoader } from '../../../src/data/feature-dataloader.ts';
import { LocalFeatureStore } from '../../../src/data/local-feature-store.ts';
import { readOfflineManifest, shardPath } from '../../../src/data/offline-eagle3.ts';
import { SafetensorsFile } from '../../../src/formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../../src/formats/safetensors-writer.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { RolloutWorker } from '../../../src/inference/rollout-worker.ts';
import { defaultAuxLayerIds, eagle3CaptureConfig, TargetFeatureSource } from '../../../src/inference/target-feature-source.ts';
import { readEagle3Export, writeEagle3Export } from '../../../src/model/eagle3/export.ts';
import { Eagle3DraftModel } from '../../../src/model/eagle3/model.ts';
import { initialEagle3Weights } from '../../../src/model/eagle3/parameters.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import { Rng } from '../../../src/util/random.ts';
import { AdamWBackend, SPECFORGE_OPTIMIZER } from '../../../src/optim/adamw-backend.ts';
import { continueWithTarget, draftConfigFor, draftVocab } from '../../../src/training/sequences/eagle3-data.ts';
import { exportRunCheckpoint } from '../../../src/training/checkpoints/checkpoint-export.ts';
import {
  offlineStream,
  offlineVocab,
  trainEagle3Offline,
  type OfflineTrainSettings,
} from '../../../src/training/offline/offline-training.ts';
import { listCheckpoints, loadCheckpoint } from '../../../src/training/checkpoints/train-checkpoint.ts';
import type { FileStore } from '../../../src/ports/storage.ts';
import { Eagle3TrainStrategy } from '../../../src/training/strategies/eagle3.ts';
import { TrainerController } from '../../../src/training/loop/trainer-controller.ts';
import { TrainerCore } from '../../../src/training/loop/trainer-core.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose, assertThrows } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const quiet = () => undefined;

/** Throws naming the first file of an SGLang export that differs between folders `a` and `b`. */
async function assertSameExport(files: FileStore, a: string, b: string, what: string): Promise<void> {
  for (const name of ['config.json', 'model.safetensors']) {
    const x = await files.read(`${a}/${name}`);
    const y = await files.read(`${b}/${name}`);
    assert(
      x.length === y.length && x.every((v, i) => v === y[i]),
      `${what}: ${a}/${name} (${x.length} bytes) differs from ${b}/${name} (${y.length} bytes)`,
    );
  }
}

/** Prompts of different lengths (so captures and batches are padded), ids inside llama-tiny's 384. */
function prompts(count: number, rng: Rng): number[][] {
  return Array.from({ length: count }, (_, i) => Array.from({ length: 4 + (i % 3) }, () => rng.int(0, 384)));
}

export default defineSuite('training/offline/offline-training', (t) => {
  t.test(
    'online and offline paths fed the same samples give the same losses (≤ 1e-6 relative)',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'offline-parity');
      const root = tmp.files.root;
      const gpu = new Gpu(ctx.gpu);
      const owned: { destroy(): void }[] = [];
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const all = prompts(7, new Rng(5));
        await tmp.files.writeAtomic('prompts.json', encode(all));
        const responseLength = 6;
        // The last prompt is held out, as `speclab train` does with --eval-prompts 1.
        await runPrepare(
          ctx.platform,
          parsePrepareFlags([
            '--target',
            `${root}/target`,
            '--prompts-file',
            `${root}/prompts.json`,
            '--eval-prompts',
            '1',
            '--response-length',
            String(responseLength),
            '--out',
            `${root}/features`,
          ]),
          quiet,
          ctx.gpu,
        );

        const checkpoint = await loadHfCheckpoint(tmp.files, 'target');
        const target = TargetModel.create(gpu, checkpoint);
        owned.push(target);
        const tc = target.config;
        const sequences = await continueWithTarget(target, all.slice(0, 6), responseLength);
        const features = ctx.platform.files(`${root}/features`);
        const manifest = await readOfflineManifest(features);
        assertEqual(manifest.samples, 6, 'one shard per training prompt');
        for (const [i, s] of sequences.entries()) {
          const shard = new SafetensorsFile(await features.read(shardPath(i)), shardPath(i));
          assertDeepEqual([...shard.i32('input_ids')], s.inputIds, `shard ${i} holds sample ${i}`);
          assertDeepEqual([...shard.i32('loss_mask')], s.lossMask, `shard ${i} loss mask (unshifted)`);
        }

        const settings: OfflineTrainSettings = {
          epochs: 2,
          batchSize: 2,
          tttLength: 3,
          lr: 1e-2,
          warmupRatio: 0.1,
          maxGradNorm: SPECFORGE_OPTIMIZER.maxGradNorm,
          seed: 0,
        };
        const draftVocabSize = 96;
        const online = draftVocab(sequences, tc.vocabSize, draftVocabSize).mapping;
        const mapping = offlineVocab(manifest, draftVocabSize).mapping;
        assertDeepEqual([...mapping.d2t], [...online.d2t], 'vocab mapping from the manifest counts equals the online one');
        const draftConfig = draftConfigFor(target, draftVocabSize);
        const initial = initialEagle3Weights(draftConfig, checkpoint.weights.embedTokens, new Rng(settings.seed + 1));
        const stream = offlineStream(sequences.length, settings.epochs, settings.seed);
        const totalSteps = Math.ceil(stream.length / settings.batchSize);

        // Online: rounds of 4 (a multiple of the batch) through controller → rollout worker → store → loader → trainer.
        const onlineLosses: number[] = [];
        const onlineWeights: Record<string, Float32Array> = {};
        {
          const store = new LocalFeatureStore(gpu);
          const controller = new DataFlowController({ runId: 'online', store: new InMemoryMetadataStore(), featureStore: store });
          const auxLayerIds = defaultAuxLayerIds(tc.numLayers);
          assertDeepEqual(manifest.auxLayerIds, auxLayerIds, 'prepare used the default aux layers');
          const capture = { ...eagle3CaptureConfig(tc, auxLayerIds), extra: { ttt_length: settings.tttLength } };
          const worker = await RolloutWorker.create(controller, new TargetFeatureSource(target), store, gpu, capture, {
            workerId: 'rollout-0',
          });
          const backend = new AdamWBackend(gpu, {
            ...SPECFORGE_OPTIMIZER,
            lr: settings.lr,
            maxGradNorm: settings.maxGradNorm,
            schedule: { kind: 'cosine', totalSteps, warmupRatio: settings.warmupRatio },
          });
          const draft = new Eagle3DraftModel(gpu, backend, draftConfig, initial, { t2d: online.t2d, d2t: online.d2t });
          owned.unshift(backend);
          owned.unshift(draft);
          const trainer = new TrainerController(
            gpu,
            new TrainerCore(new Eagle3TrainStrategy(draft, { tttLength: settings.tttLength }), backend, 1),
          );
          const lease = await controller.trainLease();
          const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: settings.batchSize, dropLast: false });
          for (let r = 0; r * 4 < stream.length; r++) {
            const round = stream.slice(r * 4, r * 4 + 4);
            await controller.ingestPrompts(
              round.map((s, i) => ({
                taskId: `r${r}-${i}-s${s}`,
                payload: { input_ids: sequences[s].inputIds, loss_mask: sequences[s].lossMask },
                maxLength: sequences[s].inputIds.length,
              })),
            );
            while ((await worker.runOnce(4)).length > 0);
            await trainer.fit(loader, {
              ackFn: async (_ids, step, batches) => {
                await lease.ack(
                  batches.flatMap((b) => (b as unknown as { refs: SampleRef[] }).refs),
                  { globalStep: step, optimizerDurable: true },
                );
              },
              onStep: (s) => onlineLosses.push(s.loss),
            });
          }
          for (const p of backend.params) onlineWeights[p.name] = (await gpu.read(p.value)) as Float32Array;
        }

        // Offline: the prepared shards, the normaliser and the target head.
        const offline = await trainEagle3Offline({
          gpu,
          target,
          files: features,
          manifest,
          settings,
          draftConfig,
          initialWeights: initial,
          mapping,
        });

        // The same shards projected to full logits per micro-batch (--target-repr logits) train the same bits
        // as the default, where the trainer makes them compact (lse and argmax a chunk of rows at a time).
        const fullLogits = await trainEagle3Offline({
          gpu,
          target,
          files: features,
          manifest,
          settings: { ...settings, targetRepr: 'logits' },
          draftConfig,
          initialWeights: initial,
          mapping,
        });
        assertDeepEqual(fullLogits.losses, offline.losses, 'offline: compact and full-logits teachers give the same loss at every step');
        for (const [name, w] of Object.entries(offline.weights))
          assert(
            w.every((v, i) => Object.is(v, fullLogits.weights[name][i])),
            `trained ${name}: compact and full-logits offline training, the same bits`,
          );

        assertEqual(onlineLosses.length, totalSteps, 'online steps');
        assertEqual(offline.losses.length, totalSteps, 'offline steps');
        let worst = 0;
        for (let i = 0; i < totalSteps; i++) {
          const rel = Math.abs(offline.losses[i] - onlineLosses[i]) / Math.abs(onlineLosses[i]);
          worst = Math.max(worst, rel);
          assert(
            Number.isFinite(onlineLosses[i]) && rel <= 1e-6,
            `step ${i + 1}: offline loss ${offline.losses[i]} vs online ${onlineLosses[i]} (relative ${rel.toExponential(2)} > 1e-6)`,
          );
        }
        assert(new Set(onlineLosses).size > 1, `losses change from step to step: ${onlineLosses.join(', ')}`);
        // And the trained drafts agree: same updates from the same gradients.
        for (const [name, w] of Object.entries(onlineWeights))
          assertRelClose(offline.weights[name], w, 1e-5, `trained ${name}, offline vs online`);
        ctx.note('steps', totalSteps);
        ctx.note('worstRelativeLossDifference', worst);
        ctx.note('losses', onlineLosses.map((l) => l.toFixed(6)).join(' '));
      } finally {
        for (const o of owned) o.destroy();
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );

  t.test(
    'checkpoints and resume: stopped after step 3, reopened: the losses, weights and export of an uninterrupted run; drift refused',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'offline-resume');
      const files = tmp.files;
      const root = files.root;
      const gpu = new Gpu(ctx.gpu);
      let target: TargetModel | undefined;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', files, 'target');
        await files.writeAtomic('prompts.json', encode(prompts(5, new Rng(9))));
        await runPrepare(
          ctx.platform,
          parsePrepareFlags([
            '--target',
            `${root}/target`,
            '--prompts-file',
            `${root}/prompts.json`,
            '--eval-prompts',
            '1',
            '--response-length',
            '6',
            '--out',
            `${root}/features`,
          ]),
          quiet,
          ctx.gpu,
        );
        const checkpoint = await loadHfCheckpoint(files, 'target');
        target = TargetModel.create(gpu, checkpoint);
        const features = ctx.platform.files(`${root}/features`);
        const manifest = await readOfflineManifest(features);
        const settings: OfflineTrainSettings = {
          epochs: 3,
          batchSize: 2,
          tttLength: 2,
          lr: 1e-2,
          warmupRatio: 0.1,
          maxGradNorm: SPECFORGE_OPTIMIZER.maxGradNorm,
          seed: 4,
          checkpointEvery: 2,
        };
        const draftConfig = draftConfigFor(target, 96);
        const mapping = offlineVocab(manifest, 96).mapping;
        const initialWeights = initialEagle3Weights(draftConfig, checkpoint.weights.embedTokens, new Rng(settings.seed + 1));
        const t = target;
        const train = (
          run: string,
          over: Partial<OfflineTrainSettings> = {},
          onStep?: (step: number, loss: number, checkpointed: boolean) => void,
        ) =>
          trainEagle3Offline({
            gpu,
            target: t,
            files: features,
            manifest,
            settings: { ...settings, ...over },
            draftConfig,
            initialWeights,
            mapping,
            checkpoints: ctx.platform.files(`${root}/${run}/checkpoints`),
            onStep: (st) => onStep?.(st.globalStep, st.loss, st.checkpointed),
          });

        const wholeReports: boolean[] = [];
        const whole = await train('whole', {}, (_s, _l, c) => wholeReports.push(c));
        assertEqual(whole.totalSteps, 6, 'three epochs of four shards, batch 2');
        assertEqual(whole.resumedFrom, undefined, 'a fresh run');
        assertDeepEqual(wholeReports, [false, true, false, true, false, true], 'checkpointed every 2 steps and at the last');

        // "Killed" during step 3: after it was reported, before any checkpoint of it.
        const firstLosses: number[] = [];
        await assertRejects(
          () =>
            train('killed', {}, (step, loss) => {
              firstLosses.push(loss);
              if (step === 3) throw new Error('killed at step 3');
            }),
          /killed at step 3/,
          'the stop',
        );
        const killedCheckpoints = ctx.platform.files(`${root}/killed/checkpoints`);
        assertDeepEqual(
          (await listCheckpoints(killedCheckpoints, 'speclab-train')).map((r) => r.step),
          [2],
          'the checkpoint of step 2 survives',
        );
        const resumed = await train('killed');
        assertEqual(resumed.resumedFrom, 2, 'resumed from step 2');
        assertEqual(resumed.steps, 6, 'to the end');
        assertDeepEqual(
          [...firstLosses.slice(0, 2), ...resumed.losses],
          whole.losses,
          'the losses of the uninterrupted run, step for step',
        );
        for (const [name, w] of Object.entries(whole.weights)) assertDeepEqual([...resumed.weights[name]], [...w], `final ${name}`);
        assertDeepEqual(
          (await listCheckpoints(killedCheckpoints, 'speclab-train')).map((r) => r.step),
          [4, 6],
          'the newest two checkpoints are kept',
        );

        // Self-contained checkpoints, exported alone: the same bytes for both runs and as the final weights export.
        await exportRunCheckpoint(files, 'whole', files, 'whole-draft');
        await exportRunCheckpoint(files, 'killed', files, 'killed-draft');
        await writeEagle3Export(files, 'weights-draft', draftConfig, whole.weights, mapping, { auxLayerIds: manifest.auxLayerIds });
        await assertSameExport(files, 'killed-draft', 'whole-draft', 'stopped-and-resumed vs uninterrupted export');
        await assertSameExport(files, 'whole-draft', 'weights-draft', 'checkpoint export vs the trained weights');
        const state = (await loadCheckpoint(killedCheckpoints, { runId: 'speclab-train', step: 6, dir: 'speclab-train-step6' })).state;
        assertEqual(state.extra.mode, 'offline', 'mode');
        assertDeepEqual(state.extra.settings, settings, 'the settings');
        assertDeepEqual(state.data, { epochBatch: 6, epochSamples: 12, samplesConsumed: 12 }, 'data position');

        // A finished run reopened trains nothing; a drifted resume is refused naming the field.
        const again = await train('killed');
        assertEqual(again.resumedFrom, 6, 'reopened at its last step');
        assertEqual(again.losses.length, 0, 'nothing left to train');
        await assertRejects(
          () => train('killed', { lr: 2e-2 }),
          /resume speclab-train from .*killed\/checkpoints\/speclab-train-step6: the run contract drifted \(optimizer\.lr: checkpoint 0\.01, this run 0\.02\)/,
          'another lr',
        );
        await assertRejects(
          () => train('killed', { batchSize: 4 }),
          /the run contract drifted \(batchSize: checkpoint 2, this run 4.*schedule\.totalSteps: checkpoint 6, this run 3/,
          'another batch size',
        );
        await assertRejects(
          () => train('killed', { seed: 5 }),
          /the run contract drifted \(draftConfigHash/,
          'another seed (another stream)',
        );
        ctx.note('losses', whole.losses.map((l) => l.toFixed(6)).join(' '));
      } finally {
        target?.destroy();
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );

  t.test(
    'speclab prepare + train --offline: SGLang export, a metrics record per step; clear errors',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'offline-cli');
      const root = tmp.files.root;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const lines: string[] = [];
        const prepareArgs = [
          '--target',
          `${root}/target`,
          '--train-prompts',
          '4',
          '--eval-prompts',
          '1',
          '--prompt-length',
          '5',
          '--response-length',
          '6',
          '--out',
          `${root}/features`,
        ];
        assertEqual(await prepareCommand(ctx.platform, prepareArgs, (l) => lines.push(l), ctx.gpu), 0, 'prepare exit code');
        assert(
          lines.some((l) => /^prepared 4 shards \(44 tokens\)/.test(l)),
          `prepare summary line:\n${lines.join('\n')}`,
        );

        const code = await trainCommand(
          ctx.platform,
          [
            '--offline',
            `${root}/features`,
            '--out',
            `${root}/run`,
            '--epochs',
            '2',
            '--batch-size',
            '2',
            '--max-new-tokens',
            '6',
            '--eval-train-prompts',
            '1',
          ],
          (l) => lines.push(l),
          ctx.gpu,
        );
        assertEqual(code, 0, `train --offline exit code (lossless)\n${lines.join('\n')}`);
        const log = new TextDecoder()
          .decode(await tmp.files.read('run/metrics.jsonl'))
          .trim()
          .split('\n')
          .map((l, i) => parseMetricsLine(l, `metrics.jsonl line ${i + 1}`) as Record<string, unknown>); // every line as the schema says
        assertEqual(log.filter((r) => r.phase === 'train').length, 4, 'one metrics record per step (2 epochs × 4 shards / batch 2)');
        const imported = await readEagle3Export(tmp.files, 'run/draft', new Float32Array(384 * 64));
        assertEqual(imported.config.vocabSize, 384, 'export vocab');
        const exportedConfig = JSON.parse(new TextDecoder().decode(await tmp.files.read('run/draft/config.json'))) as {
          eagle_config?: { eagle_aux_hidden_state_layer_ids?: number[] };
          eagle_aux_hidden_state_layer_ids?: number[];
        };
        assertDeepEqual(
          exportedConfig.eagle_config?.eagle_aux_hidden_state_layer_ids,
          [0, 2, 4],
          'export records the aux layers of the features (the default of a 6-layer target)',
        );
        assertDeepEqual(exportedConfig.eagle_aux_hidden_state_layer_ids, [1, 3, 5], "and vLLM's names for them");
        const trainRecords = log.filter((r) => r.phase === 'train');
        assert(
          trainRecords.every(
            (r) =>
              Array.isArray(r.plosses) &&
              Array.isArray(r.accs) &&
              typeof r.checkpointed === 'boolean' &&
              typeof r.simulatedAcceptance === 'number',
          ),
          'train records have the online fields',
        );
        assertEqual(trainRecords.at(-1)?.checkpointed, true, 'the last step is checkpointed');
        await exportRunCheckpoint(tmp.files, 'run', tmp.files, 'run-export');
        await assertSameExport(tmp.files, 'run-export', 'run/draft', "exporting the run folder vs the run's own export");

        // The run folder is not overwritten; --resume of the finished run trains nothing and keeps the export.
        const trainArgs = [
          '--offline',
          `${root}/features`,
          '--epochs',
          '2',
          '--batch-size',
          '2',
          '--max-new-tokens',
          '6',
          '--eval-train-prompts',
          '1',
        ];
        await assertRejects(
          () => trainCommand(ctx.platform, [...trainArgs, '--out', `${root}/run`], quiet, ctx.gpu),
          /already holds a run .*--resume.*--fresh/,
          'an existing run is refused',
        );
        assertEqual(
          await trainCommand(ctx.platform, [...trainArgs, '--out', `${root}/run`, '--resume'], quiet, ctx.gpu),
          0,
          'resume of a finished run',
        );
        const relog = new TextDecoder()
          .decode(await tmp.files.read('run/metrics.jsonl'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        assertEqual(relog.filter((r) => r.phase === 'train').length, 4, 'no step trained again');
        await assertSameExport(tmp.files, 'run-export', 'run/draft', 'the export after the resume');

        // Killed in step 3 (checkpoints every step), then resumed: the export of the uninterrupted run.
        const killArgs = [...trainArgs, '--out', `${root}/killed`, '--checkpoint-every', '1', '--log-every', '1'];
        await assertRejects(
          () =>
            trainCommand(
              ctx.platform,
              killArgs,
              (l) => {
                if (/^phase train {2}step 3\//.test(l)) throw new Error('killed in step 3');
              },
              ctx.gpu,
            ),
          /killed in step 3/,
          'the kill',
        );
        const resumeLines: string[] = [];
        assertEqual(
          await trainCommand(ctx.platform, [...killArgs, '--resume'], (l) => resumeLines.push(l), ctx.gpu),
          0,
          `resume after the kill\n${resumeLines.join('\n')}`,
        );
        assert(
          resumeLines.some((l) => /^phase resume: step 2 /.test(l)),
          `resumed from step 2:\n${resumeLines.join('\n')}`,
        );
        await assertSameExport(tmp.files, 'killed/draft', 'run/draft', 'killed-and-resumed vs uninterrupted export');
        const killedLog = new TextDecoder()
          .decode(await tmp.files.read('killed/metrics.jsonl'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        assertDeepEqual(
          killedLog.filter((r) => r.phase === 'train').map((r) => r.step),
          [1, 2, 3, 4],
          'each step logged once',
        );
        assertDeepEqual(
          killedLog.filter((r) => r.phase === 'train').map((r) => r.loss),
          trainRecords.map((r) => r.loss),
          'the losses of the uninterrupted run',
        );

        // Bad input to prepare.
        assertThrows(
          () => parsePrepareFlags(['--train-prompts', '0']),
          /trainPrompts \(--train-prompts\)/,
          'non-positive count names the flag',
        );
        assertThrows(() => parsePrepareFlags(['--bogus', '1']), /unknown option --bogus/, 'unknown flag');
        const run = (args: string[]) => prepareCommand(ctx.platform, args, quiet, ctx.gpu);
        await assertRejects(
          () => run(['--target', `${root}/target`, '--aux-layers', '1,2,9', '--out', `${root}/other`]),
          /auxLayers \(--aux-layers\): layer 9 outside 0\.\.5/,
          'aux layer out of range',
        );
        await assertRejects(
          () => run(['--target', `${root}/no-such-model`, '--out', `${root}/other`]),
          /no-such-model: no config\.json there/,
          'missing target dir',
        );
        await assertRejects(() => run(prepareArgs), /already holds a prepared feature set/, 'an already prepared --out');
        await assertRejects(
          () => trainCommand(ctx.platform, ['--offline', `${root}/nothing`, '--out', `${root}/run2`], quiet, ctx.gpu),
          /nothing\/manifest\.json not found/,
          'no manifest',
        );

        // A shard without one of its tensors fails on first access, naming the file.
        const bad = shardPath(1);
        const shard = new SafetensorsFile(await tmp.files.read(`features/${bad}`), bad);
        const kept: Record<string, TensorToWrite> = {};
        for (const name of ['input_ids', 'loss_mask', 'aux_hidden_state']) {
          const e = shard.entry(name);
          const values = e.dtype === 'I32' ? shard.i32(name) : shard.f32(name);
          kept[name] = { dtype: e.dtype, shape: e.shape, data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) };
        }
        await tmp.files.writeAtomic(`features/${bad}`, writeSafetensors(kept));
        const err = await assertRejects(
          () =>
            trainCommand(
              ctx.platform,
              [
                '--offline',
                `${root}/features`,
                '--out',
                `${root}/run3`,
                '--epochs',
                '1',
                '--batch-size',
                '2',
                '--max-new-tokens',
                '2',
                '--eval-train-prompts',
                '0',
              ],
              quiet,
              ctx.gpu,
            ),
          /has no tensor "hidden_state"/,
          'missing key',
        );
        assert(err.message.includes(`features/${bad}`), `the error names the shard file: ${err.message}`);
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'], timeoutMs: 300_000 },
  );
});
