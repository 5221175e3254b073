/**
 * What a training run is given of the runtime SpecLab runs in (Node + Dawn, Deno, a browser tab),
 * seen through runtime-neutral interfaces: a GPU, file stores, the environment, signals, Redis.
 *
 * An entry point injects it (each adapter in src/platform/ implements the command table's
 * `Platform`, src/cli/platform.ts, which adds the gateway server to this); only src/platform/
 * touches runtime globals (`navigator`, `Deno`, `process`, `node:*`, the Dawn binding), and a lint
 * rule (eslint.config.js) fails CI when code elsewhere in src/ reaches for one. It lives here, not
 * in src/ports/, because acquiring a GPU returns a `GpuContext` (src/gpu/), which ports may not import.
 */
import type { GpuContext, GpuRequest } from '../../gpu/context.ts';
import type { ProgressDisplay } from '../../ports/progress.ts';
import type { RedisLink } from '../../ports/redis-link.ts';
import type { FileStore, KeyValueHost } from '../../ports/storage.ts';
import type { RuntimeName } from '../../ports/runtime.ts';
import { lineProgress } from './progress-lines.ts';

export interface RunPlatform extends KeyValueHost {
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
  /**
   * Opens a Redis connection (`redis://host:port/db`), resolving once the server answered. Absent
   * where there are no sockets (a browser tab).
   */
  connectRedis?(url: string): Promise<RedisLink>;
  /**
   * Progress bars for long phases when the output is a terminal (Node's CLI on a TTY); absent, or
   * undefined, where output is a log or a pipe: runs then print plain progress lines (progressFor).
   */
  progressDisplay?(): ProgressDisplay | undefined;
  /**
   * The local folder of a Hugging Face model id (`ORG/NAME[@REV]`): its snapshot in the Hugging Face
   * cache, downloaded into it first when missing (src/platform/hf-hub-node.ts); undefined when `spec`
   * is not an id. With `configOnly` the snapshot needs only its config.json, and only that file is
   * downloaded (`speclab plan` sizes a run from it, before any weights are fetched). Absent where
   * there is no such cache (a browser tab, which has its own model store).
   */
  resolveModel?(spec: string, progress: ProgressDisplay, options?: ResolveModelOptions): Promise<string | undefined>;
}

export interface ResolveModelOptions {
  /** The config.json alone: a cached snapshot without weights will do, and a download fetches nothing else. */
  readonly configOnly?: boolean;
  /** The flag that gave the id, named by errors. Default --target. */
  readonly flag?: `--${string}`;
}

/**
 * Where a run shows the progress of its long phases: the platform's terminal bars, else plain lines
 * through `print` (one per update, at most one every 5 s per phase).
 */
export function progressFor(platform: Pick<RunPlatform, 'progressDisplay'>, print: (line: string) => void): ProgressDisplay {
  return platform.progressDisplay?.() ?? lineProgress(print);
}
