/**
 * One life of an online run, for test/runtime/crash.ts (which spawns it with `node --import tsx`):
 * rollout worker → spilling LocalFeatureStore → commitSamples → FeatureDataLoader via TrainLease →
 * TrainerCore (LinearProbeStrategy on the toy target) → durable ack into a FileMetadataStore, all
 * under `<dir>`. Every life starts the same way a restarted trainer would: reopen the journal,
 * restore the checkpoint of the durable ack step, reconcileOnRestart, ingest the prompts whose
 * samples were never committed, then alternate rollout rounds and training until all are acked.
 *
 * `killAt` makes this life stop at one point and wait to be killed (SIGKILL) by the parent:
 *   after-put     all puts of the 2nd rollout round done (features spilled), commitSamples not called
 *   after-step    optimizer step KILL_STEP applied and checkpointed, its ack not yet recorded
 *   ack-torn      the ack record of step KILL_STEP half written to the journal (a torn frame)
 *   ack-unsynced  the ack record of step KILL_STEP fully appended, its fsync not yet returned
 *   none          run to completion
 * Announcements are `@@ {json}` lines on stdout; what was trained and acked is appended (synchronously,
 * so it is on disk before any announcement) to `<dir>/events.jsonl`.
 *
 * Usage: node --import tsx test/runtime/crash-child.ts <dir> <killAt>
 */
import { appendFileSync } from 'node:fs';
import process from 'node:process';
import type { SampleRef } from '../../src/contracts/index.ts';
import { onlineSampleId } from '../../src/contracts/ids.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { FileMetadataStore } from '../../src/control/file-metadata-store.ts';
import { FeatureDataLoader } from '../../src/data/feature-dataloader.ts';
import { LocalFeatureStore } from '../../src/data/local-feature-store.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import type { CaptureConfig } from '../../src/inference/capture.ts';
import { RolloutWorker } from '../../src/inference/rollout-worker.ts';
import { nodePlatform } from '../../src/platform/node.ts';
import type { AppendLog, FileStore } from '../../src/ports/storage.ts';
import { Rng } from '../../src/util/random.ts';
import { AdamWBackend, type OptimizerConfig } from '../../src/optim/adamw-backend.ts';
import { LinearProbeStrategy } from '../../src/training/strategies/linear-probe.ts';
import { TrainerController } from '../../src/training/loop/trainer-controller.ts';
import { TrainerCore } from '../../src/training/loop/trainer-core.ts';
import { bigramPrompts, ToyEmbeddingTarget } from '../inference/toy-target.ts';
import { BATCH, KILL_POINTS, KILL_STEP, PROMPTS, ROUND, RUN_ID, taskId, type ChildEvent, type KillAt } from './crash-protocol.ts';

const V = 16;
const H = 8;
const CAPTURE: CaptureConfig = {
  featureNames: ['input_ids', 'hidden_state', 'labels'],
  auxLayerIds: [],
  targetRepr: 'hidden_state',
  targetHiddenSize: H,
};
const OPT: OptimizerConfig = {
  lr: 0.05,
  beta1: 0.9,
  beta2: 0.999,
  eps: 1e-8,
  weightDecay: 0,
  maxGradNorm: 1,
  schedule: { kind: 'constant', totalSteps: 1000, warmupRatio: 0 },
};

function announce(event: string, data: Record<string, unknown> = {}): void {
  process.stdout.write(`@@ ${JSON.stringify({ event, pid: process.pid, ...data })}\n`);
}

/** Announce a kill point and wait for the parent's SIGKILL (the interval keeps the process alive). */
async function stopHere(point: string, data: Record<string, unknown> = {}): Promise<never> {
  announce('point', { point, ...data });
  setInterval(() => {}, 1 << 30);
  return new Promise<never>(() => {});
}

/**
 * The journal's FileStore with a hook on appends: the ack frame of step KILL_STEP is cut short
 * (ack-torn) or left unsynced (ack-unsynced), then the process waits to be killed mid-write.
 */
function hookedJournalFiles(inner: FileStore, killAt: KillAt): FileStore {
  const isAckOfKillStep = (bytes: Uint8Array): boolean => {
    const text = new TextDecoder().decode(bytes.subarray(12));
    return text.startsWith('{"type":"ack"') && (JSON.parse(text) as { globalStep: number }).globalStep === KILL_STEP;
  };
  const wrap = (log: AppendLog): AppendLog => ({
    path: log.path,
    close: () => log.close(),
    async append(bytes, options) {
      if ((killAt === 'ack-torn' || killAt === 'ack-unsynced') && isAckOfKillStep(bytes)) {
        const written = killAt === 'ack-torn' ? Math.floor(bytes.length / 2) : bytes.length;
        await log.append(bytes.subarray(0, written), { sync: false });
        await stopHere(killAt, { frameBytes: bytes.length, written });
      }
      return log.append(bytes, options);
    },
  });
  return Object.assign(Object.create(inner) as FileStore, { openAppendLog: async (path: string) => wrap(await inner.openAppendLog(path)) });
}

