/**
 * MetadataStore (docs/durability.md §2): commit dedup plus the single durable ack transaction. All
 * recovery-critical state sits behind this interface, so a durable backend is a new
 * implementation injected into the controller, not a controller rewrite.
 *
 * The ack marker is one record: the union of acked ids, the last non-null global step and the last
 * `optimizerDurable` flag (last writer wins). Release state after a restart is derived from it and
 * never stored separately.
 *
 * Methods are async so backends that reach a disk, IndexedDB or a remote service fit the same shape.
 */
import { makeSampleRef, type SampleRef } from '../contracts/records.ts';

export interface TrainAck {
  /** Overwrites the marker's step when given; null/undefined leaves it. */
  readonly globalStep?: number | null;
  readonly optimizerDurable: boolean;
}

export interface DurableMarker {
  readonly acked: ReadonlySet<string>;
  readonly globalStep: number | null;
  readonly optimizerDurable: boolean;
}

export interface MetadataStore {
  /** True when the ref is new, false for a duplicate (dedup key: sampleId only). */
  commitSample(ref: SampleRef): Promise<boolean>;
  /** One transaction for the batch; fresh flag per ref, in order (a repeat within the batch is a duplicate). */
  commitSamples(refs: readonly SampleRef[]): Promise<boolean[]>;
  isCommitted(sampleId: string): Promise<boolean>;
  getCommitted(sampleId: string): Promise<SampleRef | undefined>;
  /** getCommitted of each id, in order, in one read (one round trip for a remote store). */
  getCommittedMany(sampleIds: readonly string[]): Promise<(SampleRef | undefined)[]>;
  committedCount(): Promise<number>;
  /** Committed ids in commit order. */
  allCommittedIds(): Promise<string[]>;
  /** The single atomic, durable ack transaction. It must be durable when the promise resolves. */
  recordTrainAck(sampleIds: readonly string[], ack: TrainAck): Promise<void>;
  /** A snapshot of the marker (a copy: later acks do not change it). */
  durableMarker(): Promise<DurableMarker>;
  /**
   * What opening the store had to repair, in words (e.g. a torn journal tail dropped), or
   * undefined; a resume that then finds state missing names it as the likely cause.
   */
  readonly repairNote?: string;
  /** Where the store writes its acks (a journal file), named when a resume finds the ledger at odds with a checkpoint. */
  readonly source?: string;
  close(): Promise<void>;
}

/**
 * The state every store keeps, with the mutation rules in one place so the in-memory store and
 * the journal replay of the file store cannot drift apart.
 */
export class MetadataState {
  readonly committed = new Map<string, SampleRef>();
  readonly acked = new Set<string>();
  globalStep: number | null = null;
  optimizerDurable = false;

  /** Which refs would be fresh if committed now, without changing anything. */
  freshFlags(refs: readonly SampleRef[]): boolean[] {
    const seen = new Set<string>();
    return refs.map((ref) => {
      const fresh = !this.committed.has(ref.sampleId) && !seen.has(ref.sampleId);
      seen.add(ref.sampleId);
      return fresh;
    });
  }

  applyCommit(refs: readonly SampleRef[]): void {
    for (const ref of refs) if (!this.committed.has(ref.sampleId)) this.committed.set(ref.sampleId, ref);
  }

  applyAck(sampleIds: readonly string[], ack: TrainAck): void {
    for (const id of sampleIds) this.acked.add(id);
    const next = nextMarkerFields(this, ack);
    this.globalStep = next.globalStep;
    this.optimizerDurable = next.optimizerDurable;
  }

  marker(): DurableMarker {
    return Object.freeze({ acked: new Set(this.acked), globalStep: this.globalStep, optimizerDurable: this.optimizerDurable });
  }
}

/**
 * The marker's scalar fields after an ack: the step is overwritten only when given, the durable
 * flag always (last writer wins). Shared by every store so the rule lives in one place.
 */
