/**
 * One start of an EAGLE3 training run (`speclab train`), in its steps:
 *   1. inputs    the target, aux layers, draft vocabulary and training data (./run-inputs.ts: a chat
 *                dataset with its own or `--regenerate`d replies, a prompts file, the lab corpus, or
 *                seeded random prompts the target continues), all checked before anything else;
 *   2. memory    the GPU memory plan, printed and checked against the adapter (./train-memory.ts);
 *   3. folder    `--out` locked and prepared, its settings stored (./run-folder.ts);
 *   4. session   the Eagle3TrainingSession opened (./run-session.ts): vocabulary mapping, resume;
 *   5. before    the untrained draft's acceptance length (./run-evaluation.ts);
 *   6. train     every remaining optimizer step (./run-loop.ts);
 *   7. export    the SGLang draft in `<out>/draft`, then the exported draft's acceptance length;
 *   8. summary   summary.json, the summary record and lines (./run-summary.ts).
 * `runTrainingCommand` wraps it as the command does: interrupts, `--offline`, the exit code;
 * `trainWithSettings` first resolves the settings a command gave.
 */
import { FileMetadataStore } from '../../control/file-metadata-store.ts';
import { formatBytes } from '../../util/bytes.ts';
import type { GpuContext } from '../../gpu/context.ts';
import { Gpu } from '../../gpu/gpu.ts';
import { TargetModel } from '../../model/target/model.ts';
import { NonFiniteGuard } from '../loop/nonfinite-guard.ts';
import type { Eagle3TrainingSession } from '../session/eagle3-session.ts';
import { sessionCapture } from '../session/eagle3-session.ts';
import { clusterRuntime, openClusterTrainer } from './cluster-run.ts';
import { progressFor, type RunPlatform } from './platform.ts';
import { loadTarget, loadTargetTables, runNeedsTargetModel } from './target-load.ts';
import { validateTrainConfig, type TrainConfig } from './run-config.ts';
import { draftScorer, exportRunDraft } from './run-evaluation.ts';
import { configRecord, dataRecord, evalAfterRecord, evalBeforeRecord } from '../../contracts/metrics-entries.ts';
import { openRunFolder, resumeCommand, type RunFolder } from './run-folder.ts';
import { readRunInputs, type RunInputs } from './run-inputs.ts';
import { RunMetricsLog } from './run-log.ts';
import { TrainInterrupted, trainRemainingSteps, type StopRequest } from './run-loop.ts';
import { openRunSession } from './run-session.ts';
import { withStoredSettings } from './run-settings.ts';
import { reportSummary, type TrainSummary } from './run-summary.ts';
import { adapterLimits, checkTrainMemory, trainMemoryPlan } from './train-memory.ts';
import { loggedSteps } from './train-log.ts';
import { offlineTrainCommand } from './train-offline.ts';
import { auxLayersLine } from '../sequences/draft-shape.ts';

export { TrainInterrupted, type StopRequest } from './run-loop.ts';
export type { TrainSummary } from './run-summary.ts';

/** The settings a command gave, before validation: the `--config` file's, flags over them, and which keys it gave. */
export interface GivenSettings {
  readonly input: Record<string, unknown>;
  /** What errors name as their source, e.g. `c.json + flags`. */
  readonly source: string;
  readonly keys: ReadonlySet<string>;
}

/**
 * `speclab train` from the settings it gave: validated, on `--resume` the run's stored settings
 * under them (./run-settings.ts refuses a given one that contradicts them), then the run.
 */
export async function trainWithSettings(
  platform: RunPlatform,
  given: GivenSettings,
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const config = validateTrainConfig(given.input, given.source);
  const resolved = clusterRuntime(platform, await withStoredSettings(platform, given.keys, config, validateTrainConfig, print));
  return runTrainingCommand(platform, resolved, print, gpuContext);
}

/**
 * A run with its settings resolved. The first SIGINT/SIGTERM while optimizer steps run stops at
 * the next step boundary: the step finishes, a checkpoint is written (its samples durably acked),
 * and the exit code is 130 with the command that resumes. An interrupt outside the steps, or a
 * second one, exits at once (130); what is on disk then is what a kill leaves, which resume handles.
 * Exit code 0 when speculative decoding stayed lossless, else 1.
 */
