/**
 * The page of the browser crash test (driven by test/runners/browser-crash.ts). One page, two phases,
 * selected by URL parameters:
 *
 *   ?phase=train&db=…&n=…&batch=…&ackBefore=…&ackTotal=…&gapMs=…
 *     The control-plane side of a train loop against the IndexedDB metadata store: a rollout worker
 *     commits n refs, the trainer leases `batch` refs per optimizer step, persists the optimizer
 *     state for the step (an IndexedDB FileStore) and acks the step with optimizerDurable. After
 *     `ackBefore` steps it publishes `window.__phase1` and keeps training in the background (up
 *     to `ackTotal` acked steps, `gapMs` apart, then one more step leased and never acked) until
 *     the driver closes or crashes the tab.
 *
 *   ?phase=recover&…same parameters
 *     A new tab: reopens the database by name, builds a new controller, runs reconcileOnRestart and
 *     publishes `window.__verdict`, one entry per check.
 *
 * Leases are FIFO in commit order, so step s consumed exactly the refs committed at positions
 * [(s-1)·batch, s·batch): the recovering tab knows which ids each ack transaction carried.
 */
import { DataFlowController, type ReleasableFeatureStore } from '../../src/control/controller.ts';
import { IndexedDbMetadataStore } from '../../src/control/indexeddb-metadata-store.ts';
import { onlineSampleId } from '../../src/contracts/ids.ts';
import type { SampleRef } from '../../src/contracts/records.ts';
import { browserPlatform } from '../../src/platform/browser.ts';
import { assert, assertDeepEqual, assertEqual } from '../harness/assert.ts';
import { RUN_ID, sampleRef } from '../contracts/fixtures.ts';

export interface Phase1Report {
  committed: string[];
  durableSteps: number;
  queueInFlight: number;
}

export interface Verdict {
  landedSteps: number;
  checkpointStep: number | null;
  released: number;
  requeued: number;
  checks: { name: string; ok: boolean; error?: string }[];
}

const params = new URLSearchParams(location.search);
const phase = params.get('phase');
const db = required('db');
const n = Number(required('n'));
const batch = Number(required('batch'));
const ackBefore = Number(required('ackBefore'));
const ackTotal = Number(required('ackTotal'));
const gapMs = Number(params.get('gapMs') ?? '0');
const logElement = document.getElementById('log')!;
logElement.textContent = '';

const taskIds = Array.from({ length: n }, (_, i) => `crash-${String(i).padStart(4, '0')}`);
const plannedIds = taskIds.map((id) => onlineSampleId(RUN_ID, id));
/** Where the optimizer state of the last persisted step lives (a separate IndexedDB database). */
const optimizerFiles = browserPlatform.files(`${db}-optimizer`);
const OPTIMIZER_STATE = 'optimizer-state.json';

function required(name: string): string {
  const value = params.get(name);
  if (value === null) throw new Error(`browser-crash page: missing URL parameter ${name}`);
  return value;
}

function log(line: string): void {
  console.log(line);
  logElement.textContent += `${line}\n`;
}

async function train(): Promise<void> {
  const store = await IndexedDbMetadataStore.open(browserPlatform, db);
  const controller = new DataFlowController({ runId: RUN_ID, store });
  const worker = await controller.registerRolloutWorker({ workerId: 'rollout-0' });
  const trainer = await controller.registerTrainer({ trainerId: 'trainer-0' });
  const lease = await controller.trainLease(trainer);

  await controller.ingestPrompts(taskIds.map((taskId) => ({ taskId, payload: { input_ids: [1, 2, 3], loss_mask: [0, 1, 1] } })));
  for (;;) {
    const tasks = await controller.leasePromptTasks(worker, batch);
    if (tasks.length === 0) break;
    await controller.commitSamples(
      worker,
      tasks.map((task) => sampleRef(task.taskId)),
    );
  }

  let step = 0;
  /** One optimizer step: lease, persist the optimizer state for the step, then the durable ack. */
  const optimizerStep = async (): Promise<SampleRef[]> => {
    const refs = await lease.get(batch);
    if (refs.length === 0) return refs;
    step++;
    const state = { step, consumed: refs.map((r) => r.sampleId) };
    await optimizerFiles.writeAtomic(OPTIMIZER_STATE, new TextEncoder().encode(JSON.stringify(state)));
    await lease.ack(refs, { globalStep: step, optimizerDurable: true });
    log(`[crash-phase1] ack-durable ${step}`);
    return refs;
  };

  for (let i = 0; i < ackBefore; i++) await optimizerStep();
  if (ackTotal === ackBefore) await lease.get(batch); // a step in progress when the tab dies
  const status = await controller.status();
  const report: Phase1Report = { committed: await store.allCommittedIds(), durableSteps: step, queueInFlight: status.queueInFlight };
  (window as unknown as { __phase1: Phase1Report }).__phase1 = report;
  log(`[crash-phase1] report ${JSON.stringify({ committed: report.committed.length, durableSteps: step })}`);

  // Keep training until the tab goes away; the store is never closed.
  while (step < ackTotal) {
    if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
    if ((await optimizerStep()).length === 0) break;
  }
  if (ackTotal > ackBefore) await lease.get(batch);
  log('[crash-phase1] background done');
}

