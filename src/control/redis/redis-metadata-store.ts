/**
 * RedisMetadataStore: the MetadataStore shared by every process of a run through one Redis server
 * (docs/durability.md §2), keys laid out in redis-keys.ts.
 *
 * Atomicity: each transition is ONE Lua script, which Redis runs with no other command in between,
 * so two processes committing the same id see it fresh exactly once, and an ack's ids and marker
 * fields change together. Arguments are validated here, in TypeScript, before the script is sent:
 * Redis does not roll back a script that fails halfway, so a script must not fail after its first write.
 *
 * Durability: a script's writes reach the append-only file as one MULTI/EXEC block, and with
 * `appendfsync always` Redis fsyncs that file before it sends the reply. So an ack is durable when
 * `recordTrainAck` resolves, but only on a server configured that way; `open` checks it
 * (redis-durability.ts) and refuses any other server unless told `requireDurable: false`. On restart
 * Redis drops a block the crash cut short, so a half-written ack never reappears.
 *
 * Nothing is cached: every read asks the server, so all processes see one state.
 */
import { makeSampleRef, type SampleRef, type SampleRefInput } from '../../contracts/records.ts';
import type { RedisArg, RedisLink, RedisReply } from '../../ports/redis-link.ts';
import { validateRefs, validateTrainAck, type DurableMarker, type MetadataStore, type TrainAck } from '../metadata-store.ts';
import { checkRedisDurability, type RedisDurability } from './redis-durability.ts';
import { controlKeys, type ControlKeys } from './redis-keys.ts';

export interface RedisMetadataStoreOptions {
  /** Refuse a server without appendonly yes + appendfsync always (default true). */
  readonly requireDurable?: boolean;
  /** `close()` also closes the link (default false: the caller may share it). */
  readonly ownsLink?: boolean;
  /** Named in errors (the link does not know its address). */
  readonly url?: string;
}

// Refusals raised inside scripts start with "CP " so `run` can tell them from transport errors.
const PRELUDE = `
local function fail(msg) error({err = 'CP ' .. msg}) end
`;

// KEYS: refs, order. ARGV: (sampleId, ref JSON)*. Reply: 1 (fresh) or 0 (duplicate) per pair.
// HSETNX is the dedup: it refuses an id already stored, including one earlier in this batch.
const COMMIT = `${PRELUDE}
if #ARGV % 2 ~= 0 then fail('commit needs (sampleId, ref JSON) pairs, got ' .. #ARGV .. ' arguments') end
local fresh = {}
for i = 1, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[i])
    fresh[#fresh + 1] = 1
  else
    fresh[#fresh + 1] = 0
  end
end
return fresh
`;

// KEYS: acked, marker. ARGV: globalStep ('' = leave it), optimizerDurable ('1' | '0'), sampleIds...
const ACK = `${PRELUDE}
local step, durable = ARGV[1], ARGV[2]
if step ~= '' and not string.match(step, '^%d+$') then fail('globalStep must be a non-negative integer, got ' .. step) end
if durable ~= '1' and durable ~= '0' then fail('optimizerDurable must be 1 or 0, got ' .. durable) end
for i = 3, #ARGV, 1000 do redis.call('SADD', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV))) end
if step ~= '' then redis.call('HSET', KEYS[2], 'globalStep', step) end
redis.call('HSET', KEYS[2], 'optimizerDurable', durable)
return 1
`;

// Reads: one short script each, since a RedisLink speaks only scripts for state.
const HAS = `return redis.call('HEXISTS', KEYS[1], ARGV[1])`;
const GET = `return redis.call('HGET', KEYS[1], ARGV[1])`;
// HMGET of every id: false (nil) for an id never committed.
const GET_MANY = `if #ARGV == 0 then return {} end return redis.call('HMGET', KEYS[1], unpack(ARGV))`;
const COUNT = `return redis.call('HLEN', KEYS[1])`;
const ORDER = `return redis.call('LRANGE', KEYS[1], 0, -1)`;
// KEYS: acked, marker. One script, so the ids and the fields are one consistent snapshot.
const MARKER = `return {redis.call('SMEMBERS', KEYS[1]), redis.call('HGET', KEYS[2], 'globalStep'), redis.call('HGET', KEYS[2], 'optimizerDurable')}`;

const decoder = new TextDecoder();

export class RedisMetadataStore implements MetadataStore {
  private closed = false;

  private constructor(
    private readonly link: RedisLink,
    readonly runId: string,
    private readonly keys: ControlKeys,
    readonly durability: RedisDurability,
    private readonly ownsLink: boolean,
  ) {}

  /** Checks the server's durability (unless opted out), then serves run `runId`'s state as stored. */
  static async open(link: RedisLink, runId: string, options: RedisMetadataStoreOptions = {}): Promise<RedisMetadataStore> {
    const keys = controlKeys(runId, 'RedisMetadataStore');
    const where = `RedisMetadataStore ${runId}`;
    const durability = await checkRedisDurability(link, { require: options.requireDurable ?? true, where, url: options.url });
    return new RedisMetadataStore(link, runId, keys, durability, options.ownsLink ?? false);
  }

  async commitSample(ref: SampleRef): Promise<boolean> {
    return (await this.commitSamples([ref]))[0];
  }

  async commitSamples(refs: readonly SampleRef[]): Promise<boolean[]> {
    const valid = validateRefs(refs, 'RedisMetadataStore.commitSamples');
    if (valid.length === 0) return [];
    const args = valid.flatMap((ref) => [ref.sampleId, JSON.stringify(ref)]);
    const reply = list(await this.run('commit', COMMIT, [this.keys.metaRefs, this.keys.metaOrder], args), 'commit');
    if (reply.length !== valid.length) throw this.error(`commit replied ${reply.length} flags for ${valid.length} refs`);
    return reply.map((flag) => flag === 1);
  }