export async function runTrainingCommand(
  platform: RunPlatform,
  config: TrainConfig,
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const stop: StopRequest = { requested: false, training: false };
  const release = platform.onInterrupt?.(() => {
    if (stop.requested || !stop.training) {
      console.error('speclab train: interrupted; exiting now');
      void platform.exit(130);
      return;
    }
    stop.requested = true;
    console.error('speclab train: interrupt: stopping after the current step and writing a checkpoint (interrupt again to exit at once)');
  });
  try {
    if (config.offline) return await offlineTrainCommand(platform, { ...config, evalNewTokens: config.maxNewTokens }, print, gpuContext);
    const summary = await runTraining(platform, config, print, gpuContext, stop);
    const { before, after } = summary;
    // Speculative decoding must stay lossless wherever it was measured.
    return [before?.heldOut, before?.train, after?.heldOut, after?.train].every((e) => e?.lossless ?? true) ? 0 : 1;
  } catch (err) {
    if (!(err instanceof TrainInterrupted)) throw err;
    print(`interrupted at step ${err.step}; resume with: ${resumeCommand(config.out)}`);
    return 130;
  } finally {
    release?.();
  }
}

export async function runTraining(
  platform: RunPlatform,
  config: TrainConfig,
  print: (line: string) => void,
  gpuContext?: GpuContext,
  stop?: StopRequest,
): Promise<TrainSummary> {
  const started = performance.now();
  // Everything that can be refused without training is checked before the run folder is touched:
  // a refused start leaves --out as it was.
  const inputs = await readRunInputs(platform, config, print);
  // The device (for its limits), then the memory plan: a run that cannot fit is refused before any
  // GPU buffer exists and before the run folder is touched (train-memory.ts).
  const ctx = gpuContext ?? (await platform.acquireGpu());
  let run: RunFolder;
  let plannedBytes: number;
  let recompute: 'on' | 'off';
  try {
    const plan = trainMemoryPlan(config, inputs.tc, inputs.draftVocabSize, inputs.data, adapterLimits(ctx.limits));
    checkTrainMemory(plan, print);
    plannedBytes = plan.totalBytes;
    recompute = plan.input.recompute ? 'on' : 'off';
    if (recompute === 'on' && config.recompute === 'auto')
      print('activation recompute: on (--recompute auto: the plan fits only with each TTT step recomputed in the backward)');
    // Locked and prepared before anything in the folder is read or deleted; released however the run
    // ends. A start that fails before its first step takes back what it created (run-folder.ts).
    run = await openRunFolder(platform, config);
  } catch (err) {
    if (!gpuContext) ctx.destroy();
    throw err;
  }
  try {
    return await trainInFolder({
      platform,
      config: { ...config, recompute },
      print,
      ctx,
      ownsContext: !gpuContext,
      run,
      inputs,
      started,
      stop,
      plannedBytes,
    });
  } catch (err) {
    if (!gpuContext && !ctx.isDestroyed) ctx.destroy();
    await run.abandon();
    throw err;
  } finally {
    await run.release();
  }
}

interface FolderRun {
  readonly platform: RunPlatform;
  readonly config: TrainConfig;
  readonly print: (line: string) => void;
  readonly ctx: GpuContext;
  /** The context was acquired for this run (not given by a test): the run destroys it. */
  readonly ownsContext: boolean;
  readonly run: RunFolder;
  readonly inputs: RunInputs;
  readonly started: number;
  readonly stop: StopRequest | undefined;
  /** The memory plan's total, printed beside the measured peak at the end. */
  readonly plannedBytes: number;
}

