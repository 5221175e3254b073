/** The lab's saved per-step metrics (web/lab/run-metrics.ts): what a reloaded tab redraws, up to its checkpoint. */
import type { MetricPoint } from '../../../web/lab/metrics.ts';
import { METRICS_FILE, readRunMetrics, writeRunMetrics } from '../../../web/lab/run-metrics.ts';
import { assertDeepEqual, assertEqual, assertRejects } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';

const point = (step: number): MetricPoint => ({
  step: {
    step,
    total: 6,
    loss: 10 - step,
    plosses: [1, 2],
    accs: [0.1 * step, 0.05 * step],
    simulatedAcceptance: 0.1 * step,
    tokensPerSecond: 50,
    lr: 0.003,
    checkpointed: step % 2 === 0,
  },
  eval:
    step === 2
      ? {
          step,
          every: 2,
          sequences: 4,
          lossTokens: 40,
          loss: 8,
          plosses: [4, 4],
          accs: [0.2, 0.1],
          acceptanceRates: [0.2, 0.5],
          simulatedAcceptance: 0.22,
        }
      : undefined,
});

export default defineSuite('web/lab/run-metrics', (t) => {
  t.test('points written at a checkpoint read back up to the step the run continues after; none saved: []', async ({ platform }) => {
    const tmp = tempStore(platform, 'lab-metrics');
    try {
      assertDeepEqual(await readRunMetrics(tmp.files, 10), [], 'no file yet');
      const points = [1, 2, 3, 4].map(point);
      await writeRunMetrics(tmp.files, points);
      const back = await readRunMetrics(tmp.files, 2);
      assertDeepEqual(
        back.map((p) => p.step.step),
        [1, 2],
        'up to step 2',
      );
      assertEqual(back[1].eval?.acceptanceRates[1], 0.5, 'the held-out evaluation comes back with its step');
      assertEqual((await readRunMetrics(tmp.files, 4)).length, 4, 'all four');
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('a damaged metrics file is refused naming it', async ({ platform }) => {
    const tmp = tempStore(platform, 'lab-metrics-bad');
    try {
      await writeRunMetrics(tmp.files, [point(1)]);
      const bytes = await tmp.files.read(METRICS_FILE);
      bytes[bytes.length - 3] ^= 0x01;
      await tmp.files.writeAtomic(METRICS_FILE, bytes);
      await assertRejects(() => readRunMetrics(tmp.files, 1), new RegExp(`${METRICS_FILE}: .*damaged`), 'a flipped bit');
    } finally {
      await tmp.cleanup();
    }
  });
});
