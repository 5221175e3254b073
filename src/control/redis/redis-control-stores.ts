/**
 * Everything a DataFlowController needs, in Redis: a controller in each process over stores opened
 * here on the same server and run id is the multi-process control plane (docs/control-plane.md §9).
 * The metadata store checks the server's durability (it holds the ack marker); the queue, prompt
 * ledger and member registry hold state that reconcileOnRestart rebuilds from the metadata, so they
 * need no durable server of their own. Keys: redis-keys.ts.
 *
 * The link stays the caller's: closing the stores' metadata does not close it, so one link can
 * serve all four stores (and the caller closes it once, last).
 */
import type { RedisLink } from '../../ports/redis-link.ts';
import type { ControlStores } from '../control-stores.ts';
import { RedisMemberRegistry } from './redis-members.ts';
import { RedisMetadataStore } from './redis-metadata-store.ts';
import { RedisPromptLedger, type RedisPromptLedgerOptions } from './redis-prompt-ledger.ts';
import { RedisRefQueue, type RedisRefQueueOptions } from './redis-ref-queue.ts';

export interface RedisControlStoresOptions {
  /** Refuse a server without appendonly yes + appendfsync always (default true; see redis-durability.ts). */
  readonly requireDurable?: boolean;
  /** The server's address, named in errors (the link does not know it). */
  readonly url?: string;
  readonly queue?: RedisRefQueueOptions;
  /** Each defaults to null (no expiry, unbounded attempts, no per-worker cap), as the controller's own ledger. */
  readonly prompts?: Partial<RedisPromptLedgerOptions>;
}

export interface RedisControlStores extends ControlStores {
  readonly metadata: RedisMetadataStore;
  readonly queue: RedisRefQueue;
  readonly prompts: RedisPromptLedger;
  readonly members: RedisMemberRegistry;
}

export async function openRedisControlStores(
  link: RedisLink,
  runId: string,
  options: RedisControlStoresOptions = {},
): Promise<RedisControlStores> {
  // The synchronous constructors validate options and the run id first, so a bad option fails
  // before the durability check talks to the server.
  const queue = new RedisRefQueue(link, runId, options.queue);
  const prompts = new RedisPromptLedger(link, runId, {
    leaseTimeoutMs: options.prompts?.leaseTimeoutMs ?? null,
    maxAttempts: options.prompts?.maxAttempts ?? null,
    maxLeasePerWorker: options.prompts?.maxLeasePerWorker ?? null,
    clock: options.prompts?.clock,
  });
  const members = new RedisMemberRegistry(link, runId);
  const metadata = await RedisMetadataStore.open(link, runId, { requireDurable: options.requireDurable, url: options.url });
  return { metadata, queue, prompts, members };
}