/** The run inside its locked folder: the GPU objects, the log, the cluster role and the session, released however it ends. */
async function trainInFolder(r: FolderRun): Promise<TrainSummary> {
  const { platform, config, print, inputs } = r;
  const out = platform.files(config.out);
  const log = new RunMetricsLog();
  const earlier = await loggedSteps(out);
  const nonFinite = new NonFiniteGuard(config.maxNonfiniteSteps);
  const gpu = new Gpu(r.ctx);
  const progress = progressFor(platform, print);
  // A cluster trainer with nothing to generate or evaluate holds only the target's tables (target-load.ts).
  const target = runNeedsTargetModel(config, inputs.data)
    ? await loadTarget(gpu, inputs.source, config.targetPrecision, progress)
    : await loadTargetTables(gpu, inputs.source, config.targetPrecision, progress);
  // A cluster run's ledger is in Redis (cluster-run.ts); once there, a failure leaves --out for --resume.
  const role =
    config.cluster && config.run
      ? await openClusterTrainer(
          platform,
          { ...config, cluster: config.cluster, run: config.run },
          gpu,
          sessionCapture(inputs.tc, inputs.auxLayerIds, config),
          inputs.tc,
          print,
        )
      : undefined;
  if (role) r.run.keep();
  const metadata = role?.stores.metadata ?? (await FileMetadataStore.open(out, { dir: 'metadata' }));
  let session: Eagle3TrainingSession | undefined;
  try {
    await log.open(out);
    const { record } = log;
    const { targetDir, tc, auxLayerIds, draftVocabSize, data } = inputs;
    await record(configRecord(config, targetDir));
    print(
      `target ${targetDir}: ${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}; ${auxLayersLine(auxLayerIds, tc.numLayers)}`,
    );

    // 1. Data (read above): a chat dataset's sequences, or prompts the target continues (inside the session).
    print(`phase data: ${data.lines[0]}`);
    for (const line of data.lines.slice(1)) print(`  ${line}`);
    const now = () => performance.now();
    session = await openRunSession({
      platform,
      config,
      inputs,
      gpu,
      target,
      metadata,
      role,
      print,
      record,
      nonFinite,
      earlierStep: earlier.lastStep,
      started: r.started,
      now,
      progress,
    });
    const s = session;
    const trainTokens = s.sequences.reduce((a, q) => a + q.inputIds.length, 0);

    // 2. Vocabulary mapping (built by the session from the loss-masked tokens).
    print(
      `phase vocab: draft vocab ${draftVocabSize} of ${tc.vocabSize}; ${s.distinctTokens} distinct loss-masked tokens; coverage ${(s.coverage * 100).toFixed(2)}% of loss-masked tokens`,
    );
    await record(
      dataRecord({
        trainSequences: s.sequences.length,
        trainTokens,
        heldOut: data.heldPrompts.length,
        draftVocabSize,
        distinctTokens: s.distinctTokens,
        vocabCoverage: s.coverage,
      }),
    );

    // 3. Untrained draft, evaluated before training (unless there are no held-out prompts).
    const scorer =
      target instanceof TargetModel && data.heldPrompts.length > 0
        ? await draftScorer(target, gpu, config, data, auxLayerIds, now, progress)
        : undefined;
    const before = await scorer?.evaluate(s.initialDraft(), 'untrained');
    if (before) {
      print(
        `phase eval-before: acceptance length ${before.heldOut.acceptanceLength.toFixed(3)} held-out${before.train ? `, ${before.train.acceptanceLength.toFixed(3)} on training prompts` : ''}`,
      );
      await record(evalBeforeRecord(before));
    } else print('phase eval-before: no held-out prompts (--eval-prompts 0): the run measures no acceptance');

    // 4. Online training through the runtime planes, one optimizer step at a time.
    const trained = await trainRemainingSteps(
      s,
      config,
      { trainTokens, role, earlierLoss: earlier.lastLoss, stop: r.stop, gpu, progress },
      print,
    );

    // 5. Export, from the run's final checkpoint, by the function `speclab export` uses: the two cannot differ.
    const { exportDir, trained: draft, serving } = await exportRunDraft(out, auxLayerIds);
    print(`phase export: SGLang draft written to ${exportDir}`);
    if (serving.warning) print(`warning: the export is not servable as trained: ${serving.warning}`);

    // 6. The trained (exported) draft, evaluated after training.
    const after = await scorer?.evaluate(draft, 'trained');
    if (after) await record(evalAfterRecord(after));

    const summary: TrainSummary = {
      target: targetDir,
      trainSequences: s.sequences.length,
      steps: s.globalStep,
      trainSeconds: trained.trainSeconds,
      finalLoss: trained.lastLoss,
      vocabCoverage: s.coverage,
      before,
      after,
      targetOnlyTokensPerSecond: scorer?.base.speed.tokensPerSecond,
      exportDir,
      exportServable: serving.servable,
      ...(serving.warning ? { exportWarning: serving.warning } : {}),
    };
    const shown = { numDraftTokens: config.numDraftTokens, started: r.started, targetDir };
    await reportSummary(out, summary, scorer?.base.speed, shown, record, print);
    // Every buffer this run's Gpu created, at its peak, against the plan that let it start.
    const peak = gpu.memoryStats().peakBytes;
    print(
      `  GPU memory: peak ${formatBytes(peak)} of the ${formatBytes(r.plannedBytes)} planned (${((100 * peak) / Math.max(r.plannedBytes, 1)).toFixed(0)}%)`,
    );
    return summary;
  } finally {
    session?.destroy();
    target.destroy();
    gpu.destroy();
    if (r.ownsContext) r.ctx.destroy();
    await log.close();
    await metadata.close();
    await role?.close();
  }
}
