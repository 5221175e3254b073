/**
 * DataFlowController (docs/control-plane.md §1): the passive coordinator. It has no run loop and never calls
 * a worker or a trainer; rollout workers and the trainer call into it, and its only outbound calls
 * go to its own SampleRefQueue and MetadataStore. Every endpoint that accepts data runs the
 * no-tensor guard, so tensors never cross the control plane.
 *
 * Adopted HEAD fixes: prompt-lease expiry, bounded prompt attempts, completePromptTasks, batch
 * commit validated up front and returning the fresh refs, `trainBacklog`, reconcileOnRestart.
 * Kept from M4 (HEAD deleted them): TrainLease, leaseTrainRefs, failRefs, enqueueOfflineRefs.
 */
import { assertNoTensors } from '../contracts/no-tensors.ts';
import { makeJsonRecord, makePromptTask, type JsonRecord, type PromptTask, type SampleRef } from '../contracts/records.ts';
import { validateRefs, type MetadataStore } from './metadata-store.ts';
import { PromptBook, type PromptFailOutcome, type PromptFailure } from './prompt-book.ts';
import { SampleRefQueue, type FailOutcome } from './sample-ref-queue.ts';
import { TrainLease } from './train-lease.ts';

/** An ack or fail named a sample id this controller's metadata store never committed. */
export class UnknownSampleError extends Error {
  override name = 'UnknownSampleError';
}

export interface ControllerOptions {
  runId: string;
  store: MetadataStore;
  queue?: SampleRefQueue;
  /** Milliseconds, monotonic; drives prompt-lease expiry. */
  clock?: () => number;
  promptLeaseTimeoutMs?: number | null;
  maxPromptAttempts?: number | null;
  /** Most prompts one worker may hold at once (flow control); null = no cap. */
  maxPromptLeasePerWorker?: number | null;
  /** `digits` random hex digits, for minted ids; injectable for repeatable tests. */
  randomHex?: (digits: number) => string;
  /**
   * The feature store whose samples this controller's refs name. When given, an optimizer-durable
   * ack aborts the acked samples' features after the ack is recorded (a spilling store deletes their
   * files there: they are never needed again), as HEAD's DP ack does after the durable marker.
   */
  featureStore?: ReleasableFeatureStore;
}

/** A prompt to ingest: known task fields, or arbitrary prompt data that becomes the payload. */
export type PromptInput = Record<string, unknown>;

const TASK_FIELDS = ['taskId', 'sourceId', 'payload', 'maxLength', 'chatTemplate', 'lossMaskPolicy', 'targetModelVersion', 'draftWeightVersion', 'metadata'];

export interface ControllerStatus {
  runId: string;
  prompts: number;
  promptsPending: number;
  promptsLeased: number;
  promptsFailed: number;
  promptsCompleted: number;
  samplesCommitted: number;
  queueDepth: number;
  queueInFlight: number;
  queueTerminal: number;
  rolloutWorkers: number;
  trainers: number;
  durableGlobalStep: number | null;
  durableAcked: number;
  optimizerDurable: boolean;
  /** Committed but not yet acked (approximated as committed − acked ids). */
  trainBacklog: number;
}

export interface ReconcileReport {
  /** Committed refs put back on the queue (not durably acked). */
  requeued: string[];
  /** Acked under an optimizer-durable marker: never trained again, features aborted. */
  released: string[];
  /** Spilled features of samples never committed (a crash between put and commit), deleted. */
  droppedUncommitted: string[];
  globalStep: number | null;
  optimizerDurable: boolean;
}

/** What reconcileOnRestart needs from a FeatureStore to drop features of released samples. */
export interface ReleasableFeatureStore {
  adopt?(ref: SampleRef): unknown;
  abort(sampleId: string): unknown;
  /** Durable stores: delete features kept on disk for samples not in `committed`; returns their ids. */
  dropUncommittedSpills?(committed: ReadonlySet<string>): Promise<string[]>;
}

export class DataFlowController {
  readonly runId: string;
  readonly queue: SampleRefQueue;
  private readonly store: MetadataStore;
  private readonly prompts: PromptBook;
  private readonly workers = new Map<string, Readonly<JsonRecord>>();
  private readonly trainers = new Map<string, Readonly<JsonRecord>>();
  private readonly randomHex: (digits: number) => string;
  private readonly featureStore: ReleasableFeatureStore | undefined;

