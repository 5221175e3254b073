/**
 * FileMetadataStore: the durable MetadataStore for Node and Deno (docs/durability.md §4, the counterpart of
 * SpecForge's SQLite ledger; recovery §5), built on an append-only journal plus periodic snapshots.
 *
 * Layout inside `dir`:
 *   snapshot.json          full state as of generation g, replaced atomically (FileStore.writeAtomic)
 *   journal-<g:08d>.log    records appended after snapshot g (framing: journal.ts)
 *
 * A write is acknowledged (its promise resolves) only after its frame is appended and fsynced, so
 * recovery (load the snapshot, replay journals ≥ g in order, drop a torn tail) never loses an
 * acknowledged write. The previous generation's journal is kept one extra round: replaying an old
 * journal is harmless (commits dedup, acks are unions with last-writer-wins flags), and it covers a
 * snapshot rename that a power cut made invisible again.
 *
 * After any failed append the store refuses further writes: the file may end in a partial frame,
 * and only the recovery in `open` knows how to cut it off.
 */
import type { AppendLog, FileStore } from '../ports/storage.ts';
import type { SampleRef } from '../contracts/records.ts';
import { encodeFrame, JournalCorruptError, scanJournal } from './journal.ts';
import { MetadataState, StateBackedMetadataStore, validateRefs, validateTrainAck, type TrainAck } from './metadata-store.ts';
import { openSealedJson, sealJson } from '../util/sealed-json.ts';

export interface FileMetadataStoreOptions {
  /** Folder inside the FileStore; default `metadata`. */
  dir?: string;
  /** Journal records between snapshots; default 1000. */
  snapshotEvery?: number;
  /** fsync commit batches too (acks are always fsynced); default true. */
  syncCommits?: boolean;
}

export interface RecoveryReport {
  /** Generation of the snapshot loaded, or null when there was none. */
  readonly snapshotGeneration: number | null;
  readonly journalRecordsReplayed: number;
  /** Bytes of torn tail dropped (never-acknowledged partial writes). */
  readonly tornBytesDropped: number;
}

type JournalRecord =
  { type: 'commit'; refs: SampleRef[] } | { type: 'ack'; ids: string[]; globalStep: number | null; optimizerDurable: boolean };

const SNAPSHOT_FORMAT = 'speclab-metadata-snapshot/1';
const JOURNAL_NAME = /^journal-(\d{8})\.log$/;

