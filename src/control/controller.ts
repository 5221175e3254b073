/**
 * DataFlowController (docs/control-plane.md §1): the passive coordinator. It has no run loop and never calls
 * a worker or a trainer; rollout workers and the trainer call into it, and its only outbound calls
 * go to its own SampleRefQueue and MetadataStore. Every endpoint that accepts data runs the
 * no-tensor guard, so tensors never cross the control plane.
 *
 * Adopted from SpecForge's later runtime: prompt-lease expiry, bounded prompt attempts, completePromptTasks, batch
 * commit validated up front and returning the fresh refs, `trainBacklog`, reconcileOnRestart.
 * Kept from SpecForge's first runtime design (SpecForge's later runtime deleted them): TrainLease, leaseTrainRefs,
 * failRefs, enqueueOfflineRefs.
 *
 * This file holds the endpoints, in the order a sample meets them (registration, prompts, train refs,
 * status and recovery); what they share lives beside it: prompt-input.ts turns a prompt into a
 * PromptTask, committed-refs.ts asks the metadata store what was committed, endpoint-checks.ts checks
 * the arguments.
 */
import { assertNoTensors } from '../contracts/no-tensors.ts';
import { makeJsonRecord, type JsonRecord, type PromptTask, type SampleRef } from '../contracts/records.ts';
import { commitFlags, resolveCommitted } from './committed-refs.ts';
import type {
  ControlStores,
  FailOutcome,
  MemberKind,
  MemberRegistry,
  PromptFailOutcome,
  PromptFailure,
  PromptLedger,
  RefQueue,
} from './control-stores.ts';
import { InMemoryMemberRegistry } from './member-registry.ts';
import { positiveIntOrNull, requireCount, requireIds, requireReason } from './endpoint-checks.ts';
import { validateRefs, type MetadataStore } from './metadata-store.ts';
import { PromptBook } from './prompt-book.ts';
import { buildPromptTask, type PromptInput } from './prompt-input.ts';
import { SampleRefQueue } from './sample-ref-queue.ts';
import { TrainLease } from './train-lease.ts';

/**
 * What the controller is built over (src/control/control-stores.ts). `store` is required; the queue,
 * the prompt ledger and the member registry default to in-memory ones (one process). Give shared
 * ones (src/control/redis/) and every process's controller sees the same run.
 */
