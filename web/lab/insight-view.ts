/**
 * The lab's "Draft insight" panel (docs/insight.md): for one held-out sample, what the draft attends
 * to and predicts at each TTT step, as captured on the GPU by the worker (./worker-insight.ts,
 * src/training/evaluation/draft-insight.ts) with the weights of a given optimizer step.
 *
 * Shown, for the chosen head (or the mean over heads, the default: a plain mean of the captured
 * per-head rows) and query position:
 *   - one heatmap per TTT step of the full [query position × key] grid (step-0 keys, then the
 *     draft's own states of steps 1..K−1), the chosen query row outlined; a picture only
 *     (role="img" with a summary): the same numbers are in the table below;
 *   - a table of the chosen query's probability on each visible key per TTT step, keys labelled with
 *     their tokens (data-p holds each value, so each step's column sums to 1);
 *   - a table of the draft's top-k per position and TTT step beside the target's token, the correct
 *     argmax marked.
 * All controls are native form elements (keyboard-usable); the heatmaps also take a click.
 */
import type { DraftInsight } from '../../src/training/evaluation/draft-insight.ts';

/** What the worker posts: the capture, plus the text of every token id it mentions. */
export interface LabInsight extends DraftInsight {
  tokenText: Record<number, string>;
}

const STYLE = `
.insight-controls { display: flex; flex-wrap: wrap; gap: 0.5em 1em; align-items: center; }
.insight-maps { display: flex; flex-wrap: wrap; gap: 0.75em; margin: 0.5em 0; }
.insight-maps figure { margin: 0; }
.insight-maps canvas { image-rendering: pixelated; border: 1px solid #8884; cursor: crosshair; }
.insight-scroll { overflow-x: auto; max-height: 28em; overflow-y: auto; }
.insight-table { border-collapse: collapse; font-size: 0.85em; }
.insight-table th, .insight-table td { border: 1px solid #8883; padding: 0.15em 0.4em; text-align: left; vertical-align: top; }
.insight-table td.p { text-align: right; font-variant-numeric: tabular-nums; }
.insight-table ol { margin: 0; padding-left: 1.2em; }
.insight-table .correct { color: #166534; font-weight: 600; }
.insight-table .wrong { color: #991b1b; }
.insight-table .unscored { color: var(--muted, #555); font-style: italic; }
.insight-tok { font-family: ui-monospace, monospace; white-space: pre; }
`;

/** Light bars behind table text (alpha ≤ 0.4), so the numbers keep their contrast. */
const bar = (p: number) => `rgba(37, 99, 235, ${(0.4 * Math.sqrt(Math.max(0, Math.min(1, p)))).toFixed(3)})`;
const shade = (p: number) => `rgba(37, 99, 235, ${Math.sqrt(Math.max(0, Math.min(1, p))).toFixed(3)})`;
const pct = (p: number) => `${(100 * p).toFixed(p >= 0.1 ? 1 : 2)}%`;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

export class InsightView {
  private insight: LabInsight | undefined;
  private readonly sample = el('select', { id: 'insight-sample' });
  private readonly topK = el('input', { id: 'insight-topk', type: 'number', min: '1', max: '10', step: '1', value: '5' });
  private readonly capture = el('button', { id: 'insight-capture', type: 'button' }, 'Capture now');
  private readonly head = el('select', { id: 'insight-head' });
  private readonly query = el('input', { id: 'insight-query', type: 'range', min: '0', max: '0', step: '1', value: '0' });
  private readonly queryOut = el('output', { for: 'insight-query' }, '0');
  private readonly status = el(
    'p',
    { id: 'insight-status', 'aria-live': 'polite', class: 'detail' },
    'No capture yet: start a run; the draft is captured every few steps.',
  );
  private readonly maps = el('div', { class: 'insight-maps', id: 'insight-maps' });
  private readonly attention = el('table', { class: 'insight-table', id: 'insight-attention' });
  private readonly topTable = el('table', { class: 'insight-table', id: 'insight-topk-table' });

  constructor(
    private readonly host: HTMLElement,
    private readonly request: (sample: number, topK: number) => void,
  ) {
    host.append(el('style', {}, STYLE));
    const label = (text: string, control: HTMLElement, ...extra: HTMLElement[]) => {
      const l = el('label', {}, `${text} `);
      l.append(control, ...extra);
      return l;
    };
    const controls = el('div', { class: 'insight-controls' });
    controls.append(
      label('Held-out sample', this.sample),
      label('Top-k', this.topK),
      this.capture,
      label('Head', this.head),
      label('Query position', this.query, this.queryOut),
    );
    // Scrollable regions take the focus, so they scroll from the keyboard too.
    const attnWrap = el('div', {
      class: 'insight-scroll',
      tabindex: '0',
      role: 'region',
      'aria-label': 'Attention of the chosen query position',
    });
    attnWrap.append(this.attention);
    const topWrap = el('div', {
      class: 'insight-scroll',
      tabindex: '0',
      role: 'region',
      'aria-label': 'Draft top-k predictions per position',
    });
    topWrap.append(this.topTable);
    host.append(controls, this.status, this.maps, attnWrap, topWrap);
    this.capture.addEventListener('click', () => this.ask());
    this.sample.addEventListener('change', () => this.ask());
    this.head.addEventListener('change', () => this.render());
    this.query.addEventListener('input', () => this.render());
    this.setEnabled(false);
  }

