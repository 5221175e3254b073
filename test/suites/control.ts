/** Suites of the control area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import contractsRecords from '../contracts/records.test.ts';
import contractsNoTensors from '../contracts/no-tensors.test.ts';

export const controlSuites: readonly Suite[] = [contractsRecords, contractsNoTensors];
