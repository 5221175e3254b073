/**
 * Progress as plain lines (src/training/run/progress-lines.ts), on an injected clock: the first and
 * the completing update always print, others at most one per interval, the last state is printed at
 * the end unless a summary replaces it; bytes and counts are worded as the CLI shows them.
 */
import { lineProgress, progressText } from '../../../src/training/run/progress-lines.ts';
import { assertDeepEqual, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

export default defineSuite('training/run/progress-lines', (t) => {
  t.test('one line per update, at most one per interval; the first, the completing and the last state always', () => {
    const lines: string[] = [];
    let clock = 0;
    const display = lineProgress((l) => lines.push(l), { everyMs: 1000, now: () => clock });
    assertEqual(display.interactive, false, 'plain lines are not redrawn in place');
    const bar = display.start({ label: 'regenerating replies', total: 10, unit: 'conversations' });
    bar.update(1, '40 tokens'); // first: printed
    clock = 400;
    bar.update(2, '80 tokens'); // within the interval: held
    clock = 1100;
    bar.update(3, '120 tokens'); // past it: printed
    clock = 1200;
    bar.update(4); // held
    bar.end(); // the held state is printed
    const whole = display.start({ label: 'loading target weights', total: 3 * 2 ** 20, unit: 'bytes' });
    whole.update(2 ** 20);
    clock = 1300;
    whole.update(3 * 2 ** 20); // completing: printed at once
    whole.end('target weights: 3.00 MiB read');
    const open = display.start({ label: 'first step', total: 0, unit: 'kernels compiled' });
    open.update(7, 'matmul/blocked');
    open.end();
    assertDeepEqual(
      lines,
      [
        'regenerating replies: 1 of 10 conversations (10%), 40 tokens',
        'regenerating replies: 3 of 10 conversations (30%), 120 tokens',
        'regenerating replies: 4 of 10 conversations (40%)',
        'loading target weights: 1.00 MiB of 3.00 MiB (33%)',
        'loading target weights: 3.00 MiB of 3.00 MiB (100%)',
        'target weights: 3.00 MiB read',
        'first step: 7 kernels compiled, matmul/blocked',
      ],
      'the lines',
    );
  });

  t.test('wording of a count past its total and of an unknown total', () => {
    assertEqual(progressText({ label: 'x', total: 4, unit: 'prompts' }, 5), 'x: 5 of 4 prompts (100%)', 'capped percentage');
    assertEqual(progressText({ label: 'x', total: 0, unit: 'bytes' }, 2048, 'ok'), 'x: 2.00 KiB, ok', 'unknown total');
  });
});
