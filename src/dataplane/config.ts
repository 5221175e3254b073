/**
 * Data-plane configuration (zod-validated). Every choice is explicit: the adapter (`impl`), and
 * for the transfer queue its backend. A typo'd key is an error, not a silently ignored setting.
 */
import { z } from 'zod';
import { DataPlaneError } from './types.ts';

const ObservabilitySchema = z.strictObject({
  enabled: z.boolean(),
  /** Producers' back-pressure threshold in bytes outstanding (absent: never blocked). */
  maxBytesOutstanding: z.number().int().positive().optional(),
});

const LocalBackendSchema = z.strictObject({
  kind: z.literal('local'),
  /** Where cells live: `gpu` tensors (needs a Gpu), `host` typed arrays, or `auto` (gpu when one is given). */
  columns: z.enum(['auto', 'host', 'gpu']),
});

const RedisBackendSchema = z.strictObject({
  kind: z.literal('redis'),
  /** e.g. redis://127.0.0.1:6399/0 */
  url: z.string().regex(/^rediss?:\/\/[^\s]+$/, 'must be a redis:// or rediss:// URL'),
  /** Namespaces every key of this data plane on the server. */
  keyPrefix: z.string().min(1),
});

export const DataPlaneConfigSchema = z.discriminatedUnion('impl', [
  z.strictObject({
    /** In-process passthrough: rows are kept by reference, no store, no copies. */
    impl: z.literal('noop'),
    claimPollMs: z.number().int().positive().max(60_000),
    observability: ObservabilitySchema.optional(),
  }),
  z.strictObject({
    impl: z.literal('transferQueue'),
    backend: z.discriminatedUnion('kind', [LocalBackendSchema, RedisBackendSchema]),
    /** Longest sleep between claim attempts (local backends also wake on every put). */
    claimPollMs: z.number().int().positive().max(60_000),
    observability: ObservabilitySchema.optional(),
  }),
]);

export type DataPlaneConfig = z.infer<typeof DataPlaneConfigSchema>;

/** Parses a config; errors name every offending path. */
export function parseDataPlaneConfig(value: unknown): DataPlaneConfig {
  const parsed = DataPlaneConfigSchema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '<root>'}: ${i.message}`).join('; ');
    throw new DataPlaneError('invalid_argument', `invalid data plane config: ${issues}`);
  }
  return parsed.data;
}
