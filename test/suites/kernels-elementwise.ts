/** Suites of the kernels-elementwise area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';

export const kernels_elementwiseSuites: readonly Suite[] = [];
