/**
 * RedisRefQueue: the RefQueue (src/control/control-stores.ts) shared by every process of a run
 * through one Redis server, with the in-memory SampleRefQueue's behaviour: FIFO partitions, leases
 * that expire lazily on the next get, bounded deliveries, terminal failures kept with their reason.
 *
 * Each of put / get / ack / fail is ONE Lua script, so two processes can never lease the same id or
 * requeue it twice; get reclaims expired leases in the same script that leases, as the memory queue
 * does. Lease age is measured on the server's TIME (one clock for all processes) unless a `clock`
 * is injected (tests expire leases without sleeping). A waiting get polls between scripts, never
 * blocking inside Redis, so one link can carry other calls meanwhile.
 *
 * Keys (redis-keys.ts, prefix `speclab:{<run>}:`): queue:seq, queue:partitions,
 * queue:pending:<partition> (zset id → seq), queue:refs (id → ref JSON, pending or leased),
 * queue:leased (zset id → leasedAt), queue:lease (id → '<lease seq>|<partition>'), queue:held
 * (partition → leased count), queue:attempts, queue:terminal (zset) + queue:terminal-why.
 */
import { makeSampleRef, type SampleRef } from '../../contracts/records.ts';
import type { RedisLink, RedisReply } from '../../ports/redis-link.ts';
import type { FailOutcome, RefQueue, TerminalFailure } from '../control-stores.ts';
import { controlKeys } from './redis-keys.ts';
import {
  asArray,
  asNumber,
  asText,
  clockArg,
  LUA_PRELUDE,
  nullableArg,
  positiveOrNull,
  ScriptRunner,
  parseJsonReply,
} from './redis-script.ts';

export interface RedisRefQueueOptions {
  /** A lease older than this goes back to the tail of its partition; null = leases never expire. */
  readonly leaseTimeoutMs?: number | null;
  /** Deliveries allowed per ref before a retryable failure or expiry becomes terminal; null = unbounded. */
  readonly maxAttempts?: number | null;
  /** Milliseconds; replaces the server clock (tests). Every process of a run must then inject the same clock. */
  readonly clock?: () => number;
  /** First pause of a waiting get between polls (default 10 ms); pauses double up to 50 ms. */
  readonly pollMs?: number;
}

// KEYS (all queue scripts, in this order). ARGV[1] is always the pending-zset prefix.
const SCRIPT_PRELUDE = `${LUA_PRELUDE}
local SEQ, PARTS, REFS, LEASED, LEASE, HELD, ATTEMPTS, TERMINAL, WHY = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local PEND = ARGV[1]
local function release(id, part)
  redis.call('ZREM', LEASED, id)
  redis.call('HDEL', LEASE, id)
  redis.call('HINCRBY', HELD, part, -1)
end
-- Ends a lease: back to the tail of its partition (new seq) unless deliveries are exhausted; else terminal.
local function requeue_or_retire(id, part, reason, retryable, max_attempts)
  release(id, part)
  local tries = tonumber(redis.call('HGET', ATTEMPTS, id) or '0')
  if retryable and not (max_attempts and tries >= max_attempts) then
    redis.call('ZADD', PEND .. part, redis.call('INCR', SEQ), id)
    redis.call('SADD', PARTS, part)
    return true
  end
  redis.call('HDEL', ATTEMPTS, id)
  redis.call('HDEL', REFS, id)
  redis.call('ZADD', TERMINAL, redis.call('INCR', SEQ), id)
  local why = reason
  if retryable then why = reason .. ' (attempts exhausted: ' .. tries .. ')' end
  redis.call('HSET', WHY, id, cjson.encode({reason = why, attempts = tries}))
  return false
end
-- Entries of the leased ids among ARGV[from..], parsed before any write; repeats count once.
local function leased_among(from)
  local out, seen = {}, {}
  for i = from, #ARGV do
    local id = ARGV[i]
    if not seen[id] then
      seen[id] = true
      local seq, part = lease_entry(LEASE, id)
      if seq then out[#out + 1] = {id, part} end
    end
  end
  return out
end
`;

