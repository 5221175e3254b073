/** Suites of speculative-decoding evaluation: the sampling rejection rule, extend attention, draft KV-cache inference, verification, `speclab eval`. */
import type { Suite } from '../harness/suite.ts';
import speculativeSampling from '../inference/speculative-sampling.test.ts';
import speculative from '../inference/speculative.test.ts';

export const speculativeSuites: readonly Suite[] = [speculativeSampling, speculative];
