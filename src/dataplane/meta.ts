/**
 * KVBatchMeta: the small handle that crosses processes instead of tensors (docs/dataplane.md §3).
 *
 * Unlike upstream's mutable dataclass, this is an immutable value: every array and tag record is
 * frozen, and every transform (`subset`, `slice`, `drop`, `concat`, `withFields`, `stampTags`)
 * returns a new meta. Upstream's transforms shared tag dicts between parent and child, so a tag
 * stamped on a shard silently changed the parent; freezing makes that impossible.
 */
import { DataPlaneError } from './errors.ts';

/** Tags are primitives only, so they can be filtered without fetching tensors and stored anywhere. */
export type TagValue = string | number | boolean | null;

/** JSON-compatible batch-level bag (`extraInfo`): packing plans, pad targets, rollout metrics. */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** The tag whose integer value per row becomes `sequenceLengths` (unpadded token count). */
export const SEQ_LEN_TAG = 'seq_len';

export interface KVBatchMetaInit {
  readonly partition: string;
  readonly taskName?: string | null;
  readonly sampleIds: readonly string[];
  readonly fields?: readonly string[] | null;
  readonly sequenceLengths?: readonly number[] | null;
  readonly tags?: readonly Readonly<Record<string, unknown>>[] | null;
  readonly extraInfo?: Readonly<Record<string, unknown>>;
  /** Set on leased claims; `ackClaim`/`releaseClaim` settle only rows still held by this lease. */
  readonly leaseId?: string | null;
}

/** The plain record form (`toJSON`/`fromJSON`), e.g. to send a claim to another process. */
export interface KVBatchMetaRecord {
  partition: string;
  taskName: string | null;
  sampleIds: string[];
  fields: string[] | null;
  sequenceLengths: number[] | null;
  tags: Record<string, TagValue>[] | null;
  extraInfo: Record<string, JsonValue>;
  leaseId: string | null;
}

export class KVBatchMeta {
  readonly partition: string;
  readonly taskName: string | null;
  readonly sampleIds: readonly string[];
  /** Put receipt: the fields that put wrote. Claim: the required fields. Not the partition schema. */
  readonly fields: readonly string[] | null;
  readonly sequenceLengths: readonly number[] | null;
  readonly tags: readonly Readonly<Record<string, TagValue>>[] | null;
  readonly extraInfo: Readonly<Record<string, JsonValue>>;
  readonly leaseId: string | null;

  constructor(init: KVBatchMetaInit) {
    if (typeof init.partition !== 'string' || init.partition === '') {
      throw new DataPlaneError('invalid_argument', 'KVBatchMeta.partition must be a non-empty string');
    }
    this.partition = init.partition;
    this.taskName = init.taskName ?? null;
    if (!Array.isArray(init.sampleIds)) throw new DataPlaneError('invalid_argument', 'KVBatchMeta.sampleIds must be an array of strings');
    init.sampleIds.forEach((id, i) => {
      if (typeof id !== 'string' || id === '')
        throw new DataPlaneError('invalid_argument', `KVBatchMeta.sampleIds[${i}] must be a non-empty string, got ${JSON.stringify(id)}`);
    });
    this.sampleIds = Object.freeze([...init.sampleIds]);
    this.fields = init.fields == null ? null : Object.freeze(dedupe(init.fields, 'KVBatchMeta.fields'));

    if (init.sequenceLengths == null) {
      this.sequenceLengths = null;
    } else {
      if (init.sequenceLengths.length !== this.sampleIds.length) {
        throw new DataPlaneError(
          'invalid_argument',
          `KVBatchMeta.sequenceLengths has ${init.sequenceLengths.length} entries for ${this.sampleIds.length} samples (must align 1:1)`,
        );
      }
      init.sequenceLengths.forEach((n, i) => {
        if (!Number.isInteger(n) || n < 0) {
          throw new DataPlaneError(
            'invalid_argument',
            `KVBatchMeta.sequenceLengths[${i}] (sample ${JSON.stringify(this.sampleIds[i])}) must be a non-negative integer, got ${n}`,
          );
        }
      });
      this.sequenceLengths = Object.freeze([...init.sequenceLengths]);
    }

    if (init.tags == null) {
      this.tags = null;
    } else {
      if (init.tags.length !== this.sampleIds.length) {
        throw new DataPlaneError(
          'invalid_argument',
          `KVBatchMeta.tags has ${init.tags.length} entries for ${this.sampleIds.length} samples (must align 1:1)`,
        );
      }
      this.tags = Object.freeze(
        init.tags.map((row, i) => validateTagRecord(row, `KVBatchMeta.tags[${i}] (sample ${JSON.stringify(this.sampleIds[i])})`)),
      );
    }
    this.extraInfo = freezeJson(init.extraInfo ?? {}, 'KVBatchMeta.extraInfo') as Readonly<Record<string, JsonValue>>;
    this.leaseId = init.leaseId ?? null;
    Object.freeze(this);
  }

