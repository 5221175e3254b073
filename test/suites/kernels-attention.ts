/** Suites of the kernels-attention area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import kernelsAttention from '../kernels/attention.test.ts';
import referenceAttention from '../reference/attention.test.ts';
import kernelsAttentionProbs from '../kernels/attention-probs.test.ts';
import kernelsAttentionLanes from '../kernels/attention-lanes.test.ts';

export const kernels_attentionSuites: readonly Suite[] = [
  referenceAttention,
  kernelsAttention,
  kernelsAttentionLanes,
  kernelsAttentionProbs,
];
