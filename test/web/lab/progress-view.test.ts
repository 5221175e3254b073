/** The lab's progress (web/lab/progress-view.ts): counts and ETAs, the first (compiling) step timed apart. */
import { RunProgress } from '../../../web/lab/progress-view.ts';
import { assert, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

export default defineSuite('web/lab/progress-view', (t) => {
  t.test('the data phase: counts and an ETA from the time per prompt so far', () => {
    const p = new RunProgress(undefined, () => 0);
    p.onProgress({ type: 'progress', task: 'prompts', done: 0, total: 32, elapsedMs: 0 });
    assertEqual(p.snapshot().etaSeconds, undefined, 'no ETA before the first chunk');
    assert(p.texts().label.includes('0 of 32 prompts · estimating time left'), p.texts().label);
    p.onProgress({ type: 'progress', task: 'prompts', done: 8, total: 32, elapsedMs: 20_000 });
    assertEqual(p.snapshot().etaSeconds, 60, '2.5 s per prompt × 24 left');
    assertEqual(p.texts().label, 'Data 2 of 2 · the target continues the training prompts: 8 of 32 prompts · about 1m0s left', 'label');
  });

  t.test('training: the first step (shader compile) is timed apart; the ETA uses the steady state; evaluations counted', () => {
    let now = 1000;
    const p = new RunProgress(undefined, () => now);
    p.onPhase('training');
    assert(p.texts().label.includes('compiling the GPU shaders'), 'the first step says it compiles');
    now += 9000;
    p.onStep(1, 10, undefined);
    assertEqual(p.snapshot().firstStepMs, 9000, 'first step');
    assertEqual(p.snapshot().etaSeconds, 81, "until a second step: the first step's time × 9");
    now += 500;
    p.onStep(2, 10, 2);
    now += 500;
    p.onStep(3, 10, undefined);
    const s = p.snapshot();
    assertEqual(s.steadyStepMs, 500, 'steady state per step');
    assertEqual(s.etaSeconds, 3.5, '7 steps × 0.5 s');
    assertEqual(s.evalsDone, 1, 'one evaluation so far');
    assertEqual(s.evalsTotal, 5, 'every 2 of 10 steps');
    assertEqual(
      p.texts().timing,
      'First step 9.0s (includes compiling the GPU shaders, once per tab); steady state 0.5s per step; held-out evaluation 1 of 5 (every 2 steps and at the last).',
      'timing line',
    );
    // A pause does not count as step time: the steady state restarts from the next step.
    p.onPhase('paused');
    now += 60_000;
    p.onPhase('training');
    now += 400;
    p.onStep(4, 10, 2);
    now += 400;
    p.onStep(5, 10, undefined);
    assertEqual(p.snapshot().steadyStepMs, 400, 'the pause left out');
    assertEqual(p.snapshot().firstStepMs, 9000, 'the first step stays the first');
  });

  t.test('an evaluation count for runs whose steps are not a multiple of the interval (the last step is evaluated too)', () => {
    const p = new RunProgress(undefined, () => 0);
    p.restored(4, 7, 2, 2);
    assertEqual(p.snapshot().evalsTotal, 4, 'steps 2, 4, 6 and 7');
    assertEqual(p.texts().label, 'Saved run: step 4 of 7 is checkpointed; Continue goes on from there.', 'a restored run');
  });
});
