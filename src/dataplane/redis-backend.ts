/**
 * Cross-process backend on Redis. Every operation is ONE Lua script, which Redis runs atomically
 * (redis-backend-scripts.ts: the scripts, their arguments and replies, and the key layout, with
 * K = `<prefix>{<partition>}`). This file is the client side: it encodes each call's arguments,
 * runs its script, and decodes the reply, rebuilding a script's own refusal as that DataPlaneError.
 *
 * The socket client lives behind the platform boundary (src/platform/redis-node.ts) and is injected
 * as a `RedisLink`. Waiting happens here, client-side, between attempts (never inside a script).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { DType } from '../gpu/tensor.ts';
import type { Backend, ClaimAttempt, ClaimRequest, PutRequest, RegisterMode, SettleAction } from './client.ts';
import { hostArray, toHostRow } from './column-store.ts';
import type { TagValue } from './meta.ts';
import { checkName, isDType } from './names.ts';
import { DataPlaneError, listIds, type PartitionStats, type RowValue } from './types.ts';
import type { RedisArg, RedisLink, RedisReply } from '../ports/redis-link.ts';
import { CLAIM, CLEAR, CONSUMED, GET, PUT, REGISTER, SETTLE, STATS } from './redis-backend-scripts.ts';

const decoder = new TextDecoder();

export interface RedisBackendOptions {
  /** Namespaces every key, so several runs or tests can share one server. */
  readonly keyPrefix: string;
  /** Needed only to put GPU `Tensor` rows (they are read back to bytes). */
  readonly gpu?: Gpu;
}

export class RedisBackend implements Backend {
  readonly kind = 'transferQueue/redis';

  constructor(
    private readonly link: RedisLink,
    private readonly options: RedisBackendOptions,
  ) {
    // A brace in the prefix would move the hash tag off the partition name, so partitions could share keys.
    if (typeof options.keyPrefix !== 'string' || /[{}]/.test(options.keyPrefix))
      throw new DataPlaneError('invalid_argument', `Redis keyPrefix ${JSON.stringify(options.keyPrefix)} must be a string without { or }`);
  }

  async register(partition: string, fields: Readonly<Record<string, DType>>, tasks: readonly string[], mode: RegisterMode): Promise<void> {
    const names = Object.keys(fields);
    await this.run('register', REGISTER, partition, [
      mode === 'replace' ? '1' : mode === 'create' ? '2' : '0',
      names.length,
      ...names,
      ...names.map((f) => fields[f]),
      ...tasks,
    ]);
  }

  async put(request: PutRequest): Promise<void> {
    const args: RedisArg[] = [request.sampleIds.length, request.fields.length, ...request.fields];
    for (const [i, id] of request.sampleIds.entries()) {
      const tags = Object.entries(request.tags?.[i] ?? {});
      args.push(id, tags.length);
      for (const [tag, value] of tags) args.push(tag, JSON.stringify(value));
      for (const [f, field] of request.fields.entries()) {
        const row = await toHostRow(request.rows[f][i], this.options.gpu, `put ${request.partition}/${id}/${field}`);
        args.push(`${row.dtype}|${row.shape.join(',')}`, new Uint8Array(row.data.buffer, row.data.byteOffset, row.data.byteLength));
      }
    }
    await this.run('put', PUT, request.partition, args);
  }

  async tryClaim(request: ClaimRequest): Promise<ClaimAttempt> {
    const reply = asArray(
      await this.run('claim', CLAIM, request.partition, [
        request.task,
        request.batchSize,
        request.minBatch,
        request.leaseMs ?? 0,
        request.leaseId ?? '',
        ...request.requiredFields,
      ]),
    );
    if (reply[0] === 0) {
      const missing: Record<string, number> = {};
      request.requiredFields.forEach((f, j) => (missing[f] = reply[2 + j] as number));
      return { ok: false, ready: reply[1] as number, missing };
    }
    const sampleIds: string[] = [];
    const tags: Record<string, TagValue>[] = [];
    for (let k = 1; k < reply.length;) {
      sampleIds.push(text(reply[k]));
      const n = reply[k + 1] as number;
      const row: Record<string, TagValue> = {};
      for (let t = 0; t < n; t++) row[text(reply[k + 2 + 2 * t])] = JSON.parse(text(reply[k + 3 + 2 * t])) as TagValue;
      tags.push(row);
      k += 2 + 2 * n;
    }
    return { ok: true, sampleIds, tags };
  }

  async settle(
    partition: string,
    task: string,
    leaseId: string,
    ids: readonly string[],
    action: SettleAction,
  ): Promise<{ settled: string[]; lost: string[] }> {
    const [settled, lost] = asArray(await this.run('settle', SETTLE, partition, [task, leaseId, action, ...ids]));
    return { settled: asArray(settled).map(text), lost: asArray(lost).map(text) };
  }

