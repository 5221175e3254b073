/**
 * The rollout page: reads the gateway, token and run from the URL hash (the link `speclab gateway`
 * prints: #gateway=…&run=…&token=…, optional target=, batch=, workerId=) or the form, starts the
 * Web Worker (./worker.ts) and shows what it does. The work itself is src/training/cluster/tab-rollout.ts.
 * The hash never reaches a server, so the token stays in this tab.
 */
import type { JoinCommand, WorkerMessage } from './protocol.ts';

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const status = $<HTMLDListElement>('status');
const log = $<HTMLPreElement>('log');
const counts = { leased: 0, done: 0, committed: 0 };
const committedIds: string[] = [];

function line(text: string, fail = false): void {
  const row = document.createElement('div');
  row.textContent = `${new Date().toISOString().slice(11, 19)} ${text}`;
  if (fail) row.className = 'fail';
  log.append(row);
}

function show(state: string): void {
  status.dataset.state = state;
  $('state').textContent = state;
  for (const [k, v] of Object.entries(counts)) {
    status.dataset[k] = String(v);
    $(k).textContent = String(v);
  }
  status.dataset.committedIds = committedIds.join(' ');
}

function onMessage(message: WorkerMessage): void {
  if (message.type === 'error') {
    line(message.message, true);
    return show('failed');
  }
  if (message.type === 'held') {
    line(`holding the lease of ${message.taskIds.join(', ')} (pauseAfterLease)`);
    status.dataset.heldTaskIds = message.taskIds.join(' ');
    return show('held');
  }
  const e = message.event;
  switch (e.kind) {
    case 'status':
      line(e.text);
      return show('starting');
    case 'joined':
      status.dataset.workerId = e.workerId;
      $('worker').textContent = e.workerId;
      line(
        `joined as ${e.workerId}: aux layers [${e.auxLayerIds.join(', ')}], features ${e.featurePrecision}, prompt lease ${e.leaseMs} ms`,
      );
      return show('running');
    case 'leased':
      counts.leased += e.taskIds.length;
      line(`leased ${e.taskIds.length} prompt(s)`);
      return show('capturing');
    case 'committed':
      counts.done += e.taskIds.length;
      counts.committed += e.sampleIds.length;
      committedIds.push(...e.sampleIds);
      line(`committed ${e.sampleIds.length} sample(s) (total ${counts.committed})`);
      return show('running');
    case 'finished':
      line(`the run is finished; this tab committed ${e.committed} samples`);
      return show('finished');
  }
}

function start(cmd: JoinCommand): void {
  $<HTMLFormElement>('join').hidden = true;
  const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' });
  worker.onmessage = (event: MessageEvent<WorkerMessage>) => onMessage(event.data);
  worker.onerror = (event) => {
    line(`worker error: ${event.message}`, true);
    show('failed');
  };
  worker.postMessage(cmd);
  show('starting');
}

function command(fields: URLSearchParams): JoinCommand | string {
  const gateway = fields.get('gateway') ?? '';
  const token = fields.get('token') ?? '';
  const run = fields.get('run') ?? '';
  if (!gateway || !token || !run) return 'give the gateway, token and run';
  const batch = Number(fields.get('batch') ?? 4);
  if (!Number.isInteger(batch) || batch < 1 || batch > 1024) return `batch must be an integer in [1, 1024], got ${fields.get('batch')}`;
  const pause = Number(fields.get('pauseAfterLease') ?? 0);
  if (!Number.isInteger(pause) || pause < 0) return `pauseAfterLease must be a non-negative integer, got ${fields.get('pauseAfterLease')}`;
  const targetUrl = new URL(fields.get('target') || './lab-target/', location.href).href;
  return { type: 'join', gateway, token, run, targetUrl, batch, workerId: fields.get('workerId') ?? undefined, pauseAfterLease: pause };
}

const fromHash = new URLSearchParams(location.hash.slice(1));
for (const name of ['gateway', 'run', 'target', 'batch']) {
  const v = fromHash.get(name);
  if (v !== null) $<HTMLInputElement>(name).value = v;
}
const initial = command(fromHash);
if (typeof initial !== 'string') start(initial);

$<HTMLFormElement>('join').addEventListener('submit', (event) => {
  event.preventDefault();
  const fields = new URLSearchParams(new FormData(event.target as HTMLFormElement) as unknown as Record<string, string>);
  const cmd = command(fields);
  if (typeof cmd === 'string') return line(cmd, true);
  start(cmd);
});