// ARGV: prefix, partition, (id, ref JSON)*. Reply: the ids enqueued. HSETNX on queue:refs is the
// "already pending or leased anywhere" check, and it also catches a repeat within this put.
const PUT = `${SCRIPT_PRELUDE}
local part, added = ARGV[2], {}
for i = 3, #ARGV, 2 do
  if redis.call('HSETNX', REFS, ARGV[i], ARGV[i + 1]) == 1 then added[#added + 1] = ARGV[i] end
end
if #added == 0 then return added end
local base, pend = redis.call('INCRBY', SEQ, #added) - #added, {}
for i, id in ipairs(added) do pend[2 * i - 1] = base + i; pend[2 * i] = id end
each_chunk('ZADD', PEND .. part, pend)
each_chunk('ZREM', TERMINAL, added)
each_chunk('HDEL', WHY, added)
redis.call('SADD', PARTS, part)
return added
`;

// ARGV: prefix, partition, now ('' = TIME), maxRefs, leaseTimeoutMs ('' = never), maxAttempts ('' = unbounded), expiry reason.
// Reply: {id, ref JSON or nil}* for the refs leased; the client refuses a nil or invalid ref by id.
// The reclaims run first so a ref whose lease just expired can be leased again by this same get.
const GET = `${SCRIPT_PRELUDE}
local part, now, max_refs = ARGV[2], now_ms(ARGV[3]), tonumber(ARGV[4])
local timeout, max_attempts, expiry = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
if timeout then
  for _, e in ipairs(expired_leases(LEASED, LEASE, now, timeout)) do requeue_or_retire(e[2], e[3], expiry, true, max_attempts) end
end
local out = {}
if max_refs == 0 then return out end
local ids = redis.call('ZRANGE', PEND .. part, 0, max_refs - 1)
if #ids == 0 then return out end
local refs = {}
for i, id in ipairs(ids) do refs[i] = redis.call('HGET', REFS, id) end
redis.call('ZREMRANGEBYRANK', PEND .. part, 0, #ids - 1)
local base, leased, entries = redis.call('INCRBY', SEQ, #ids) - #ids, {}, {}
for i, id in ipairs(ids) do
  leased[2 * i - 1] = now; leased[2 * i] = id
  entries[2 * i - 1] = id; entries[2 * i] = (base + i) .. '|' .. part
  redis.call('HINCRBY', ATTEMPTS, id, 1)
  out[#out + 1] = id
  out[#out + 1] = refs[i]
end
each_chunk('ZADD', LEASED, leased)
each_chunk('HSET', LEASE, entries)
redis.call('HINCRBY', HELD, part, #ids)
return out
`;

// ARGV: prefix, ids...   Reply: how many leases were released.
const ACK = `${SCRIPT_PRELUDE}
local leased, ids, per_part = leased_among(2), {}, {}
for i, e in ipairs(leased) do
  ids[i] = e[1]
  per_part[e[2]] = (per_part[e[2]] or 0) + 1
end
if #ids == 0 then return 0 end
each_chunk('ZREM', LEASED, ids)
for _, key in ipairs({LEASE, ATTEMPTS, REFS}) do each_chunk('HDEL', key, ids) end
for part, n in pairs(per_part) do redis.call('HINCRBY', HELD, part, -n) end
return #ids
`;

// ARGV: prefix, maxAttempts ('' = unbounded), reason, retryable ('1' | '0'), ids...   Reply: {requeued, terminal}.
const FAIL = `${SCRIPT_PRELUDE}
local max_attempts, reason, retryable = tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
local requeued, terminal = {}, {}
for _, e in ipairs(leased_among(5)) do
  if requeue_or_retire(e[1], e[2], reason, retryable, max_attempts) then requeued[#requeued + 1] = e[1] else terminal[#terminal + 1] = e[1] end
end
return {requeued, terminal}
`;

// ARGV: prefix, partition, all ('1' = sum over every partition, ignoring ARGV[2]). IN_FLIGHT likewise.
const DEPTH = `${SCRIPT_PRELUDE}
if ARGV[3] == '0' then return redis.call('ZCARD', PEND .. ARGV[2]) end
local n = 0
for _, part in ipairs(redis.call('SMEMBERS', PARTS)) do n = n + redis.call('ZCARD', PEND .. part) end
return n
`;