export function nextMarkerFields(
  previous: { readonly globalStep: number | null; readonly optimizerDurable: boolean },
  ack: TrainAck,
): { globalStep: number | null; optimizerDurable: boolean } {
  const step = ack.globalStep;
  return { globalStep: step !== undefined && step !== null ? step : previous.globalStep, optimizerDurable: ack.optimizerDurable };
}

/**
 * Re-validates refs before a store keeps them: a durable store must never journal a record it
 * could not read back, and a cast object must not slip past the schema.
 */
export function validateRefs(refs: readonly SampleRef[], where: string): SampleRef[] {
  if (!Array.isArray(refs)) throw new TypeError(`${where}: refs must be an array of SampleRefs`);
  return refs.map((ref, i) => {
    if (validatedRefs.has(ref)) return ref;
    const valid = makeSampleRef(ref, `${where} refs[${i}]`);
    validatedRefs.add(valid);
    return valid;
  });
}

/**
 * Records `validateRefs` itself produced. They are deep-frozen copies, so they cannot have changed
 * since: the controller's validation of a commit batch is not repeated by the store (a schema parse
 * per ref per layer dominated the control plane's cost per ref).
 */
const validatedRefs = new WeakSet<object>();

/** Checks an ack's arguments before anything is written. */
export function validateTrainAck(sampleIds: readonly string[], ack: TrainAck, where: string): void {
  if (!Array.isArray(sampleIds)) throw new TypeError(`${where}: sampleIds must be an array of strings`);
  sampleIds.forEach((id, i) => {
    if (typeof id !== 'string' || id.length === 0)
      throw new TypeError(`${where}: sampleIds[${i}] must be a non-empty string, got ${JSON.stringify(id)}`);
  });
  const step = ack.globalStep;
  if (step !== undefined && step !== null && (!Number.isSafeInteger(step) || step < 0)) {
    throw new RangeError(`${where}: globalStep must be a non-negative integer or null, got ${step}`);
  }
  if (typeof ack.optimizerDurable !== 'boolean') throw new TypeError(`${where}: optimizerDurable must be a boolean`);
}

/**
 * The read side of a store that keeps its whole state in process (memory, or the file journal replayed
 * at open): the stores differ only in how a write becomes durable before it is applied.
 */
export abstract class StateBackedMetadataStore implements MetadataStore {
  protected abstract readonly state: MetadataState;

  abstract commitSamples(refs: readonly SampleRef[]): Promise<boolean[]>;
  abstract recordTrainAck(sampleIds: readonly string[], ack: TrainAck): Promise<void>;
  abstract close(): Promise<void>;

  async commitSample(ref: SampleRef): Promise<boolean> {
    return (await this.commitSamples([ref]))[0];
  }
  async isCommitted(sampleId: string): Promise<boolean> {
    return this.state.committed.has(sampleId);
  }
  async getCommitted(sampleId: string): Promise<SampleRef | undefined> {
    return this.state.committed.get(sampleId);
  }
  async getCommittedMany(sampleIds: readonly string[]): Promise<(SampleRef | undefined)[]> {
    return sampleIds.map((id) => this.state.committed.get(id));
  }
  async committedCount(): Promise<number> {
    return this.state.committed.size;
  }
  async allCommittedIds(): Promise<string[]> {
    return [...this.state.committed.keys()];
  }
  async durableMarker(): Promise<DurableMarker> {
    return this.state.marker();
  }
}

/** Process-local store: nothing survives a restart (as in SpecForge's first runtime design; the reference for conformance). */
export class InMemoryMetadataStore extends StateBackedMetadataStore {
  protected readonly state = new MetadataState();

  async commitSamples(refs: readonly SampleRef[]): Promise<boolean[]> {
    const valid = validateRefs(refs, 'InMemoryMetadataStore.commitSamples');
    const fresh = this.state.freshFlags(valid);
    this.state.applyCommit(valid);
    return fresh;
  }
  async recordTrainAck(sampleIds: readonly string[], ack: TrainAck): Promise<void> {
    validateTrainAck(sampleIds, ack, 'InMemoryMetadataStore.recordTrainAck');
    this.state.applyAck(sampleIds, ack);
  }
  async close(): Promise<void> {}
}
