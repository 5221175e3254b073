/**
 * The lab's chart set: which charts there are, their series, axes and units, and how one step's
 * metrics (./metrics.ts MetricPoint: live, restored after a reload, or read from a metrics.jsonl)
 * lands in them. Counts and bytes never share an axis: the queue and the feature store are two charts.
 */
import { LiveChart, type ChartOptions } from './charts.ts';
import { acceptanceLength, type MetricPoint } from './metrics.ts';

const fixed = (digits: number) => (v: number) => v.toFixed(digits);
const count = (v: number) => v.toFixed(0);

interface ChartSpec extends ChartOptions {
  id: string;
  names: (tttLength: number) => string[];
}

const positions = (label: string) => (ttt: number) => Array.from({ length: ttt }, (_, k) => `${label} k=${k}`);

const SPECS: ChartSpec[] = [
  { id: 'chart-loss', yLabel: 'loss (nats)', names: positions('loss'), format: fixed(2) },
  { id: 'chart-acc', yLabel: 'top-1 accuracy', names: positions('acc'), format: fixed(3), yRange: [0, 1] },
  {
    id: 'chart-acceptance',
    yLabel: 'tokens / verify',
    names: () => ['training batch (simulated)', 'held-out (simulated)'],
    format: fixed(3),
  },
  { id: 'chart-eval', yLabel: 'top-1 accuracy', names: positions('held-out acc'), format: fixed(3), yRange: [0, 1] },
  { id: 'chart-accept-rate', yLabel: 'acceptance rate', names: positions('held-out rate'), format: fixed(3), yRange: [0, 1] },
  { id: 'chart-throughput', yLabel: 'tokens / s', names: () => ['training tokens/s'], format: fixed(1) },
  { id: 'chart-queue', yLabel: 'samples', names: () => ['queue depth', 'in flight'], format: count },
  { id: 'chart-store', yLabel: 'MB', names: () => ['resident on the GPU (MB)', 'spilled (MB)'], format: fixed(2) },
  {
    id: 'chart-lifecycle',
    yLabel: 'count',
    names: () => ['prompts pending', 'prompts leased', 'prompts done', 'samples committed', 'samples acked', 'train backlog'],
    format: count,
  },
];

export const CHART_IDS = SPECS.map((s) => s.id);

export class LabCharts {
  private charts = new Map<string, LiveChart>();
  tttLength = 0;

  constructor(private readonly $: (id: string) => HTMLElement) {}

  /** (Re)builds every chart for `tttLength` draft positions, empty. */
  build(tttLength: number): void {
    this.tttLength = tttLength;
    for (const c of this.charts.values()) c.destroy();
    this.charts.clear();
    for (const spec of SPECS) {
      const container = this.$(spec.id);
      container.innerHTML = '';
      const table = document.querySelector<HTMLTableElement>(`.chart-numbers[data-for="${spec.id}"]`)!;
      this.charts.set(spec.id, new LiveChart(container, table, spec.names(tttLength), spec));
    }
  }

  reset(): void {
    for (const c of this.charts.values()) c.reset();
  }

  /** Steps drawn so far. */
  get steps(): number {
    return this.charts.get('chart-loss')?.length ?? 0;
  }

  /** Draws one step; a point with a different number of draft positions rebuilds the charts first. */
  push(p: MetricPoint): void {
    const s = p.step;
    if (s.accs.length > 0 && s.accs.length !== this.tttLength) this.build(s.accs.length);
    const at = (id: string, values: (number | undefined)[]) => this.charts.get(id)!.push(s.step, values);
    at('chart-loss', s.plosses);
    at('chart-acc', s.accs);
    at('chart-acceptance', [acceptanceLength(s.simulatedAcceptance), p.eval ? acceptanceLength(p.eval.simulatedAcceptance) : undefined]);
    at('chart-eval', p.eval ? p.eval.accs : []);
    at('chart-accept-rate', p.eval ? p.eval.acceptanceRates : []);
    at('chart-throughput', [s.tokensPerSecond]);
    const st = p.status;
    const c = st?.controller;
    at('chart-queue', c ? [c.queueDepth, c.queueInFlight] : []);
    at('chart-store', st ? [st.residentBytes / 1e6, st.spillBytes / 1e6] : []);
    at(
      'chart-lifecycle',
      c ? [c.promptsPending, c.promptsLeased, c.promptsCompleted, c.samplesCommitted, c.durableAcked, c.trainBacklog] : [],
    );
  }
}
