/** Suites of the control area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';

export const controlSuites: readonly Suite[] = [];