async function recover(): Promise<void> {
  const store = await IndexedDbMetadataStore.open(browserPlatform, db);
  const controller = new DataFlowController({ runId: RUN_ID, store });
  const adopted: string[] = [];
  const resident = new Set<string>();
  const features: ReleasableFeatureStore = {
    adopt: (ref) => {
      adopted.push(ref.sampleId);
      resident.add(ref.sampleId);
    },
    abort: (id) => resident.delete(id),
  };
  const report = await controller.reconcileOnRestart(features);
  const committed = await store.allCommittedIds();
  const marker = await store.durableMarker();
  const landedSteps = Math.floor(marker.acked.size / batch);
  const checkpointStep = (await optimizerFiles.exists(OPTIMIZER_STATE))
    ? (JSON.parse(new TextDecoder().decode(await optimizerFiles.read(OPTIMIZER_STATE))) as { step: number }).step
    : null;
  const landedIds = plannedIds.slice(0, landedSteps * batch);
  const checks: Verdict['checks'] = [];
  const check = async (name: string, body: () => void | Promise<void>): Promise<void> => {
    try {
      await body();
      checks.push({ name, ok: true });
    } catch (err) {
      checks.push({ name, ok: false, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
    }
  };

  await check('every sample committed before the tab died is in the reopened store, in commit order', () => {
    assertDeepEqual(committed, plannedIds, 'committed ids');
  });
  await check(`the marker holds whole ack transactions, a prefix of the steps (${ackBefore} ≤ landed ≤ ${ackTotal})`, () => {
    assertDeepEqual([...marker.acked].sort(), [...landedIds].sort(), `acked ids = the refs of steps 1..${landedSteps}`);
    assert(landedSteps >= ackBefore && landedSteps <= ackTotal, `landed steps ${landedSteps} outside [${ackBefore}, ${ackTotal}]`);
  });
  await check('marker step and durable flag are those of the last landed ack', () => {
    assertDeepEqual(
      [marker.globalStep, marker.optimizerDurable],
      [landedSteps > 0 ? landedSteps : null, landedSteps > 0],
      'step / durable',
    );
  });
  await check('the durable ack never runs ahead of the persisted optimizer state', () => {
    const ok =
      landedSteps === 0
        ? checkpointStep === null || checkpointStep === 1
        : checkpointStep === landedSteps || checkpointStep === landedSteps + 1;
    assert(ok, `optimizer state of step ${checkpointStep}, durable ack of step ${landedSteps}`);
  });
  await check('every committed sample is either released (durably acked, once) or requeued, never both', () => {
    const released = new Set(report.released);
    const requeued = new Set(report.requeued);
    assertEqual(released.size, report.released.length, 'no id released twice');
    assertEqual(requeued.size, report.requeued.length, 'no id requeued twice');
    assertDeepEqual([...report.released, ...report.requeued].sort(), [...committed].sort(), 'released ∪ requeued = committed');
    assertDeepEqual(report.released, landedIds, 'released = the durably acked refs, in commit order');
  });
  await check('nothing acked is requeued; the requeued refs are the ones leasable again', async () => {
    assertDeepEqual(
      report.requeued.filter((id) => marker.acked.has(id)),
      [],
      'acked ids among the requeued',
    );
    assertDeepEqual(report.requeued, plannedIds.slice(landedIds.length), 'requeued = everything not durably acked, in commit order');
    const trainer = await controller.registerTrainer({ trainerId: 'trainer-after-crash' });
    const leased = await controller.leaseTrainRefs(trainer, n + 1);
    assertDeepEqual(
      leased.map((r) => r.sampleId),
      report.requeued,
      'leasable after the restart',
    );
  });
  await check('released features were adopted then aborted', () => {
    assertDeepEqual([adopted, [...resident]], [landedIds, []], 'adopted / still resident');
  });
  await check('a second reconcile requeues nothing', async () => {
    const again = await controller.reconcileOnRestart();
    assertDeepEqual(again.requeued, [], 'requeued again');
  });
  await store.close();
  const verdict: Verdict = { landedSteps, checkpointStep, released: report.released.length, requeued: report.requeued.length, checks };
  (window as unknown as { __verdict: Verdict }).__verdict = verdict;
  log(`[crash-phase2] ${JSON.stringify(verdict)}`);
}

const run = phase === 'train' ? train : phase === 'recover' ? recover : undefined;
if (!run) throw new Error(`browser-crash page: unknown phase ${phase}`);
run().catch((err: unknown) => {
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  (window as unknown as { __crashError: string }).__crashError = message;
  log(`[crash-error] ${message}`);
});
