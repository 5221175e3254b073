/**
 * Node's Redis connection for the data plane's Redis backend (src/dataplane/redis-backend.ts).
 * Sockets are a runtime capability, so the ioredis client is created here and injected as a
 * `RedisLink`; nothing outside src/platform/ imports ioredis.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { RedisArg, RedisLink, RedisReply } from '../ports/redis-link.ts';
import { DataPlaneError } from '../dataplane/types.ts';

export interface RedisConnectOptions {
  /** Give up connecting after this long (default 5 s). */
  readonly connectTimeoutMs?: number;
  /**
   * A command the server has not answered in this long fails (default 30 s), so a frozen Redis
   * (SIGSTOP, a stuck disk under appendfsync) surfaces as an error instead of blocking forever.
   * Every data-plane call is a short script: claims poll rather than block in Redis.
   */
  readonly commandTimeoutMs?: number;
}

/** Connects to `url` (e.g. redis://127.0.0.1:6399/0) and resolves once the server answered. */
export async function connectRedis(url: string, options: RedisConnectOptions = {}): Promise<RedisLink> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: options.connectTimeoutMs ?? 5000,
    // Fail calls instead of queueing them forever when the server is gone: a data-plane call must
    // surface an error the caller can act on, not hang.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    commandTimeout: options.commandTimeoutMs ?? 30_000,
  });
  // Connection trouble is reported through each failed call (as DataPlaneError 'unavailable' by the
  // backend); without a listener ioredis would also print every reconnect attempt.
  let lastError = '';
  client.on('error', (err: Error) => (lastError = err.message));
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    const why = err instanceof Error ? err.message : String(err);
    throw new DataPlaneError(
      'unavailable',
      `Redis at ${url}: could not connect within ${options.connectTimeoutMs ?? 5000} ms: ${why || lastError}`,
    );
  }
  const shas = new Map<string, string>();
  let closed = false;

  const toWire = (a: RedisArg): string | Buffer | number =>
    a instanceof Uint8Array ? Buffer.from(a.buffer, a.byteOffset, a.byteLength) : a;

  return {
    async evalScript(script: string, keys: readonly string[], args: readonly RedisArg[]): Promise<RedisReply> {
      let sha = shas.get(script);
      if (sha === undefined) {
        sha = createHash('sha1').update(script).digest('hex');
        shas.set(script, sha);
      }
      const wire = [keys.length, ...keys, ...args.map(toWire)];
      try {
        return (await client.callBuffer('EVALSHA', [sha, ...wire])) as RedisReply;
      } catch (err) {
        // The server does not have the script cached yet (first use, or after a restart).
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        return (await client.callBuffer('EVAL', [script, ...wire])) as RedisReply;
      }
    },
    async call(command: string, args: readonly RedisArg[]): Promise<RedisReply> {
      return (await client.callBuffer(command, args.map(toWire))) as RedisReply;
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
