/** Suites of `speclab train`: online EAGLE3 draft training end to end on the fixtures, and resume. */
import type { Suite } from '../harness/suite.ts';
import trainCli from '../cli/train.test.ts';
import session from '../training/eagle3-session.test.ts';

export const trainSuites: readonly Suite[] = [session, trainCli];
