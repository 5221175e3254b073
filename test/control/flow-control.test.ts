/** docs/control-plane.md §7 (SpecForge's test_flow_control): one latch for refs and bytes, lease cap, invalid watermarks. */
import { defineSuite } from '../harness/suite.ts';
import { assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { ProducerFlowControl, assertWatermarksCoverQuantum, resolveFlowControlLimits } from '../../src/control/flow-control.ts';

export default defineSuite('control/flow-control', (t) => {
  t.test('defaults follow the reference', () => {
    assertDeepEqual(
      resolveFlowControlLimits(),
      { highWatermarkRefs: 256, lowWatermarkRefs: 256, highWatermarkBytes: null, lowWatermarkBytes: null, maxPromptLeasePerWorker: 8 },
      'default limits',
    );
    assertEqual(resolveFlowControlLimits({ highWatermarkBytes: 100 }).lowWatermarkBytes, 100, 'low bytes default to high');
  });

  t.test('ref hysteresis: pause at high, stay paused above low, resume at low', () => {
    const fc = new ProducerFlowControl({ highWatermarkRefs: 10, lowWatermarkRefs: 4 });
    const seq = [3, 9, 10, 7, 5, 4, 8, 9].map((refs) => fc.shouldPause(refs));
    assertDeepEqual(seq, [false, false, true, true, true, false, false, false], 'latched states');
    assertDeepEqual(fc.counters(), { pauses: 1, resumes: 1, pausedChecks: 3 }, 'counters');
  });

  t.test('refs and bytes share one latch', () => {
    const fc = new ProducerFlowControl({ highWatermarkRefs: 10, lowWatermarkRefs: 5, highWatermarkBytes: 1000, lowWatermarkBytes: 400 });
    assertEqual(fc.shouldPause(2, 1000), true, 'bytes alone pause');
    assertEqual(fc.shouldPause(2, 500), true, 'bytes above low keep the pause although refs are low');
    assertEqual(fc.shouldPause(6, 300), true, 'refs above low keep the pause although bytes are low');
    assertEqual(fc.shouldPause(5, 400), false, 'both at low resume');
    assertEqual(fc.shouldPause(10, 0), true, 'refs alone pause');
    assertEqual(fc.shouldPause(4, 999), true, 'bytes above low keep the ref-triggered pause');
    assertEqual(fc.shouldPause(4, 100), false, 'resume');
    assertDeepEqual(fc.counters(), { pauses: 2, resumes: 2, pausedChecks: 5 }, 'counters');
  });

  t.test('per-worker prompt lease cap', () => {
    const fc = new ProducerFlowControl({ maxPromptLeasePerWorker: 4 });
    assertEqual(fc.promptLease(10), 4, 'clamped to the cap');
    assertEqual(fc.promptLease(3), 3, 'below the cap');
    assertEqual(fc.promptLease(10, 3), 1, 'room left after 3 held');
    assertEqual(fc.promptLease(10, 6), 0, 'never negative');
    assertEqual(fc.promptLease(-2), 0, 'negative request');
  });

  t.test('invalid watermarks are rejected naming the field', () => {
    assertThrows(() => resolveFlowControlLimits({ highWatermarkRefs: 0 }), /highWatermarkRefs must be an integer ≥ 1/, 'zero high');
    assertThrows(
      () => resolveFlowControlLimits({ highWatermarkRefs: 4, lowWatermarkRefs: 5 }),
      /lowWatermarkRefs \(5\) must not exceed highWatermarkRefs \(4\)/,
      'low above high',
    );
    assertThrows(() => resolveFlowControlLimits({ lowWatermarkRefs: -1 }), /lowWatermarkRefs must be an integer ≥ 0/, 'negative low');
    assertThrows(
      () => resolveFlowControlLimits({ lowWatermarkBytes: 10 }),
      /lowWatermarkBytes needs highWatermarkBytes/,
      'low bytes without high',
    );
    assertThrows(
      () => resolveFlowControlLimits({ highWatermarkBytes: 10, lowWatermarkBytes: 11 }),
      /lowWatermarkBytes \(11\) must not exceed/,
      'low bytes above high',
    );
    assertThrows(
      () => resolveFlowControlLimits({ maxPromptLeasePerWorker: 0 }),
      /maxPromptLeasePerWorker must be an integer ≥ 1/,
      'zero lease cap',
    );
    assertThrows(() => resolveFlowControlLimits({ highWatermarkRefs: 2.5 }), /highWatermarkRefs must be an integer/, 'fractional');
  });

  t.test('watermarks below the optimizer window are refused', () => {
    const limits = resolveFlowControlLimits({ highWatermarkRefs: 64, lowWatermarkRefs: 16 });
    assertWatermarksCoverQuantum(limits, 16);
    assertThrows(() => assertWatermarksCoverQuantum(limits, 32), /low 16\) must be ≥ the optimizer window of 32 refs/, 'low below quantum');
  });
});