  /** The held-out prompts, in the session's held-out order. */
  setPrompts(texts: readonly string[]): void {
    const chosen = this.sample.value;
    this.sample.replaceChildren(
      ...texts.map((t, i) => el('option', { value: String(i) }, `${i}: ${t.length > 40 ? `${t.slice(0, 40)}…` : t}`)),
    );
    if (chosen && Number(chosen) < texts.length) this.sample.value = chosen;
  }

  /** Captures need an open session. */
  setEnabled(on: boolean): void {
    this.capture.disabled = !on;
  }

  private ask(): void {
    // Without an open session there is nothing to capture; the choice is used by the next capture.
    if (this.capture.disabled) return;
    const topK = Math.max(1, Math.min(10, Math.round(Number(this.topK.value) || 5)));
    this.topK.value = String(topK);
    this.status.textContent = `Capturing held-out sample ${this.sample.value || 0}…`;
    this.request(Number(this.sample.value || 0), topK);
  }

  show(insight: LabInsight): void {
    const first = !this.insight || this.insight.heads !== insight.heads;
    this.insight = insight;
    if (first) {
      this.head.replaceChildren(
        el('option', { value: 'mean' }, 'mean over heads'),
        ...Array.from({ length: insight.heads }, (_, h) => el('option', { value: String(h) }, `head ${h}`)),
      );
    }
    this.query.max = String(Math.max(0, insight.length - 1));
    if (Number(this.query.value) > insight.length - 1) this.query.value = String(Math.max(0, insight.length - 1));
    if (this.sample.value !== String(insight.sample)) this.sample.value = String(insight.sample);
    const accs = insight.steps.map((st, k) => `step ${k}: ${st.correctCount}/${st.supervisedCount}`).join(', ');
    this.status.textContent = `Held-out sample ${insight.sample} after optimizer step ${insight.globalStep}: ${insight.length} tokens; draft argmax correct ${accs}.`;
    this.host.dataset.step = String(insight.globalStep);
    this.host.dataset.sample = String(insight.sample);
    this.render();
  }

  /** P[k][i][c] for the chosen head (or the mean over heads), for the sample's real rows. */
  private rowOf(k: number, i: number): Float64Array {
    const ins = this.insight!;
    const { seq: S, heads: H, width: W } = ins;
    const out = new Float64Array(W);
    const heads = this.head.value === 'mean' || this.head.value === '' ? Array.from({ length: H }, (_, h) => h) : [Number(this.head.value)];
    for (const h of heads) {
      const base = ((k * H + h) * S + i) * W;
      for (let c = 0; c < W; c++) out[c] += ins.probs[base + c] / heads.length;
    }
    return out;
  }

  private tok(id: number): string {
    return this.insight!.tokenText[id] ?? `#${id}`;
  }

  private render(): void {
    const ins = this.insight;
    if (!ins) return;
    const q = Number(this.query.value);
    this.queryOut.textContent = `${q} (${JSON.stringify(this.tok(ins.inputIds[q]))})`;
    this.renderMaps(ins, q);
    this.renderAttention(ins, q);
    this.renderTop(ins);
  }

  private renderMaps(ins: LabInsight, q: number): void {
    const n = ins.length;
    const K = ins.tttLength;
    const cols = n + K - 1;
    const cell = Math.max(3, Math.min(14, Math.floor(320 / cols)));
    const figures = ins.steps.map((_, k) => {
      const fig = el('figure');
      const canvas = el('canvas', { width: String(cols * cell), height: String(n * cell), role: 'img', 'data-ttt-step': String(k) });
      canvas.setAttribute(
        'aria-label',
        `TTT step ${k}: attention of each of ${n} query positions over ${n} sequence keys and ${K - 1} own-state keys; the table below lists the values for query position ${q}`,
      );
      const g = canvas.getContext('2d');
      if (g) {
        for (let i = 0; i < n; i++) {
          const row = this.rowOf(k, i);
          for (let c = 0; c < cols; c++) {
            const p = c < n ? row[c] : row[ins.seq + (c - n)];
            g.fillStyle = p > 0 ? shade(p) : c >= n ? '#8882' : '#0000';
            g.fillRect(c * cell, i * cell, cell, cell);
          }
        }
        g.strokeStyle = '#f59e0b';
        g.lineWidth = 1;
        g.strokeRect(0.5, q * cell + 0.5, cols * cell - 1, cell - 1);
        g.fillStyle = '#8886';
        g.fillRect(n * cell, 0, 1, n * cell);
      }
      canvas.addEventListener('click', (e) => {
        const r = canvas.getBoundingClientRect();
        const i = Math.floor(((e.clientY - r.top) / r.height) * n);
        if (i >= 0 && i < n) {
          this.query.value = String(i);
          this.render();
        }
      });
      fig.append(el('figcaption', {}, `TTT step ${k}`), canvas);
      return fig;
    });
    this.maps.replaceChildren(...figures);
  }

