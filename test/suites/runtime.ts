/** Suites of the compute loops: rollout worker and trainer (listed explicitly). */
import type { Suite } from '../harness/suite.ts';
import rolloutWorker from '../inference/rollout-worker.test.ts';
import trainer from '../training/loop/trainer.test.ts';
import featurePath from '../training/loop/feature-path.test.ts';
import eagle3Online from '../training/loop/eagle3-online.test.ts';
import spill from '../runtime/spill.test.ts';
import badInput from '../runtime/bad-input.test.ts';

export const runtimeSuites: readonly Suite[] = [rolloutWorker, trainer, featurePath, eagle3Online, spill, badInput];