const IN_FLIGHT = `${SCRIPT_PRELUDE}
if ARGV[3] == '0' then return tonumber(redis.call('HGET', HELD, ARGV[2]) or '0') end
return redis.call('ZCARD', LEASED)
`;

const IS_LEASED = `${SCRIPT_PRELUDE}
return redis.call('HEXISTS', LEASE, ARGV[2])
`;

// Reply: {id, JSON}* in the order the failures happened.
const TERMINALS = `${SCRIPT_PRELUDE}
local out = {}
for _, id in ipairs(redis.call('ZRANGE', TERMINAL, 0, -1)) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', WHY, id)
end
return out
`;

// Every pending and leased ref dropped; terminal failures and the sequence kept.
const CLEAR = `${SCRIPT_PRELUDE}
for _, part in ipairs(redis.call('SMEMBERS', PARTS)) do redis.call('DEL', PEND .. part) end
redis.call('DEL', PARTS, REFS, LEASED, LEASE, HELD, ATTEMPTS)
return 1
`;

const DEFAULT_PARTITION = '';

export class RedisRefQueue implements RefQueue {
  private readonly keys: string[];
  private readonly pendPrefix: string;
  private readonly scripts: ScriptRunner;
  private readonly leaseTimeoutMs: number | null;
  private readonly maxAttempts: number | null;
  private readonly clock: (() => number) | undefined;
  private readonly pollMs: number;

  constructor(
    link: RedisLink,
    readonly runId: string,
    options: RedisRefQueueOptions = {},
  ) {
    const where = `RedisRefQueue run ${JSON.stringify(runId)}`;
    const k = controlKeys(runId, 'RedisRefQueue');
    this.keys = [
      k.queueSeq,
      k.queuePartitions,
      k.queueRefs,
      k.queueLeased,
      k.queueLease,
      k.queueHeld,
      k.queueAttempts,
      k.queueTerminal,
      k.queueTerminalWhy,
    ];
    this.pendPrefix = k.queuePendingPrefix;
    this.scripts = new ScriptRunner(link, where);
    this.leaseTimeoutMs = positiveOrNull(options.leaseTimeoutMs, 'leaseTimeoutMs', 'RedisRefQueue');
    this.maxAttempts = positiveOrNull(options.maxAttempts, 'maxAttempts', 'RedisRefQueue', true);
    this.clock = options.clock;
    this.pollMs = positiveOrNull(options.pollMs, 'pollMs', 'RedisRefQueue') ?? 10;
  }

  async clear(): Promise<void> {
    await this.scripts.run('clear', CLEAR, this.keys, [this.pendPrefix]);
  }

  async put(refs: readonly SampleRef[], options: { partitionKey?: string } = {}): Promise<string[]> {
    const partition = partitionOf(options.partitionKey, 'put');
    const args: string[] = [this.pendPrefix, partition];
    // Validated (tensor check first) before anything is sent: a ref Redis holds must read back valid.
    refs.forEach((ref, i) => args.push(ref.sampleId, JSON.stringify(makeSampleRef(ref, `RedisRefQueue.put refs[${i}]`))));
    if (refs.length === 0) return [];
    return asArray(await this.scripts.run('put', PUT, this.keys, args), 'put').map((r) => asText(r, 'put'));
  }

