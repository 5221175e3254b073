/**
 * The metadata records every plane exchanges (docs/contracts.md §3–§6), as zod schemas with inferred
 * types. Records are built with `makePromptTask` / `makeFeatureSpec` / `makeSampleRef` /
 * `makeFeatureHandle`, which check the no-tensor rule, validate, copy and deep-freeze: a record a
 * caller holds can never change under the controller, the queue or the journal.
 *
 * Free-form fields (`payload`, `metadata`, ...) must be JSON values, because refs are journaled
 * and sent across processes; a Map, a Date or `undefined` in them is rejected, not silently lost.
 * Absent optional fields are `null`, not missing, for the same reason.
 */
import { z } from 'zod';
import { DraftStrategyName, SCHEMA_VERSION, TargetRepr } from './enums.ts';
import { assertNoTensors } from './no-tensors.ts';

const Json = z.json();
/** A JSON object: string keys, JSON values. */
export const JsonRecord = z.record(z.string(), Json);
export type JsonRecord = z.infer<typeof JsonRecord>;

const Text = z.string().min(1);
const Count = z.number().int().nonnegative();

/** One unit of rollout work. The controller mints `task-<12 hex>` ids and stamps its run id. */
export const PromptTaskSchema = z.strictObject({
  taskId: Text,
  runId: Text,
  sourceId: Text,
  /** Conversation, text or token ids; online EAGLE3 uses `{ input_ids: [...], loss_mask: [...] }`. */
  payload: JsonRecord,
  maxLength: z.number().int().positive(),
  chatTemplate: z.string().nullable().default(null),
  lossMaskPolicy: JsonRecord.default({}),
  targetModelVersion: z.string().default('unknown'),
  /** Provenance only: there is no weight-version lifecycle. */
  draftWeightVersion: z.string().nullable().default(null),
  /** Incremented by every retryable failure (and prompt-lease expiry). */
  attempt: Count.default(0),
  metadata: JsonRecord.default({}),
});
export type PromptTask = Readonly<z.output<typeof PromptTaskSchema>>;
export type PromptTaskInput = z.input<typeof PromptTaskSchema>;

/** Descriptor of one stored tensor. `dtype` is the element type name, e.g. `bfloat16`, `int64`, `f32`. */
export const FeatureSpecSchema = z.strictObject({
  name: Text,
  shape: z.array(Count),
  dtype: Text,
  deviceHint: z.string().nullable().default(null),
  required: z.boolean().default(true),
  /** Set only on the `target` feature. */
  targetRepr: TargetRepr.nullable().default(null),
  /** Vocab-map version / head version / softmax convention of the target. */
  targetMeta: JsonRecord.default({}),
});
export type FeatureSpec = Readonly<z.output<typeof FeatureSpecSchema>>;
export type FeatureSpecInput = z.input<typeof FeatureSpecSchema>;

/** A pointer to exactly one sample; batching is never baked in. `sampleId` is the dedup key everywhere. */
export const SampleRefSchema = z.strictObject({
  sampleId: Text,
  runId: Text,
  /** The prompt task that produced the sample; null for offline samples. */
  sourceTaskId: z.string().nullable().default(null),
  /** `mem://<store>/<quoted id>?generation=<n>` or `file://<path>`. */
  featureStoreUri: Text,
  /** Logical feature name → store key. */
  featureKeys: z.record(z.string(), z.string()),
  featureSpecs: z.record(z.string(), FeatureSpecSchema),
  strategy: DraftStrategyName,
  schemaVersion: z.number().int().positive().default(SCHEMA_VERSION),
  targetModelVersion: z.string().default('unknown'),
  tokenizerVersion: z.string().default('unknown'),
  draftWeightVersion: z.string().nullable().default(null),
  numTokens: Count.default(0),
  estimatedBytes: Count.default(0),
  /** Carries `target_repr`, `ttt_length`, `max_len`, `format`, `file_index`, `vocab_map_version`, ... */
  metadata: JsonRecord.default({}),
});
export type SampleRef = Readonly<z.output<typeof SampleRefSchema>>;
export type SampleRefInput = z.input<typeof SampleRefSchema>;

/** Lease token returned by `FeatureStore.get`; a release with a stale generation is a no-op. */
export const FeatureHandleSchema = z.strictObject({
  sampleId: Text,
  generation: Count,
  leaseToken: Text,
});
export type FeatureHandle = Readonly<z.output<typeof FeatureHandleSchema>>;
export type FeatureHandleInput = z.input<typeof FeatureHandleSchema>;

export function makePromptTask(input: PromptTaskInput, where = 'PromptTask'): PromptTask {
  return build(PromptTaskSchema, input, where);
}

export function makeFeatureSpec(input: FeatureSpecInput, where = 'FeatureSpec'): FeatureSpec {
  return build(FeatureSpecSchema, input, where);
}

export function makeSampleRef(input: SampleRefInput, where = 'SampleRef'): SampleRef {
  return build(SampleRefSchema, input, where);
}

export function makeFeatureHandle(input: FeatureHandleInput, where = 'FeatureHandle'): FeatureHandle {
  return build(FeatureHandleSchema, input, where);
}

/** Validates a JSON object (worker info, failure detail, ...) and returns a frozen copy. */
export function makeJsonRecord(input: unknown, where: string): Readonly<JsonRecord> {
  return build(JsonRecord, input, where);
}

/**
 * The no-tensor check comes first so a smuggled tensor is reported as such (with its path), not
 * as a schema mismatch. Parsing copies every object and array, so freezing the result never
 * freezes the caller's data.
 */
function build<S extends z.ZodType>(schema: S, input: unknown, where: string): Readonly<z.output<S>> {
  // A record this module already built is frozen and valid: hand it back instead of re-parsing
  // (refs pass through commit, queue and ack many times; re-validation dominated the hot path).
  if (typeof input === 'object' && input !== null && builtBy.get(input) === schema) return input as Readonly<z.output<S>>;
  assertNoTensors(input, where);
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    throw new TypeError(`${where} is invalid:\n${z.prettifyError(parsed.error)}`);
  }
  const record = deepFreeze(parsed.data);
  if (typeof record === 'object' && record !== null) builtBy.set(record, schema);
  return record;
}

/** Records built (validated, deep-frozen) by `build`, with the schema that built them. */
const builtBy = new WeakMap<object, z.ZodType>();

/** Freezes plain objects and arrays all the way down (records hold nothing else after parsing). */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}
