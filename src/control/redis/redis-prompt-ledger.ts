/**
 * RedisPromptLedger: the PromptLedger (src/control/control-stores.ts) shared by every process of a
 * run through one Redis server, with the in-memory PromptBook's semantics: FIFO ingest, leases
 * owned by one worker (only it may fail or complete them), expiry with attempt + 1, bounded
 * attempts, a per-worker cap, terminal failures kept with their reason, and `committed` finishing a
 * task for a fresh ref whoever holds it.
 *
 * Each transition is ONE Lua script (lease also reclaims expired leases, lazily, as PromptBook
 * does), so two controllers can never hand one task to two workers. Lease age uses the server's
 * TIME unless `clock` is injected. A task is stored as JSON without its `attempt`, which lives in
 * its own hash so a script can bump it without re-encoding the JSON (Lua's cjson would reformat
 * numbers and turn [] into {}); reads rebuild the task through makePromptTask, so a damaged record
 * is refused with an error naming the task id instead of reaching a worker.
 *
 * Keys (redis-keys.ts, prefix `speclab:{<run>}:`): prompt:seq, prompt:tasks, prompt:attempt,
 * prompt:pending (zset id → seq), prompt:leased (zset id → leasedAt), prompt:lease
 * (id → '<lease seq>|<workerId>'), prompt:held (worker → count), prompt:failed (zset) +
 * prompt:failed-why, prompt:completed.
 */
import { makePromptTask, type PromptTask } from '../../contracts/records.ts';
import type { RedisLink, RedisReply } from '../../ports/redis-link.ts';
import type { CommittedTask, PromptCounts, PromptFailOutcome, PromptFailure, PromptLedger } from '../control-stores.ts';
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

export interface RedisPromptLedgerOptions {
  /** null = prompt leases never expire. */
  readonly leaseTimeoutMs: number | null;
  /** null = unbounded retries. A retryable failure requeues only while attempt + 1 < this. */
  readonly maxAttempts: number | null;
  /** null = no per-worker cap on prompts held at once. */
  readonly maxLeasePerWorker: number | null;
  /** Milliseconds; replaces the server clock (tests). */
  readonly clock?: () => number;
}

const SCRIPT_PRELUDE = `${LUA_PRELUDE}
local SEQ, TASKS, ATTEMPT, PEND, LEASED, LEASE, HELD, FAILED, WHY, DONE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local function release(id, worker)
  redis.call('ZREM', LEASED, id)
  redis.call('HDEL', LEASE, id)
  redis.call('HINCRBY', HELD, worker, -1)
end
local function owner(id)
  local _, worker = lease_entry(LEASE, id)
  return worker
end
local function attempt_of(id)
  local a = tonumber(redis.call('HGET', ATTEMPT, id) or '')
  if not a then fail('damaged', 'task "' .. id .. '" has no attempt in ' .. ATTEMPT) end
  return a
end
local function retire(id)
  local worker = owner(id)
  if worker then release(id, worker) end
  redis.call('ZREM', PEND, id)
  redis.call('HDEL', TASKS, id)
  redis.call('HDEL', ATTEMPT, id)
  redis.call('INCR', DONE)
end
-- After the lease is released: requeue with attempt + 1 while attempts remain, else record the failure.
local function retry_or_retire(id, a, reason, retryable, max)
  if retryable and (not max or a + 1 < max) then
    redis.call('HSET', ATTEMPT, id, a + 1)
    redis.call('ZADD', PEND, redis.call('INCR', SEQ), id)
    return true
  end
  redis.call('HDEL', TASKS, id)
  redis.call('HDEL', ATTEMPT, id)
  local why = reason
  if retryable then why = reason .. ' (attempts exhausted: ' .. (a + 1) .. ')' end
  redis.call('ZADD', FAILED, redis.call('INCR', SEQ), id)
  redis.call('HSET', WHY, id, cjson.encode({reason = why, attempt = a}))
  return false
end
`;

