/**
 * Training charts (uPlot), each with a table of the latest numbers beside it: the table is the
 * legend (a colour swatch per series) and keeps the page readable without the pictures, so uPlot's
 * own legend is off. One x value (the optimizer step, whole numbers only) per point; a series
 * without a value at a step (held-out evaluation runs only every few steps) leaves a gap its line
 * spans, and its table row keeps the latest value it had. Every chart names its y quantity and unit.
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

const COLORS = ['#3558d8', '#d8354f', '#2a9d5c', '#c77c0e', '#7b3fd1', '#0f8ea1', '#6b6b6b', '#b0456f'];
const HEIGHT = 180;
/** Step ticks: whole numbers only (uPlot would otherwise place 1.5). */
const STEP_INCREMENTS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000];

export interface ChartOptions {
  /** The y quantity and its unit, e.g. "loss (nats)". */
  yLabel: string;
  /** Table cells and y tick labels. */
  format?: (v: number) => string;
  /** A fixed y range (accuracies: [0, 1]); else it follows the data. */
  yRange?: [number, number];
}

export class LiveChart {
  private readonly xs: number[] = [];
  private readonly ys: (number | null)[][];
  private readonly latest: (number | undefined)[];
  private plot: uPlot | undefined;
  private pending = false;
  private destroyed = false;
  private resize: ResizeObserver | undefined;
  private readonly format: (v: number) => string;

  constructor(
    private readonly container: HTMLElement,
    private readonly table: HTMLTableElement,
    private readonly names: readonly string[],
    private readonly options: ChartOptions,
  ) {
    this.ys = names.map(() => []);
    this.latest = names.map(() => undefined);
    this.format = options.format ?? ((v) => (Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4)));
    container.setAttribute('role', 'img');
    container.setAttribute('aria-label', `${options.yLabel} against optimizer step: ${names.join(', ')}`);
    this.renderTable();
  }

  /** The number of steps drawn. */
  get length(): number {
    return this.xs.length;
  }

  /** Appends one point per series at step `x`; an undefined value is no point for that series. */
  push(x: number, values: readonly (number | undefined)[]): void {
    this.xs.push(x);
    this.names.forEach((_, i) => {
      const v = values[i];
      const finite = v !== undefined && Number.isFinite(v);
      this.ys[i].push(finite ? v : null);
      if (finite) this.latest[i] = v;
    });
    this.renderTable();
    this.schedule();
  }

  reset(): void {
    for (const series of [this.xs, ...this.ys]) series.length = 0;
    this.latest.fill(undefined);
    this.renderTable();
    this.schedule();
  }

  /** Removes the plot; a redraw already scheduled draws nothing (the container gets a new chart). */
  destroy(): void {
    this.destroyed = true;
    this.resize?.disconnect();
    this.plot?.destroy();
    this.plot = undefined;
  }

  private renderTable(): void {
    const cell = (v: number | undefined) => (v === undefined ? '—' : this.format(v));
    const head = `<thead><tr><th scope="col">series</th><th scope="col">latest</th></tr></thead>`;
    const rows = this.names.map(
      (n, i) =>
        `<tr><th scope="row"><span class="swatch" style="background:${COLORS[i % COLORS.length]}"></span>${n}</th><td>${cell(this.latest[i])}</td></tr>`,
    );
    this.table.innerHTML = `${head}<tbody>${rows.join('')}</tbody>`;
  }

  private aligned(): uPlot.AlignedData {
    return [this.xs, ...this.ys];
  }

  /** Redraws at most once per animation frame. */
  private schedule(): void {
    if (this.pending || this.destroyed) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      if (!this.destroyed) this.draw();
    });
  }

  private width(): number {
    return Math.max(200, this.container.clientWidth || 320);
  }

  private draw(): void {
    if (this.plot) {
      this.plot.setData(this.aligned());
      return;
    }
    const format = this.format;
    const range = this.options.yRange;
    this.plot = new uPlot(
      {
        width: this.width(),
        height: HEIGHT,
        scales: { x: { time: false }, y: range ? { range: () => range } : {} },
        axes: [
          {
            label: 'optimizer step',
            incrs: STEP_INCREMENTS,
            values: (_u, ticks) => ticks.map((t) => (Number.isInteger(t) ? String(t) : '')),
          },
          { label: this.options.yLabel, size: 56, values: (_u, ticks) => ticks.map((t) => format(t)) },
        ],
        series: [
          { label: 'step' },
          ...this.names.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true })),
        ],
        legend: { show: false },
      },
      this.aligned(),
      this.container,
    );
    this.resize = new ResizeObserver(() => this.plot?.setSize({ width: this.width(), height: HEIGHT }));
    this.resize.observe(this.container);
  }
}
