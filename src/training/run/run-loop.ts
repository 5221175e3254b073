/**
 * The run's training: every remaining optimizer step of the session, one at a time, with a progress
 * line every `--log-every` steps (tokens/s over the steps since the previous line), a bar on a
 * terminal, and the first step's kernel compilation shown as it happens. An interrupt (StopRequest) stops it at the next step boundary with
 * a checkpoint and the durable ack of every step so far. At the end every sample must be durably
 * acked, and a cluster run tells its rollout processes to exit.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { ProgressDisplay, ProgressReporter } from '../../ports/progress.ts';
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

/** The longest a run goes without a training line (slow steps print one each, past this). */
const LINE_EVERY_MS = 30_000;

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

/** What the loop is given of the run besides the session and its settings. */
export interface RunLoopContext {
  readonly trainTokens: number;
  readonly role: ClusterTrainer | undefined;
  readonly earlierLoss: number;
  readonly stop: StopRequest | undefined;
  /** The run's Gpu: its pipeline cache reports the kernels the first step compiles. */
  readonly gpu: Gpu;
  readonly progress: ProgressDisplay;
}

export async function trainRemainingSteps(
  s: Eagle3TrainingSession,
  config: TrainConfig,
  run: RunLoopContext,
  print: (line: string) => void,
): Promise<TrainedSteps> {
  const { role, stop, progress } = run;
  const startStep = s.globalStep;
  print(
    `phase train: ${config.epochs} epochs × ${s.sequences.length} sequences (${run.trainTokens} tokens), ${onlineSteps(s.sequences.length * config.epochs, config)}, TTT ${config.tttLength}, lr ${config.lr} cosine, ${role ? `rollout by the speclab rollout processes of run ${config.run}` : `${config.rolloutWorkers} rollout worker(s)`}${startStep > 0 ? `; resuming after step ${startStep}` : ''}`,
  );
  const trainStart = performance.now();
  // A resumed run that has no step left keeps the loss its last step logged.
  let lastLoss = run.earlierLoss;
  if (stop) stop.training = true;
  // The first step also rolls out its round and compiles every kernel the step uses: minutes on a
  // software adapter, so it shows the kernels compiled as they come.
  const first = firstStepProgress(run.gpu, progress);
  // Tokens/s over the window since the last line, not since the start (the first step's compiling would weigh on every later figure).
  let window = { at: trainStart, tokens: 0 };
  let bar: ProgressReporter | undefined;
  try {
    for (let st = await s.step(); st; st = await s.step()) {
      if (st.globalStep === startStep + 1) {
        first.end();
        if (progress.interactive) bar = progress.start({ label: 'training', total: st.totalSteps, unit: 'steps' });
      }
      lastLoss = st.loss;
      window.tokens += st.tokens;
      const now = performance.now();
      const elapsed = (now - trainStart) / 1000;
      const windowRate = window.tokens / Math.max((now - window.at) / 1000, 1e-9);
      bar?.update(st.globalStep, `${Math.round(windowRate)} tokens/s  loss ${st.loss.toFixed(4)}  acc_0 ${st.accs[0].toFixed(3)}`);
      // Every --log-every steps, the first and the last; and never more than LINE_EVERY_MS apart, so slow steps are not silent.
      const due = st.globalStep % config.logEvery === 0 || st.globalStep === st.totalSteps || st.globalStep === startStep + 1;
      if (due || now - window.at >= LINE_EVERY_MS) {
        const eta = (elapsed / (st.globalStep - startStep)) * (st.totalSteps - st.globalStep);
        const line = `phase train  step ${st.globalStep}/${st.totalSteps}  ${Math.round(windowRate)} tokens/s  loss ${st.loss.toFixed(4)}  acc_0 ${st.accs[0].toFixed(3)}  lr ${st.lr.toExponential(2)}  ETA ${formatDuration(eta)}`;
        (bar ? progress.log : print)(line);
        window = { at: now, tokens: 0 };
      }
      if (stop?.requested && st.globalStep < st.totalSteps) {
        bar?.end();
        await s.flush(); // checkpoint + durable ack of every step so far
        throw new TrainInterrupted(st.globalStep);
      }
    }
  } finally {
    // Ended however the steps end (an error included), so a terminal's bars never outlive them.
    first.end(false); // a no-op after the first step; before it, nothing to report
    bar?.end();
  }
  if (stop) stop.training = false;
  const status = (await s.status()).controller;
  const expected = s.sequences.length * config.epochs;
  if (status.durableAcked !== expected) throw new Error(`training acked ${status.durableAcked} of ${expected} samples`);
  await role?.finish(); // the rollout processes exit
  const trainSeconds = (performance.now() - trainStart) / 1000;
  const written = s.checkpointsWritten;
  print(
    `phase train: ${s.globalStep} steps (${s.globalStep - startStep} in this process) in ${formatDuration(trainSeconds)}, final loss ${lastLoss.toFixed(4)}; ${status.durableAcked} samples durably acked; ${written.count} checkpoint${written.count === 1 ? '' : 's'} written in ${formatDuration(written.seconds)} (${((100 * written.seconds) / Math.max(trainSeconds, 1e-9)).toFixed(1)}% of the training time)`,
  );
  return { trainSeconds, lastLoss };
}

/**
 * The first step's progress: the GPU kernels compiled so far (their number is not known ahead), from
 * the pipeline cache; `end` (idempotent) says how many the step compiled and how long it took.
 */
function firstStepProgress(gpu: Gpu, progress: ProgressDisplay): { end(report?: boolean): void } {
  const before = gpu.pipelines.compiled;
  const started = performance.now();
  const bar = progress.start({ label: 'first step (rollout, capture, GPU kernel compilation)', total: 0, unit: 'kernels compiled' });
  const previous = gpu.pipelines.onCompiled;
  gpu.pipelines.onCompiled = (count, name) => {
    previous?.(count, name);
    bar.update(count - before, name);
  };
  let ended = false;
  return {
    end(report = true) {
      if (ended) return;
      ended = true;
      gpu.pipelines.onCompiled = previous;
      const seconds = (performance.now() - started) / 1000;
      bar.end(
        report
          ? `first step: ${gpu.pipelines.compiled - before} GPU kernels compiled, ${formatDuration(seconds)} with its rollout`
          : undefined,
      );
    },
  };
}
