/**
 * The rollout endpoints of `DataFlowController`, declared once for everything that serves or calls
 * them without needing the whole controller: the gateway's control RPC that serves them to browser
 * tabs (src/platform/control-gateway-node.ts, src/cli/gateway-options.ts) and the rollout worker
 * that calls them (src/inference/rollout-worker.ts). Picked from the class so that the signatures
 * cannot drift from the controller's. Its own file because controller.ts is at its size limit.
 */
import type { DataFlowController } from './controller.ts';

export type RolloutControl = Pick<
  DataFlowController,
  'runId' | 'registerRolloutWorker' | 'leasePromptTasks' | 'failPromptTasks' | 'completePromptTasks' | 'commitSamples'
>;