  constructor(options: ControllerOptions) {
    if (typeof options.runId !== 'string' || options.runId.length === 0) throw new TypeError('DataFlowController: runId must be a non-empty string');
    this.runId = options.runId;
    this.store = options.store;
    this.queue = options.queue ?? new SampleRefQueue();
    this.randomHex = options.randomHex ?? cryptoHex;
    this.featureStore = options.featureStore;
    this.prompts = new PromptBook({
      clock: options.clock ?? (() => performance.now()),
      leaseTimeoutMs: positiveIntOrNull(options.promptLeaseTimeoutMs, 'promptLeaseTimeoutMs'),
      maxAttempts: positiveIntOrNull(options.maxPromptAttempts, 'maxPromptAttempts'),
      maxLeasePerWorker: positiveIntOrNull(options.maxPromptLeasePerWorker, 'maxPromptLeasePerWorker'),
    });
  }

  // ── registration ────────────────────────────────────────────────────────────────────────────

  registerRolloutWorker(info: Record<string, unknown> = {}): string {
    return this.register(this.workers, info, 'workerId', 'rollout', 'registerRolloutWorker');
  }

  registerTrainer(info: Record<string, unknown> = {}): string {
    return this.register(this.trainers, info, 'trainerId', 'trainer', 'registerTrainer');
  }

  /** The trainer's only way to the queue; registers a trainer when no id is given. */
  trainLease(trainerId?: string, options: { partitionKey?: string } = {}): TrainLease {
    const id = trainerId ?? this.registerTrainer();
    this.requireKnown(this.trainers, id, 'trainer', 'registerTrainer', 'trainLease');
    return new TrainLease(this, id, options.partitionKey);
  }

  // ── prompts (producer side) ─────────────────────────────────────────────────────────────────

  /** Builds one PromptTask per input (all validated before any is queued) and returns their ids. */
  ingestPrompts(prompts: readonly PromptInput[]): string[] {
    if (!Array.isArray(prompts)) throw new TypeError('ingestPrompts: prompts must be an array');
    const tasks = prompts.map((p, i) => this.buildTask(p, `ingestPrompts prompts[${i}]`));
    this.prompts.add(tasks);
    return tasks.map((task) => task.taskId);
  }

  leasePromptTasks(workerId: string, maxTasks: number): PromptTask[] {
    this.requireKnown(this.workers, workerId, 'rollout worker', 'registerRolloutWorker', 'leasePromptTasks');
    requireCount(maxTasks, 'leasePromptTasks: maxTasks');
    return this.prompts.lease(workerId, maxTasks);
  }

  /** Releases failed prompt leases: retryable → back to pending with attempt + 1; else terminal. */
  failPromptTasks(workerId: string, taskIds: readonly string[], reason: string, retryable: boolean): PromptFailOutcome {
    this.requireKnown(this.workers, workerId, 'rollout worker', 'registerRolloutWorker', 'failPromptTasks');
    requireIds(taskIds, 'failPromptTasks: taskIds');
    requireReason(reason, retryable, 'failPromptTasks');
    return this.prompts.fail(workerId, taskIds, reason, retryable);
  }

  completePromptTasks(workerId: string, taskIds: readonly string[]): string[] {
    this.requireKnown(this.workers, workerId, 'rollout worker', 'registerRolloutWorker', 'completePromptTasks');
    requireIds(taskIds, 'completePromptTasks: taskIds');
    return this.prompts.complete(workerId, taskIds);
  }

  /**
   * Validates every ref first (one bad ref rejects the batch), commits them in one store
   * transaction, retires their prompt tasks, enqueues the fresh ones and returns them. Duplicates
   * are dropped silently: producers deliver at least once.
   */
  async commitSamples(workerId: string, refs: readonly SampleRef[], options: { partitionKey?: string } = {}): Promise<SampleRef[]> {
    this.requireKnown(this.workers, workerId, 'rollout worker', 'registerRolloutWorker', 'commitSamples');
    const valid = validateRefBatch(refs, 'commitSamples');
    const flags = await this.commitFlags(valid, 'commitSamples');
    valid.forEach((ref, i) => {
      if (ref.sourceTaskId !== null) this.prompts.committed(workerId, ref.sourceTaskId, flags[i]);
    });
    const fresh = valid.filter((_, i) => flags[i]);
    this.queue.put(fresh, options);
    return fresh;
  }

