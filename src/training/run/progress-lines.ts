/**
 * Progress as plain lines (a ProgressDisplay for logs, pipes and tests): one line per update, at most
 * one every `everyMs` per phase (default 5 s), plus the first and the completing update, e.g.
 *   loading target weights: 126 MiB of 537 MiB (23%)
 *   regenerating replies: 16 of 32 conversations (50%), 1.9k tokens
 * so a long phase is never silent and a log is not flooded. Used by the CLI when stdout is not a
 * terminal, and by any run given no display.
 */
import type { ProgressDisplay, ProgressReporter, ProgressTask } from '../../ports/progress.ts';
import { formatBytes } from '../../util/bytes.ts';

export interface LineProgressOptions {
  /** Milliseconds between two lines of one phase (the first and the last always print). Default 5000. */
  readonly everyMs?: number;
  /** Clock in milliseconds (injected by tests). Default performance.now. */
  readonly now?: () => number;
}

/** `done` of `total` in the task's unit, with the percentage when the total is known. */
export function progressText(task: ProgressTask, done: number, status?: string): string {
  const amount = (n: number) => (task.unit === 'bytes' ? formatBytes(n) : String(n));
  const unit = task.unit === 'bytes' ? '' : ` ${task.unit}`;
  const count =
    task.total > 0
      ? `${amount(done)} of ${amount(task.total)}${unit} (${Math.floor((100 * Math.min(done, task.total)) / task.total)}%)`
      : `${amount(done)}${unit}`;
  return `${task.label}: ${count}${status ? `, ${status}` : ''}`;
}

export function lineProgress(print: (line: string) => void, options: LineProgressOptions = {}): ProgressDisplay {
  const everyMs = options.everyMs ?? 5000;
  const now = options.now ?? (() => performance.now());
  return {
    interactive: false,
    log: print,
    start(task: ProgressTask): ProgressReporter {
      let last: number | undefined;
      let printed: string | undefined;
      let pending: string | undefined;
      return {
        update(done, status) {
          const t = now();
          const text = progressText(task, done, status);
          if (text === printed) return; // nothing new to say
          if (last === undefined || t - last >= everyMs || (task.total > 0 && done >= task.total)) {
            print(text);
            last = t;
            printed = text;
            pending = undefined;
          } else pending = text;
        },
        end(summary) {
          // The last state is shown when no summary replaces it.
          if (summary !== undefined) print(summary);
          else if (pending !== undefined) print(pending);
          pending = undefined;
        },
      };
    },
  };
}
