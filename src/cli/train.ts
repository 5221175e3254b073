/**
 * `speclab train`: train an EAGLE3 draft for a target model online, through the runtime planes, and
 * show by speculative decoding that the trained draft beats the untrained one.
 *
 *   speclab train [--target <hf dir>] [--prompts-file <json>] [--out <dir>] [--config <json file>]
 *                 [--resume | --fresh] [options]        (options: train-options.ts, `speclab train --help`)
 *
 * Pipeline (the training itself is an Eagle3TrainingSession, src/training/session/eagle3-session.ts):
 *   1. data      prompts (a JSON file of token-id arrays; the lab corpus when the lab target is the
 *                target; else seeded random token prompts) continued greedily by the target itself:
 *                the draft learns the target's own outputs. Loss mask = the generated tokens.
 *   2. vocab     draft vocabulary from token counts over loss-masked positions (d2t/t2d), coverage.
 *   3. before    acceptance length of the untrained draft on the held-out prompts (and training ones).
 *   4. train     rounds: the DataFlowController ingests a round of sequences, rollout workers capture
 *                target features into the LocalFeatureStore (spilled to <out>/spill) and commit refs,
 *                the trainer leases them through the FeatureDataLoader and steps AdamW (cosine +
 *                warmup); checkpoints in <out>/checkpoints, durable acks in the <out>/metadata journal.
 *   5. export    SGLang directory (config.json + bf16 model.safetensors with d2t/t2d) in <out>/draft.
 *   6. after     the exported draft's acceptance length and tokens/s with and without it (lossless).
 * A killed run continues with `--resume` from its last checkpoint (same stream, same losses); an
 * existing run in --out is never overwritten silently (`--fresh` deletes it). Ctrl-C while training
 * finishes the step, writes a checkpoint and exits 130 (runTrainCli).
 * Progress lines go to the terminal; <out>/metrics.jsonl gets one JSON record per step and phase.
 */
import { z } from 'zod';
import { FileMetadataStore } from '../control/file-metadata-store.ts';
import { loadHfCheckpoint, matrixF32 } from '../formats/hf-checkpoint.ts';
import type { GpuContext } from '../gpu/context.ts';
import { Gpu } from '../gpu/gpu.ts';
import type { Eagle3DraftCheckpoint } from '../inference/eagle3-drafter.ts';
import { evaluateDraft, type SpecEval } from '../inference/evaluate-draft.ts';
import { timeTargetOnly, type SpeedReport } from '../inference/speculative.ts';
import { readEagle3Export, withoutEmbedding } from '../model/eagle3/export.ts';
import { exportRunCheckpoint } from '../training/checkpoints/checkpoint-export.ts';
import { TargetModel } from '../model/target/model.ts';
import type { AppendLog } from '../ports/storage.ts';
import type { Platform } from './platform.ts';
import { formatDuration } from '../util/format.ts';
import { adapterLimits, checkTrainMemory, gpuMemoryBudgetSchema, trainMemoryPlan } from '../training/run/train-memory.ts';
import { loggedSteps } from '../training/run/train-log.ts';
import { Eagle3TrainingSession, sessionCapture, sessionSettingsSchema } from '../training/session/eagle3-session.ts';
import { clusterRuntime, openClusterTrainer } from '../training/run/cluster-run.ts';
import { NonFiniteGuard } from '../training/loop/nonfinite-guard.ts';
import { readJson, resolveAuxLayers, resolveDraftVocabSize, resolveTargetDir, usesLabCorpus } from '../training/run/run-plan.ts';
import { openRunFolder, resumeCommand, withStoredSettings } from './run-settings.ts';
import { offlineTrainCommand } from '../training/run/train-offline.ts';
import { trainingData } from '../training/run/train-data.ts';
import { continueWithTarget } from '../training/sequences/eagle3-data.ts';
import { reduceTrainMetrics, specForgeMetrics } from '../training/evaluation/metric-keys.ts';
import { commandHelp, settingsOrExit, UsageError } from './options.ts';
import { checkClusterSettings, normalizeConfigKeys, parseTrainFlags, TRAIN_DEF, trainArgs, type TrainFlags } from './train-options.ts';

const posInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();

