/** Suites of the EAGLE3 draft area: float64 reference, GPU model, training strategy (listed explicitly). */
import type { Suite } from '../harness/suite.ts';
import referenceEagle3 from '../reference/eagle3.test.ts';
import modelEagle3 from '../model/eagle3.test.ts';
import eagle3Strategy from '../training/eagle3-strategy.test.ts';

export const eagle3Suites: readonly Suite[] = [referenceEagle3, modelEagle3, eagle3Strategy];
