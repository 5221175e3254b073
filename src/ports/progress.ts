/**
 * Progress of a long phase (loading the target's weights, regenerating replies, an evaluation, the
 * first step's shader compilation, training), runtime-neutral: a run reports it, a display renders
 * it. The CLI renders bars on a terminal (src/platform/, through the cli-progress library) and plain
 * lines otherwise (src/training/run/progress-lines.ts); the browser lab has its own progress panel.
 */
export interface ProgressTask {
  /** What the phase is, e.g. 'loading target weights'. */
  readonly label: string;
  /** Units in all; 0 when unknown (a count is shown, no bar). */
  readonly total: number;
  /** 'bytes' (shown as KiB/MiB/GiB) or the plural noun counted, e.g. 'conversations'. */
  readonly unit: string;
}

export interface ProgressReporter {
  /** `done` units so far, with a short status (tokens, tokens/s, loss) when there is one. */
  update(done: number, status?: string): void;
  /** The phase ended; `summary`, when given, is printed as its last line. */
  end(summary?: string): void;
}

export interface ProgressDisplay {
  /** Bars redrawn in place (a terminal); false for plain lines, where a run's own per-step lines already report training. */
  readonly interactive: boolean;
  start(task: ProgressTask): ProgressReporter;
  /** Prints a line without breaking an active bar. */
  log(line: string): void;
}
