/**
 * How a prompt handed to `DataFlowController.ingestPrompts` becomes a PromptTask (docs/control-plane.md §3):
 * the fields a caller may set, the defaults, the minted task id, and the no-tensor guard on both sides.
 * Its own file because it is pure (no store is touched) and is the one place that decides what a
 * prompt may carry; the controller only hands each input here and queues what comes back.
 */
import { assertNoTensors } from '../contracts/no-tensors.ts';
import { makePromptTask, type JsonRecord, type PromptTask } from '../contracts/records.ts';

/** A prompt to ingest: known task fields, or arbitrary prompt data that becomes the payload. */
export type PromptInput = Record<string, unknown>;

const TASK_FIELDS = [
  'taskId',
  'sourceId',
  'payload',
  'maxLength',
  'chatTemplate',
  'lossMaskPolicy',
  'targetModelVersion',
  'draftWeightVersion',
  'metadata',
];

/**
 * The PromptTask of one input of run `runId`; `randomHex(digits)` mints the task id when the input
 * names none. An input with a `payload` may hold only task fields; one without is the payload itself.
 */
export function buildPromptTask(input: PromptInput, runId: string, randomHex: (digits: number) => string, where: string): PromptTask {
  assertNoTensors(input, where);
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw new TypeError(`${where} must be an object`);
  const hasPayload = 'payload' in input;
  const unknown = Object.keys(input).filter((k) => !TASK_FIELDS.includes(k));
  if (hasPayload && unknown.length > 0) {
    throw new TypeError(`${where}: unknown field(s) ${unknown.join(', ')}; prompt data belongs under payload`);
  }
  const fields = Object.fromEntries(Object.entries(input).filter(([k]) => TASK_FIELDS.includes(k)));
  const task = makePromptTask(
    {
      sourceId: 'prompt_source',
      maxLength: 2048,
      ...fields,
      taskId: (input.taskId as string | undefined) ?? `task-${randomHex(12)}`,
      runId,
      payload: (hasPayload ? input.payload : input) as JsonRecord,
      attempt: 0,
    },
    where,
  );
  assertNoTensors(task, `${where} (task)`);
  return task;
}