  private renderAttention(ins: LabInsight, q: number): void {
    const K = ins.tttLength;
    const rows = ins.steps.map((_, k) => this.rowOf(k, q));
    const headName = this.head.value === 'mean' || this.head.value === '' ? 'mean over heads' : `head ${this.head.value}`;
    const caption = el(
      'caption',
      {},
      `Attention of query position ${q} (${JSON.stringify(this.tok(ins.inputIds[q]))} at step 0) over its visible keys, per TTT step (${headName}); each step's column sums to 1.`,
    );
    const head = el('tr');
    head.append(el('th', { scope: 'col' }, 'Key'), ...ins.steps.map((_, k) => el('th', { scope: 'col' }, `Step ${k}`)));
    const body: HTMLTableRowElement[] = [];
    const addRow = (label: string, col: number) => {
      const tr = el('tr');
      tr.append(el('th', { scope: 'row', class: 'insight-tok' }, label));
      for (let k = 0; k < K; k++) {
        const p = rows[k][col];
        const visible = col < ins.seq ? ins.attentionMask[col] === 1 && col <= q : col - ins.seq + 1 <= k;
        const td = el('td', { class: 'p', 'data-step': String(k), 'data-p': String(p) }, visible ? pct(p) : '—');
        if (visible) td.style.background = `linear-gradient(90deg, ${bar(p)} ${(100 * p).toFixed(1)}%, transparent 0)`;
        else td.setAttribute('aria-label', 'not visible');
        tr.append(td);
      }
      body.push(tr);
    };
    for (let u = 0; u <= q; u++) addRow(`${u}: ${JSON.stringify(this.tok(ins.inputIds[u]))}`, u);
    for (let j = 1; j < K; j++) addRow(`own state, step ${j}`, ins.seq + j - 1);
    this.attention.replaceChildren(caption, el('thead'), el('tbody'));
    this.attention.tHead!.append(head);
    this.attention.tBodies[0].append(...body);
  }

  private renderTop(ins: LabInsight): void {
    const caption = el(
      'caption',
      {},
      `Draft top-${ins.steps[0]?.top[0]?.length ?? 0} per position and TTT step beside the target's token; ✓ marks a correct argmax. Greyed rows are not scored (outside the loss mask).`,
    );
    const head = el('tr');
    head.append(el('th', { scope: 'col' }, 'Pos'));
    for (let k = 0; k < ins.tttLength; k++)
      head.append(el('th', { scope: 'col' }, `Step ${k}: target`), el('th', { scope: 'col' }, `Step ${k}: draft top-k`));
    const body: HTMLTableRowElement[] = [];
    for (let i = 0; i < ins.length; i++) {
      const tr = el('tr', { 'data-pos': String(i) });
      tr.append(el('th', { scope: 'row' }, String(i)));
      ins.steps.forEach((st, k) => {
        const scored = st.supervised[i];
        tr.append(el('td', { class: `insight-tok${scored ? '' : ' unscored'}` }, JSON.stringify(this.tok(st.targets[i]))));
        const td = el('td', {
          class: `${scored ? (st.correct[i] ? 'correct' : 'wrong') : 'unscored'}`,
          'data-step': String(k),
          'data-correct': String(st.correct[i]),
        });
        const ol = el('ol', { class: 'insight-top' });
        st.top[i].forEach((x, r) => {
          const mark = r === 0 ? (st.correct[i] ? ' ✓' : ' ✗') : '';
          ol.append(el('li', { 'data-p': String(x.p), class: 'insight-tok' }, `${JSON.stringify(this.tok(x.id))} ${pct(x.p)}${mark}`));
        });
        td.append(ol);
        if (!scored) td.setAttribute('aria-description', 'not scored');
        tr.append(td);
      });
      body.push(tr);
    }
    this.topTable.replaceChildren(caption, el('thead'), el('tbody'));
    this.topTable.tHead!.append(head);
    this.topTable.tBodies[0].append(...body);
  }
}
