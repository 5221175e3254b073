/**
 * src/training/run/run-loop.ts: the `phase train:` line states what the steps of the session's plan
 * (plannedStepSamples, src/training/session/session-parts.ts) really hold, not only the batch size.
 */
import { describeSteps } from '../../../src/training/run/run-loop.ts';
import { plannedStepSamples } from '../../../src/training/session/session-parts.ts';
import { assertDeepEqual, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

const ROUNDS = 'a step never spans two rounds of --round-prompts';

export default defineSuite('training/run/run-loop', (t) => {
  t.test('the plan: rounds of --round-prompts in steps of --batch-size, the last step of a round taking what is left', () => {
    assertDeepEqual(plannedStepSamples(32, { roundPrompts: 16, batchSize: 4 }), Array(8).fill(4), 'even rounds: all full');
    assertDeepEqual(plannedStepSamples(38, { roundPrompts: 16, batchSize: 8 }), [8, 8, 8, 8, 6], 'a short last round');
    assertDeepEqual(plannedStepSamples(20, { roundPrompts: 10, batchSize: 4 }), [4, 4, 2, 4, 4, 2], 'each round ends a step');
    assertDeepEqual(plannedStepSamples(3, { roundPrompts: 1, batchSize: 4 }), [1, 1, 1], 'rounds of one: one sample per step');
    assertDeepEqual(plannedStepSamples(0, { roundPrompts: 16, batchSize: 4 }), [], 'nothing to train');
  });

  t.test('the train line: uniform steps as `N steps of B samples`, else how many steps hold how many samples and why', () => {
    const online = (samples: number, roundPrompts: number, batchSize: number) =>
      describeSteps(plannedStepSamples(samples, { roundPrompts, batchSize }), batchSize, `${ROUNDS} ${roundPrompts}`);
    assertEqual(online(32, 16, 4), '8 steps of 4 samples', 'every step a full batch');
    assertEqual(
      online(38, 16, 8),
      `5 steps (4 of 8 samples, 1 of 6 samples: --batch-size 8, and ${ROUNDS} 16)`,
      'full steps and a short last one',
    );
    assertEqual(online(4, 1, 4), `4 steps of 1 sample (--batch-size 4, and ${ROUNDS} 1)`, 'rounds of one prompt: one sample per step');
    assertEqual(online(1, 16, 1), '1 step of 1 sample', 'one step of one');
    assertEqual(describeSteps([], 4, ROUNDS), '0 steps', 'no step');
  });
});
