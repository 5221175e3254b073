/** Builders shared by the controller tests: a controller with deterministic ids and a registered worker + trainer. */
import { DataFlowController, type ControllerOptions } from '../../src/control/controller.ts';
import { InMemoryMetadataStore, type MetadataStore } from '../../src/control/metadata-store.ts';
import { RUN_ID } from '../contracts/fixtures.ts';

export function counterHex(): (digits: number) => string {
  let n = 0;
  return (digits) => (n++).toString(16).padStart(digits, '0');
}

export interface Rig {
  controller: DataFlowController;
  store: MetadataStore;
  worker: string;
  trainer: string;
}

export async function rig(options: Partial<ControllerOptions> = {}): Promise<Rig> {
  const store = options.store ?? new InMemoryMetadataStore();
  const controller = new DataFlowController({ runId: RUN_ID, store, randomHex: counterHex(), ...options });
  const worker = await controller.registerRolloutWorker({ workerId: 'rollout-a', host: 'local' });
  const trainer = await controller.registerTrainer({ trainerId: 'trainer-0' });
  return { controller, store, worker, trainer };
}

/** Ingests prompts `t<i>` with a token payload; returns their task ids. */
export async function ingest(controller: DataFlowController, ...taskIds: string[]): Promise<string[]> {
  return await controller.ingestPrompts(taskIds.map((taskId) => ({ taskId, payload: { input_ids: [1, 2, 3], loss_mask: [0, 1, 1] } })));
}
