/**
 * RedisMemberRegistry: the MemberRegistry (src/control/control-stores.ts) shared by every process
 * of a run, so a rollout worker registered through one controller is known to all of them.
 *
 * Keys (redis-keys.ts, prefix `speclab:{<run>}:`): members:rollout and members:trainer, each a
 * hash id → info JSON. Registering again overwrites the info (HSET), as the in-memory registry does.
 */
import { makeJsonRecord } from '../../contracts/records.ts';
import type { RedisLink } from '../../ports/redis-link.ts';
import type { MemberKind, MemberRegistry } from '../control-stores.ts';
import { controlKeys } from './redis-keys.ts';
import { asNumber, ScriptRunner } from './redis-script.ts';

const REGISTER = `redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1`;
const HAS = `return redis.call('HEXISTS', KEYS[1], ARGV[1])`;
const COUNT = `return redis.call('HLEN', KEYS[1])`;

export class RedisMemberRegistry implements MemberRegistry {
  private readonly hashes: Readonly<Record<MemberKind, string>>;
  private readonly scripts: ScriptRunner;

  constructor(
    link: RedisLink,
    readonly runId: string,
  ) {
    const k = controlKeys(runId, 'RedisMemberRegistry');
    this.hashes = { rollout: k.membersRollout, trainer: k.membersTrainer };
    this.scripts = new ScriptRunner(link, `RedisMemberRegistry run ${JSON.stringify(runId)}`);
  }

  async register(kind: MemberKind, id: string, info: Readonly<Record<string, unknown>>): Promise<void> {
    const key = this.hashOf(kind, 'register');
    requireId(id, 'register');
    // Validated as a JSON object first: what another process reads back must be what was meant.
    const json = JSON.stringify(makeJsonRecord(info, `RedisMemberRegistry.register ${kind} "${id}" info`));
    await this.scripts.run('register', REGISTER, [key], [id, json]);
  }

  async has(kind: MemberKind, id: string): Promise<boolean> {
    const key = this.hashOf(kind, 'has');
    requireId(id, 'has');
    return asNumber(await this.scripts.run('has', HAS, [key], [id]), 'has') === 1;
  }

  async count(kind: MemberKind): Promise<number> {
    return asNumber(await this.scripts.run('count', COUNT, [this.hashOf(kind, 'count')], []), 'count');
  }

  private hashOf(kind: MemberKind, op: string): string {
    const key = Object.hasOwn(this.hashes, kind) ? this.hashes[kind] : undefined;
    if (key === undefined)
      throw new TypeError(`RedisMemberRegistry.${op}: kind must be "rollout" or "trainer", got ${JSON.stringify(kind)}`);
    return key;
  }
}

function requireId(id: string, op: string): void {
  if (typeof id !== 'string' || id.length === 0)
    throw new TypeError(`RedisMemberRegistry.${op}: id must be a non-empty string, got ${JSON.stringify(id)}`);
}
