/** Suites of the kernels-loss area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';

export const kernels_lossSuites: readonly Suite[] = [];
