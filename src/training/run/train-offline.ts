/**
 * `speclab train --offline DIR`: train an EAGLE3 draft from a feature set written by
 * `speclab prepare` (src/training/offline/offline-training.ts does the training), then export and evaluate
 * it as the online `speclab train` does:
 *   1. load      manifest.json; the target (manifest's, or --target) is checked against it
 *   2. vocab     draft vocabulary from the manifest's loss-token counts
 *   3. before    acceptance length of the untrained draft on the manifest's held-out (and training) prompts
 *   4. train     shards → store → loader (normaliser) → trainer, the target head projecting targets;
 *                checkpoints in <out>/checkpoints every --checkpoint-every steps and at the end, in the
 *                format of the online run (self-contained: `speclab export` takes them alone)
 *   5. export    SGLang directory in <out>/draft from the final checkpoint, by the function
 *                `speclab export` uses (eagle_config records the aux layers)
 *   6. after     the exported draft's acceptance length (lossless check)
 * Data settings (prompts, lengths, aux layers) were fixed by `prepare`; the training settings of
 * `speclab train` apply. As online, an existing run in --out is continued only with `--resume` (from
 * its newest checkpoint, same losses; refused when the run contract drifted) or deleted with
 * `--fresh`, and <out>/metrics.jsonl gets one JSON record per step (fsynced before the step's
 * checkpoint; a step an earlier process logged and a resume trains again is marked `replay`) and phase.
 */
import { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import { readOfflineManifest } from '../../data/offline-eagle3.ts';
import type { GpuContext } from '../../gpu/context.ts';
import { Gpu } from '../../gpu/gpu.ts';
import type { Eagle3DraftCheckpoint } from '../../inference/eagle3-drafter.ts';
import { evaluateDraft, type SpecEval } from '../../inference/evaluate-draft.ts';
import { timeTargetOnly } from '../../inference/speculative.ts';
import { readEagle3Export } from '../../model/eagle3/export.ts';
import { initialEagle3Weights } from '../../model/eagle3/parameters.ts';
import { loadTarget } from './target-load.ts';
import { progressFor, type RunPlatform } from './platform.ts';
import { Rng } from '../../util/random.ts';
import { draftConfigFor } from '../sequences/eagle3-data.ts';
import { exportRunCheckpoint, RUN_CHECKPOINTS_DIR } from '../checkpoints/checkpoint-export.ts';
import { checkManifestTarget, offlineVocab, trainEagle3Offline, type OfflineTrainSettings } from '../offline/offline-training.ts';
import { TRAIN_RUN_ID } from '../checkpoints/run-checkpoints.ts';
import { loggedSteps } from './train-log.ts';
import {
  configRecord,
  dataRecord,
  evalAfterRecord,
  evalBeforeRecord,
  offlineSummaryRecord,
  resumeEventRecord,
  trainRecord,
} from '../../contracts/metrics-entries.ts';
import { lockRunFolder, prepareRunFolder } from './run-folder.ts';
import { RunMetricsLog } from './run-log.ts';
import { auxLayersLine, resolveAuxLayers, resolveDraftVocabSize } from '../sequences/draft-shape.ts';
import { describeSteps } from './run-loop.ts';

/** The offline stream (epochs × shards) in steps of `batchSize`, its last step taking what is left (trainEagle3Offline's plan). */
const offlineSteps = (samples: number, batchSize: number) =>
  describeSteps(
    Array.from({ length: Math.ceil(samples / batchSize) }, (_, i) => Math.min(batchSize, samples - i * batchSize)),
    batchSize,
    'the last step takes what is left of the stream',
  );

/** The settings of `speclab train` that offline training reads (TrainConfig has them all). */
export interface OfflineTrainConfig extends OfflineTrainSettings {
  offline?: string;
  target?: string;
  out: string;
  /** Continue the run in `out` from its newest checkpoint / delete it first (as online). */
  resume?: boolean;
  fresh?: boolean;
  draftVocabSize?: number;
  auxLayers?: number[];
  numDraftTokens: number;
  evalNewTokens: number;
  evalTrainPrompts: number;
  logEvery: number;
}

export interface OfflineTrainSummary {
  features: string;
  target: string;
  samples: number;
  steps: number;
  trainSeconds: number;
  finalLoss: number;
  vocabCoverage: number;
  before: { heldOut: SpecEval; train?: SpecEval };
  after: { heldOut: SpecEval; train?: SpecEval };
  exportDir: string;
  /** Whether SGLang and vLLM serve the export as trained, and why not (checkpoint-export.ts ExportServing). */
  exportServable: boolean;
  exportWarning?: string;
}

/** Exit code: 0 when speculative decoding with both drafts stayed lossless. */
export async function offlineTrainCommand(
  platform: RunPlatform,
  config: OfflineTrainConfig,
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const s = await runOfflineTraining(platform, config, print, gpuContext);
  return [s.before.heldOut, s.after.heldOut, s.before.train, s.after.train].every((e) => e === undefined || e.lossless) ? 0 : 1;
}

export async function runOfflineTraining(
  platform: RunPlatform,
  config: OfflineTrainConfig,
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<OfflineTrainSummary> {
  const started = performance.now();
  if (!config.offline) throw new Error('offline (--offline): missing the prepared feature directory');
  const features = platform.files(config.offline);
  const manifest = await readOfflineManifest(features);
  const manifestPath = `${features.root}/manifest.json`;
  if (config.auxLayers && config.auxLayers.join() !== manifest.auxLayerIds.join()) {
    throw new Error(
      `auxLayers (--aux-layers) [${config.auxLayers}] differ from the layers [${manifest.auxLayerIds}] the features were captured from (${manifestPath})`,
    );
  }
  const targetDir = config.target ?? manifest.target;
  const targetFiles = platform.files(targetDir);
  if (!(await targetFiles.exists('config.json')))
    throw new Error(
      `target ${targetFiles.root} (from ${config.target ? '--target' : manifestPath}): no config.json there (expected a Hugging Face model directory)`,
    );
  const weights = await HfCheckpointSource.open(targetFiles, '');
  const tc = weights.config;
  const draftVocabSize = resolveDraftVocabSize(config.draftVocabSize, tc.vocabSize);
  // The features' layers, checked as a run's own (servable ones only, where the target has such a set) before training.
  resolveAuxLayers(manifest.auxLayerIds, tc.numLayers, { field: `auxLayerIds of ${manifestPath}` });

  const out = platform.files(config.out);
  const lock = await lockRunFolder(out);
  try {
    await prepareRunFolder(out, { resume: config.resume ?? false, fresh: config.fresh ?? false });
    if ((await out.list('metadata')).length > 0)
      throw new Error(
        `${out.root} holds an online run (metadata/ is its ledger): resume it without --offline, or pass --fresh or another --out`,
      );
    // The online run's metrics log: records land in order even when a caller does not wait.
    const log = new RunMetricsLog();
    const { record } = log;
    const earlier = await loggedSteps(out);

    const ctx = gpuContext ?? (await platform.acquireGpu());
    const gpu = new Gpu(ctx);
    const target = await loadTarget(gpu, weights, 'f32', progressFor(platform, print));
    try {
      checkManifestTarget(manifest, target, manifestPath);
      await log.open(out);
      await record(configRecord(config, targetDir));
      const auxLayerIds = manifest.auxLayerIds;
      print(
        `features ${features.root}: ${manifest.samples} samples (${manifest.tokens} tokens) from ${manifest.promptSource}; target ${targetDir}: ${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}; ${auxLayersLine(auxLayerIds, tc.numLayers)}`,
      );

      // 2. Vocabulary mapping.
      const { mapping, coverage, distinct } = offlineVocab(manifest, draftVocabSize);
      print(
        `phase vocab: draft vocab ${draftVocabSize} of ${tc.vocabSize}; ${distinct} distinct loss-masked tokens; coverage ${(coverage * 100).toFixed(2)}% of loss-masked tokens`,
      );
      await record(
        dataRecord({
          trainSequences: manifest.samples,
          trainTokens: manifest.tokens,
          heldOut: manifest.heldOutPrompts.length,
          draftVocabSize,
          distinctTokens: distinct,
          vocabCoverage: coverage,
        }),
      );

      // 3. Untrained draft, evaluated before training.
      const draftConfig = draftConfigFor(target, draftVocabSize);
      const initial = initialEagle3Weights(draftConfig, 'shared', new Rng(config.seed + 1));
      const held = manifest.heldOutPrompts;
      const trainEval = manifest.trainPrompts.slice(0, config.evalTrainPrompts);
      const now = () => performance.now();
      await timeTargetOnly(target, [held[0]], 2, now); // warm-up: pipeline compilation
      const base = await timeTargetOnly(target, held, config.evalNewTokens, now);
      const baseTrain = trainEval.length > 0 ? await timeTargetOnly(target, trainEval, config.evalNewTokens, now) : undefined;
      const evaluateOn = (draft: Eagle3DraftCheckpoint, prompts: number[][], reference: number[][]) =>
        evaluateDraft(target, gpu, draft, prompts, {
          maxNewTokens: config.evalNewTokens,
          numDraftTokens: config.numDraftTokens,
          auxLayerIds,
          reference,
          now,
        });
      const untrained: Eagle3DraftCheckpoint = { config: draftConfig, weights: initial, d2t: mapping.d2t, auxLayerIds };
      const before = {
        heldOut: await evaluateOn(untrained, held, base.tokens),
        train: baseTrain ? await evaluateOn(untrained, trainEval, baseTrain.tokens) : undefined,
      };
      print(
        `phase eval-before: acceptance length ${before.heldOut.acceptanceLength.toFixed(3)} held-out${before.train ? `, ${before.train.acceptanceLength.toFixed(3)} on training prompts` : ''}`,
      );
      await record(evalBeforeRecord(before));

      // 4. Offline training, checkpointed in <out>/checkpoints (resumed from there with --resume).
      print(
        `phase train: ${config.epochs} epochs × ${manifest.samples} shards, ${offlineSteps(config.epochs * manifest.samples, config.batchSize)}, TTT ${config.tttLength}, lr ${config.lr} cosine; target head: the target's lm_head`,
      );
      const trainStart = performance.now();
      let tokens = 0;
      let startStep = 0;
      const avgTokens = manifest.tokens / manifest.samples;
      const result = await trainEagle3Offline({
        gpu,
        target,
        files: features,
        manifest,
        settings: config,
        draftConfig,
        initialWeights: initial,
        mapping,
        checkpoints: platform.files(`${config.out}/${RUN_CHECKPOINTS_DIR}`),
        runId: TRAIN_RUN_ID,
        onResume: (step) => {
          startStep = step;
          print(
            `phase resume: step ${step} from ${out.root}/${RUN_CHECKPOINTS_DIR}; ${Math.ceil((manifest.samples * config.epochs) / config.batchSize) - step} steps left`,
          );
          void record(resumeEventRecord(step));
        },
        // Written and fsynced before the step's checkpoint, with the fields of the online record.
        onStep: (st) => {
          tokens += st.samples * avgTokens;
          const elapsed = (performance.now() - trainStart) / 1000;
          if (st.globalStep % config.logEvery === 0 || st.globalStep === st.totalSteps || st.globalStep === startStep + 1) {
            print(
              `phase train  step ${st.globalStep}/${st.totalSteps}  ${Math.round(tokens / elapsed)} tokens/s  loss ${st.loss.toFixed(4)}  acc_0 ${st.accs[0].toFixed(3)}  lr ${st.lr.toExponential(2)}`,
            );
          }
          const replay = st.globalStep <= earlier.lastStep;
          return record(
            trainRecord(
              {
                step: st.globalStep,
                totalSteps: st.totalSteps,
                loss: st.loss,
                plosses: st.plosses,
                accs: st.accs,
                simulatedAcceptance: st.simulatedAcceptance,
                lr: st.lr,
                gradNorm: st.gradNorm,
                samples: st.samples,
                tokensPerSecond: tokens / elapsed,
                checkpointed: st.checkpointed,
                elapsedSeconds: (performance.now() - started) / 1000,
              },
              { replay },
            ),
            { sync: true },
          );
        },
      });
      const trainSeconds = (performance.now() - trainStart) / 1000;
      // A resumed run that has no step left keeps the loss its last step logged.
      const finalLoss = result.losses.at(-1) ?? earlier.lastLoss;
      print(
        `phase train: ${result.steps} steps (${result.losses.length} in this process) in ${trainSeconds.toFixed(1)}s, final loss ${finalLoss.toFixed(4)}`,
      );

      // 5. Export of the final checkpoint, as `speclab export <out>` writes it.
      const { serving } = await exportRunCheckpoint(out, '', out, 'draft');
      const exported = await readEagle3Export(out, 'draft', 'none');
      const exportDir = `${out.root}/draft`;
      print(`phase export: SGLang draft written to ${exportDir}`);
      if (serving.warning) print(`warning: the export is not servable as trained: ${serving.warning}`);

      // 6. The trained (exported) draft, evaluated after training.
      const trained: Eagle3DraftCheckpoint = {
        config: exported.config,
        weights: exported.values,
        d2t: exported.vocab.d2t,
        auxLayerIds,
      };
      const after = {
        heldOut: await evaluateOn(trained, held, base.tokens),
        train: baseTrain ? await evaluateOn(trained, trainEval, baseTrain.tokens) : undefined,
      };
      await record(evalAfterRecord(after));

      const summary: OfflineTrainSummary = {
        features: features.root,
        target: targetDir,
        samples: manifest.samples,
        steps: result.steps,
        trainSeconds,
        finalLoss,
        vocabCoverage: coverage,
        before,
        after,
        exportDir,
        exportServable: serving.servable,
        ...(serving.warning ? { exportWarning: serving.warning } : {}),
      };
      await out.writeAtomic('summary.json', new TextEncoder().encode(`${JSON.stringify(summary, null, 2)}\n`));
      await record(offlineSummaryRecord(summary));
      print('summary:');
      print(
        `  acceptance length (held-out):        ${before.heldOut.acceptanceLength.toFixed(3)} → ${after.heldOut.acceptanceLength.toFixed(3)}  (${config.numDraftTokens} draft tokens per verification, bonus included)`,
      );
      if (before.train && after.train)
        print(
          `  acceptance length (training prompts): ${before.train.acceptanceLength.toFixed(3)} → ${after.train.acceptanceLength.toFixed(3)}`,
        );
      const lossless = [before.heldOut, after.heldOut, before.train, after.train].every((e) => e === undefined || e.lossless);
      print(
        `  lossless: ${lossless ? 'yes (speculative tokens equal target greedy tokens)' : 'NO — speculative output differs from target greedy decoding'}`,
      );
      print(`  ${result.steps} steps, final loss ${finalLoss.toFixed(4)}, total ${((performance.now() - started) / 1000).toFixed(1)}s`);
      print(`  export: ${exportDir}   metrics: ${out.root}/metrics.jsonl   checkpoints: ${out.root}/${RUN_CHECKPOINTS_DIR}`);
      return summary;
    } finally {
      target.destroy();
      gpu.destroy();
      if (!gpuContext) ctx.destroy();
      await log.close();
    }
  } finally {
    await lock.release();
  }
}
