/**
 * A `speclab train` metrics.jsonl, picked or dropped on the lab page, drawn in the charts
 * (./metrics.ts parses it; a bad line is refused naming it in #metrics-status).
 */
import type { LabCharts } from './lab-charts.ts';
import { parseMetricsJsonl } from './metrics.ts';

const $ = (id: string) => document.getElementById(id) as HTMLElement;

/** Draws `file` in the charts (this tab's run is redrawn at its next step). */
export async function showMetricsFile(file: File, charts: LabCharts, chartSource: (source: 'file', text: string) => void): Promise<void> {
  const el = $('metrics-status');
  try {
    const points = parseMetricsJsonl(await file.text(), file.name);
    charts.reset();
    for (const p of points) charts.push(p);
    const last = points[points.length - 1].step;
    chartSource(
      'file',
      `Showing ${file.name}: ${points.length} steps of a speclab train run (up to step ${last.step} of ${last.total}). A CLI log has no queue, feature-store or lifecycle counts: those charts stay empty. This tab's run is drawn again at its next step.`,
    );
    el.dataset.state = 'ready';
    el.dataset.steps = String(points.length);
    el.textContent = `${file.name}: ${points.length} steps, ${points.filter((p) => p.eval).length} held-out evaluations.`;
  } catch (err) {
    el.dataset.state = 'error';
    el.textContent = `metrics file refused: ${(err as Error).message}`;
  }
}