// ARGV: (taskId, JSON without attempt, attempt)*. A task already pending or leased is left as it is.
const ADD = `${SCRIPT_PRELUDE}
for i = 1, #ARGV, 3 do
  local id = ARGV[i]
  if redis.call('HSETNX', TASKS, id, ARGV[i + 1]) == 1 then
    redis.call('HSET', ATTEMPT, id, ARGV[i + 2])
    redis.call('ZADD', PEND, redis.call('INCR', SEQ), id)
    redis.call('ZREM', FAILED, id)
    redis.call('HDEL', WHY, id)
  end
end
return 1
`;

// ARGV: now ('' = TIME), workerId, maxTasks, leaseTimeoutMs ('' = never), timeout text, maxAttempts, maxLeasePerWorker.
// Reply: {id, JSON, attempt}* leased. Expired leases are parsed (and their attempts read) before any write.
const LEASE_TASKS = `${SCRIPT_PRELUDE}
local now, worker, n = now_ms(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local timeout, max, cap = tonumber(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[7])
if timeout then
  local expired = expired_leases(LEASED, LEASE, now, timeout)
  for _, e in ipairs(expired) do e[4] = attempt_of(e[2]) end
  for _, e in ipairs(expired) do
    release(e[2], e[3])
    retry_or_retire(e[2], e[4], 'prompt lease of worker ' .. e[3] .. ' expired after ' .. ARGV[5] .. ' ms', true, max)
  end
end
if cap then n = math.min(n, cap - tonumber(redis.call('HGET', HELD, worker) or '0')) end
local out = {}
if n <= 0 then return out end
local ids = redis.call('ZRANGE', PEND, 0, n - 1)
if #ids == 0 then return out end
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', TASKS, id)
  out[#out + 1] = redis.call('HGET', ATTEMPT, id)
end
redis.call('ZREMRANGEBYRANK', PEND, 0, #ids - 1)
local base = redis.call('INCRBY', SEQ, #ids) - #ids
for i, id in ipairs(ids) do
  redis.call('ZADD', LEASED, now, id)
  redis.call('HSET', LEASE, id, (base + i) .. '|' .. worker)
end
redis.call('HINCRBY', HELD, worker, #ids)
return out
`;

// ARGV: workerId, reason, retryable, maxAttempts, taskIds...   Reply: {requeued, failed, skipped}.
const FAIL = `${SCRIPT_PRELUDE}
local worker, reason, retryable, max = ARGV[1], ARGV[2], ARGV[3] == '1', tonumber(ARGV[4])
local mine, skipped = {}, {}
for i = 5, #ARGV do
  local id = ARGV[i]
  if owner(id) == worker and not mine[id] then mine[id] = attempt_of(id); mine[#mine + 1] = id else skipped[#skipped + 1] = id end
end
local requeued, failed = {}, {}
for _, id in ipairs(mine) do
  release(id, worker)
  if retry_or_retire(id, mine[id], reason, retryable, max) then requeued[#requeued + 1] = id else failed[#failed + 1] = id end
end
return {requeued, failed, skipped}
`;

// ARGV: workerId, taskIds...   Reply: the ids retired (leased by this worker).
const COMPLETE = `${SCRIPT_PRELUDE}
local done = {}
for i = 2, #ARGV do
  if owner(ARGV[i]) == ARGV[1] then retire(ARGV[i]); done[#done + 1] = ARGV[i] end
end
return done
`;

// ARGV: workerId, then (taskId, fresh) pairs: one commit batch. A fresh ref retires its task
// wherever it is; a duplicate only the committer's lease.
const COMMITTED = `${SCRIPT_PRELUDE}
local worker, done = ARGV[1], 0
for i = 2, #ARGV, 2 do
  local id, fresh = ARGV[i], ARGV[i + 1] == '1'
  if redis.call('HEXISTS', TASKS, id) == 1 and (fresh or owner(id) == worker) then retire(id); done = done + 1 end
end
return done
`;

