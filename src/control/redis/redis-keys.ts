/**
 * Where one run's control plane lives in Redis. Every key is `speclab:{<run>}:<name>`; the braces
 * make the run id the cluster hash tag, so all of a run's keys share one slot and a multi-key Lua
 * script over them is legal on a cluster too.
 *
 * Keys (add a row here and to CONTROL_KEYS together):
 *   meta:refs    hash  sampleId → SampleRef JSON (what was committed)
 *   meta:order   list  sampleIds in commit order (each id pushed once, when it first commits)
 *   meta:acked   set   sampleIds in the durable ack marker (the union of every ack)
 *   meta:marker  hash  globalStep → last non-null step, optimizerDurable → '1' | '0' (last writer)
 *   queue:seq            string  one counter for every queue ordering (pending FIFO order, lease order, terminal order)
 *   queue:partitions     set     partition names that have a pending zset (the default partition is '')
 *   queue:pending:<p>    zset    sampleId → seq, partition <p> verbatim after the prefix (any string, '' too)
 *   queue:refs           hash    sampleId → SampleRef JSON, for every pending or leased ref
 *   queue:leased         zset    sampleId → leasedAt ms (server TIME, or the injected clock)
 *   queue:lease          hash    sampleId → '<lease seq>|<partition>'
 *   queue:held           hash    partition → refs leased from it
 *   queue:attempts       hash    sampleId → deliveries so far (dropped on ack and terminal failure)
 *   queue:terminal       zset    sampleId → seq (terminal failures in the order they happened)
 *   queue:terminal-why   hash    sampleId → JSON {reason, attempts}
 *   prompt:seq           string  pending FIFO order, lease order, failure order
 *   prompt:tasks         hash    taskId → PromptTask JSON without `attempt`, for every pending or leased task
 *   prompt:attempt       hash    taskId → attempt (0-based; scripts bump it without re-encoding the JSON)
 *   prompt:pending       zset    taskId → seq
 *   prompt:leased        zset    taskId → leasedAt ms
 *   prompt:lease         hash    taskId → '<lease seq>|<workerId>'
 *   prompt:held          hash    workerId → tasks it holds (the per-worker cap)
 *   prompt:failed        zset    taskId → seq (terminal failures in order)
 *   prompt:failed-why    hash    taskId → JSON {reason, attempt}
 *   prompt:completed     string  tasks retired by a commit or complete
 *   members:rollout      hash    workerId → info JSON
 *   members:trainer      hash    trainerId → info JSON
 *   run:manifest         string  the trainer's run manifest JSON (what rollout processes must match)
 *   run:finished         string  '1' once the trainer finished the run (rollout processes then exit)
 */

/** Logical key → the name after `speclab:{<run>}:`. */
export const CONTROL_KEYS = Object.freeze({
  metaRefs: 'meta:refs',
  metaOrder: 'meta:order',
  metaAcked: 'meta:acked',
  metaMarker: 'meta:marker',
  queueSeq: 'queue:seq',
  queuePartitions: 'queue:partitions',
  /** A prefix, not a key: the partition name is appended verbatim. */
  queuePendingPrefix: 'queue:pending:',
  queueRefs: 'queue:refs',
  queueLeased: 'queue:leased',
  queueLease: 'queue:lease',
  queueHeld: 'queue:held',
  queueAttempts: 'queue:attempts',
  queueTerminal: 'queue:terminal',
  queueTerminalWhy: 'queue:terminal-why',
  promptSeq: 'prompt:seq',
  promptTasks: 'prompt:tasks',
  promptAttempt: 'prompt:attempt',
  promptPending: 'prompt:pending',
  promptLeased: 'prompt:leased',
  promptLease: 'prompt:lease',
  promptHeld: 'prompt:held',
  promptFailed: 'prompt:failed',
  promptFailedWhy: 'prompt:failed-why',
  promptCompleted: 'prompt:completed',
  membersRollout: 'members:rollout',
  membersTrainer: 'members:trainer',
  runManifest: 'run:manifest',
  runFinished: 'run:finished',
} as const);

export type ControlKeyName = keyof typeof CONTROL_KEYS;
export type ControlKeys = Readonly<Record<ControlKeyName, string>>;

const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/** Throws one line naming `runId` when it cannot be part of a key. */
export function validateRunId(runId: string, where: string): string {
  if (typeof runId !== 'string' || runId.length === 0)
    throw new TypeError(`${where}: runId must be a non-empty string, got ${JSON.stringify(runId)}`);
  // A brace would end the hash tag early, so one run's keys could land in different slots.
  if (runId.includes('{') || runId.includes('}'))
    throw new TypeError(`${where}: runId must not contain braces (it becomes the keys' {hash tag}), got ${JSON.stringify(runId)}`);
  if (!VISIBLE_ASCII.test(runId))
    throw new TypeError(`${where}: runId must be visible ASCII without spaces or control characters, got ${JSON.stringify(runId)}`);
  return runId;
}

/** Every control-plane key of run `runId`, by logical name. */
export function controlKeys(runId: string, where = 'controlKeys'): ControlKeys {
  validateRunId(runId, where);
  const keys = {} as Record<ControlKeyName, string>;
  for (const name of Object.keys(CONTROL_KEYS) as ControlKeyName[]) keys[name] = `speclab:{${runId}}:${CONTROL_KEYS[name]}`;
  return Object.freeze(keys);
}