/**
 * Every setting of a run; JSON keys (camelCase; snake_case and SpecForge names are mapped by
 * train-options.ts) and `--kebab-case` flags as named here. The ranges here are the ones help
 * shows (train-options.ts lists them; test/cli/cli.test.ts checks they agree).
 */
export const trainConfigSchema = sessionSettingsSchema
  .extend({
    target: z.string().min(1).optional(),
    promptsFile: z.string().min(1).optional(),
    data: z
      .union([
        z
          .string()
          .min(1)
          .transform((file) => [file]),
        z.array(z.string().min(1)).min(1),
      ])
      .optional(),
    evalData: z.string().min(1).optional(),
    chatTemplate: z.string().min(1).optional(),
    maxLength: posInt.max(1_048_576).default(2048),
    regenerate: z.boolean().default(false),
    evalEvery: nonNegInt.max(1_000_000).default(50),
    temperature: z.number().min(0).max(100).default(0),
    offline: z.string().min(1).optional(),
    out: z.string().min(1).default('runs/train'),
    resume: z.boolean().default(false),
    fresh: z.boolean().default(false),
    trainPrompts: posInt.max(10_000_000).default(32),
    evalPrompts: posInt.max(100_000).default(4),
    promptLength: posInt.max(1_048_576).default(8),
    numDraftTokens: posInt.max(64).default(3),
    maxNewTokens: posInt.max(1_048_576).default(32),
    evalTrainPrompts: nonNegInt.max(100_000).default(4),
    logEvery: posInt.max(1_000_000).default(10),
    maxNonfiniteSteps: nonNegInt.max(1_000_000).default(3),
    gpuMemoryBudget: gpuMemoryBudgetSchema,
    // Storage of the frozen target's matrices; shapes the captured features, so a resume keeps it.
    targetPrecision: z.enum(['f32', 'f16']).default('f32'),
    cluster: z.string().min(1).optional(), // the trainer of a cluster run (cluster-options.ts, cluster-run.ts)
    run: z.string().min(1).optional(),
    promptLeaseMs: z.number().int().min(100).max(86_400_000).optional(),
  })
  .strict();

export type TrainConfig = z.infer<typeof trainConfigSchema>;

export { parseTrainFlags, TRAIN_DEF } from './train-options.ts';

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const FLAG_OF = new Map(TRAIN_DEF.options.map((o) => [o.key, o.flag]));

/** The help of `speclab train`: every setting with its type, range and default. */
export function trainUsage(): string {
  return commandHelp(TRAIN_DEF);
}

/** Validate settings (config file first, flags over it); errors name the field and its flag. */
export function validateTrainConfig(input: Record<string, unknown>, source = 'train config'): TrainConfig {
  const parsed = trainConfigSchema.safeParse(input);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => {
      const field = issue.path.length > 0 ? String(issue.path[0]) : '';
      const keys = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : field;
      const flag = field && FLAG_OF.has(field) ? ` (--${kebab(field)})` : '';
      return `${keys || '(root)'}${flag}: ${issue.message}`;
    });
    throw new UsageError(`${source}: ${issues.join('; ')}`);
  }
  return parsed.data;
}

export async function loadTrainConfig(platform: Platform, args: readonly string[]): Promise<TrainConfig> {
  return configFromFlags(platform, parseTrainFlags(args));
}

/** The settings: the `--config` file's (any accepted key form), flags over them, validated. */
export async function configFromFlags(platform: Platform, flags: TrainFlags): Promise<TrainConfig> {
  const { configFile, values } = flags;
  let base: Record<string, unknown> = {};
  if (configFile) {
    const json = await readJson(platform, configFile);
    if (json === null || typeof json !== 'object' || Array.isArray(json))
      throw new UsageError(`${configFile}: expected a JSON object of settings`);
    const notices: string[] = [];
    base = normalizeConfigKeys(json as Record<string, unknown>, configFile, notices);
    for (const notice of notices) console.error(notice);
  }
  const source = configFile ? `${configFile} + flags` : 'train flags';
  return validateTrainConfig(checkClusterSettings({ ...base, ...values }, source), source);
}

/** Thrown by runTraining when an interrupt stopped it at a step boundary (checkpoint written). */
export class TrainInterrupted extends Error {
  constructor(readonly step: number) {
    super(`interrupted at step ${step}`);
  }
}

