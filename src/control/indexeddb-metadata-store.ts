/**
 * IndexedDbMetadataStore: the durable MetadataStore for the browser (docs/durability.md §4, §5), the
 * IndexedDB counterpart of the SQLite ledger: every write is one IndexedDB transaction, committed
 * with strict durability before its promise resolves.
 *
 * The database is reached through the platform's key-value capability
 * (`Platform.openKeyValueDatabase`, IndexedDB in src/platform/browser.ts), so this file touches no
 * runtime global. Object stores:
 *
 *   committed   auto-increment key (= commit order) → { sampleId, ref }, unique index on sampleId
 *   acked       sampleId → true (the union of acked ids)
 *   marker      'marker' → { globalStep, optimizerDurable }
 *
 * commitSamples is one readwrite transaction: look every id up in the index, insert the new ones
 * in order (insert-or-ignore; fresh = inserted). recordTrainAck is one readwrite transaction over
 * `acked` and `marker`. A transaction that fails (or a body that throws) is aborted, so a failed
 * write records nothing; IndexedDB serialises readwrite transactions over the same stores, so
 * concurrent commits (even from two tabs) report an id fresh exactly once.
 *
 * Nothing is cached: every read is a transaction, so two tabs on the same database see one state,
 * and reopening the database by name (a reloaded or re-opened tab) restores everything.
 */
import { makeSampleRef, type SampleRef } from '../contracts/records.ts';
import type { KeyValueDatabase, KeyValueSchema, KeyValueTransaction, KeyValueHost } from '../ports/storage.ts';
import {
  nextMarkerFields,
  validateRefs,
  validateTrainAck,
  type DurableMarker,
  type MetadataStore,
  type TrainAck,
} from './metadata-store.ts';

const COMMITTED = 'committed';
const BY_SAMPLE_ID = 'sampleId';
const ACKED = 'acked';
const MARKER = 'marker';
const MARKER_KEY = 'marker';

/** The database layout; bump `version` (and extend `stores`) when it changes. */
export const METADATA_DB_SCHEMA: KeyValueSchema = Object.freeze({
  version: 1,
  stores: Object.freeze([
    { name: COMMITTED, autoIncrement: true, indexes: [{ name: BY_SAMPLE_ID, keyPath: 'sampleId', unique: true }] },
    { name: ACKED },
    { name: MARKER },
  ]),
});

interface CommittedRow {
  sampleId: string;
  ref: SampleRef;
}

interface MarkerRow {
  globalStep: number | null;
  optimizerDurable: boolean;
}

/** What the store needs from the platform (pass the Platform itself). */
export type KeyValueOpener = Pick<KeyValueHost, 'openKeyValueDatabase'>;

export class IndexedDbMetadataStore implements MetadataStore {
  private closed = false;
  /** Transactions started and not yet settled; `close` waits for them. */
  private readonly inFlight = new Set<Promise<unknown>>();

  private constructor(private readonly db: KeyValueDatabase) {}

  /** Opens (or creates) the store in database `name`; whatever an earlier tab wrote there is restored. */
  static async open(platform: KeyValueOpener, name: string): Promise<IndexedDbMetadataStore> {
    if (typeof name !== 'string' || name.length === 0)
      throw new TypeError('IndexedDbMetadataStore: database name must be a non-empty string');
    return new IndexedDbMetadataStore(await platform.openKeyValueDatabase(name, METADATA_DB_SCHEMA));
  }

  get name(): string {
    return this.db.name;
  }

  async commitSample(ref: SampleRef): Promise<boolean> {
    return (await this.commitSamples([ref]))[0];
  }

  async commitSamples(refs: readonly SampleRef[]): Promise<boolean[]> {
    const valid = validateRefs(refs, 'IndexedDbMetadataStore.commitSamples');
    if (valid.length === 0) return [];
    return this.run('commit transaction', [COMMITTED], 'readwrite', async (tx) => {
      const existing = await Promise.all(valid.map((ref) => tx.getKeyByIndex(COMMITTED, BY_SAMPLE_ID, ref.sampleId)));
      const seen = new Set<string>();
      const fresh = valid.map((ref, i) => {
        const isFresh = existing[i] === undefined && !seen.has(ref.sampleId);
        seen.add(ref.sampleId);
        return isFresh;
      });
      // Issued in order, so the auto-increment keys follow the batch order.
      const rows: CommittedRow[] = valid.filter((_, i) => fresh[i]).map((ref) => ({ sampleId: ref.sampleId, ref }));
      await Promise.all(rows.map((row) => tx.put(COMMITTED, row)));
      return fresh;
    });
  }

  async recordTrainAck(sampleIds: readonly string[], ack: TrainAck): Promise<void> {
    validateTrainAck(sampleIds, ack, 'IndexedDbMetadataStore.recordTrainAck');
    const ids = [...new Set(sampleIds)];
    const given = { globalStep: ack.globalStep ?? null, optimizerDurable: ack.optimizerDurable };
    await this.run('ack transaction', [ACKED, MARKER], 'readwrite', async (tx) => {
      const previous = this.readMarker(await tx.get(MARKER, MARKER_KEY));
      await Promise.all(ids.map((id) => tx.put(ACKED, true, id)));
      const next: MarkerRow = nextMarkerFields(previous, given);
      await tx.put(MARKER, next, MARKER_KEY);
    });
  }

