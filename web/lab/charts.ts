/**
 * Live training charts (uPlot), each with a table of the latest numbers beside it so the page is
 * readable without the pictures. One x value (the optimizer step) per point; a series without a value
 * at a step (held-out evaluation runs only every few steps) leaves a gap its line spans, and its
 * table row keeps the latest value it had.
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

const COLORS = ['#3558d8', '#d8354f', '#2a9d5c', '#c77c0e', '#7b3fd1', '#0f8ea1', '#8a8a8a', '#b0456f'];

export class LiveChart {
  private readonly xs: number[] = [];
  private readonly ys: (number | null)[][];
  private readonly latest: (number | undefined)[];
  private plot: uPlot | undefined;
  private pending = false;

  constructor(
    private readonly container: HTMLElement,
    private readonly table: HTMLTableElement,
    private readonly names: readonly string[],
    private readonly format: (v: number) => string = (v) => (Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4)),
  ) {
    this.ys = names.map(() => []);
    this.latest = names.map(() => undefined);
  }

  /** Appends one point per series at step `x`; an undefined value is no point for that series. */
  push(x: number, values: readonly (number | undefined)[]): void {
    this.xs.push(x);
    this.names.forEach((_, i) => {
      const v = values[i];
      this.ys[i].push(v ?? null);
      if (v !== undefined) this.latest[i] = v;
    });
    const cell = (v: number | undefined) => (v === undefined ? '—' : this.format(v));
    this.table.innerHTML = `<tbody>${this.names.map((n, i) => `<tr><th scope="row">${n}</th><td>${cell(this.latest[i])}</td></tr>`).join('')}</tbody>`;
    this.schedule();
  }

  reset(): void {
    for (const series of [this.xs, ...this.ys]) series.length = 0;
    this.latest.fill(undefined);
    this.table.innerHTML = '';
    this.schedule();
  }

  private aligned(): uPlot.AlignedData {
    return [this.xs, ...this.ys];
  }

  /** Redraws at most once per animation frame. */
  private schedule(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  private draw(): void {
    const width = Math.max(240, this.container.clientWidth || 320);
    if (!this.plot) {
      this.plot = new uPlot(
        {
          width,
          height: 180,
          scales: { x: { time: false } },
          axes: [{ label: 'step' }, {}],
          series: [{ label: 'step' }, ...this.names.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true }))],
          legend: { show: this.names.length > 1 },
        },
        this.aligned(),
        this.container,
      );
      new ResizeObserver(() => this.plot?.setSize({ width: Math.max(240, this.container.clientWidth), height: 180 })).observe(this.container);
      return;
    }
    this.plot.setData(this.aligned());
  }
}
