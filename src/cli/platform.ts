/**
 * What an entry point injects into the command table: the runtime SpecLab runs in (Node + Dawn,
 * Deno, a browser tab), seen through runtime-neutral interfaces.
 *
 * The commands are the only code in src/ that needs the whole runtime, so the interface lives with
 * them; each adapter in src/platform/ implements it, and only that folder touches runtime globals
 * (`navigator`, `Deno`, `process`, `node:*`, the Dawn binding). A lint rule (eslint.config.js)
 * fails CI when code elsewhere in src/ reaches for one. The storage pieces every plane uses
 * (`FileStore`, key-value databases) are in src/ports/.
 */
import type { GpuContext, GpuRequest } from '../gpu/context.ts';
import type { RedisLink } from '../ports/redis-link.ts';
import type { GatewayServeOptions, ServedGateway } from './gateway-options.ts';
import type { FileStore, KeyValueHost } from '../ports/storage.ts';
import type { RuntimeName } from '../ports/runtime.ts';

export interface Platform extends KeyValueHost {
  readonly name: RuntimeName;
  /** Acquire an adapter and device. The returned context owns every native object behind it. */
  acquireGpu(request?: GpuRequest): Promise<GpuContext>;
  /** A file store rooted at `root` (a directory path in Node/Deno, a database name in the browser). */
  files(root: string): FileStore;
  /** Environment variable (Node/Deno) or URL query parameter (browser); undefined when absent. */
  env(name: string): string | undefined;
  /** Command-line arguments after the script (empty in the browser). */
  args(): string[];
  /** Destroy every live GPU device from this platform, then end the process (no-op in browser). */
  exit(code: number): Promise<never>;
  /**
   * Calls `handler` on each SIGINT or SIGTERM (Node, Deno) instead of ending the process; returns
   * the function that removes it. Absent where there are no signals (a browser tab).
   */
  onInterrupt?(handler: (signal: 'SIGINT' | 'SIGTERM') => void): () => void;
  /** Opens a Redis connection (`redis://host:port/db`), resolving once the server answered. Absent where there are no sockets (a browser tab). */
  connectRedis?(url: string): Promise<RedisLink>;
  /** Serves a run's WebSocket gateway for rollout tabs (`speclab gateway`). Absent where there is no server socket. */
  startGateway?(options: GatewayServeOptions): Promise<ServedGateway>;
}
