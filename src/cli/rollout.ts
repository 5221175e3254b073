/**
 * `speclab rollout --cluster redis://… --run NAME --target DIR`: a rollout worker of a cluster run
 * (docs/control-plane.md §9). Its trainer (`speclab train --cluster … --run …`) ingests the rounds
 * into the run's prompt ledger in Redis; this process leases prompts, captures their target
 * features into the run's feature store on the same Redis, and commits the refs, until the trainer
 * marks the run finished.
 *
 * Before it captures anything it waits (up to --wait-ms) for the trainer's run manifest and builds
 * its own capture config from its target and the manifest's aux layers, TTT length and feature
 * precision: a worker whose target (config.json, --target-precision) or capture differs from the
 * trainer's is refused, naming the field, so it never commits features the trainer cannot use.
 * The target loads exactly as `speclab train` loads it (resolveTargetDir, HfCheckpointSource, streamed with
 * --target-precision).
 *
 * SIGINT/SIGTERM stops after the current capture (its samples are committed, it holds no lease)
 * and exits 130; a second one exits at once. A worker killed mid-capture leaves its leased prompts
 * leased: they return to the ledger only where the ledger has a lease timeout.
 */
import { DataFlowController } from '../control/controller.ts';
import { openRedisControlStores } from '../control/redis/redis-control-stores.ts';
import { differences, RedisRunRecord, stableJson, type RunManifest } from '../control/redis/redis-run-record.ts';
import { DataPlaneFeatureStore } from '../data/dataplane-feature-store.ts';
import type { DataPlaneClient } from '../dataplane/types.ts';
import { HfCheckpointSource } from '../formats/hf-checkpoint-source.ts';
import { Gpu } from '../gpu/gpu.ts';
import { runRolloutLoop } from '../inference/rollout-loop.ts';
import { RolloutWorker } from '../inference/rollout-worker.ts';
import { TargetFeatureSource } from '../inference/target-feature-source.ts';
import { progressFor } from '../training/run/platform.ts';
import { loadTarget } from '../training/run/target-load.ts';
import { sessionCapture } from '../training/session/eagle3-session.ts';
import { manifestCapture } from '../training/cluster/tab-rollout.ts';
import { resolveTargetDir } from '../training/run/run-plan.ts';
import { speclabCommand } from '../util/cli-command.ts';
import { formatDuration } from '../util/format.ts';
import type { RolloutArgs } from './cluster-options.ts';
import { featureClient, redisConnector, targetDescription } from '../training/run/cluster-run.ts';
import type { Platform } from './platform.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The manifest, once the trainer published it (undefined when stopped first); an error naming the run after `waitMs`. */
async function waitForManifest(record: RedisRunRecord, args: RolloutArgs, stopped: () => boolean): Promise<RunManifest | undefined> {
  const deadline = performance.now() + args.waitMs;
  for (;;) {
    const manifest = await record.read();
    if (manifest || stopped()) return manifest;
    if (performance.now() >= deadline)
      throw new Error(
        `--run ${args.run}: no trainer published this run on ${args.cluster} within ${args.waitMs} ms (--wait-ms); start ${speclabCommand('train')} --cluster ${args.cluster} --run ${args.run} first`,
      );
    await sleep(Math.min(args.pollMs, 250));
  }
}

/** The run's prompt lease in ms; a manifest without a valid one is refused. */
function manifestLeaseMs(manifest: RunManifest, run: string): number {
  const ms = manifest.promptLeaseMs;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 1)
    throw new Error(`run ${run}: its manifest has no valid promptLeaseMs (a record from another version, or damaged)`);
  return ms;
}

/** Refuses, naming each differing field, unless `mine` equals the manifest's `field`. */
function requireSame(manifest: RunManifest, field: 'capture' | 'target', mine: unknown, args: RolloutArgs): void {
  if (stableJson(manifest[field]) === stableJson(mine)) return;
  const diff = differences((manifest[field] ?? {}) as RunManifest, JSON.parse(stableJson(mine)) as RunManifest);
  const hint =
    field === 'target' ? "give the trainer's target (--target) and --target-precision" : 'a worker must capture what the trainer trains on';
  throw new Error(
    `--run ${args.run}: this worker's ${field} differs from the run manifest's (${field}.${diff.replace(/, /g, `, ${field}.`)}; manifest → this worker): ${hint}; refusing to capture`,
  );
}

