/** Suites of the kernels-elementwise area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import embedding from '../kernels/embedding.test.ts';

export const kernels_elementwiseSuites: readonly Suite[] = [embedding];
