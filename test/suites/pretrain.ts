/** Suites of the lab-target pretraining area: the target-model trainer (forward + hand backward) and the
 * `speclab pretrain` / `speclab generate` commands. */
import type { Suite } from '../harness/suite.ts';
import targetTrainer from '../training/pretraining/target-trainer.test.ts';
import pretrainCli from '../cli/pretrain.test.ts';

export const pretrainSuites: readonly Suite[] = [targetTrainer, pretrainCli];