/** Set by the interrupt handler; runTraining stops at the next step boundary when `requested`. */
export interface StopRequest {
  requested: boolean;
  /** True while optimizer steps run (an interrupt elsewhere exits at once: nothing to finish). */
  training: boolean;
}

export interface TrainSummary {
  target: string;
  trainSequences: number;
  steps: number;
  trainSeconds: number;
  finalLoss: number;
  vocabCoverage: number;
  before: { heldOut: SpecEval; train?: SpecEval };
  after: { heldOut: SpecEval; train?: SpecEval };
  targetOnlyTokensPerSecond: number;
  exportDir: string;
}

/** Runs `speclab train` from argv; `gpuContext` (tests) replaces acquiring a device from the platform. */
export async function trainCommand(
  platform: Platform,
  args: readonly string[],
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  const p = settingsOrExit(TRAIN_DEF, args, trainArgs, print);
  return 'exit' in p ? p.exit : runTrainCli(platform, p.settings, print, gpuContext);
}

/**
 * `speclab train` with parsed flags. The first SIGINT/SIGTERM while optimizer steps run stops at
 * the next step boundary: the step finishes, a checkpoint is written (its samples durably acked),
 * and the exit code is 130 with the command that resumes. An interrupt outside the steps, or a
 * second one, exits at once (130); what is on disk then is what a kill leaves, which resume handles.
 */
export async function runTrainCli(
  platform: Platform,
  flags: TrainFlags,
  print: (line: string) => void,
  gpuContext?: GpuContext,
): Promise<number> {
  // --resume takes the run's stored settings; a given one that contradicts them is refused (run-settings.ts).
  const config = clusterRuntime(
    platform,
    await withStoredSettings(platform, flags, await configFromFlags(platform, flags), validateTrainConfig, print),
  );
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
    return summary.after.heldOut.lossless && (summary.after.train?.lossless ?? true) && summary.before.heldOut.lossless ? 0 : 1;
  } catch (err) {
    if (!(err instanceof TrainInterrupted)) throw err;
    print(`interrupted at step ${err.step}; resume with: ${resumeCommand(config.out)}`);
    return 130;
  } finally {
    release?.();
  }
}

