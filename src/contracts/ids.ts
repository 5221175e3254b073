/**
 * Deterministic sample ids. A rollout that retries a prompt produces the same id, so a duplicate
 * commit is recognised (exactly-once enqueue); offline ids follow manifest order, so runs and
 * recorded fixtures line up.
 */

/** `<run_id>:<task_id>`: the id of the sample an online rollout produces for one prompt task. */
export function onlineSampleId(runId: string, taskId: string): string {
  requireText(runId, 'runId');
  requireText(taskId, 'taskId');
  return `${runId}:${taskId}`;
}

/** `<run_id>:<index:08d>`: the id of the `index`-th sample (0-based) of an offline manifest. */
export function offlineSampleId(runId: string, index: number): string {
  requireText(runId, 'runId');
  if (!Number.isSafeInteger(index) || index < 0) {
    throw new RangeError(`offlineSampleId: index must be a non-negative integer, got ${index}`);
  }
  return `${runId}:${String(index).padStart(8, '0')}`;
}

function requireText(value: string, name: string): void {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`sample id: ${name} must be a non-empty string, got ${JSON.stringify(value)}`);
  }
}
