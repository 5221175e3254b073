/**
 * The run's training: every remaining optimizer step of the session, one at a time, with a progress
 * line every `--log-every` steps. An interrupt (StopRequest) stops it at the next step boundary with
 * a checkpoint and the durable ack of every step so far. At the end every sample must be durably
 * acked, and a cluster run tells its rollout processes to exit.
 */
import { formatDuration } from '../../util/format.ts';
import type { Eagle3TrainingSession } from '../session/eagle3-session.ts';
import { plannedStepSamples } from '../session/session-parts.ts';
import type { ClusterTrainer } from './cluster-run.ts';
import type { TrainConfig } from './run-config.ts';

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

export interface TrainedSteps {
  readonly trainSeconds: number;
  /** The last step's loss (a resumed run with no step left: the loss its last step logged). */
  readonly lastLoss: number;
}

const samples = (n: number) => `${n} sample${n === 1 ? '' : 's'}`;

/**
 * What the steps of a plan hold (`stepSamples`: the samples of each step): `48 steps of 4 samples`,
 * or where some step holds fewer than `batchSize`, how many steps hold how many samples and `why`, e.g.
 * `36 steps (32 of 4 samples, 4 of 2 samples: --batch-size 4, and a step never spans two rounds of --round-prompts 18)`.
 */
export function describeSteps(stepSamples: readonly number[], batchSize: number, why: string): string {
  const bySize = new Map<number, number>();
  for (const n of stepSamples) bySize.set(n, (bySize.get(n) ?? 0) + 1);
  const sizes = [...bySize.entries()].sort((a, b) => b[0] - a[0]);
  const steps = `${stepSamples.length} step${stepSamples.length === 1 ? '' : 's'}`;
  if (sizes.length === 0) return steps;
  if (sizes.length === 1 && sizes[0][0] === batchSize) return `${steps} of ${samples(batchSize)}`;
  const reason = `--batch-size ${batchSize}, and ${why}`;
  if (sizes.length === 1) return `${steps} of ${samples(sizes[0][0])} (${reason})`;
  return `${steps} (${sizes.map(([size, count]) => `${count} of ${samples(size)}`).join(', ')}: ${reason})`;
}

/** The online plan's steps (the session's plannedStepSamples), described. */
const onlineSteps = (streamSamples: number, config: Pick<TrainConfig, 'batchSize' | 'roundPrompts'>) =>
  describeSteps(
    plannedStepSamples(streamSamples, config),
    config.batchSize,
    `a step never spans two rounds of --round-prompts ${config.roundPrompts}`,
  );

export async function trainRemainingSteps(
  s: Eagle3TrainingSession,
  config: TrainConfig,
  run: { trainTokens: number; role: ClusterTrainer | undefined; earlierLoss: number; stop: StopRequest | undefined },
  print: (line: string) => void,
): Promise<TrainedSteps> {
  const { role, stop } = run;
  const startStep = s.globalStep;
  print(
    `phase train: ${config.epochs} epochs × ${s.sequences.length} sequences (${run.trainTokens} tokens), ${onlineSteps(s.sequences.length * config.epochs, config)}, TTT ${config.tttLength}, lr ${config.lr} cosine, ${role ? `rollout by the speclab rollout processes of run ${config.run}` : `${config.rolloutWorkers} rollout worker(s)`}${startStep > 0 ? `; resuming after step ${startStep}` : ''}`,
  );
  const trainStart = performance.now();
  // A resumed run that has no step left keeps the loss its last step logged.
  let lastLoss = run.earlierLoss;
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
  return { trainSeconds, lastLoss };
}