export async function runTraining(
  platform: Platform,
  config: TrainConfig,
  print: (line: string) => void,
  gpuContext?: GpuContext,
  stop?: StopRequest,
): Promise<TrainSummary> {
  const started = performance.now();
  const targetDir = await resolveTargetDir(platform, config.target);
  const useLabCorpus = usesLabCorpus(targetDir, config.promptsFile);
  // Everything that can be refused without training is checked before the run folder is touched:
  // a refused start leaves --out as it was.
  const checkpoint = await loadHfCheckpoint(platform.files(targetDir), '', { weightPrecision: config.targetPrecision });
  const tc = checkpoint.config;
  const auxLayerIds = resolveAuxLayers(config.auxLayers, tc.numLayers);
  const draftVocabSize = resolveDraftVocabSize(config.draftVocabSize, tc.vocabSize);
  const data = await trainingData(platform, config, targetDir, tc, useLabCorpus);
  const heldPrompts = data.heldPrompts;

  const out = platform.files(config.out);
  // The device (for its limits), then the memory plan: a run that cannot fit is refused before any
  // GPU buffer exists and before the run folder is touched (train-memory.ts).
  const ctx = gpuContext ?? (await platform.acquireGpu());
  let run: Awaited<ReturnType<typeof openRunFolder>>;
  try {
    checkTrainMemory(trainMemoryPlan(config, tc, draftVocabSize, data, adapterLimits(ctx.limits)), print);
    // Locked and prepared before anything in the folder is read or deleted; released however the run
    // ends. A start that fails before its first step takes back what it created (run-settings.ts).
    run = await openRunFolder(platform, config);
  } catch (err) {
    if (!gpuContext) ctx.destroy();
    throw err;
  }
  try {
    let log: AppendLog | undefined;
    // Appends are chained so records land in order even when a step callback does not wait.
    let logged: Promise<void> = Promise.resolve();
    const record = (entry: Record<string, unknown>, options?: { sync?: boolean }): Promise<void> => {
      const line = new TextEncoder().encode(`${JSON.stringify({ time: new Date().toISOString(), ...entry })}\n`);
      logged = logged.then(() => log?.append(line, options));
      return logged;
    };
    const earlier = await loggedSteps(out);
    const nonFinite = new NonFiniteGuard(config.maxNonfiniteSteps);
    const gpu = new Gpu(ctx);
    const target = TargetModel.create(gpu, checkpoint);
    // A cluster run's ledger is in Redis (cluster-run.ts); once there, a failure leaves --out for --resume.
    const role =
      config.cluster && config.run
        ? await openClusterTrainer(
            platform,
            { ...config, cluster: config.cluster, run: config.run },
            gpu,
            sessionCapture(tc, auxLayerIds, config),
            tc,
            print,
          )
        : undefined;
    if (role) run.keep();
    const metadata = role?.stores.metadata ?? (await FileMetadataStore.open(out, { dir: 'metadata' }));
    let session: Eagle3TrainingSession | undefined;
    try {
      log = await out.openAppendLog('metrics.jsonl');
      await record({ phase: 'config', ...config, target: targetDir });
      print(
        `target ${targetDir}: ${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}; aux layers [${auxLayerIds.join(', ')}]`,
      );

      // 1. Data (read above): a chat dataset's sequences, or prompts the target continues (inside the session).
      print(`phase data: ${data.lines[0]}`);
      for (const line of data.lines.slice(1)) print(`  ${line}`);
      const now = () => performance.now();
      session = await Eagle3TrainingSession.open({
        gpu,
        target,
        embedTokens: matrixF32(checkpoint.weights.embedTokens),
        trainPrompts: data.trainPrompts,
        regenerate: data.regenerate,
        continuation: data.continuation,
        trainSequences: data.trainSequences,
        // Held-out conversations with their own replies, else the target's continuations of the held-out prompts.
        evaluation:
          config.evalEvery > 0
            ? {
                every: config.evalEvery,
                sequences:
                  data.heldSequences ?? (await continueWithTarget(target, heldPrompts, config.responseLength, 16, data.continuation)),
              }
            : undefined,
        settings: { ...config, auxLayers: auxLayerIds, draftVocabSize },
        storage: { checkpoints: platform.files(`${config.out}/checkpoints`), metadata, spill: platform.files(`${config.out}/spill`) },
        runId: config.run ?? 'speclab-train', // sample ids are `<runId>:<task>`: a cluster run's are its rollout processes'
        cluster: role?.cluster,
        now,
        onEvent: (e) => {
          if (e.kind === 'phase' && e.phase === 'resume') print(`phase resume: ${e.detail}`);
          void record({ event: e.kind, ...e });
        },
        // Written and fsynced before the step's durable ack; a step logged by an earlier process
        // that a resume trains again is marked as a replay.
        onStep: (st) => {
          // A non-finite gradient norm made the GPU skip this update; past the limit the run
          // stops before this step is acked, naming it.
          const skipped = nonFinite.observe(st.globalStep, st.loss, st.gradNorm);
          if (skipped) print(skipped);
          const replay = st.globalStep <= earlier.lastStep;
          if (st.eval) {
            print(
              `eval   step ${st.globalStep}: loss ${st.eval.loss.toFixed(4)}  acc_0 ${st.eval.accs[0].toFixed(3)}  simulated acceptance length ${st.eval.simulatedAcceptance.toFixed(3)} (${st.eval.lossTokens} held-out tokens)`,
            );
            void record({ phase: 'eval', step: st.globalStep, ...specForgeMetrics('eval', st.eval), ...(replay ? { replay: true } : {}) });
          }
          return record(
            {
              phase: 'train',
              step: st.globalStep,
              totalSteps: st.totalSteps,
              loss: st.loss,
              plosses: st.plosses,
              accs: st.accs,
              simulatedAcceptance: st.simulatedAcceptance,
              lr: st.lr,
              gradNorm: st.gradNorm,
              samples: st.samples,
              tokensPerSecond: st.tokensPerSecond,
              checkpointed: st.checkpointed,
              elapsedSeconds: (performance.now() - started) / 1000,
              ...specForgeMetrics('train', { ...reduceTrainMetrics(st.metrics, config.tttLength), lr: st.lr, gradNorm: st.gradNorm }),
              ...(replay ? { replay: true } : {}),
            },
            { sync: true },
          );
        },
      });
      const s = session;
      const trainTokens = s.sequences.reduce((a, q) => a + q.inputIds.length, 0);

      // 2. Vocabulary mapping (built by the session from the loss-masked tokens).
      print(
        `phase vocab: draft vocab ${draftVocabSize} of ${tc.vocabSize}; ${s.distinctTokens} distinct loss-masked tokens; coverage ${(s.coverage * 100).toFixed(2)}% of loss-masked tokens`,
      );
      await record({
        phase: 'data',
        trainSequences: s.sequences.length,
        trainTokens,
        heldOut: heldPrompts.length,
        draftVocabSize,
        distinctTokens: s.distinctTokens,
        vocabCoverage: s.coverage,
      });

      // 3. Untrained draft, evaluated before training.
      const trainEval = data.evalTrainPrompts.slice(0, config.evalTrainPrompts);
      await timeTargetOnly(target, [heldPrompts[0]], 2, now); // warm-up: pipeline compilation
      const base = await timeTargetOnly(target, heldPrompts, config.maxNewTokens, now);
      const baseTrain = trainEval.length > 0 ? await timeTargetOnly(target, trainEval, config.maxNewTokens, now) : undefined;
      const evaluateOn = (draft: Eagle3DraftCheckpoint, prompts: number[][], reference: number[][]) =>
        evaluateDraft(target, gpu, draft, prompts, {
          maxNewTokens: config.maxNewTokens,
          numDraftTokens: config.numDraftTokens,
          auxLayerIds,
          reference,
          now,
        });
      const untrained = s.initialDraft();
      const before = {
        heldOut: await evaluateOn(untrained, heldPrompts, base.tokens),
        train: baseTrain ? await evaluateOn(untrained, trainEval, baseTrain.tokens) : undefined,
      };
      print(
        `phase eval-before: acceptance length ${before.heldOut.acceptanceLength.toFixed(3)} held-out${before.train ? `, ${before.train.acceptanceLength.toFixed(3)} on training prompts` : ''}`,
      );
      await record({ phase: 'eval-before', ...flatEval(before) });

      // 4. Online training through the runtime planes, one optimizer step at a time.
      const startStep = s.globalStep;
      print(
        `phase train: ${config.epochs} epochs × ${s.sequences.length} sequences (${trainTokens} tokens), ${s.totalSteps} steps of batch ${config.batchSize}, TTT ${config.tttLength}, lr ${config.lr} cosine, ${role ? `rollout by the speclab rollout processes of run ${config.run}` : `${config.rolloutWorkers} rollout worker(s)`}${startStep > 0 ? `; resuming after step ${startStep}` : ''}`,
      );
      const trainStart = performance.now();
      // A resumed run that has no step left keeps the loss its last step logged.
      let lastLoss = earlier.lastLoss;
      if (stop) stop.training = true;
      for (let st = await s.step(); st; st = await s.step()) {
        lastLoss = st.loss;
        const elapsed = (performance.now() - trainStart) / 1000;
        if (st.globalStep % config.logEvery === 0 || st.globalStep === st.totalSteps || st.globalStep === startStep + 1) {
          const eta = (elapsed / (st.globalStep - startStep)) * (st.totalSteps - st.globalStep);
          print(
            `phase train  step ${st.globalStep}/${st.totalSteps}  ${Math.round(st.tokensPerSecond)} tokens/s  loss ${st.loss.toFixed(4)}  acc_0 ${st.accs[0].toFixed(3)}  lr ${st.lr.toExponential(2)}  ETA ${formatDuration(eta)}`,
          );
        }
        if (stop?.requested && st.globalStep < st.totalSteps) {
          await s.flush(); // checkpoint + durable ack of every step so far
          throw new TrainInterrupted(st.globalStep);
        }
      }
      if (stop) stop.training = false;
      const status = (await s.status()).controller;
      const expected = s.sequences.length * config.epochs;
      if (status.durableAcked !== expected) throw new Error(`training acked ${status.durableAcked} of ${expected} samples`);
      await role?.finish(); // the rollout processes exit
      const trainSeconds = (performance.now() - trainStart) / 1000;
      print(
        `phase train: ${s.globalStep} steps (${s.globalStep - startStep} in this process) in ${formatDuration(trainSeconds)}, final loss ${lastLoss.toFixed(4)}; ${status.durableAcked} samples durably acked`,
      );

      // 5. Export.
      // From the run's final checkpoint, by the function `speclab export` uses: the two cannot differ.
      await exportRunCheckpoint(out, '', out, 'draft');
      const exported = await readEagle3Export(out, 'draft', matrixF32(checkpoint.weights.embedTokens));
      const exportDir = `${out.root}/draft`;
      print(`phase export: SGLang draft written to ${exportDir}`);

      // 6. The trained (exported) draft, evaluated after training.
      const trained: Eagle3DraftCheckpoint = {
        config: exported.config,
        weights: withoutEmbedding(exported.values),
        d2t: exported.vocab.d2t,
        auxLayerIds,
      };
      const after = {
        heldOut: await evaluateOn(trained, heldPrompts, base.tokens),
        train: baseTrain ? await evaluateOn(trained, trainEval, baseTrain.tokens) : undefined,
      };
      await record({ phase: 'eval-after', ...flatEval(after) });

      const summary: TrainSummary = {
        target: targetDir,
        trainSequences: s.sequences.length,
        steps: s.globalStep,
        trainSeconds,
        finalLoss: lastLoss,
        vocabCoverage: s.coverage,
        before,
        after,
        targetOnlyTokensPerSecond: base.speed.tokensPerSecond,
        exportDir,
      };
      await out.writeAtomic('summary.json', new TextEncoder().encode(`${JSON.stringify(summary, null, 2)}\n`));
      await record({ phase: 'summary', ...summary });
      const speedup = (e: SpecEval, sp: SpeedReport) => (e.tokensPerSecond / sp.tokensPerSecond).toFixed(2);
      print('summary:');
      print(
        `  acceptance length (held-out):        ${before.heldOut.acceptanceLength.toFixed(3)} → ${after.heldOut.acceptanceLength.toFixed(3)}  (${config.numDraftTokens} draft tokens per verification, bonus included)`,
      );
      if (before.train && after.train)
        print(
          `  acceptance length (training prompts): ${before.train.acceptanceLength.toFixed(3)} → ${after.train.acceptanceLength.toFixed(3)}`,
        );
      print(
        `  decode tokens/s (held-out):          target only ${base.speed.tokensPerSecond.toFixed(2)}; with untrained draft ${before.heldOut.tokensPerSecond.toFixed(2)} (${speedup(before.heldOut, base.speed)}x); with trained draft ${after.heldOut.tokensPerSecond.toFixed(2)} (${speedup(after.heldOut, base.speed)}x)`,
      );
      const lossless = [before.heldOut, after.heldOut, before.train, after.train].every((e) => e === undefined || e.lossless);
      print(
        `  lossless: ${lossless ? 'yes (speculative tokens equal target greedy tokens)' : 'NO — speculative output differs from target greedy decoding'}`,
      );
      print(
        `  vocab coverage ${(s.coverage * 100).toFixed(2)}%, ${s.globalStep} steps, final loss ${lastLoss.toFixed(4)}, total ${formatDuration((performance.now() - started) / 1000)}`,
      );
      print(`  export: ${exportDir}   metrics: ${out.root}/metrics.jsonl   checkpoints: ${out.root}/checkpoints`);
      return summary;
    } finally {
      session?.destroy();
      target.destroy();
      gpu.destroy();
      if (!gpuContext) ctx.destroy();
      await logged.catch(() => undefined);
      await log?.close();
      await metadata.close();
      await role?.close();
    }
  } catch (err) {
    if (!gpuContext && !ctx.isDestroyed) ctx.destroy();
    await run.abandon();
    throw err;
  } finally {
    await run.release();
  }
}

function flatEval(e: { heldOut: SpecEval; train?: SpecEval }): Record<string, unknown> {
  return { heldOut: e.heldOut, ...(e.train ? { train: e.train } : {}) };
}
