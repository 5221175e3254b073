/**
 * The Hugging Face part of the lab's "Bring a model" panel: an id (`ORG/NAME` or `ORG/NAME@revision`)
 * with an optional token for gated or private models, and the list of models this tab has cached
 * (downloaded into its origin-private file system by the worker, src/platform/browser-hub.ts), each
 * with Load and Remove. A cut download resumes when the same id is loaded again, after a reload too.
 *
 * #hub-cache-list carries data-count; each item data-repo, data-commit and data-complete.
 */
import { formatBytes } from '../../src/util/bytes.ts';
import type { Command, Report } from './protocol.ts';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

export class HubPanel {
  private readonly list = $<HTMLUListElement>('hub-cache-list');

  constructor(private readonly send: (cmd: Command) => void) {
    const id = $<HTMLInputElement>('hub-id');
    const load = () => {
      const spec = id.value.trim();
      if (spec) this.send({ type: 'load-model-hub', id: spec, token: $<HTMLInputElement>('hub-token').value.trim() });
    };
    $('hub-load').addEventListener('click', load);
    id.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') load();
    });
  }

  /** Draws a `hub-cache` report; false for any other report. */
  handle(r: Report): boolean {
    if (r.type !== 'hub-cache') return false;
    this.list.replaceChildren();
    this.list.dataset.count = String(r.models.length);
    if (r.models.length === 0) {
      const li = document.createElement('li');
      li.textContent = 'None yet.';
      this.list.append(li);
    }
    for (const m of r.models) {
      const li = document.createElement('li');
      Object.assign(li.dataset, { repo: m.repo, commit: m.commit, complete: String(m.complete) });
      const refs = m.refs.length > 0 ? ` (${m.refs.join(', ')})` : '';
      const text = document.createElement('span');
      text.textContent = `${m.repo}@${m.commit.slice(0, 7)}${refs}: ${formatBytes(m.bytes)}${m.complete ? '' : ', download cut: Load resumes it'} `;
      const load = document.createElement('button');
      load.type = 'button';
      load.textContent = m.complete ? 'Load' : 'Resume';
      load.setAttribute('aria-label', `${load.textContent} ${m.repo}`);
      load.addEventListener('click', () =>
        this.send({ type: 'load-model-hub', id: `${m.repo}@${m.commit}`, token: $<HTMLInputElement>('hub-token').value.trim() }),
      );
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.textContent = 'Remove';
      remove.setAttribute('aria-label', `Remove ${m.repo} from this tab's cache`);
      remove.addEventListener('click', () => this.send({ type: 'remove-cached-model', repo: m.repo }));
      li.append(text, load, remove);
      this.list.append(li);
    }
    return true;
  }
}