  async recordTrainAck(sampleIds: readonly string[], ack: TrainAck): Promise<void> {
    validateTrainAck(sampleIds, ack, 'RedisMetadataStore.recordTrainAck');
    const step = ack.globalStep ?? null;
    const args = [step === null ? '' : String(step), ack.optimizerDurable ? '1' : '0', ...sampleIds];
    await this.run('ack', ACK, [this.keys.metaAcked, this.keys.metaMarker], args);
  }

  async isCommitted(sampleId: string): Promise<boolean> {
    if (typeof sampleId !== 'string') return false;
    return (await this.run('read', HAS, [this.keys.metaRefs], [sampleId])) === 1;
  }

  async getCommitted(sampleId: string): Promise<SampleRef | undefined> {
    if (typeof sampleId !== 'string') return undefined;
    const raw = await this.run('read', GET, [this.keys.metaRefs], [sampleId]);
    return raw === null ? undefined : this.parseRef(sampleId, raw);
  }

  async getCommittedMany(sampleIds: readonly string[]): Promise<(SampleRef | undefined)[]> {
    const valid = sampleIds.filter((id) => typeof id === 'string');
    const byId = new Map<string, RedisReply>();
    // Chunks: Lua's unpack() takes a few thousand values at most, and a resume reads a whole run.
    for (let i = 0; i < valid.length; i += 1000) {
      const chunk = valid.slice(i, i + 1000);
      const raws = list(await this.run('read', GET_MANY, [this.keys.metaRefs], chunk), 'getCommittedMany');
      chunk.forEach((id, j) => byId.set(id, raws[j]));
    }
    return sampleIds.map((id) => {
      const raw = byId.get(id);
      return raw === null || raw === undefined ? undefined : this.parseRef(id, raw);
    });
  }

  async committedCount(): Promise<number> {
    return (await this.run('read', COUNT, [this.keys.metaRefs], [])) as number;
  }

  async allCommittedIds(): Promise<string[]> {
    return list(await this.run('read', ORDER, [this.keys.metaOrder], []), this.keys.metaOrder).map((id) => text(id, this.keys.metaOrder));
  }

  async durableMarker(): Promise<DurableMarker> {
    const [ids, step, flag] = list(await this.run('read', MARKER, [this.keys.metaAcked, this.keys.metaMarker], []), 'marker');
    const acked = new Set(list(ids, this.keys.metaAcked).map((id) => text(id, this.keys.metaAcked)));
    const globalStep = step === null ? null : Number(text(step, this.keys.metaMarker));
    if (globalStep !== null && (!Number.isSafeInteger(globalStep) || globalStep < 0)) {
      throw this.error(
        `${this.keys.metaMarker} globalStep ${JSON.stringify(text(step, this.keys.metaMarker))} is not a non-negative integer; the marker is damaged`,
      );
    }
    const durable = flag === null ? '0' : text(flag, this.keys.metaMarker);
    if (durable !== '1' && durable !== '0')
      throw this.error(`${this.keys.metaMarker} optimizerDurable ${JSON.stringify(durable)} is not 1 or 0; the marker is damaged`);
    return Object.freeze({ acked, globalStep, optimizerDurable: durable === '1' });
  }

  /** Refuses later calls; closes the link only when the store owns it (the data stays in Redis). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsLink) await this.link.close();
  }

  /** Re-validates a stored ref through the schema, so a damaged record is refused, never returned. */
  private parseRef(sampleId: string, raw: RedisReply): SampleRef {
    const where = `RedisMetadataStore ${this.keys.metaRefs} ${sampleId}`;
    let value: unknown;
    try {
      value = JSON.parse(text(raw, where));
    } catch (err) {
      throw new Error(`${where}: the stored ref is not valid JSON (${(err as Error).message}); the record is damaged`, { cause: err });
    }
    const ref = makeSampleRef(value as SampleRefInput, where);
    if (ref.sampleId !== sampleId)
      throw new Error(`${where}: the stored ref belongs to sample ${JSON.stringify(ref.sampleId)}; the record is damaged`);
    return ref;
  }

  /**
   * Runs one script. Script refusals come back as their message; anything else (a lost connection,
   * a timeout) names the operation. A failed write may still have been applied: retrying is safe
   * (commits dedup, acks are unions), though a retried commit then reports its ids as duplicates.
   */
  private async run(op: string, script: string, keys: readonly string[], args: readonly RedisArg[]): Promise<RedisReply> {
    if (this.closed) throw this.error('store is closed');
    try {
      return await this.link.evalScript(script, keys, args);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const refused = /CP ([\s\S]*?)(?: script: [\s\S]*)?$/.exec(message);
      if (refused) throw this.error(`${op} refused: ${refused[1]}`);
      const outcome = op === 'read' ? '' : ' (it may or may not have been applied)';
      throw this.error(`${op} failed${outcome}: ${message}`, err);
    }
  }

  private error(detail: string, cause?: unknown): Error {
    return new Error(`RedisMetadataStore ${this.runId}: ${detail}`, cause === undefined ? undefined : { cause });
  }
}

function list(reply: RedisReply, what: string): RedisReply[] {
  if (!Array.isArray(reply)) throw new Error(`RedisMetadataStore: ${what} replied ${String(reply)}, expected an array`);
  return reply;
}

function text(reply: RedisReply, what: string): string {
  if (reply instanceof Uint8Array) return decoder.decode(reply);
  throw new Error(`RedisMetadataStore: ${what} replied ${String(reply)}, expected a string`);
}
