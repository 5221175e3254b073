/**
 * The rollout page's Web Worker: owns the GPU device and runs src/training/cluster/tab-rollout.ts (the
 * same RolloutWorker, capture and feature store as `speclab rollout`), posting its events.
 */
/// <reference lib="webworker" />
import { Gpu } from '../../src/gpu/gpu.ts';
import { browserPlatform } from '../../src/platform/browser.ts';
import { urlStore } from '../../src/platform/browser-model-url.ts';
import { standardWebSocket } from '../../src/platform/websocket.ts';
import { runTabRollout } from '../../src/training/cluster/tab-rollout.ts';
import type { JoinCommand, WorkerMessage } from './protocol.ts';

const scope = self as unknown as DedicatedWorkerGlobalScope;
const post = (message: WorkerMessage): void => scope.postMessage(message);

async function join(cmd: JoinCommand): Promise<void> {
  const ctx = await browserPlatform.acquireGpu();
  const gpu = new Gpu(ctx);
  let leases = 0;
  try {
    await runTabRollout({
      gatewayUrl: cmd.gateway,
      token: cmd.token,
      run: cmd.run,
      WebSocket: standardWebSocket(),
      targetFiles: urlStore(cmd.targetUrl),
      gpu,
      batch: cmd.batch,
      workerId: cmd.workerId,
      onEvent: (event) => post({ type: 'event', event }),
      afterLease: async (tasks) => {
        if (++leases !== cmd.pauseAfterLease) return;
        // Held for good: the tab keeps the lease until it is closed, as a tab that died mid-capture would.
        post({ type: 'held', taskIds: tasks.map((t) => t.taskId) });
        await new Promise<never>(() => {});
      },
    });
  } finally {
    gpu.destroy();
    ctx.destroy();
  }
}

scope.onmessage = (event: MessageEvent<JoinCommand>) => {
  if (event.data?.type !== 'join') return;
  join(event.data).catch((err: unknown) => post({ type: 'error', message: err instanceof Error ? err.message : String(err) }));
};