  async isCommitted(sampleId: string): Promise<boolean> {
    if (typeof sampleId !== 'string') return false;
    return this.run(
      'read',
      [COMMITTED],
      'readonly',
      async (tx) => (await tx.getKeyByIndex(COMMITTED, BY_SAMPLE_ID, sampleId)) !== undefined,
    );
  }

  async getCommitted(sampleId: string): Promise<SampleRef | undefined> {
    if (typeof sampleId !== 'string') return undefined;
    const row = await this.run('read', [COMMITTED], 'readonly', (tx) => tx.getByIndex(COMMITTED, BY_SAMPLE_ID, sampleId));
    return row === undefined ? undefined : this.readRow(row).ref;
  }

  async getCommittedMany(sampleIds: readonly string[]): Promise<(SampleRef | undefined)[]> {
    return this.run('read', [COMMITTED], 'readonly', async (tx) =>
      Promise.all(
        sampleIds.map(async (id) => {
          if (typeof id !== 'string') return undefined;
          const row = await tx.getByIndex(COMMITTED, BY_SAMPLE_ID, id);
          return row === undefined ? undefined : this.readRow(row).ref;
        }),
      ),
    );
  }

  async committedCount(): Promise<number> {
    return this.run('read', [COMMITTED], 'readonly', (tx) => tx.count(COMMITTED));
  }

  async allCommittedIds(): Promise<string[]> {
    // getAll returns key order, and the keys are the auto-increment commit sequence.
    const rows = await this.run('read', [COMMITTED], 'readonly', (tx) => tx.getAll(COMMITTED));
    return rows.map((row) => this.rowSampleId(row));
  }

  /** One readonly transaction over both stores, so the copy is a consistent snapshot. */
  async durableMarker(): Promise<DurableMarker> {
    const [keys, raw] = await this.run('read', [ACKED, MARKER], 'readonly', async (tx) =>
      Promise.all([tx.getAllKeys(ACKED), tx.get(MARKER, MARKER_KEY)] as const),
    );
    const acked = new Set<string>();
    for (const key of keys) {
      if (typeof key !== 'string') throw this.corrupt(`acked key ${JSON.stringify(key)} is not a sample id`);
      acked.add(key);
    }
    const marker = this.readMarker(raw);
    return Object.freeze({ acked, globalStep: marker.globalStep, optimizerDurable: marker.optimizerDurable });
  }

  /** Refuses new calls, waits for started transactions, then closes the connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    this.db.close();
  }

  private run<T>(
    what: string,
    stores: readonly string[],
    mode: 'readonly' | 'readwrite',
    body: (tx: KeyValueTransaction) => Promise<T>,
  ): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`IndexedDbMetadataStore ${this.name}: store is closed`));
    const result = this.db.transaction(stores, mode, body).catch((err: unknown) => {
      const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      const nothing = mode === 'readwrite' ? ', nothing recorded' : '';
      throw new Error(`IndexedDbMetadataStore ${this.name}: ${what} failed${nothing}: ${message}`, { cause: err });
    });
    this.inFlight.add(result);
    const forget = (): void => {
      this.inFlight.delete(result);
    };
    result.then(forget, forget);
    return result;
  }

  private rowSampleId(row: unknown): string {
    const id = (row as Partial<CommittedRow> | null)?.sampleId;
    if (typeof id !== 'string' || id.length === 0)
      throw this.corrupt(`committed row without a sample id: ${JSON.stringify(row)?.slice(0, 120)}`);
    return id;
  }

  /** Re-validates a stored ref (schema, no tensors) and returns it frozen, like a fresh record. */
  private readRow(row: unknown): CommittedRow {
    const sampleId = this.rowSampleId(row);
    const ref = makeSampleRef((row as CommittedRow).ref, `IndexedDbMetadataStore ${this.name} committed ${sampleId}`);
    if (ref.sampleId !== sampleId) throw this.corrupt(`committed row ${sampleId} holds the ref of ${ref.sampleId}`);
    return { sampleId, ref };
  }

  private readMarker(raw: unknown): MarkerRow {
    if (raw === undefined) return { globalStep: null, optimizerDurable: false };
    const row = raw as Partial<MarkerRow> | null;
    const step = row?.globalStep;
    if (typeof row?.optimizerDurable !== 'boolean' || (step !== null && (!Number.isSafeInteger(step) || (step as number) < 0))) {
      throw this.corrupt(`marker row is malformed: ${JSON.stringify(raw)?.slice(0, 120)}`);
    }
    return { globalStep: step as number | null, optimizerDurable: row.optimizerDurable };
  }

  private corrupt(detail: string): Error {
    return new Error(`IndexedDbMetadataStore ${this.name}: ${detail}`);
  }
}
