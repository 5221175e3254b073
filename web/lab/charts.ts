/**
 * Live training charts (uPlot), each with a table of the latest numbers beside it so the page is
 * readable without the pictures. One x value (the optimizer step) per point.
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

const COLORS = ['#3558d8', '#d8354f', '#2a9d5c', '#c77c0e', '#7b3fd1', '#0f8ea1', '#8a8a8a', '#b0456f'];

export class LiveChart {
  private readonly data: number[][];
  private plot: uPlot | undefined;
  private pending = false;

  constructor(
    private readonly container: HTMLElement,
    private readonly table: HTMLTableElement,
    private readonly names: readonly string[],
    private readonly format: (v: number) => string = (v) => (Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4)),
  ) {
    this.data = [[], ...names.map(() => [])];
  }

  /** Appends one point per series at step `x`. */
  push(x: number, values: readonly number[]): void {
    this.data[0].push(x);
    this.names.forEach((_, i) => this.data[i + 1].push(values[i] ?? Number.NaN));
    this.table.innerHTML = `<tbody>${this.names.map((n, i) => `<tr><th scope="row">${n}</th><td>${this.format(values[i] ?? Number.NaN)}</td></tr>`).join('')}</tbody>`;
    this.schedule();
  }

  reset(): void {
    for (const series of this.data) series.length = 0;
    this.table.innerHTML = '';
    this.schedule();
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
          series: [{ label: 'step' }, ...this.names.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 1.5 }))],
          legend: { show: this.names.length > 1 },
        },
        this.data as uPlot.AlignedData,
        this.container,
      );
      new ResizeObserver(() => this.plot?.setSize({ width: Math.max(240, this.container.clientWidth), height: 180 })).observe(this.container);
      return;
    }
    this.plot.setData(this.data as uPlot.AlignedData);
  }
}
