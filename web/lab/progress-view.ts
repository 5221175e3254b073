/**
 * Progress of the long phases, with counts and an ETA: the target continuing the held-out and the
 * training prompts (the worker's `progress` reports), the optimizer steps, and the held-out
 * evaluations among them. The first step of a tab also compiles every GPU pipeline (and captures
 * the first round), so it is timed apart from the steady state that the ETA uses.
 */
import { formatDuration } from '../../src/util/format.ts';
import type { Phase, Report } from './protocol.ts';

type ProgressReport = Extract<Report, { type: 'progress' }>;

const TASKS = {
  'held-out': 'Data 1 of 2 · the target continues the held-out prompts (for evaluation)',
  prompts: 'Data 2 of 2 · the target continues the training prompts',
} as const;

export class RunProgress {
  private task: string = 'idle';
  private done = 0;
  private total = 0;
  private etaSeconds: number | undefined;
  /** The tab's first optimizer step, in ms (shader compilation included). */
  private firstStepMs: number | undefined;
  private steadyStepMs: number | undefined;
  private phaseStartedAt = 0;
  /** The steady-state base: a step and when it ended (reset whenever training (re)starts). */
  private base: { step: number; at: number } | undefined;
  private evalsDone = 0;
  private evalEvery = 0;

  /** `root` is the #progress element (none: the state alone, as the unit test reads it). */
  constructor(
    private readonly root: HTMLElement | undefined,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The numbers the panel shows (its data attributes). */
  snapshot(): {
    task: string;
    done: number;
    total: number;
    etaSeconds?: number;
    firstStepMs?: number;
    steadyStepMs?: number;
    evalsDone: number;
    evalsTotal: number;
  } {
    return {
      task: this.task,
      done: this.done,
      total: this.total,
      etaSeconds: this.etaSeconds,
      firstStepMs: this.firstStepMs,
      steadyStepMs: this.steadyStepMs,
      evalsDone: this.evalsDone,
      evalsTotal: this.evalsTotal(),
    };
  }

  onPhase(phase: Phase): void {
    if (phase === 'training') {
      this.task = 'training';
      this.phaseStartedAt = this.now();
      this.base = undefined;
      this.etaSeconds = undefined;
    } else if (phase !== 'data' && phase !== 'loading') {
      this.task = phase;
      this.etaSeconds = undefined;
    }
    this.render();
  }

  /** A new run (not a continued one): evaluations counted from zero. */
  resetRun(): void {
    this.evalsDone = 0;
    this.evalEvery = 0;
  }

  /** Steps restored from the saved run (no timing): the evaluations among them count as done. */
  restored(step: number, total: number, evals: number, evalEvery: number | undefined): void {
    this.done = step;
    this.total = total;
    if (this.task === 'idle' || this.task === 'stopped') this.task = 'saved';
    this.evalsDone = evals;
    if (evalEvery) this.evalEvery = evalEvery;
    this.render();
  }

  onProgress(r: ProgressReport): void {
    this.task = r.task;
    this.done = r.done;
    this.total = r.total;
    this.etaSeconds = r.done > 0 && r.done < r.total ? ((r.elapsedMs / r.done) * (r.total - r.done)) / 1000 : undefined;
    this.render();
  }

  onStep(step: number, total: number, evalEvery: number | undefined): void {
    const t = this.now();
    this.task = 'training';
    this.done = step;
    this.total = total;
    if (evalEvery !== undefined) {
      this.evalsDone++;
      this.evalEvery = evalEvery;
    }
    if (this.firstStepMs === undefined) this.firstStepMs = t - this.phaseStartedAt;
    if (!this.base) {
      this.base = { step, at: t };
    } else if (step > this.base.step) {
      this.steadyStepMs = (t - this.base.at) / (step - this.base.step);
    }
    const perStep = this.steadyStepMs ?? (this.firstStepMs > 0 ? this.firstStepMs : undefined);
    this.etaSeconds = perStep !== undefined ? (perStep * (total - step)) / 1000 : undefined;
    this.render();
  }

  /** A short line for the status bar. */
  summary(): string {
    const eta = this.etaSeconds !== undefined ? ` · about ${formatDuration(this.etaSeconds)} left` : '';
    if (this.task === 'held-out' || this.task === 'prompts') return `data: ${this.done}/${this.total} prompts${eta}`;
    if (this.task === 'training') return `training: step ${this.done}/${this.total}${eta}`;
    return this.task;
  }

  private evalsTotal(): number {
    if (this.evalEvery <= 0) return 0;
    return Math.floor(this.total / this.evalEvery) + (this.total % this.evalEvery === 0 ? 0 : 1);
  }

  /** The panel's two lines: what runs, with counts and ETA; and the step timing. */
  texts(): { label: string; timing: string } {
    const eta =
      this.etaSeconds !== undefined
        ? ` · about ${formatDuration(this.etaSeconds)} left`
        : this.done < this.total
          ? ' · estimating time left…'
          : '';
    let label: string;
    if (this.task === 'held-out' || this.task === 'prompts') {
      label = `${TASKS[this.task]}: ${this.done} of ${this.total} prompts${eta}`;
    } else if (this.task === 'training') {
      label =
        this.firstStepMs === undefined
          ? 'Training · first step: compiling the GPU shaders and capturing the first round of hidden states…'
          : `Training · step ${this.done} of ${this.total}${eta}`;
    } else {
      label =
        {
          idle: 'Not running.',
          saved: `Saved run: step ${this.done} of ${this.total} is checkpointed; Continue goes on from there.`,
          done: `Done: ${this.done} of ${this.total} steps.`,
          paused: `Paused after step ${this.done}.`,
          stopped: 'Stopped; a checkpoint is saved.',
          error: 'Stopped by an error (see below).',
        }[this.task] ?? this.task;
    }
    const parts: string[] = [];
    if (this.firstStepMs !== undefined)
      parts.push(`First step ${formatDuration(this.firstStepMs / 1000)} (includes compiling the GPU shaders, once per tab)`);
    if (this.steadyStepMs !== undefined) parts.push(`steady state ${formatDuration(this.steadyStepMs / 1000)} per step`);
    if (this.evalEvery > 0)
      parts.push(`held-out evaluation ${this.evalsDone} of ${this.evalsTotal()} (every ${this.evalEvery} steps and at the last)`);
    return { label, timing: parts.length > 0 ? `${parts.join('; ')}.` : '' };
  }

  private render(): void {
    if (!this.root) return;
    const snap = this.snapshot();
    const num = (v: number | undefined, digits: number) => (v === undefined ? '' : v.toFixed(digits));
    Object.assign(this.root.dataset, {
      task: snap.task,
      done: String(snap.done),
      total: String(snap.total),
      etaS: num(snap.etaSeconds, 1),
      firstStepMs: num(snap.firstStepMs, 0),
      steadyStepMs: num(snap.steadyStepMs, 0),
      evalsDone: String(snap.evalsDone),
      evalsTotal: String(snap.evalsTotal),
    });
    const { label, timing } = this.texts();
    this.root.querySelector<HTMLElement>('#progress-label')!.textContent = label;
    this.root.querySelector<HTMLElement>('#progress-timing')!.textContent = timing;
    const bar = this.root.querySelector<HTMLProgressElement>('#progress-bar')!;
    bar.max = Math.max(1, this.total);
    bar.value = this.done;
  }
}
