/**
 * Is this Redis durable enough to hold the ack marker? A Redis reply means the write reached the
 * server's memory; it is on disk when the reply is sent only if the server keeps an append-only
 * file (appendonly yes) and fsyncs it before replying to each write (appendfsync always). With
 * `everysec` a crash loses up to a second of acknowledged acks; with AOF off it loses everything
 * since the last snapshot. Stores check this once at startup instead of trusting a deployment note.
 *
 * Redis refuses CONFIG inside scripts, so this needs the link's optional plain `call`.
 */
import type { RedisLink, RedisReply } from '../../ports/redis-link.ts';

export interface RedisDurability {
  readonly appendonly: boolean;
  /** `always`, `everysec`, `no`, or `unknown` when the config could not be read (see `require`). */
  readonly appendfsync: string;
  /** appendonly yes AND appendfsync always. */
  readonly durable: boolean;
}

export interface DurabilityCheckOptions {
  /** Throw unless durable (and when the config cannot be read). */
  readonly require: boolean;
  /** Prefix of the error, e.g. `RedisMetadataStore run-7`. */
  readonly where: string;
  /** Named in the error when given. */
  readonly url?: string;
}

const HOW_TO_FIX =
  'start redis-server with --appendonly yes --appendfsync always (scripts/redis.sh --durable does), or opt out with requireDurable: false';

export async function checkRedisDurability(link: RedisLink, options: DurabilityCheckOptions): Promise<RedisDurability> {
  const server = options.url === undefined ? 'Redis' : `Redis at ${options.url}`;
  let appendonly: string;
  let appendfsync: string;
  try {
    if (link.call === undefined) throw new Error('this RedisLink has no call() for plain commands');
    appendonly = await readConfig(link, 'appendonly');
    appendfsync = await readConfig(link, 'appendfsync');
  } catch (err) {
    // CONFIG may be renamed away or denied by an ACL on a managed server: durability is then unknown.
    if (!options.require) return Object.freeze({ appendonly: false, appendfsync: 'unknown', durable: false });
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(
      `${options.where}: cannot read the persistence config of ${server} (${why}), so an ack's durability is unknown; ${HOW_TO_FIX}`,
      { cause: err },
    );
  }
  const result = Object.freeze({
    appendonly: appendonly === 'yes',
    appendfsync,
    durable: appendonly === 'yes' && appendfsync === 'always',
  });
  if (options.require && !result.durable) {
    throw new Error(
      `${options.where}: ${server} is not durable (appendonly=${appendonly}, appendfsync=${appendfsync}), so a crash can lose acknowledged acks; ${HOW_TO_FIX}`,
    );
  }
  return result;
}

/** CONFIG GET replies [name, value] (an empty array for an unknown parameter). */
async function readConfig(link: RedisLink, name: string): Promise<string> {
  const reply: RedisReply = await link.call!('CONFIG', ['GET', name]);
  if (!Array.isArray(reply) || reply.length < 2 || !(reply[1] instanceof Uint8Array)) {
    throw new Error(`CONFIG GET ${name} returned ${describe(reply)}, not [name, value]`);
  }
  return new TextDecoder().decode(reply[1]);
}

function describe(reply: RedisReply): string {
  return Array.isArray(reply) ? `an array of ${reply.length}` : reply instanceof Uint8Array ? 'a string' : String(reply);
}