export class FileMetadataStore extends StateBackedMetadataStore {
  protected readonly state: MetadataState;
  private log: AppendLog;
  private generation: number;
  private recordsSinceSnapshot = 0;
  private broken: Error | undefined;
  private closed = false;
  /** Serialises writes so journal order equals the order state changes are applied. */
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly files: FileStore,
    private readonly dir: string,
    private readonly snapshotEvery: number,
    private readonly syncCommits: boolean,
    state: MetadataState,
    generation: number,
    log: AppendLog,
    readonly recovery: RecoveryReport,
  ) {
    super();
    this.state = state;
    this.generation = generation;
    this.log = log;
  }

  get repairNote(): string | undefined {
    if (this.recovery.tornBytesDropped === 0) return undefined;
    return `opening ${this.files.root}/${this.dir} dropped a torn tail of ${this.recovery.tornBytesDropped} bytes from the last journal (taken as a write cut short by a crash)`;
  }

  /** The journal that takes this store's writes (acks included) now. */
  get source(): string {
    return `${this.files.root}/${journalPath(this.dir, this.generation)}`;
  }

  /** Opens (or creates) the store in `files`, recovering whatever a previous process left. */
  static async open(files: FileStore, options: FileMetadataStoreOptions = {}): Promise<FileMetadataStore> {
    const dir = options.dir ?? 'metadata';
    const snapshotEvery = options.snapshotEvery ?? 1000;
    if (!Number.isInteger(snapshotEvery) || snapshotEvery < 1) {
      throw new RangeError(`FileMetadataStore: snapshotEvery must be a positive integer, got ${snapshotEvery}`);
    }
    const state = new MetadataState();
    const snapshotPath = `${dir}/snapshot.json`;
    let generation = 0;
    let snapshotGeneration: number | null = null;
    if (await files.exists(snapshotPath)) {
      generation = snapshotGeneration = loadSnapshot(await files.read(snapshotPath), `${files.root}/${snapshotPath}`, state);
    }
    const names = await files.list(dir);
    const journals = names
      .map((n) => JOURNAL_NAME.exec(n))
      .filter((m) => m !== null)
      .map((m) => Number(m[1]));
    if (snapshotGeneration === null && journals.some((g) => g > 0) && !journals.includes(0)) {
      // Journals after generation 0 hold only changes since a snapshot; without it the state is partial.
      throw new JournalCorruptError(
        `${files.root}/${snapshotPath} is missing but journals of later generations exist (${journals.join(', ')}); restore the snapshot`,
      );
    }
    let replayed = 0;
    let torn = 0;
    for (const gen of journals.filter((g) => g >= generation).sort((x, y) => x - y)) {
      const path = journalPath(dir, gen);
      const scan = scanJournal(await files.read(path), `${files.root}/${path}`);
      for (const record of scan.records) applyRecord(state, record, `${files.root}/${path}`);
      replayed += scan.records.length;
      torn += scan.tornBytes;
      generation = gen;
    }
    // Leftovers of an interrupted snapshot write, and journals two generations old.
    for (const name of names) {
      const gen = JOURNAL_NAME.exec(name);
      if (name.startsWith('snapshot.json.tmp-') || (gen !== null && Number(gen[1]) < (snapshotGeneration ?? 0) - 1)) {
        await files.remove(`${dir}/${name}`);
      }
    }
    const report = { snapshotGeneration, journalRecordsReplayed: replayed, tornBytesDropped: torn };
    const log = await files.openAppendLog(journalPath(dir, generation));
    const store = new FileMetadataStore(files, dir, snapshotEvery, options.syncCommits ?? true, state, generation, log, report);
    store.recordsSinceSnapshot = replayed;
    // Never append after a torn tail: start a fresh generation so the garbage is never read again.
    if (torn > 0) await store.compact();
    return store;
  }

  async commitSamples(refs: readonly SampleRef[]): Promise<boolean[]> {
    const valid = validateRefs(refs, 'FileMetadataStore.commitSamples');
    return this.exclusive(async () => {
      const fresh = this.state.freshFlags(valid);
      const added = valid.filter((_, i) => fresh[i]);
      if (added.length > 0) {
        await this.append({ type: 'commit', refs: added }, this.syncCommits);
        this.state.applyCommit(added);
      }
      return fresh;
    });
  }

  async recordTrainAck(sampleIds: readonly string[], ack: TrainAck): Promise<void> {
    validateTrainAck(sampleIds, ack, 'FileMetadataStore.recordTrainAck');
    const record: JournalRecord = {
      type: 'ack',
      ids: [...sampleIds],
      globalStep: ack.globalStep ?? null,
      optimizerDurable: ack.optimizerDurable,
    };
    await this.exclusive(async () => {
      await this.append(record, true);
      this.state.applyAck(record.ids, record);
    });
  }

  /** Refuses new writes, waits for queued ones, then closes the journal. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.tail.catch(() => {});
    await this.log.close();
  }

  /** Writes already queued when `close` is called still run; later ones are refused. */
  private exclusive<T>(op: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`FileMetadataStore ${this.where()}: store is closed`));
    const run = this.tail.then(async () => {
      if (this.broken)
        throw new Error(
          `FileMetadataStore ${this.where()}: an earlier journal write failed (${this.broken.message}); reopen the store to recover`,
        );
      if (this.recordsSinceSnapshot >= this.snapshotEvery) await this.compact();
      return op();
    });
    this.tail = run.catch(() => {});
    return run;
  }

  private async append(record: JournalRecord, sync: boolean): Promise<void> {
    try {
      await this.log.append(encodeFrame(record), { sync });
    } catch (err) {
      this.broken = err as Error;
      // Not applied here; if the bytes did reach the disk, recovery replays them, which is safe
      // because commits dedup and acks are idempotent unions (callers retry either way).
      throw new Error(`FileMetadataStore ${this.where()}: journal write failed, change not applied: ${(err as Error).message}`, {
        cause: err,
      });
    }
    this.recordsSinceSnapshot++;
  }

  /** Writes the full state as generation g+1 and switches to a fresh journal. */
  private async compact(): Promise<void> {
    const next = this.generation + 1;
    await this.files.writeAtomic(`${this.dir}/snapshot.json`, encodeSnapshot(next, this.state));
    try {
      const log = await this.files.openAppendLog(journalPath(this.dir, next));
      const old = this.log;
      this.log = log;
      this.generation = next;
      this.recordsSinceSnapshot = 0;
      await old.close();
      for (const name of await this.files.list(this.dir)) {
        const gen = JOURNAL_NAME.exec(name);
        if (gen !== null && Number(gen[1]) < next - 1) await this.files.remove(`${this.dir}/${name}`);
      }
    } catch (err) {
      // The new snapshot is visible but appends could land in a journal recovery would skip.
      this.broken = err as Error;
      throw err;
    }
  }

  private where(): string {
    return `${this.files.root}/${this.dir}`;
  }
}

