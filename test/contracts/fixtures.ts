/** Small builders for contract records used across the control-area tests. */
import { makePromptTask, makeSampleRef, type PromptTask, type SampleRef, type SampleRefInput } from '../../src/contracts/records.ts';
import { onlineSampleId } from '../../src/contracts/ids.ts';

export const RUN_ID = 'run-test';

/** An online-style ref whose id is `<run>:<taskId>`, with one hidden-state feature spec. */
export function sampleRef(taskId: string, overrides: Partial<SampleRefInput> = {}): SampleRef {
  const sampleId = onlineSampleId(overrides.runId ?? RUN_ID, taskId);
  return makeSampleRef({
    sampleId,
    runId: RUN_ID,
    sourceTaskId: taskId,
    featureStoreUri: `mem://store-a/${encodeURIComponent(sampleId)}?generation=1`,
    featureKeys: { hidden_state: `${sampleId}/hidden_state`, input_ids: `${sampleId}/input_ids` },
    featureSpecs: {
      hidden_state: { name: 'hidden_state', shape: [8, 12], dtype: 'bfloat16' },
      input_ids: { name: 'input_ids', shape: [8], dtype: 'int64' },
    },
    strategy: 'eagle3',
    numTokens: 8,
    estimatedBytes: 8 * 12 * 2 + 8 * 8,
    metadata: { target_repr: 'hidden_state', ttt_length: 7 },
    ...overrides,
  });
}

export function promptTask(taskId: string): PromptTask {
  return makePromptTask({
    taskId,
    runId: RUN_ID,
    sourceId: 'prompt_source',
    payload: { input_ids: [1, 2, 3], loss_mask: [0, 1, 1] },
    maxLength: 2048,
  });
}