  /** Offline ingest: the same dedup and the same queue as online commits (the planes converge here). */
  async enqueueOfflineRefs(refs: readonly SampleRef[], options: { partitionKey?: string } = {}): Promise<SampleRef[]> {
    const valid = validateRefBatch(refs, 'enqueueOfflineRefs');
    const flags = await this.commitFlags(valid, 'enqueueOfflineRefs');
    const fresh = valid.filter((_, i) => flags[i]);
    this.queue.put(fresh, options);
    return fresh;
  }

  // ── train refs (consumer side, reached through TrainLease) ──────────────────────────────────

  leaseTrainRefs(trainerId: string, maxRefs: number, timeoutMs?: number, options: { partitionKey?: string } = {}): Promise<SampleRef[]> {
    this.requireKnown(this.trainers, trainerId, 'trainer', 'registerTrainer', 'leaseTrainRefs');
    return this.queue.get(maxRefs, timeoutMs, options);
  }

  /**
   * FIRST records the durable ack transaction, THEN releases the queue leases: if the record
   * fails, the leases stay and the refs are retrained, never lost (release state after a restart
   * is derived from the marker alone).
   */
  async ackTrainRefs(trainerId: string, sampleIds: readonly string[], ack: { globalStep?: number | null; optimizerDurable?: boolean } = {}): Promise<{ released: number }> {
    this.requireKnown(this.trainers, trainerId, 'trainer', 'registerTrainer', 'ackTrainRefs');
    assertNoTensors(ack, 'ackTrainRefs.ack');
    requireIds(sampleIds, 'ackTrainRefs: sampleIds');
    // An id never committed is a caller bug (a typo, another run's id): recording it would put a
    // sample in the durable marker that no restart can account for, so nothing is recorded at all.
    const refs = await this.resolveKnown(sampleIds, 'ackTrainRefs', 'nothing was acked');
    await this.store.recordTrainAck(sampleIds, { globalStep: ack.globalStep ?? null, optimizerDurable: ack.optimizerDurable ?? false });
    const released = this.queue.ack(refs);
    // Only after the durable record: a crash before it requeues these samples, which then still need their features.
    if (ack.optimizerDurable && this.featureStore) for (const id of sampleIds) await this.featureStore.abort(id);
    return { released };
  }

  async failRefs(ownerId: string, sampleIds: readonly string[], reason: string, retryable: boolean): Promise<FailOutcome> {
    this.requireKnown(this.trainers, ownerId, 'trainer', 'registerTrainer', 'failRefs');
    requireIds(sampleIds, 'failRefs: sampleIds');
    requireReason(reason, retryable, 'failRefs');
    return this.queue.fail(await this.resolveKnown(sampleIds, 'failRefs', 'nothing was failed'), reason, retryable);
  }

  // ── observation and recovery ────────────────────────────────────────────────────────────────

  async status(): Promise<ControllerStatus> {
    const p = this.prompts.counts();
    const committed = await this.store.committedCount();
    const marker = await this.store.durableMarker();
    return {
      runId: this.runId,
      prompts: p.prompts,
      promptsPending: p.pending,
      promptsLeased: p.leased,
      promptsFailed: p.failed,
      promptsCompleted: p.completed,
      samplesCommitted: committed,
      queueDepth: this.queue.depth(),
      queueInFlight: this.queue.inFlight(),
      queueTerminal: this.queue.terminalFailures().length,
      rolloutWorkers: this.workers.size,
      trainers: this.trainers.size,
      durableGlobalStep: marker.globalStep,
      durableAcked: marker.acked.size,
      optimizerDurable: marker.optimizerDurable,
      trainBacklog: Math.max(0, committed - marker.acked.size),
    };
  }

  /** Terminal prompt failures (tensor-free records). */
  promptFailures(): PromptFailure[] {
    return this.prompts.failuresList();
  }

  promptTask(taskId: string): PromptTask | undefined {
    return this.prompts.task(taskId);
  }