  get size(): number {
    return this.sampleIds.length;
  }

  /** Rows at the given positions, in the given order (duplicates repeat rows). */
  subset(indices: readonly number[]): KVBatchMeta {
    for (const [k, i] of indices.entries()) {
      if (!Number.isInteger(i) || i < 0 || i >= this.size) {
        throw new DataPlaneError('invalid_argument', `subset index ${k} is ${i}, outside [0, ${this.size})`);
      }
    }
    return this.pick(indices);
  }

  /** Contiguous rows [start, stop), clamped like Array.prototype.slice (negative counts from the end). */
  slice(start: number, stop: number = this.size): KVBatchMeta {
    const positions = [...this.sampleIds.keys()].slice(start, stop);
    return this.pick(positions);
  }

  /** Complement of `subset`, original order kept; indices act as a set. Null when every row is dropped. */
  drop(indices: readonly number[]): KVBatchMeta | null {
    const gone = new Set(indices);
    const kept = [...this.sampleIds.keys()].filter((i) => !gone.has(i));
    return kept.length === 0 ? null : this.pick(kept);
  }

  /**
   * Append other metas' rows. Partitions and field lists must agree (a silent mix would make
   * `getData(meta, meta.fields)` read fields some rows never claimed). Lengths/tags survive only
   * when every input has them; the lease survives only when every input shares it.
   */
  concat(...others: readonly KVBatchMeta[]): KVBatchMeta {
    const all = [this, ...others];
    for (const [k, m] of others.entries()) {
      if (m.partition !== this.partition) {
        throw new DataPlaneError(
          'invalid_argument',
          `concat: meta ${k + 1} is in partition ${JSON.stringify(m.partition)}, expected ${JSON.stringify(this.partition)}`,
        );
      }
      if (!sameList(m.fields, this.fields)) {
        throw new DataPlaneError(
          'invalid_argument',
          `concat: meta ${k + 1} has fields ${JSON.stringify(m.fields)}, expected ${JSON.stringify(this.fields)}`,
        );
      }
    }
    return new KVBatchMeta({
      partition: this.partition,
      taskName: this.taskName,
      sampleIds: all.flatMap((m) => m.sampleIds),
      fields: this.fields,
      sequenceLengths: all.every((m) => m.sequenceLengths !== null) ? all.flatMap((m) => m.sequenceLengths!) : null,
      tags: all.every((m) => m.tags !== null) ? all.flatMap((m) => m.tags!) : null,
      extraInfo: this.extraInfo,
      leaseId: all.every((m) => m.leaseId === this.leaseId) ? this.leaseId : null,
    });
  }

  /** Union of current and new field names, first occurrence wins. */
  withFields(names: readonly string[]): KVBatchMeta {
    return this.with({ fields: dedupe([...(this.fields ?? []), ...names], 'withFields') });
  }

  /**
   * A new meta with per-row scalar tags added (e.g. `std`, `total_reward`). Values must be
   * primitives; each column must have one value per row. Local only: the store is not touched.
   */
  stampTags(scalars: Readonly<Record<string, ArrayLike<unknown>>>): KVBatchMeta {
    const rows = this.sampleIds.map((_, i) => ({ ...(this.tags?.[i] ?? {}) }) as Record<string, unknown>);
    for (const [name, values] of Object.entries(scalars)) {
      if (values.length !== this.size) {
        throw new DataPlaneError(
          'invalid_argument',
          `stampTags: tag ${JSON.stringify(name)} has ${values.length} values for ${this.size} rows`,
        );
      }
      for (let i = 0; i < this.size; i++) rows[i][name] = values[i];
    }
    const stamped = rows.map((row, i) => validateTagRecord(row, `stampTags row ${i} (sample ${JSON.stringify(this.sampleIds[i])})`));
    return this.with({ tags: stamped, sequenceLengths: this.sequenceLengths ?? lengthsFromTags(stamped) });
  }

  /** A copy with some attributes replaced (validated like a fresh meta). */
  with(changes: Partial<KVBatchMetaInit>): KVBatchMeta {
    return new KVBatchMeta({ ...this.toJSON(), ...changes });
  }

