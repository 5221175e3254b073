/** formatDuration (src/util/format.ts): progress-line durations. */
import { formatDuration } from '../../src/util/format.ts';
import { assertEqual } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('util/format', (t) => {
  t.test('compact durations round to whole seconds before splitting minutes (no "4m60s")', () => {
    const cases: [number, string][] = [
      [12.34, '12.3s'],
      [59.94, '59.9s'],
      [59.96, '1m0s'],
      [299.7, '5m0s'],
      [303, '5m3s'],
      [3900, '1h5m'],
      [Number.NaN, '?'],
    ];
    for (const [seconds, text] of cases) assertEqual(formatDuration(seconds), text, `${seconds} s`);
    assertEqual(formatDuration(65, 'clock'), '1m05s', 'clock style');
  });
});