  /**
   * After a restart on a durable store: committed refs acked under an optimizer-durable marker are
   * released (their features aborted when a store is given); every other committed ref is
   * requeued in commit order (at-least-once training). Idempotent: the queue skips ids it holds.
   * A spilling LocalFeatureStore needs nothing for the requeued refs (its get falls back to the
   * spill file of the generation the ref names); spills of never-committed samples are deleted.
   */
  async reconcileOnRestart(featureStore?: ReleasableFeatureStore): Promise<ReconcileReport> {
    const marker = await this.store.durableMarker();
    const toQueue: SampleRef[] = [];
    const released: string[] = [];
    for (const id of await this.store.allCommittedIds()) {
      const ref = (await this.store.getCommitted(id))!;
      if (marker.optimizerDurable && marker.acked.has(id)) {
        released.push(id);
        if (featureStore) {
          await featureStore.adopt?.(ref);
          await featureStore.abort(id);
        }
      } else {
        toQueue.push(ref);
      }
    }
    const requeued = this.queue.put(toQueue);
    const committed = new Set(await this.store.allCommittedIds());
    const droppedUncommitted = (await featureStore?.dropUncommittedSpills?.(committed)) ?? [];
    return { requeued, released, droppedUncommitted, globalStep: marker.globalStep, optimizerDurable: marker.optimizerDurable };
  }

  // ── helpers ─────────────────────────────────────────────────────────────────────────────────

  private register(book: Map<string, Readonly<JsonRecord>>, info: Record<string, unknown>, idField: string, prefix: string, where: string): string {
    const record = makeJsonRecord(info, `${where}.info`);
    const given = record[idField];
    if (given !== undefined && (typeof given !== 'string' || given.length === 0)) throw new TypeError(`${where}: info.${idField} must be a non-empty string`);
    const id = (given as string | undefined) ?? `${prefix}-${this.randomHex(8)}`;
    book.set(id, record);
    return id;
  }

  private requireKnown(book: Map<string, unknown>, id: string, kind: string, register: string, where: string): void {
    if (!book.has(id)) throw new Error(`${where}: unknown ${kind} ${JSON.stringify(id)}; call ${register} first`);
  }

  private buildTask(input: PromptInput, where: string): PromptTask {
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
        taskId: (input.taskId as string | undefined) ?? `task-${this.randomHex(12)}`,
        runId: this.runId,
        payload: (hasPayload ? input.payload : input) as JsonRecord,
        attempt: 0,
      },
      where,
    );
    assertNoTensors(task, `${where} (task)`);
    return task;
  }

  /** One store transaction for the batch; fresh flag per ref. */
  private async commitFlags(refs: SampleRef[], where: string): Promise<boolean[]> {
    const flags = await this.store.commitSamples(refs);
    if (flags.length !== refs.length) throw new Error(`${where}: metadata store returned ${flags.length} flags for ${refs.length} refs`);
    return flags;
  }

  /** The committed refs of `sampleIds`; throws UnknownSampleError naming every id never committed. */
  private async resolveKnown(sampleIds: readonly string[], where: string, consequence: string): Promise<SampleRef[]> {
    const refs: SampleRef[] = [];
    const unknown: string[] = [];
    for (const id of sampleIds) {
      const ref = await this.store.getCommitted(id);
      if (ref !== undefined) refs.push(ref);
      else unknown.push(id);
    }
    if (unknown.length > 0) {
      const shown = unknown.slice(0, 8).map((id) => JSON.stringify(id)).join(', ');
      throw new UnknownSampleError(`${where}: ${unknown.length} sample id(s) were never committed in run ${this.runId}: ${shown}${unknown.length > 8 ? ', ...' : ''}; ${consequence}`);
    }
    return refs;
  }
}

function validateRefBatch(refs: readonly SampleRef[], where: string): SampleRef[] {
  return validateRefs(refs, where);
}

function requireIds(ids: readonly string[], where: string): void {
  assertNoTensors(ids, where);
  if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string' || id.length === 0)) {
    throw new TypeError(`${where} must be an array of non-empty strings`);
  }
}

function requireReason(reason: string, retryable: boolean, where: string): void {
  if (typeof reason !== 'string') throw new TypeError(`${where}: reason must be a string (failure records stay metadata-only)`);
  if (typeof retryable !== 'boolean') throw new TypeError(`${where}: retryable must be a boolean`);
}

function requireCount(value: number, where: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${where} must be a non-negative integer, got ${value}`);
}

function positiveIntOrNull(value: number | null | undefined, name: string): number | null {
  if (value === undefined || value === null) return null;
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`DataFlowController: ${name} must be a positive integer or null, got ${value}`);
  return value;
}

function cryptoHex(digits: number): string {
  const bytes = new Uint8Array(Math.ceil(digits / 2));
  globalThis.crypto.getRandomValues(bytes);
  return [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('').slice(0, digits);
}
