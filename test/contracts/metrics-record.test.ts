/**
 * src/contracts/metrics-record.ts and metrics-entries.ts: the schema of a `metrics.jsonl` line accepts
 * every record the online and offline `speclab train` write (real lines: ./metrics-lines.ts), the
 * constructors the writers call write those lines again byte for byte, and a bad line is refused
 * naming the line and the field.
 */
import {
  configRecord,
  dataRecord,
  evalAfterRecord,
  evalBeforeRecord,
  evalRecord,
  metricsLine,
  offlineSummaryRecord,
  resumeEventRecord,
  sessionEventRecord,
  summaryRecord,
  trainRecord,
} from '../../src/contracts/metrics-entries.ts';
import {
  evalRecordValues,
  MetricsLine,
  metricsRecordKind,
  parseMetricsLine,
  type MetricsEntry,
  type MetricsRecord,
} from '../../src/contracts/metrics-record.ts';
import { specForgeMetrics } from '../../src/training/evaluation/metric-keys.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { OFFLINE_LINES, ONLINE_LINES } from './metrics-lines.ts';

const TIME = '2026-12-04T02:13:20.479Z';

/** The keys of `record` that `prefix` starts, in order, with their values. */
const keysWith = (record: object, prefix: string): Record<string, number> =>
  Object.fromEntries(Object.entries(record).filter(([k]) => k.startsWith(prefix))) as Record<string, number>;

/** The entry a writer builds for record `r`, through the constructor of its kind. */
function rebuilt(r: MetricsRecord): MetricsEntry {
  const { time: _time, ...entry } = r;
  const kind = metricsRecordKind(r)!;
  const x = entry as never;
  switch (kind) {
    case 'config': {
      const { phase: _phase, ...settings } = entry as { phase: 'config'; target: string };
      return configRecord(settings, settings.target);
    }
    case 'data':
      return dataRecord(x);
    case 'eval-before':
      return evalBeforeRecord(x);
    case 'eval-after':
      return evalAfterRecord(x);
    case 'train': {
      const train = r as Extract<MetricsRecord, { phase: 'train' }>;
      const specForge = keysWith(r, 'train/');
      return trainRecord(train, { replay: train.replay === true, ...(Object.keys(specForge).length > 0 ? { specForge } : {}) });
    }
    case 'eval': {
      const ev = r as Extract<MetricsRecord, { phase: 'eval' }>;
      return evalRecord(ev.step, keysWith(r, 'eval/'), ev.replay === true);
    }
    case 'summary':
      return summaryRecord(x);
    case 'offline-summary':
      return offlineSummaryRecord(x);
    case 'session-event':
      return sessionEventRecord(x);
    case 'resume-event':
      return resumeEventRecord((r as { step: number }).step);
  }
}

