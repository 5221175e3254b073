/** Contracts: the records, ids and the no-tensor guard shared by every plane. */
export { SCHEMA_VERSION, RunMode, DraftStrategyName, TargetRepr } from './enums.ts';
export { onlineSampleId, offlineSampleId } from './ids.ts';
export { assertNoTensors, tensorKind } from './no-tensors.ts';
export {
  JsonRecord,
  PromptTaskSchema,
  FeatureSpecSchema,
  SampleRefSchema,
  FeatureHandleSchema,
  makePromptTask,
  makeFeatureSpec,
  makeSampleRef,
  makeFeatureHandle,
  makeJsonRecord,
  deepFreeze,
} from './records.ts';
export type {
  PromptTask,
  PromptTaskInput,
  FeatureSpec,
  FeatureSpecInput,
  SampleRef,
  SampleRefInput,
  FeatureHandle,
  FeatureHandleInput,
} from './records.ts';
export { makeTrainBatch } from './train-batch.ts';
export type { TrainBatch, TrainBatchMetadata } from './train-batch.ts';
export type { TrainSequence, Continuation } from './train-sequence.ts';
