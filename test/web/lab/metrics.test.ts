/** The lab's metrics (web/lab/metrics.ts): acceptance length with the bonus token, and reading a `speclab train` metrics.jsonl. */
import { acceptanceLength, parseMetricsJsonl } from '../../../web/lab/metrics.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

const train = (step: number, loss: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    time: '2026-01-01T00:00:00.000Z',
    phase: 'train',
    step,
    totalSteps: 3,
    loss,
    plosses: [loss, loss + 1],
    accs: [0.5, 0.25],
    simulatedAcceptance: 0.625,
    lr: 0.001,
    tokensPerSecond: 100,
    checkpointed: step % 2 === 0,
    ...extra,
  });

export default defineSuite('web/lab/metrics', (t) => {
  t.test('acceptance length counts the bonus token: 1 + Σ_k Π_{j≤k} acc_j', () => {
    assertEqual(acceptanceLength(0), 1, 'no accepted draft token: the bonus alone');
    assertEqual(acceptanceLength(0.5 + 0.5 * 0.5), 1.75, 'acc 0.5, 0.5');
  });

  t.test('train steps in order, the eval of a step attached, replayed steps replaced by the last record', () => {
    const evalLine = JSON.stringify({
      phase: 'eval',
      step: 2,
      'eval/avg_loss': 3.5,
      'eval/avg_acc': 0.4,
      'eval/per_position_acc/0': 0.4,
      'eval/per_position_acc/1': 0.2,
      'eval/simulated_acc_len': 0.48,
      'eval/acceptance_rate_0': 0.4,
      'eval/acceptance_rate_1': 0.5,
      'eval/ploss_0': 3,
      'eval/ploss_1': 4,
    });
    const text = [
      JSON.stringify({ phase: 'config', tttLength: 2 }),
      train(1, 9),
      train(2, 8),
      evalLine,
      JSON.stringify({ event: 'checkpoint', step: 2 }),
      train(2, 7.5, { replay: true }),
      train(3, 7),
      '',
    ].join('\n');
    const points = parseMetricsJsonl(text, 'metrics.jsonl');
    assertDeepEqual(
      points.map((p) => p.step.step),
      [1, 2, 3],
      'steps',
    );
    assertEqual(points[1].step.loss, 7.5, 'the replayed record of step 2 wins');
    assertDeepEqual(points[0].step.plosses, [9, 10], 'plosses');
    assertEqual(points[0].step.checkpointed, false, 'checkpointed');
    assert(points[0].eval === undefined && points[2].eval === undefined, 'no eval where none was logged');
    const ev = points[1].eval!;
    assertDeepEqual(ev.accs, [0.4, 0.2], 'eval accs');
    assertDeepEqual(ev.acceptanceRates, [0.4, 0.5], 'eval acceptance rates');
    assertDeepEqual(ev.plosses, [3, 4], 'eval plosses');
    assertEqual(ev.simulatedAcceptance, 0.48, 'eval simulated acceptance');
    assertEqual(ev.loss, 3.5, 'eval loss');
  });

  t.test('a last line cut mid-append is skipped; bad lines fail naming the file and the line', () => {
    assertEqual(parseMetricsJsonl(`${train(1, 9)}\n{"phase":"tr`, 'm.jsonl').length, 1, 'the cut line is skipped');
    assertThrows(() => parseMetricsJsonl(`${train(1, 9)}\nnot json\n${train(2, 8)}`, 'm.jsonl'), /m\.jsonl line 2: not JSON/, 'bad input');
    assertThrows(
      () => parseMetricsJsonl(`${train(1, 9)}\n${train(2, 8, { loss: 'x' })}`, 'm.jsonl'),
      /m\.jsonl line 2: "loss" is not a number/,
      'bad input',
    );
    assertThrows(() => parseMetricsJsonl(train(1, 9, { accs: [0.5] }), 'm.jsonl'), /m\.jsonl line 1: 2 plosses for 1 accs/, 'bad input');
    assertThrows(() => parseMetricsJsonl('[1,2]\n', 'm.jsonl'), /m\.jsonl line 1: not a JSON object/, 'bad input');
    assertThrows(() => parseMetricsJsonl(JSON.stringify({ phase: 'config' }), 'm.jsonl'), /m\.jsonl: no train steps/, 'bad input');
  });
});