export default defineSuite('contracts/metrics-record', (t) => {
  t.test('every record the online and offline writers wrote parses, and their constructors write the same bytes', () => {
    const kinds = new Set<string>();
    for (const [name, lines] of [
      ['online', ONLINE_LINES],
      ['offline', OFFLINE_LINES],
    ] as const) {
      lines.forEach((line, i) => {
        const record = parseMetricsLine(line, `${name} line ${i + 1}`);
        kinds.add(metricsRecordKind(record)!);
        // From the line as written (a parsed record lists the schema's fields first).
        const written = JSON.parse(line) as MetricsRecord;
        assertEqual(metricsLine(written.time, rebuilt(written)), `${line}\n`, `${name} line ${i + 1} written again`);
      });
    }
    assertDeepEqual([...kinds].sort(), Object.keys(MetricsLine).sort(), 'every record kind is among the real lines');
  });

  t.test('a replayed step, a skipped step (non-finite gradient norm: null) and SpecForge keys round-trip', () => {
    const values = {
      step: 3,
      totalSteps: 4,
      loss: 6.5,
      plosses: [2, 1.5],
      accs: [0.5, 0.25],
      simulatedAcceptance: 0.625,
      lr: 0.001,
      gradNorm: Number.NaN,
      samples: 4,
      tokensPerSecond: 100,
      checkpointed: false,
      elapsedSeconds: 2,
    };
    const specForge = specForgeMetrics('train', {
      loss: 6.5,
      plosses: [2, 1.5],
      accs: [0.5, 0.25],
      simulatedAcceptance: 0.625,
      acc: 0.375,
    });
    const line = metricsLine(TIME, trainRecord(values, { replay: true, specForge }));
    assert(line.includes('"gradNorm":null') && line.endsWith(',"replay":true}\n'), `the line: ${line}`);
    const back = parseMetricsLine(line.trim(), 'line 1') as Extract<MetricsRecord, { phase: 'train' }>;
    assert(Number.isNaN(back.gradNorm), 'null reads back as NaN');
    assertEqual(back.replay, true, 'replay');
    assertEqual(back['train/acc_1'], 0.25, 'a SpecForge key');

    const ev = specForgeMetrics('eval', {
      loss: 3.5,
      plosses: [3, 4],
      accs: [0.4, 0.2],
      acceptanceRates: [0.4, 0.5],
      simulatedAcceptance: 0.48,
    });
    const evLine = parseMetricsLine(metricsLine(TIME, evalRecord(2, ev, false)).trim(), 'line 2') as Extract<
      MetricsRecord,
      { phase: 'eval' }
    >;
    assertDeepEqual(
      evalRecordValues(evLine),
      { step: 2, loss: 3.5, plosses: [3, 4], accs: [0.4, 0.2], acceptanceRates: [0.4, 0.5], simulatedAcceptance: 0.48 },
      'the eval record read back into arrays',
    );
  });

  t.test('a bad line is refused naming the line and the field', () => {
    const train = JSON.parse(ONLINE_LINES.find((l) => l.includes('"phase":"train"'))!) as Record<string, unknown>;
    const bad = (change: Record<string, unknown>) => JSON.stringify({ ...train, ...change });
    const refused: [string, RegExp][] = [
      ['{"phase":"tr', /^metrics\.jsonl line 7: not JSON/],
      ['[1,2]', /^metrics\.jsonl line 7: not a JSON object$/],
      ['{"phase":"warmup"}', /^metrics\.jsonl line 7: not a metrics record \(phase "warmup"\)$/],
      ['{"step":1}', /^metrics\.jsonl line 7: not a metrics record \(no "phase" or "event"\)$/],
      [bad({ loss: 'x' }), /^metrics\.jsonl line 7: "loss" is not a number$/],
      [bad({ accs: [0.5, 'x', 0, 0] }), /^metrics\.jsonl line 7: "accs\[1\]" is not a number$/],
      [bad({ accs: [0.5] }), /^metrics\.jsonl line 7: 4 plosses for 1 accs$/],
      [bad({ step: 1.5 }), /^metrics\.jsonl line 7: "step" is not a whole number$/],
      [bad({ samples: undefined }), /^metrics\.jsonl line 7: "samples" is missing$/],
      [bad({ time: 'yesterday' }), /^metrics\.jsonl line 7: "time" is not an ISO time$/],
      [bad({ epoch: 1 }), /^metrics\.jsonl line 7: "epoch" is not a field of a train record$/],
      [bad({ 'train/acc_x': 1 }), /^metrics\.jsonl line 7: "train\/acc_x" is not a field of a train record$/],
      [bad({ replay: false }), /^metrics\.jsonl line 7: "replay"/],
      [`{"time":"${TIME}","phase":"data","trainSequences":8}`, /^metrics\.jsonl line 7: "trainTokens" is missing$/],
      [
        `{"time":"${TIME}","event":"checkpoint","kind":"checkpoint","step":2,"acked":8,"of":9}`,
        /line 7: "of" is not a field of this record$/,
      ],
      [`{"time":"${TIME}","event":"restart","kind":"restart"}`, /line 7: "kind" is not a session event \(phase, rollout or checkpoint\)$/],
    ];
    for (const [line, message] of refused) assertThrows(() => parseMetricsLine(line, 'metrics.jsonl line 7'), message, line.slice(0, 80));
  });

  t.test('a writer cannot write a SpecForge key the schema lacks', () => {
    const values = JSON.parse(ONLINE_LINES.find((l) => l.includes('"phase":"train"'))!) as Parameters<typeof trainRecord>[0];
    assertThrows(
      () => trainRecord(values, { replay: false, specForge: { 'train/accuracy': 1 } }),
      /"train\/accuracy" is not a SpecForge train key/,
      'train',
    );
    assertThrows(() => evalRecord(2, { 'eval/avg_loss': 1, 'eval/loss': 1 }, false), /"eval\/loss" is not a SpecForge eval key/, 'eval');
    assertThrows(() => evalRecord(2, { 'eval/avg_loss': 1 }, false), /"eval\/simulated_acc_len" is missing/, 'eval without its acceptance');
  });
});