  async consumed(partition: string, tasks: readonly string[]): Promise<boolean> {
    return (await this.run('consumed', CONSUMED, partition, tasks)) === 1;
  }

  async get(partition: string, ids: readonly string[], fields: readonly string[]): Promise<Record<string, RowValue[]>> {
    const reply = asArray(await this.run('get', GET, partition, [ids.length, ...ids, ...fields]));
    if (reply[0] === 0) {
      const unknown = asArray(reply[1]).map(text);
      if (unknown.length > 0)
        throw new DataPlaneError(
          'unknown_sample',
          `get from partition ${JSON.stringify(partition)}: ${unknown.length} unknown or cleared sample id(s): ${listIds(unknown)}`,
        );
      const unproduced = asArray(reply[2]).map(text);
      throw new DataPlaneError(
        'field_not_produced',
        `get from partition ${JSON.stringify(partition)}: ${unproduced.length} (sample/field) cell(s) not produced yet: ${listIds(unproduced)}`,
      );
    }
    const out: Record<string, RowValue[]> = Object.fromEntries(fields.map((f) => [f, [] as RowValue[]]));
    let k = 1;
    for (const id of ids) {
      for (const field of fields) {
        out[field].push(decodeRow(text(reply[k]), reply[k + 1] as Uint8Array, `${partition}/${id}/${field}`));
        k += 2;
      }
    }
    return out;
  }

  async clear(partition: string, target: readonly string[] | 'all'): Promise<number> {
    return (await this.run('clear', CLEAR, partition, target === 'all' ? ['1'] : ['0', ...target])) as number;
  }

  async stats(partition: string): Promise<PartitionStats> {
    const [samples, bytes, fieldPairs, tasks] = asArray(await this.run('stats', STATS, partition, []));
    const pairs = asArray(fieldPairs).map(text);
    const fields: Record<string, DType> = {};
    for (let i = 0; i < pairs.length; i += 2) fields[pairs[i]] = pairs[i + 1] as DType;
    return { partition, samples: samples as number, bytesHeld: bytes as number, fields, consumerTasks: asArray(tasks).map(text).sort() };
  }

  waitForChange(ms: number): Promise<void> {
    // Other processes change the store, so there is nothing local to wait on: poll.
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  async close(): Promise<void> {
    // Only the connection is ours; the data belongs to every process sharing the server.
    await this.link.close();
  }

  /**
   * Runs one script. Its own refusals ("DP <code> …") come back as that DataPlaneError; anything
   * else (a lost connection, a timeout, a Redis error) as `unavailable`, naming the operation, so a
   * caller never sees a raw client error.
   */
  private async run(op: string, script: string, partition: string, args: readonly RedisArg[]): Promise<RedisReply> {
    // The partition becomes the hash tag of every key: only a checked name keeps partitions apart.
    const key = `${this.options.keyPrefix}{${checkName(partition, `Redis ${op} partition`)}}`;
    try {
      return await this.link.evalScript(script, [], [key, partition, ...args]);
    } catch (err) {
      if (err instanceof DataPlaneError) throw err;
      const message = err instanceof Error ? err.message : String(err);
      const m = /DP (\w+) ([\s\S]*?)(?: script: [\s\S]*)?$/.exec(message);
      if (m) throw new DataPlaneError(m[1] as DataPlaneError['code'], m[2]);
      throw new DataPlaneError('unavailable', `Redis ${op} on partition ${JSON.stringify(partition)} failed: ${message}`);
    }
  }
}

function decodeRow(header: string, bytes: Uint8Array, where: string): RowValue {
  const bar = header.indexOf('|');
  const dtype = header.slice(0, bar);
  if (!isDType(dtype)) throw new DataPlaneError('conflict', `${where}: stored header ${header} names no known dtype`);
  const shape =
    header.slice(bar + 1) === ''
      ? []
      : header
          .slice(bar + 1)
          .split(',')
          .map(Number);
  // Copy into a fresh, aligned buffer: replies may be views into a shared, unaligned socket buffer.
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  const data = hostArray(dtype, copy.buffer);
  if (data.length !== shape.reduce((a, b) => a * b, 1))
    throw new DataPlaneError('conflict', `${where}: stored header ${header} does not match ${bytes.byteLength} stored bytes`);
  return { dtype, shape, data };
}

function asArray(reply: RedisReply): RedisReply[] {
  if (!Array.isArray(reply)) throw new Error(`unexpected Redis reply ${String(reply)} (expected an array)`);
  return reply;
}

function text(reply: RedisReply): string {
  if (reply instanceof Uint8Array) return decoder.decode(reply);
  if (typeof reply === 'number') return String(reply);
  throw new Error(`unexpected Redis reply ${String(reply)} (expected a string)`);
}
