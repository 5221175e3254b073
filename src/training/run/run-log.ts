/** The metrics log of a run, `<out>/metrics.jsonl`: one JSON record per step and phase, each stamped with its time. */
import type { MetricsEntry } from '../../contracts/metrics-record.ts';
import { metricsLine } from '../../contracts/metrics-entries.ts';
import type { AppendLog, FileStore } from '../../ports/storage.ts';

export type RecordFn = (entry: MetricsEntry, options?: { sync?: boolean }) => Promise<void>;

export class RunMetricsLog {
  private log: AppendLog | undefined;
  // Appends are chained so records land in order even when a step callback does not wait.
  private logged: Promise<void> = Promise.resolve();

  /** Opens the log; records made before are dropped (none are). */
  async open(out: FileStore): Promise<void> {
    this.log = await out.openAppendLog('metrics.jsonl');
  }

  /** Appends one record after every earlier one; `sync` fsyncs it (a step's record, before its durable ack). */
  readonly record: RecordFn = (entry, options) => {
    const line = new TextEncoder().encode(metricsLine(new Date().toISOString(), entry));
    this.logged = this.logged.then(() => this.log?.append(line, options));
    return this.logged;
  };

  /** Waits for the pending appends (a failed one was already reported to its caller), then closes. */
  async close(): Promise<void> {
    await this.logged.catch(() => undefined);
    await this.log?.close();
  }
}