export interface ControllerOptions {
  runId: string;
  store: MetadataStore;
  queue?: RefQueue;
  /** When given, the prompt options below are the ledger's own business and must not be given here. */
  prompts?: PromptLedger;
  members?: MemberRegistry;
  /** Milliseconds, monotonic; drives prompt-lease expiry of the default in-memory ledger. */
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
   * files there: they are never needed again), as SpecForge's later runtime's data-plane ack does after the durable marker.
   */
  featureStore?: ReleasableFeatureStore;
  /**
   * false: commits are not enqueued (a cluster run's rollout: its trainer enqueues each whole round
   * from the ledger, so a late enqueue cannot race an ack).
   */
  enqueueCommits?: boolean;
}

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
  readonly queue: RefQueue;
  private readonly store: MetadataStore;
  private readonly prompts: PromptLedger;
  private readonly members: MemberRegistry;
  private readonly randomHex: (digits: number) => string;
  private readonly featureStore: ReleasableFeatureStore | undefined;
  private readonly enqueueCommits: boolean;

  constructor(options: ControllerOptions) {
    if (typeof options.runId !== 'string' || options.runId.length === 0)
      throw new TypeError('DataFlowController: runId must be a non-empty string');
    this.runId = options.runId;
    this.store = options.store;
    this.queue = options.queue ?? new SampleRefQueue();
    this.members = options.members ?? new InMemoryMemberRegistry();
    this.randomHex = options.randomHex ?? cryptoHex;
    this.featureStore = options.featureStore;
    this.enqueueCommits = options.enqueueCommits ?? true;
    const promptOptions = {
      clock: options.clock ?? (() => performance.now()),
      leaseTimeoutMs: positiveIntOrNull(options.promptLeaseTimeoutMs, 'promptLeaseTimeoutMs'),
      maxAttempts: positiveIntOrNull(options.maxPromptAttempts, 'maxPromptAttempts'),
      maxLeasePerWorker: positiveIntOrNull(options.maxPromptLeasePerWorker, 'maxPromptLeasePerWorker'),
    };
    if (options.prompts) {
      const given = (['clock', 'promptLeaseTimeoutMs', 'maxPromptAttempts', 'maxPromptLeasePerWorker'] as const).filter(
        (k) => options[k] !== undefined,
      );
      if (given.length > 0)
        throw new TypeError(
          `DataFlowController: ${given.join(', ')} configure the default prompt ledger; set them on the given prompts ledger instead`,
        );
    }
    this.prompts = options.prompts ?? new PromptBook(promptOptions);
  }

  /** A controller over shared stores (e.g. src/control/redis/): one per process, all seeing one run. */
  static over(
    runId: string,
    stores: ControlStores,
    options: Omit<ControllerOptions, 'runId' | 'store' | 'queue' | 'prompts' | 'members'> = {},
  ): DataFlowController {
    return new DataFlowController({
      ...options,
      runId,
      store: stores.metadata,
      queue: stores.queue,
      prompts: stores.prompts,
      members: stores.members,
    });
  }

  // ── registration ────────────────────────────────────────────────────────────────────────────

  registerRolloutWorker(info: Record<string, unknown> = {}): Promise<string> {
    return this.register('rollout', info, 'workerId', 'registerRolloutWorker');
  }

  registerTrainer(info: Record<string, unknown> = {}): Promise<string> {
    return this.register('trainer', info, 'trainerId', 'registerTrainer');
  }

  /** The trainer's only way to the queue; registers a trainer when no id is given. */
  async trainLease(trainerId?: string, options: { partitionKey?: string } = {}): Promise<TrainLease> {
    const id = trainerId ?? (await this.registerTrainer());
    await this.requireKnown('trainer', id, 'trainLease');
    return new TrainLease(this, id, options.partitionKey);
  }

  // ── prompts (producer side) ─────────────────────────────────────────────────────────────────

  /** Builds one PromptTask per input (all validated before any is queued) and returns their ids. */
  async ingestPrompts(prompts: readonly PromptInput[]): Promise<string[]> {
    if (!Array.isArray(prompts)) throw new TypeError('ingestPrompts: prompts must be an array');
    const tasks = prompts.map((p, i) => buildPromptTask(p, this.runId, this.randomHex, `ingestPrompts prompts[${i}]`));
    await this.prompts.add(tasks);
    return tasks.map((task) => task.taskId);
  }

  async leasePromptTasks(workerId: string, maxTasks: number): Promise<PromptTask[]> {
    await this.requireKnown('rollout', workerId, 'leasePromptTasks');
    requireCount(maxTasks, 'leasePromptTasks: maxTasks');
    return this.prompts.lease(workerId, maxTasks);
  }

  /** Releases failed prompt leases: retryable → back to pending with attempt + 1; else terminal. */
  async failPromptTasks(workerId: string, taskIds: readonly string[], reason: string, retryable: boolean): Promise<PromptFailOutcome> {
    await this.requireKnown('rollout', workerId, 'failPromptTasks');
    requireIds(taskIds, 'failPromptTasks: taskIds');
    requireReason(reason, retryable, 'failPromptTasks');
    return this.prompts.fail(workerId, taskIds, reason, retryable);
  }

  async completePromptTasks(workerId: string, taskIds: readonly string[]): Promise<string[]> {
    await this.requireKnown('rollout', workerId, 'completePromptTasks');
    requireIds(taskIds, 'completePromptTasks: taskIds');
    return this.prompts.complete(workerId, taskIds);
  }

  /**
   * Validates every ref first (one bad ref rejects the batch), commits them in one store
   * transaction, retires their prompt tasks, enqueues the fresh ones and returns them. Duplicates
   * are dropped silently: producers deliver at least once.
   */
  async commitSamples(workerId: string, refs: readonly SampleRef[], options: { partitionKey?: string } = {}): Promise<SampleRef[]> {
    await this.requireKnown('rollout', workerId, 'commitSamples');
    const valid = validateRefs(refs, 'commitSamples');
    const flags = await commitFlags(this.store, valid, 'commitSamples');
    const tasks = valid.flatMap((ref, i) => (ref.sourceTaskId === null ? [] : [{ taskId: ref.sourceTaskId, fresh: flags[i] }]));
    await this.prompts.committed(workerId, tasks);
    const fresh = valid.filter((_, i) => flags[i]);
    if (this.enqueueCommits) await this.queue.put(fresh, options);
    return fresh;
  }

  /** Offline ingest: the same dedup and the same queue as online commits (the planes converge here). */
  async enqueueOfflineRefs(refs: readonly SampleRef[], options: { partitionKey?: string } = {}): Promise<SampleRef[]> {
    const valid = validateRefs(refs, 'enqueueOfflineRefs');
    const flags = await commitFlags(this.store, valid, 'enqueueOfflineRefs');
    const fresh = valid.filter((_, i) => flags[i]);
    await this.queue.put(fresh, options);
    return fresh;
  }

  // ── train refs (consumer side, reached through TrainLease) ──────────────────────────────────

  async leaseTrainRefs(
    trainerId: string,
    maxRefs: number,
    timeoutMs?: number,
    options: { partitionKey?: string } = {},
  ): Promise<SampleRef[]> {
    await this.requireKnown('trainer', trainerId, 'leaseTrainRefs');
    return this.queue.get(maxRefs, timeoutMs, options);
  }

  /**
   * FIRST records the durable ack transaction, THEN releases the queue leases: if the record
   * fails, the leases stay and the refs are retrained, never lost (release state after a restart
   * is derived from the marker alone).
   */
  async ackTrainRefs(
    trainerId: string,
    sampleIds: readonly string[],
    ack: { globalStep?: number | null; optimizerDurable?: boolean } = {},
  ): Promise<{ released: number }> {
    await this.requireKnown('trainer', trainerId, 'ackTrainRefs');
    assertNoTensors(ack, 'ackTrainRefs.ack');
    requireIds(sampleIds, 'ackTrainRefs: sampleIds');
    // An id never committed is a caller bug (a typo, another run's id): recording it would put a
    // sample in the durable marker that no restart can account for, so nothing is recorded at all.
    const refs = await resolveCommitted(this.store, this.runId, sampleIds, 'ackTrainRefs', 'nothing was acked');
    await this.store.recordTrainAck(sampleIds, { globalStep: ack.globalStep ?? null, optimizerDurable: ack.optimizerDurable ?? false });
    const released = await this.queue.ack(refs);
    // Only after the durable record: a crash before it requeues these samples, which then still need their features.
    if (ack.optimizerDurable && this.featureStore) for (const id of sampleIds) await this.featureStore.abort(id);
    return { released };
  }

  async failRefs(ownerId: string, sampleIds: readonly string[], reason: string, retryable: boolean): Promise<FailOutcome> {
    await this.requireKnown('trainer', ownerId, 'failRefs');
    requireIds(sampleIds, 'failRefs: sampleIds');
    requireReason(reason, retryable, 'failRefs');
    return this.queue.fail(await resolveCommitted(this.store, this.runId, sampleIds, 'failRefs', 'nothing was failed'), reason, retryable);
  }

  // ── observation and recovery ────────────────────────────────────────────────────────────────

  async status(): Promise<ControllerStatus> {
    const p = await this.prompts.counts();
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
      queueDepth: await this.queue.depth(),
      queueInFlight: await this.queue.inFlight(),
      queueTerminal: (await this.queue.terminalFailures()).length,
      rolloutWorkers: await this.members.count('rollout'),
      trainers: await this.members.count('trainer'),
      durableGlobalStep: marker.globalStep,
      durableAcked: marker.acked.size,
      optimizerDurable: marker.optimizerDurable,
      trainBacklog: Math.max(0, committed - marker.acked.size),
    };
  }

  /** Terminal prompt failures (tensor-free records). */
  promptFailures(): Promise<PromptFailure[]> {
    return this.prompts.failuresList();
  }

  promptTask(taskId: string): Promise<PromptTask | undefined> {
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
    const ids = await this.store.allCommittedIds();
    const refs = await this.store.getCommittedMany(ids);
    for (const [i, id] of ids.entries()) {
      const ref = refs[i]!;
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
    const requeued = await this.queue.put(toQueue);
    const committed = new Set(await this.store.allCommittedIds());
    const droppedUncommitted = (await featureStore?.dropUncommittedSpills?.(committed)) ?? [];
    return { requeued, released, droppedUncommitted, globalStep: marker.globalStep, optimizerDurable: marker.optimizerDurable };
  }

  // ── helpers ─────────────────────────────────────────────────────────────────────────────────

  private async register(kind: MemberKind, info: Record<string, unknown>, idField: string, where: string): Promise<string> {
    const record: Readonly<JsonRecord> = makeJsonRecord(info, `${where}.info`);
    const given = record[idField];
    if (given !== undefined && (typeof given !== 'string' || given.length === 0))
      throw new TypeError(`${where}: info.${idField} must be a non-empty string`);
    const id = (given as string | undefined) ?? `${kind}-${this.randomHex(8)}`;
    await this.members.register(kind, id, record);
    return id;
  }

  private async requireKnown(kind: MemberKind, id: string, where: string): Promise<void> {
    if (await this.members.has(kind, id)) return;
    const [what, register] = kind === 'rollout' ? ['rollout worker', 'registerRolloutWorker'] : ['trainer', 'registerTrainer'];
    throw new Error(`${where}: unknown ${what} ${JSON.stringify(id)}; call ${register} first`);
  }
}

function cryptoHex(digits: number): string {
  const bytes = new Uint8Array(Math.ceil(digits / 2));
  globalThis.crypto.getRandomValues(bytes);
  return [...bytes]
    .map((b) => b.toString(16).padStart(2, '0'))
    .join('')
    .slice(0, digits);
}
