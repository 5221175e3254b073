/** Suites of the kernels-attention area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';

export const kernels_attentionSuites: readonly Suite[] = [];