const COUNTS = `${SCRIPT_PRELUDE}
return {redis.call('HLEN', TASKS), redis.call('ZCARD', PEND), redis.call('ZCARD', LEASED), redis.call('ZCARD', FAILED), tonumber(redis.call('GET', DONE) or '0')}
`;

const TASK = `${SCRIPT_PRELUDE}
return {redis.call('HGET', TASKS, ARGV[1]), redis.call('HGET', ATTEMPT, ARGV[1])}
`;

const FAILURES = `${SCRIPT_PRELUDE}
local out = {}
for _, id in ipairs(redis.call('ZRANGE', FAILED, 0, -1)) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', WHY, id)
end
return out
`;

export class RedisPromptLedger implements PromptLedger {
  private readonly keys: string[];
  private readonly scripts: ScriptRunner;
  private readonly leaseTimeoutMs: number | null;
  private readonly maxAttempts: number | null;
  private readonly maxLeasePerWorker: number | null;
  private readonly clock: (() => number) | undefined;

  constructor(
    link: RedisLink,
    readonly runId: string,
    options: RedisPromptLedgerOptions,
  ) {
    const k = controlKeys(runId, 'RedisPromptLedger');
    this.keys = [
      k.promptSeq,
      k.promptTasks,
      k.promptAttempt,
      k.promptPending,
      k.promptLeased,
      k.promptLease,
      k.promptHeld,
      k.promptFailed,
      k.promptFailedWhy,
      k.promptCompleted,
    ];
    this.scripts = new ScriptRunner(link, `RedisPromptLedger run ${JSON.stringify(runId)}`);
    this.leaseTimeoutMs = positiveOrNull(options.leaseTimeoutMs, 'leaseTimeoutMs', 'RedisPromptLedger');
    this.maxAttempts = positiveOrNull(options.maxAttempts, 'maxAttempts', 'RedisPromptLedger', true);
    this.maxLeasePerWorker = positiveOrNull(options.maxLeasePerWorker, 'maxLeasePerWorker', 'RedisPromptLedger', true);
    this.clock = options.clock;
  }

  async add(tasks: readonly PromptTask[]): Promise<void> {
    const args: string[] = [];
    tasks.forEach((input, i) => {
      const { attempt, ...rest } = makePromptTask(input, `RedisPromptLedger.add tasks[${i}]`);
      args.push(rest.taskId, JSON.stringify(rest), String(attempt));
    });
    if (args.length > 0) await this.scripts.run('add', ADD, this.keys, args);
  }

  async lease(workerId: string, maxTasks: number): Promise<PromptTask[]> {
    requireWorker(workerId, 'lease');
    if (!Number.isInteger(maxTasks) || maxTasks < 0)
      throw new RangeError(`RedisPromptLedger.lease: maxTasks must be a non-negative integer, got ${maxTasks}`);
    const args = [
      clockArg(this.clock, 'RedisPromptLedger'),
      workerId,
      String(maxTasks),
      nullableArg(this.leaseTimeoutMs),
      String(this.leaseTimeoutMs),
      nullableArg(this.maxAttempts),
      nullableArg(this.maxLeasePerWorker),
    ];
    const reply = asArray(await this.scripts.run('lease', LEASE_TASKS, this.keys, args), 'lease');
    const out: PromptTask[] = [];
    for (let i = 0; i < reply.length; i += 3) out.push(this.parseTask(asText(reply[i], 'lease'), reply[i + 1], reply[i + 2]));
    return out;
  }