  async get(maxRefs: number, timeoutMs?: number, options: { partitionKey?: string } = {}): Promise<SampleRef[]> {
    if (!Number.isInteger(maxRefs) || maxRefs < 0)
      throw new RangeError(`RedisRefQueue.get: maxRefs must be a non-negative integer, got ${maxRefs}`);
    if (timeoutMs !== undefined && !(timeoutMs >= 0)) throw new RangeError(`RedisRefQueue.get: timeoutMs must be ≥ 0, got ${timeoutMs}`);
    const partition = partitionOf(options.partitionKey, 'get');
    const deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
    let pause = this.pollMs;
    for (;;) {
      const leased = await this.tryGet(maxRefs, partition);
      if (leased.length > 0 || maxRefs === 0 || deadline === undefined) return leased;
      const remaining = deadline - performance.now();
      if (remaining <= 0) return [];
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, remaining)));
      pause = Math.min(pause * 2, Math.max(this.pollMs, 50));
    }
  }

  async ack(refs: readonly SampleRef[]): Promise<number> {
    if (refs.length === 0) return 0;
    return asNumber(await this.scripts.run('ack', ACK, this.keys, [this.pendPrefix, ...refs.map((r) => r.sampleId)]), 'ack');
  }

  async fail(refs: readonly SampleRef[], reason: string, retryable: boolean): Promise<FailOutcome> {
    if (typeof reason !== 'string') throw new TypeError('RedisRefQueue.fail: reason must be a string');
    if (refs.length === 0) return { requeued: [], terminal: [] };
    const args = [this.pendPrefix, nullableArg(this.maxAttempts), reason, retryable ? '1' : '0', ...refs.map((r) => r.sampleId)];
    const [requeued, terminal] = asArray(await this.scripts.run('fail', FAIL, this.keys, args), 'fail');
    return {
      requeued: asArray(requeued, 'fail').map((r) => asText(r, 'fail')),
      terminal: asArray(terminal, 'fail').map((r) => asText(r, 'fail')),
    };
  }

  async depth(partitionKey?: string): Promise<number> {
    return asNumber(
      await this.scripts.run('depth', DEPTH, this.keys, [this.pendPrefix, partitionKey ?? '', partitionKey === undefined ? '1' : '0']),
      'depth',
    );
  }

  async inFlight(partitionKey?: string): Promise<number> {
    return asNumber(
      await this.scripts.run('inFlight', IN_FLIGHT, this.keys, [
        this.pendPrefix,
        partitionKey ?? '',
        partitionKey === undefined ? '1' : '0',
      ]),
      'inFlight',
    );
  }

  async isLeased(sampleId: string): Promise<boolean> {
    return asNumber(await this.scripts.run('isLeased', IS_LEASED, this.keys, [this.pendPrefix, sampleId]), 'isLeased') === 1;
  }

  async terminalFailures(): Promise<TerminalFailure[]> {
    const reply = asArray(await this.scripts.run('terminalFailures', TERMINALS, this.keys, [this.pendPrefix]), 'terminalFailures');
    const out: TerminalFailure[] = [];
    for (let i = 0; i < reply.length; i += 2) {
      const sampleId = asText(reply[i], 'terminalFailures');
      const record = parseJsonReply(this.scripts, reply[i + 1], `terminal record of "${sampleId}"`) as {
        reason?: unknown;
        attempts?: unknown;
      };
      if (typeof record.reason !== 'string' || typeof record.attempts !== 'number')
        throw new Error(`${this.scripts.where}: terminal record of "${sampleId}" is damaged (want {reason, attempts})`);
      out.push(Object.freeze({ sampleId, reason: record.reason, attempts: record.attempts }));
    }
    return out;
  }

  private async tryGet(maxRefs: number, partition: string): Promise<SampleRef[]> {
    const expiry = this.leaseTimeoutMs === null ? '' : `lease expired after ${this.leaseTimeoutMs} ms`;
    const args = [
      this.pendPrefix,
      partition,
      clockArg(this.clock, 'RedisRefQueue'),
      String(maxRefs),
      nullableArg(this.leaseTimeoutMs),
      nullableArg(this.maxAttempts),
      expiry,
    ];
    const reply = asArray(await this.scripts.run('get', GET, this.keys, args), 'get');
    const out: SampleRef[] = [];
    for (let i = 0; i < reply.length; i += 2) {
      const id = asText(reply[i], 'get');
      out.push(this.parseRef(id, reply[i + 1]));
    }
    return out;
  }

  /** A leased ref read back: refused with an error naming the id if Redis holds something that is not a valid ref. */
  private parseRef(id: string, json: RedisReply): SampleRef {
    const where = `${this.scripts.where}: ref "${id}" in queue:refs`;
    const ref = makeSampleRef(parseJsonReply(this.scripts, json, `ref "${id}" in queue:refs`) as SampleRef, where);
    if (ref.sampleId !== id) throw new Error(`${where} is damaged: it holds sampleId ${JSON.stringify(ref.sampleId)}`);
    return ref;
  }
}

function partitionOf(key: string | undefined, op: string): string {
  if (key === undefined) return DEFAULT_PARTITION;
  if (typeof key !== 'string') throw new TypeError(`RedisRefQueue.${op}: partitionKey must be a string, got ${typeof key}`);
  return key;
}
