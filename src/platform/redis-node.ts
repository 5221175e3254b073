/**
 * Node's Redis connection for the data plane's Redis backend (src/dataplane/redis-backend.ts).
 * Sockets are a runtime capability, so the ioredis client is created here and injected as a
 * `RedisLink`; nothing outside src/platform/ imports ioredis.
 *
 * Liveness: every call has a deadline. No SpecLab call blocks in Redis (claims and waits poll with
 * short scripts), so one command timeout bounds each call; a call the server does not answer in time
 * fails naming the server, and the connection is dropped and made again in the background, so the
 * calls after it (a process's cleanup) fail at once instead of each waiting out the timeout, and a
 * thawed server is reachable again.
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

/**
 * The command timeout from SPECLAB_REDIS_TIMEOUT_MS (unset: the 30 s default), for runs that must
 * notice a frozen server sooner or later; anything but a positive whole number fails naming it.
 */
export function redisOptionsFromEnv(env: (name: string) => string | undefined): RedisConnectOptions {
  const raw = env('SPECLAB_REDIS_TIMEOUT_MS');
  if (raw === undefined || raw === '') return {};
  const ms = Number(raw);
  if (!Number.isSafeInteger(ms) || ms < 1)
    throw new Error(`SPECLAB_REDIS_TIMEOUT_MS must be a positive whole number of milliseconds, got "${raw}"`);
  return { commandTimeoutMs: ms };
}

/**
 * Servers (by URL) a call of this process got no answer from, until one of its connections to that
 * server is ready again. A process holds several connections to one server (the control plane's, the
 * data plane's): without this, a frozen server would cost one full timeout per connection in turn
 * (a failed put, then the failure record on the other connection), not one.
 */
const unresponsive = new Set<string>();

/** How long closing waits for the server to answer QUIT before dropping the socket. */
const QUIT_DEADLINE_MS = 1000;

/** `url` without its password, for messages. */
export function redisUrlForMessages(url: string): string {
  return url.replace(
    /^(\w+:\/\/)([^@/]*)@/,
    (_, scheme: string, auth: string) => `${scheme}${auth.includes(':') ? `${auth.split(':')[0]}:***` : '***'}@`,
  );
}

/** Connects to `url` (e.g. redis://127.0.0.1:6399/0) and resolves once the server answered. */
export async function connectRedis(url: string, options: RedisConnectOptions = {}): Promise<RedisLink> {
  const where = `Redis at ${redisUrlForMessages(url)}`;
  const commandTimeoutMs = options.commandTimeoutMs ?? 30_000;
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: options.connectTimeoutMs ?? 5000,
    // Fail calls instead of queueing them forever when the server is gone: a data-plane call must
    // surface an error the caller can act on, not hang.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    commandTimeout: commandTimeoutMs,
  });
  // Connection trouble is reported through each failed call (as DataPlaneError 'unavailable' by the
  // backend); without a listener ioredis would also print every reconnect attempt.
  let lastError = '';
  client.on('error', (err: Error) => (lastError = err.message));
  // Ready (after ioredis' own INFO check) means the server answers again.
  client.on('ready', () => unresponsive.delete(where));
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    const why = err instanceof Error ? err.message : String(err);
    throw new DataPlaneError(
      'unavailable',
      `${where}: could not connect within ${options.connectTimeoutMs ?? 5000} ms: ${why || lastError}`,
    );
  }
  const shas = new Map<string, string>();
  let closed = false;

  /**
   * A failed call as the caller should see it: the server's own replies (script refusals, NOSCRIPT)
   * unchanged; a timeout or a lost connection naming the server, with the client's error as cause.
   */
  const lost = (err: unknown): unknown => {
    if (!(err instanceof Error) || err.name === 'ReplyError') return err;
    if (/timed out/i.test(err.message)) {
      // The server may be frozen: drop the socket (pending calls fail now) and reconnect behind.
      unresponsive.add(where);
      if (!closed) client.disconnect(true);
      return new Error(`${where}: no answer within ${commandTimeoutMs} ms, connection lost (${err.message})`, { cause: err });
    }
    const detail = lastError && lastError !== err.message ? `${err.message}; ${lastError}` : err.message;
    return new Error(`${where}: connection lost (${detail})`, { cause: err });
  };
  const guarded = async <T>(call: () => Promise<T>): Promise<T> => {
    if (unresponsive.has(where))
      throw new Error(
        `${where}: no answer within ${commandTimeoutMs} ms, connection lost (on another connection; none has answered since)`,
      );
    try {
      return await call();
    } catch (err) {
      throw lost(err);
    }
  };

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
      return guarded(async () => {
        try {
          return (await client.callBuffer('EVALSHA', [sha, ...wire])) as RedisReply;
        } catch (err) {
          // The server does not have the script cached yet (first use, or after a restart).
          if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
          return (await client.callBuffer('EVAL', [script, ...wire])) as RedisReply;
        }
      });
    },
    async call(command: string, args: readonly RedisArg[]): Promise<RedisReply> {
      return guarded(async () => (await client.callBuffer(command, args.map(toWire))) as RedisReply);
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      // QUIT waits for the server's answer: a frozen or gone server must not hold the process.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, QUIT_DEADLINE_MS)));
      try {
        await Promise.race([client.status === 'ready' ? client.quit() : Promise.resolve(), deadline]);
      } catch {
        // Closing anyway.
      } finally {
        clearTimeout(timer);
        client.disconnect();
      }
    },
  };
}
