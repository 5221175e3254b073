/**
 * What the Redis queue, prompt ledger and member registry share: a script runner that turns every
 * failure into one line naming the store, run and operation, the reply decoders, and the Lua
 * helpers their scripts start with (the lease-entry format and the clock).
 *
 * Scripts raise `CTL <code> <message>` for refusals they detect themselves (a damaged entry);
 * anything else (a lost connection, a timeout, a Redis error) is reported as the operation failing.
 */
import type { RedisArg, RedisLink, RedisReply } from '../../ports/redis-link.ts';

export const LUA_PRELUDE = `
local function fail(code, msg) error({err = 'CTL ' .. code .. ' ' .. msg}) end
-- The injected test clock when the client sent one, else the server clock: every process sharing
-- the run then measures lease age on one clock, whatever its own clock says.
local function now_ms(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
-- A lease entry is '<lease seq>|<owner>'. The seq is the order leases were taken in, so expired
-- leases are reclaimed in that order, as the in-memory stores walk their insertion-ordered maps.
local function lease_entry(key, id)
  local v = redis.call('HGET', key, id)
  if not v then return nil end
  local bar = string.find(v, '|', 1, true)
  local seq = bar and tonumber(string.sub(v, 1, bar - 1))
  if not seq then fail('damaged', 'lease entry of "' .. id .. '" in ' .. key .. ' is "' .. v .. '", not <seq>|<owner>') end
  return seq, string.sub(v, bar + 1)
end
-- One variadic command per chunk instead of one per element: the command count, not the data,
-- dominates a script's time. Chunks keep unpack() under Lua's stack limit.
local function each_chunk(cmd, key, list)
  for i = 1, #list, 1000 do redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list))) end
end
-- Leases taken at or before now - timeout, as {seq, id, owner}, oldest lease first. Every entry is
-- parsed before the caller writes anything (Redis does not roll a failed script back).
local function expired_leases(leased, lease, now, timeout)
  local out = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', leased, '-inf', now - timeout)) do
    local seq, owner = lease_entry(lease, id)
    if not seq then fail('damaged', '"' .. id .. '" is in ' .. leased .. ' but has no entry in ' .. lease) end
    out[#out + 1] = {seq, id, owner}
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end
`;

const decoder = new TextDecoder();

/** Runs scripts for one store of one run; `where` (e.g. `RedisRefQueue run "r1"`) starts every error. */
export class ScriptRunner {
  constructor(
    private readonly link: RedisLink,
    readonly where: string,
  ) {}

  async run(op: string, script: string, keys: readonly string[], args: readonly RedisArg[]): Promise<RedisReply> {
    try {
      return await this.link.evalScript(script, keys, args);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const refusal = /CTL (\w+) ([\s\S]*?)(?: script: [\s\S]*)?$/.exec(message);
      if (refusal) throw new Error(`${this.where}: ${op} refused (${refusal[1]}): ${refusal[2]}`, { cause: err });
      throw new Error(`${this.where}: ${op} failed: ${message}`, { cause: err });
    }
  }
}

/** A JSON record read back by `runner`'s store: missing or unparsable is refused, naming `what` as damaged. */
export function parseJsonReply(runner: ScriptRunner, reply: RedisReply, what: string): unknown {
  if (!(reply instanceof Uint8Array)) throw new Error(`${runner.where}: ${what} is missing`);
  try {
    return JSON.parse(asText(reply, what));
  } catch (err) {
    throw new Error(`${runner.where}: ${what} is damaged (not JSON: ${(err as Error).message})`, { cause: err });
  }
}

export function asArray(reply: RedisReply, what: string): RedisReply[] {
  if (!Array.isArray(reply)) throw new Error(`${what}: unexpected Redis reply ${String(reply)} (expected an array)`);
  return reply;
}

export function asText(reply: RedisReply, what: string): string {
  if (reply instanceof Uint8Array) return decoder.decode(reply);
  if (typeof reply === 'number') return String(reply);
  throw new Error(`${what}: unexpected Redis reply ${String(reply)} (expected a string)`);
}

export function asNumber(reply: RedisReply, what: string): number {
  if (typeof reply === 'number') return reply;
  if (reply instanceof Uint8Array && /^-?\d+$/.test(decoder.decode(reply))) return Number(decoder.decode(reply));
  throw new Error(`${what}: unexpected Redis reply ${String(reply)} (expected an integer)`);
}

/** Options shared by the queue and the ledger: null = off; a value must be a positive (integer) number. */
export function positiveOrNull(value: number | null | undefined, name: string, where: string, integer = false): number | null {
  if (value === undefined || value === null) return null;
  if (!(value > 0) || !Number.isFinite(value)) throw new RangeError(`${where}: ${name} must be a positive number or null, got ${value}`);
  if (integer && !Number.isInteger(value)) throw new RangeError(`${where}: ${name} must be an integer, got ${value}`);
  return value;
}

/** A clock reading for a script: the injected clock's value, or '' so the script reads the server's TIME. */
export function clockArg(clock: (() => number) | undefined, where: string): string {
  if (clock === undefined) return '';
  const now = clock();
  if (!Number.isFinite(now)) throw new RangeError(`${where}: clock() returned ${now}, not a finite number of milliseconds`);
  return String(now);
}

export function nullableArg(value: number | null): string {
  return value === null ? '' : String(value);
}
