/** Suites of `speclab train`: online EAGLE3 draft training end to end on the fixtures. */
import type { Suite } from '../harness/suite.ts';
import trainCli from '../cli/train.test.ts';

export const trainSuites: readonly Suite[] = [trainCli];
