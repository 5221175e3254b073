/**
 * Progress bars on a terminal, through the cli-progress library: one bar per running phase (weights
 * loaded, conversations regenerated, prompts evaluated, kernels compiled, optimizer steps), with the
 * phase's status (tokens/s, loss) beside it, and lines printed above the bars without breaking them.
 * A phase whose total is unknown shows a count instead of a bar. Used by the CLI only when stdout is
 * a terminal; elsewhere runs print plain lines (src/training/run/progress-lines.ts).
 */
import { MultiBar, type SingleBar } from 'cli-progress';
import type { ProgressDisplay, ProgressReporter, ProgressTask } from '../ports/progress.ts';
import { formatBytes } from '../util/bytes.ts';

export function terminalProgress(stream: NodeJS.WriteStream): ProgressDisplay {
  let bars: MultiBar | undefined;
  let active = 0;
  const open = (): MultiBar =>
    (bars ??= new MultiBar({
      stream,
      clearOnComplete: true,
      hideCursor: true,
      // Redrawn at most every 100 ms; lines logged in between go above the bars.
      fps: 10,
      autopadding: true,
      format: (options, params, payload: { label: string; unit: string; status: string; known: boolean }) => {
        const amount = (n: number) => (payload.unit === 'bytes' ? formatBytes(n) : String(n));
        const unit = payload.unit === 'bytes' ? '' : ` ${payload.unit}`;
        const status = payload.status ? `  ${payload.status}` : '';
        if (!payload.known) return `${payload.label}: ${amount(params.value)}${unit}${status}`;
        const width = options.barsize ?? 30;
        const filled = Math.round(Math.min(1, params.progress) * width);
        const bar = `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
        const eta = params.eta > 0 && Number.isFinite(params.eta) ? `  ETA ${params.eta}s` : '';
        return `${payload.label} ${bar} ${Math.floor(params.progress * 100)}%  ${amount(params.value)} of ${amount(params.total)}${unit}${status}${eta}`;
      },
    }));
  const log = (line: string) => {
    if (bars && active > 0) bars.log(`${line}\n`);
    else stream.write(`${line}\n`);
  };
  return {
    interactive: true,
    log,
    start(task: ProgressTask): ProgressReporter {
      const multi = open();
      active++;
      const payload = { label: task.label, unit: task.unit, status: '', known: task.total > 0 };
      const bar: SingleBar = multi.create(Math.max(task.total, 1), 0, payload);
      let ended = false;
      return {
        update(done, status) {
          if (!ended) bar.update(done, { ...payload, status: status ?? '' });
        },
        end(summary) {
          if (ended) return;
          ended = true;
          multi.remove(bar);
          active--;
          if (active === 0) {
            multi.stop();
            bars = undefined;
          }
          if (summary !== undefined) log(summary);
        },
      };
    },
  };
}
