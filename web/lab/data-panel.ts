/**
 * The "Bring conversations" panel of the lab page: a chat file dropped on its zone or picked, the
 * held-out count (the last N usable rows), and the summary the worker sends back — rows read, usable,
 * skipped by line with the reason, truncated, loss tokens, the split — or its refusal naming the file
 * and line. The file is read in the worker (./worker-conversations.ts); this module only sends and draws.
 *
 * #data-status carries the contract the end-to-end tests read: data-state (none | ready | error |
 * reading), data-file, data-usable, data-train, data-held and data-skipped.
 */
import type { Command, DataSummary, Report } from './protocol.ts';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

export class DataPanel {
  private readonly status = $('data-status');
  private readonly heldOut = $<HTMLInputElement>('data-held-out');
  private readonly clear = $<HTMLButtonElement>('data-clear');
  private readonly table = $<HTMLTableElement>('data-summary');
  private readonly skipped = $<HTMLUListElement>('data-skipped');
  private loaded = false;
  /** Something is kept or refused: "Use the bundled prompts" can clear it (a kept file the new model cannot read too). */
  private kept = false;
  private locked = false;

  constructor(private readonly send: (cmd: Command) => void) {
    const pick = $<HTMLInputElement>('data-file');
    pick.addEventListener('change', () => {
      const file = pick.files?.[0];
      if (file) this.load(file);
      pick.value = '';
    });
    const zone = $('data-drop');
    zone.addEventListener('dragover', (e) => {
      e.preventDefault();
      zone.dataset.over = 'true';
    });
    zone.addEventListener('dragleave', () => delete zone.dataset.over);
    zone.addEventListener('drop', (e) => {
      // Not the page's own drop (a metrics.jsonl, a model folder).
      e.preventDefault();
      e.stopPropagation();
      delete zone.dataset.over;
      const files = e.dataTransfer?.files;
      if (!files || files.length !== 1) {
        this.show('error', 'drop one conversation file (.jsonl, .json or .parquet)');
        return;
      }
      this.load(files[0]);
    });
    this.heldOut.addEventListener('change', () => {
      const n = Number(this.heldOut.value);
      if (this.loaded) this.send({ type: 'data-held-out', heldOut: n });
    });
    this.clear.addEventListener('click', () => this.send({ type: 'clear-data' }));
    this.refresh();
  }

  private load(file: File): void {
    this.show('reading', `reading ${file.name}…`);
    this.send({ type: 'load-data', file });
  }

  /** A saved or running run fixes its data: the panel's controls wait until it is discarded. */
  setLocked(locked: boolean): void {
    this.locked = locked;
    this.refresh();
  }

  private refresh(): void {
    this.heldOut.disabled = !this.loaded || this.locked;
    this.clear.disabled = !this.kept || this.locked;
    $<HTMLInputElement>('data-file').disabled = this.locked;
  }

  private show(state: string, message: string): void {
    this.status.dataset.state = state;
    this.status.textContent = message;
  }

  /** Draws a `data` report; false for any other report. */
  handle(r: Report): boolean {
    if (r.type !== 'data') return false;
    // A refusal keeps the data in use: its summary comes with it, and the held-out input shows its count again.
    this.show(r.state, r.message);
    this.draw(r.summary);
    this.loaded = r.summary !== undefined;
    this.kept = r.state !== 'none';
    this.refresh();
    return true;
  }

  private draw(s: DataSummary | undefined): void {
    const d = this.status.dataset;
    for (const k of ['file', 'usable', 'train', 'held', 'skipped']) delete d[k];
    this.table.replaceChildren();
    this.skipped.replaceChildren();
    if (!s) return;
    Object.assign(d, {
      file: s.file,
      usable: String(s.usable),
      train: String(s.train),
      held: String(s.held),
      skipped: String(s.skippedCount),
    });
    this.heldOut.max = String(s.usable - 1);
    this.heldOut.value = String(s.heldOut);
    const rows: [string, string][] = [
      ['file', s.file],
      ['rows read', String(s.rows)],
      ['usable', String(s.usable)],
      ['skipped', String(s.skippedCount)],
      [`truncated to ${s.maxLength} tokens`, String(s.truncated)],
      ['loss tokens (assistant replies)', String(s.lossTokens)],
      ['chat template', s.template],
      ['train on', `${s.train} conversations`],
      ['held out (the last)', `${s.held} conversations`],
    ];
    for (const [label, value] of rows) {
      const row = this.table.insertRow();
      row.insertCell().textContent = label;
      row.insertCell().textContent = value;
    }
    for (const k of s.skipped) {
      const li = document.createElement('li');
      li.textContent = `${s.file}:${k.line}: ${k.reason}`;
      this.skipped.append(li);
    }
    if (s.skippedCount > s.skipped.length) {
      const li = document.createElement('li');
      li.textContent = `… ${s.skippedCount - s.skipped.length} more skipped`;
      this.skipped.append(li);
    }
  }
}