  async fail(workerId: string, taskIds: readonly string[], reason: string, retryable: boolean): Promise<PromptFailOutcome> {
    requireWorker(workerId, 'fail');
    if (typeof reason !== 'string') throw new TypeError('RedisPromptLedger.fail: reason must be a string');
    if (taskIds.length === 0) return { requeued: [], failed: [], skipped: [] };
    const reply = asArray(
      await this.scripts.run('fail', FAIL, this.keys, [workerId, reason, retryable ? '1' : '0', nullableArg(this.maxAttempts), ...taskIds]),
      'fail',
    );
    const [requeued, failed, skipped] = reply.map((list) => asArray(list, 'fail').map((r) => asText(r, 'fail')));
    return { requeued, failed, skipped };
  }

  async complete(workerId: string, taskIds: readonly string[]): Promise<string[]> {
    requireWorker(workerId, 'complete');
    if (taskIds.length === 0) return [];
    return asArray(await this.scripts.run('complete', COMPLETE, this.keys, [workerId, ...taskIds]), 'complete').map((r) =>
      asText(r, 'complete'),
    );
  }

  async committed(workerId: string, tasks: readonly CommittedTask[]): Promise<void> {
    requireWorker(workerId, 'committed');
    if (tasks.length === 0) return;
    await this.scripts.run('committed', COMMITTED, this.keys, [workerId, ...tasks.flatMap((t) => [t.taskId, t.fresh ? '1' : '0'])]);
  }

  async failuresList(): Promise<PromptFailure[]> {
    const reply = asArray(await this.scripts.run('failuresList', FAILURES, this.keys, []), 'failuresList');
    const out: PromptFailure[] = [];
    for (let i = 0; i < reply.length; i += 2) {
      const taskId = asText(reply[i], 'failuresList');
      const record = parseJsonReply(this.scripts, reply[i + 1], `failure record of task "${taskId}"`) as {
        reason?: unknown;
        attempt?: unknown;
      };
      if (typeof record.reason !== 'string' || typeof record.attempt !== 'number')
        throw new Error(`${this.scripts.where}: failure record of task "${taskId}" is damaged (want {reason, attempt})`);
      out.push(Object.freeze({ taskId, reason: record.reason, attempt: record.attempt }));
    }
    return out;
  }

  async counts(): Promise<PromptCounts> {
    const [prompts, pending, leased, failed, completed] = asArray(await this.scripts.run('counts', COUNTS, this.keys, []), 'counts').map(
      (r) => asNumber(r, 'counts'),
    );
    return { prompts, pending, leased, failed, completed };
  }

  async task(taskId: string): Promise<PromptTask | undefined> {
    const [json, attempt] = asArray(await this.scripts.run('task', TASK, this.keys, [taskId]), 'task');
    if (json === null && attempt === null) return undefined;
    return this.parseTask(taskId, json, attempt);
  }

  /** Rebuilds a stored task; anything that is not a valid PromptTask is refused, naming the task. */
  private parseTask(taskId: string, json: RedisReply, attempt: RedisReply): PromptTask {
    const where = `${this.scripts.where}: task "${taskId}" in prompt:tasks`;
    const fields = parseJsonReply(this.scripts, json, `task "${taskId}" in prompt:tasks`);
    if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) throw new Error(`${where} is damaged (not a JSON object)`);
    const a = attempt instanceof Uint8Array ? Number(asText(attempt, 'attempt')) : NaN;
    if (!Number.isInteger(a) || a < 0)
      throw new Error(
        `${this.scripts.where}: task "${taskId}" has a damaged attempt in prompt:attempt (${attempt === null ? 'missing' : asText(attempt, 'attempt')})`,
      );
    const task = makePromptTask({ ...(fields as object), attempt: a } as PromptTask, where);
    if (task.taskId !== taskId) throw new Error(`${where} is damaged: it holds taskId ${JSON.stringify(task.taskId)}`);
    return task;
  }
}

function requireWorker(workerId: string, op: string): void {
  if (typeof workerId !== 'string' || workerId.length === 0)
    throw new TypeError(`RedisPromptLedger.${op}: workerId must be a non-empty string, got ${JSON.stringify(workerId)}`);
}
