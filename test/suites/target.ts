/** Suites of the target-model-on-GPU area: decode attention, table RoPE, the GPU forward / generation, capture. */
import type { Suite } from '../harness/suite.ts';
import attentionDecode from '../kernels/attention-decode.test.ts';
import ropeTable from '../kernels/rope-table.test.ts';
import targetModel from '../model/target.test.ts';
import targetModelF16 from '../model/target-f16.test.ts';
import targetRowChunks from '../model/target-row-chunks.test.ts';
import targetTables from '../model/target-tables.test.ts';
import weightStream from '../model/weight-stream.test.ts';
import targetFeatureSource from '../inference/target-feature-source.test.ts';

export const targetSuites: readonly Suite[] = [
  attentionDecode,
  ropeTable,
  targetModel,
  targetModelF16,
  targetRowChunks,
  targetTables,
  weightStream,
  targetFeatureSource,
];
