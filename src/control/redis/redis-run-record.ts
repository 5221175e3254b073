/**
 * What a run's trainer tells its rollout processes through Redis: the run manifest (the capture
 * settings every rollout must match, so features from a process with another target or other aux
 * layers are refused before they are captured) and the end of the run (rollout processes exit).
 *
 * Keys (redis-keys.ts, prefix `speclab:{<run>}:`): run:manifest (string, JSON) and run:finished.
 */
import type { RedisLink } from '../../ports/redis-link.ts';
import { controlKeys } from './redis-keys.ts';
import { asNumber, asText, ScriptRunner } from './redis-script.ts';

// Publish once: the same manifest again is fine (a resumed trainer), a different one is refused.
const PUBLISH = `
local old = redis.call('GET', KEYS[1])
if old and old ~= ARGV[1] then return {0, old} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return {1, ARGV[1]}
`;
const READ = `return redis.call('GET', KEYS[1]) or ''`;
const FINISH = `redis.call('SET', KEYS[1], '1') return 1`;
const FINISHED = `return redis.call('EXISTS', KEYS[1])`;

export type RunManifest = Readonly<Record<string, unknown>>;

export class RedisRunRecord {
  private readonly keys: ReturnType<typeof controlKeys>;
  private readonly scripts: ScriptRunner;

  constructor(
    link: RedisLink,
    readonly runId: string,
  ) {
    this.keys = controlKeys(runId, 'RedisRunRecord');
    this.scripts = new ScriptRunner(link, `RedisRunRecord run ${JSON.stringify(runId)}`);
  }

  /** Stores the manifest (and clears a finished flag); throws naming the difference when another one is there. */
  async publish(manifest: RunManifest): Promise<void> {
    const json = stableJson(manifest);
    const reply = await this.scripts.run('publish', PUBLISH, [this.keys.runManifest, this.keys.runFinished], [json]);
    const [ok, stored] = reply as [number, Uint8Array];
    if (ok !== 1)
      throw new Error(
        `run ${this.runId}: Redis already holds another manifest for this run (${differences(JSON.parse(new TextDecoder().decode(stored)) as RunManifest, manifest)}); use another --run, or the settings it was started with`,
      );
  }

  /** The manifest, or undefined before the trainer published it. */
  async read(): Promise<RunManifest | undefined> {
    const text = asText(await this.scripts.run('read', READ, [this.keys.runManifest], []), 'read');
    if (text === '') return undefined;
    try {
      return JSON.parse(text) as RunManifest;
    } catch (err) {
      throw new Error(`run ${this.runId}: ${this.keys.runManifest} is not valid JSON (${(err as Error).message}); the record is damaged`, {
        cause: err,
      });
    }
  }

  async finish(): Promise<void> {
    await this.scripts.run('finish', FINISH, [this.keys.runFinished], []);
  }

  async finished(): Promise<boolean> {
    return asNumber(await this.scripts.run('finished', FINISHED, [this.keys.runFinished], []), 'finished') === 1;
  }
}

/** What a reader of the run record needs (the gateway serving tabs): the manifest and whether the run is finished. */
export type RunRecordReader = Pick<RedisRunRecord, 'read' | 'finished'>;

/** JSON with keys sorted at every level, so equal manifests are equal strings. */
export function stableJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  );
}

/** The top-level fields that differ, as `field: stored → given`. */
export function differences(stored: RunManifest, given: RunManifest): string {
  const keys = [...new Set([...Object.keys(stored), ...Object.keys(given)])].sort();
  const diff = keys
    .filter((k) => stableJson(stored[k]) !== stableJson(given[k]))
    .map((k) => `${k}: ${stableJson(stored[k])} → ${stableJson(given[k])}`);
  return diff.join(', ') || 'formatting only';
}
