/**
 * What an entry point injects into the command table: the runtime a training run is given
 * (`RunPlatform`, src/training/run/platform.ts: GPU, files, environment, signals, Redis) and, for
 * `speclab gateway`, the WebSocket server. Each adapter in src/platform/ implements it, and only
 * that folder touches runtime globals (`navigator`, `Deno`, `process`, `node:*`, the Dawn binding).
 * The storage pieces every plane uses (`FileStore`, key-value databases) are in src/ports/.
 */
import type { RunPlatform } from '../training/run/platform.ts';
import type { GatewayServeOptions, ServedGateway } from './gateway-options.ts';

export interface Platform extends RunPlatform {
  /** Serves a run's WebSocket gateway for rollout tabs (`speclab gateway`). Absent where there is no server socket. */
  startGateway?(options: GatewayServeOptions): Promise<ServedGateway>;
}