  toJSON(): KVBatchMetaRecord {
    return {
      partition: this.partition,
      taskName: this.taskName,
      sampleIds: [...this.sampleIds],
      fields: this.fields && [...this.fields],
      sequenceLengths: this.sequenceLengths && [...this.sequenceLengths],
      tags: this.tags && this.tags.map((t) => ({ ...t })),
      extraInfo: JSON.parse(JSON.stringify(this.extraInfo)) as Record<string, JsonValue>,
      leaseId: this.leaseId,
    };
  }

  /** Rebuild from a record (e.g. parsed JSON from another process); validated like a fresh meta. */
  static fromJSON(record: unknown): KVBatchMeta {
    if (record === null || typeof record !== 'object' || Array.isArray(record)) {
      throw new DataPlaneError('invalid_argument', 'KVBatchMeta.fromJSON needs an object record');
    }
    const r = record as Partial<KVBatchMetaRecord>;
    return new KVBatchMeta({
      partition: r.partition as string,
      taskName: r.taskName,
      sampleIds: r.sampleIds as string[],
      fields: r.fields,
      sequenceLengths: r.sequenceLengths,
      tags: r.tags,
      extraInfo: r.extraInfo,
      leaseId: r.leaseId,
    });
  }

  private pick(positions: readonly number[]): KVBatchMeta {
    return new KVBatchMeta({
      partition: this.partition,
      taskName: this.taskName,
      sampleIds: positions.map((i) => this.sampleIds[i]),
      fields: this.fields,
      sequenceLengths: this.sequenceLengths && positions.map((i) => this.sequenceLengths![i]),
      tags: this.tags && positions.map((i) => this.tags![i]),
      extraInfo: this.extraInfo,
      leaseId: this.leaseId,
    });
  }
}

/** Checks one tag value; returns it, or throws naming `where`. */
export function validateTagValue(value: unknown, where: string): TagValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new DataPlaneError('invalid_argument', `${where} is ${value}; tag numbers must be finite`);
    return value;
  }
  const kind = value === undefined ? 'undefined' : typeof value === 'object' ? (value.constructor?.name ?? 'object') : typeof value;
  throw new DataPlaneError('invalid_argument', `${where} is a ${kind}; tags hold primitives only (string, finite number, boolean, null)`);
}

/** A frozen, validated copy of one row's tags. */
export function validateTagRecord(row: unknown, where: string): Readonly<Record<string, TagValue>> {
  if (row === null || typeof row !== 'object' || Array.isArray(row)) {
    throw new DataPlaneError('invalid_argument', `${where} must be a plain object of primitive tags`);
  }
  const out: Record<string, TagValue> = {};
  for (const [name, value] of Object.entries(row)) {
    if (name === '') throw new DataPlaneError('invalid_argument', `${where} has an empty tag name`);
    out[name] = validateTagValue(value, `${where}.${name}`);
  }
  return Object.freeze(out);
}

/** `seq_len` per row when every row carries a non-negative integer one; otherwise null. */
export function lengthsFromTags(tags: readonly Readonly<Record<string, TagValue>>[] | null): number[] | null {
  if (tags === null || tags.length === 0) return null;
  const lengths: number[] = [];
  for (const t of tags) {
    const n = t[SEQ_LEN_TAG];
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) return null;
    lengths.push(n);
  }
  return lengths;
}

function dedupe(names: readonly string[], where: string): string[] {
  const out: string[] = [];
  for (const n of names) {
    if (typeof n !== 'string' || n === '')
      throw new DataPlaneError('invalid_argument', `${where}: field names must be non-empty strings, got ${JSON.stringify(n)}`);
    if (!out.includes(n)) out.push(n);
  }
  return out;
}

function sameList(a: readonly string[] | null, b: readonly string[] | null): boolean {
  if (a === null || b === null) return a === b;
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function freezeJson(value: unknown, path: string): JsonValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new DataPlaneError('invalid_argument', `${path} is ${value}; extraInfo must be JSON`);
    return value;
  }
  if (Array.isArray(value)) return Object.freeze(value.map((v, i) => freezeJson(v, `${path}[${i}]`)));
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, JsonValue> = {};
    for (const [k, v] of Object.entries(value)) out[k] = freezeJson(v, `${path}.${k}`);
    return Object.freeze(out);
  }
  throw new DataPlaneError(
    'invalid_argument',
    `${path} is not JSON data (${typeof value}); tensors go through the data plane, not metadata`,
  );
}
