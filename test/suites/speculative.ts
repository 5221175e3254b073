/** Suites of speculative-decoding evaluation: extend attention, draft KV-cache inference, verification, `speclab eval`. */
import type { Suite } from '../harness/suite.ts';
import speculative from '../inference/speculative.test.ts';

export const speculativeSuites: readonly Suite[] = [speculative];