export async function runRollout(platform: Platform, args: RolloutArgs, print: (line: string) => void): Promise<number> {
  const connect = redisConnector(platform, 'rollout');
  const started = performance.now();
  // As train loads its target: a bad directory is refused before Redis or the GPU is touched.
  const targetDir = await resolveTargetDir(platform, args.target, print);
  const source = await HfCheckpointSource.open(platform.files(targetDir), '');
  const link = await connect(args.cluster);
  const cleanup: (() => Promise<void> | void)[] = [() => link.close()];
  let stop = false;
  const release = platform.onInterrupt?.(() => {
    if (stop) {
      console.error('speclab rollout: interrupted again; exiting now');
      void platform.exit(130);
      return;
    }
    stop = true;
    console.error('speclab rollout: interrupt: stopping after the current capture (interrupt again to exit at once)');
  });
  try {
    const record = new RedisRunRecord(link, args.run);
    let manifest = await record.read();
    if (!manifest) {
      print(`rollout: waiting up to ${args.waitMs} ms for the trainer of run ${args.run} on ${args.cluster}`);
      manifest = await waitForManifest(record, args, () => stop);
    }
    if (!manifest) {
      print(`rollout: stopped by an interrupt before the trainer of run ${args.run} published it; committed nothing`);
      return 130;
    }
    requireSame(manifest, 'target', targetDescription(source.config, args.targetPrecision), args);
    const wanted = manifestCapture(manifest, args.run);
    const capture = sessionCapture(source.config, wanted.auxLayerIds, wanted);
    requireSame(manifest, 'capture', capture, args);

    const ctx = await platform.acquireGpu();
    cleanup.push(() => ctx.destroy());
    const gpu = new Gpu(ctx);
    cleanup.push(() => gpu.destroy());
    const target = await loadTarget(gpu, source, args.targetPrecision, progressFor(platform, print));
    cleanup.push(() => target.destroy());
    // Shared with the trainer, which durably acks; this process only commits (no durable marker of its own).
    // Prompt leases expire on the trainer's timeout (the manifest's): a worker killed mid-lease
    // strands nothing, another worker's next lease takes its prompts back.
    const stores = await openRedisControlStores(link, args.run, {
      url: args.cluster,
      requireDurable: false,
      prompts: { leaseTimeoutMs: manifestLeaseMs(manifest, args.run) },
    });
    const client: DataPlaneClient = await featureClient(connect, args.cluster, gpu);
    cleanup.push(() => client.close());
    // Attach: the trainer registered the partition (a worker must never wipe it).
    const store = new DataPlaneFeatureStore(gpu, client, args.run);
    const worker = await RolloutWorker.create(
      DataFlowController.over(args.run, stores, { enqueueCommits: false }),
      new TargetFeatureSource(target),
      store,
      gpu,
      capture,
      { workerId: args.workerId },
    );
    const id = worker.workerId;
    print(
      `rollout ${id}: joined run ${args.run} on ${args.cluster} (target ${targetDir}, aux layers [${capture.auxLayerIds.join(', ')}], features ${wanted.featurePrecision}); batch ${args.batch}`,
    );
    let total = 0;
    const committed = await runRolloutLoop(worker, {
      batch: args.batch,
      pollMs: args.pollMs,
      finished: () => record.finished(),
      stopped: () => stop,
      onCommit: (n) => print(`rollout ${id}: committed ${n} (total ${(total += n)})`),
    });
    const why = stop ? 'stopped by an interrupt' : 'the run is finished';
    print(`rollout ${id}: ${why}; committed ${committed} samples in ${formatDuration((performance.now() - started) / 1000)}`);
    return stop ? 130 : 0;
  } finally {
    release?.();
    for (const close of cleanup.reverse()) await Promise.resolve(close()).catch(() => undefined);
  }
}
