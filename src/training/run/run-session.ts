/**
 * Opening the run's Eagle3TrainingSession (src/training/session/eagle3-session.ts) on the data read
 * by ./run-inputs.ts: its storage in the run folder (or a cluster's Redis), the held-out evaluation,
 * and the callbacks that print and log what it reports. Each step's record is written and fsynced
 * before the step's durable ack; a step logged by an earlier process that a resume trains again is
 * marked as a replay.
 */
import { evalRecord, sessionEventRecord, trainRecord } from '../../contracts/metrics-entries.ts';
import type { MetadataStore } from '../../control/metadata-store.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { TargetModel } from '../../model/target/model.ts';
import type { DraftTargetTables } from '../../model/target/target-tables.ts';
import type { ProgressDisplay } from '../../ports/progress.ts';
import { reduceTrainMetrics, specForgeMetrics } from '../evaluation/metric-keys.ts';
import type { NonFiniteGuard } from '../loop/nonfinite-guard.ts';
import { continueWithTarget } from '../sequences/eagle3-data.ts';
import { Eagle3TrainingSession } from '../session/eagle3-session.ts';
import type { ClusterTrainer } from './cluster-run.ts';
import type { RunPlatform } from './platform.ts';
import type { TrainConfig } from './run-config.ts';
import type { RunInputs } from './run-inputs.ts';
import type { RecordFn } from './run-log.ts';

export interface RunSessionContext {
  readonly platform: RunPlatform;
  readonly config: TrainConfig;
  readonly inputs: RunInputs;
  readonly gpu: Gpu;
  /** The target, or only its tables for a cluster trainer that neither generates nor evaluates (target-load.ts). */
  readonly target: TargetModel | DraftTargetTables;
  readonly metadata: MetadataStore;
  readonly role: ClusterTrainer | undefined;
  readonly print: (line: string) => void;
  readonly record: RecordFn;
  readonly nonFinite: NonFiniteGuard;
  /** The last train step an earlier process of this run logged (./train-log.ts). */
  readonly earlierStep: number;
  /** When the run started (performance.now()), for each step's elapsedSeconds. */
  readonly started: number;
  readonly now: () => number;
  readonly progress: ProgressDisplay;
}

export async function openRunSession(c: RunSessionContext): Promise<Eagle3TrainingSession> {
  const { platform, config, inputs, target, print, record, nonFinite, started } = c;
  const { data, auxLayerIds, draftVocabSize } = inputs;
  return Eagle3TrainingSession.open({
    gpu: c.gpu,
    target,
    progress: c.progress,
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
              data.heldSequences ??
              (await continueWithTarget(modelOf(target), data.heldPrompts, config.responseLength, 16, data.continuation)),
          }
        : undefined,
    settings: { ...config, auxLayers: auxLayerIds, draftVocabSize },
    storage: {
      checkpoints: platform.files(`${config.out}/checkpoints`),
      metadata: c.metadata,
      spill: platform.files(`${config.out}/spill`),
    },
    runId: config.run ?? 'speclab-train', // sample ids are `<runId>:<task>`: a cluster run's are its rollout processes'
    cluster: c.role?.cluster,
    now: c.now,
    onEvent: (e) => {
      if (e.kind === 'phase' && e.phase === 'resume') print(`phase resume: ${e.detail}`);
      void record(sessionEventRecord(e));
    },
    // Written and fsynced before the step's durable ack; a step logged by an earlier process
    // that a resume trains again is marked as a replay.
    onStep: (st) => {
      // A non-finite gradient norm made the GPU skip this update; past the limit the run
      // stops before this step is acked, naming it.
      const skipped = nonFinite.observe(st.globalStep, st.loss, st.gradNorm);
      if (skipped) print(skipped);
      const replay = st.globalStep <= c.earlierStep;
      if (st.eval) {
        print(
          `eval   step ${st.globalStep}: loss ${st.eval.loss.toFixed(4)}  acc_0 ${st.eval.accs[0].toFixed(3)}  simulated acceptance length ${st.eval.simulatedAcceptance.toFixed(3)} (${st.eval.lossTokens} held-out tokens)`,
        );
        void record(evalRecord(st.globalStep, specForgeMetrics('eval', st.eval), replay));
      }
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
            tokensPerSecond: st.tokensPerSecond,
            checkpointed: st.checkpointed,
            elapsedSeconds: (performance.now() - started) / 1000,
          },
          {
            specForge: specForgeMetrics('train', { ...reduceTrainMetrics(st.metrics, config.tttLength), lr: st.lr, gradNorm: st.gradNorm }),
            replay,
          },
        ),
        { sync: true },
      );
    },
  });
}

/** The target model where the run writes with it (runNeedsTargetModel in ./target-load.ts loaded it then). */
function modelOf(target: TargetModel | DraftTargetTables): TargetModel {
  if (!(target instanceof TargetModel))
    throw new Error('run session: the held-out replies are written by the target, and only its tables were loaded');
  return target;
}