const [dir, killArg] = nodePlatform.args();
const killAt = (killArg ?? 'none') as KillAt;
if (!dir || !KILL_POINTS.includes(killAt)) {
  process.stderr.write('usage: node --import tsx test/runtime/crash-child.ts <dir> <none|after-put|after-step|ack-torn|ack-unsynced>\n');
  process.exit(2);
}
const files = nodePlatform.files(dir);
const eventsPath = `${files.root}/events.jsonl`;
const record = (kind: ChildEvent['kind'], step: number, ids: string[]) =>
  appendFileSync(eventsPath, `${JSON.stringify({ pid: process.pid, kind, step, ids } satisfies ChildEvent)}\n`);

/** Stops before the second commit of the run (all of that round's features are already spilled). */
class CrashingController extends DataFlowController {
  private commits = 0;
  override async commitSamples(
    workerId: string,
    refs: readonly SampleRef[],
    options: { partitionKey?: string } = {},
  ): Promise<SampleRef[]> {
    if (killAt === 'after-put' && ++this.commits === 2) await stopHere('after-put', { uncommitted: refs.map((r) => r.sampleId) });
    return super.commitSamples(workerId, refs, options);
  }
}

const metadata = await FileMetadataStore.open(hookedJournalFiles(files, killAt), { dir: 'metadata' });
const gpu = new Gpu(await nodePlatform.acquireGpu());
const store = new LocalFeatureStore(gpu, { storeId: 'crash', spill: nodePlatform.files(`${files.root}/spill`) });
const controller = new CrashingController({ runId: RUN_ID, store: metadata, featureStore: store });
const report = await controller.reconcileOnRestart(store);

// Restore the optimizer state of the durable ack step (never a later one: its refs are requeued).
const backend = new AdamWBackend(gpu, OPT);
const strategy = new LinearProbeStrategy(gpu, backend, H, V, new Rng(9).floats(V * H, 0.1));
const restoredStep = report.globalStep ?? 0;
if (restoredStep > 0) {
  const ckpt = JSON.parse(new TextDecoder().decode(await files.read(`checkpoints/step-${restoredStep}.json`))) as {
    step: number;
    weight: number[];
    m: number[];
    v: number[];
  };
  gpu.write(strategy.weight.value, ckpt.weight);
  gpu.write(strategy.weight.m, ckpt.m);
  gpu.write(strategy.weight.v, ckpt.v);
  backend.step = ckpt.step;
}
announce('started', { recovery: metadata.recovery, reconcile: report, restoredStep });

const prompts = bigramPrompts(PROMPTS, V);
const pending: { taskId: string; payload: { input_ids: number[] }; maxLength: number }[] = [];
for (let i = 0; i < PROMPTS; i++) {
  if (!(await metadata.isCommitted(onlineSampleId(RUN_ID, taskId(i)))))
    pending.push({ taskId: taskId(i), payload: prompts[i], maxLength: 64 });
}
await controller.ingestPrompts(pending);

const target = new ToyEmbeddingTarget(gpu, V, H);
const worker = await RolloutWorker.create(controller, target, store, gpu, CAPTURE, { workerId: 'rollout-0' });
const core = new TrainerCore(strategy, backend, 1);
const lease = await controller.trainLease();
const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: BATCH, padValues: { labels: -1 }, dropLast: false });
const trainer = new TrainerController(gpu, core);
trainer.globalStep = restoredStep;

for (;;) {
  const produced = await worker.runOnce(ROUND);
  await trainer.fit(loader, {
    beforeAck: async (step) => {
      const state = {
        step,
        weight: [...(await gpu.read(strategy.weight.value))],
        m: [...(await gpu.read(strategy.weight.m))],
        v: [...(await gpu.read(strategy.weight.v))],
      };
      await files.writeAtomic(`checkpoints/step-${step}.json`, new TextEncoder().encode(JSON.stringify(state)));
      // Keep the previous step too: a crash before this step's ack restores that one.
      await files.remove(`checkpoints/step-${step - 2}.json`);
    },
    ackFn: async (ids, step, batches) => {
      record('trained', step, ids);
      if (killAt === 'after-step' && step === KILL_STEP) await stopHere('after-step', { ids });
      await lease.ack(
        batches.flatMap((b) => (b as unknown as { refs: SampleRef[] }).refs),
        { globalStep: step, optimizerDurable: true },
      );
      record('acked', step, ids);
    },
  });
  const status = await controller.status();
  if (produced.length === 0 && status.queueDepth === 0 && status.queueInFlight === 0) break;
}

const status = await controller.status();
const health = store.health();
await metadata.close();
backend.destroy();
const leftover = { ...gpu.pool.stats() };
announce('done', {
  status,
  health,
  spilled: await store.spilledSampleIds(),
  liveBuffers: leftover.liveBuffers,
  globalStep: trainer.globalStep,
});
gpu.destroy();
await nodePlatform.exit(0);