function journalPath(dir: string, generation: number): string {
  return `${dir}/journal-${String(generation).padStart(8, '0')}.log`;
}

function encodeSnapshot(generation: number, state: MetadataState): Uint8Array {
  const snapshot = {
    format: SNAPSHOT_FORMAT,
    generation,
    committed: [...state.committed.values()],
    acked: [...state.acked],
    globalStep: state.globalStep,
    optimizerDurable: state.optimizerDurable,
  };
  // Sealed: an edited globalStep or a dropped committed id would otherwise parse into another run.
  return sealJson(snapshot);
}

/** Fills `state` from a snapshot file and returns its generation. */
function loadSnapshot(bytes: Uint8Array, where: string, state: MetadataState): number {
  let snap: Record<string, unknown>;
  try {
    snap = openSealedJson(bytes, where, 'the ledger snapshot (committed refs, acked ids, global step)') as Record<string, unknown>;
  } catch (err) {
    throw new JournalCorruptError((err as Error).message);
  }
  if (snap === null || typeof snap !== 'object') throw new JournalCorruptError(`${where}: not a ${SNAPSHOT_FORMAT} snapshot`);
  const generation = snap.generation;
  if (
    snap.format !== SNAPSHOT_FORMAT ||
    !Number.isSafeInteger(generation) ||
    !Array.isArray(snap.committed) ||
    !Array.isArray(snap.acked)
  ) {
    throw new JournalCorruptError(`${where}: not a ${SNAPSHOT_FORMAT} snapshot`);
  }
  state.applyCommit(validateRefs(snap.committed as SampleRef[], `${where} committed`));
  const step = snap.globalStep as number | null;
  const ack = { globalStep: step, optimizerDurable: snap.optimizerDurable as boolean };
  validateTrainAck(snap.acked as string[], ack, `${where} marker`);
  state.applyAck(snap.acked as string[], ack);
  return generation as number;
}

function applyRecord(state: MetadataState, record: unknown, where: string): void {
  const r = record as Partial<JournalRecord> | null;
  if (r?.type === 'commit' && Array.isArray(r.refs)) {
    state.applyCommit(validateRefs(r.refs, `${where} commit record`));
  } else if (r?.type === 'ack' && Array.isArray(r.ids)) {
    const ack = { globalStep: r.globalStep ?? null, optimizerDurable: r.optimizerDurable as boolean };
    validateTrainAck(r.ids, ack, `${where} ack record`);
    state.applyAck(r.ids, ack);
  } else {
    throw new JournalCorruptError(`${where}: unknown journal record ${JSON.stringify(record).slice(0, 120)}`);
  }
}
