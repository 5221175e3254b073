/**
 * A rollout worker of a cluster run that reaches the run through the gateway (`speclab gateway`)
 * instead of Redis: what a browser tab runs (web/rollout/worker.ts), and any runtime with a
 * WebSocket. It does what `speclab rollout` (src/cli/rollout.ts) does, with the same modules:
 *
 *  - reads the trainer's run manifest (through the control RPC), loads its own target with the
 *    manifest's target precision and refuses, naming the field, a target whose description differs
 *    (config hash, sizes, precision), so a tab never commits features the trainer cannot use;
 *  - builds its capture with `sessionCapture` from the manifest's aux layers, TTT length and feature
 *    precision, and refuses a capture that differs from the manifest's;
 *  - captures with `TargetFeatureSource` and `RolloutWorker` over the same WGSL target model, puts
 *    the features into the run's partition with `DataPlaneFeatureStore` over the data-plane gateway
 *    (ws-client: the gateway's Redis data plane), and commits refs through the control RPC, whose
 *    server-side controller is built over the run's Redis control stores like a Node worker's;
 *  - runs `runRolloutLoop` until the trainer marks the run finished.
 *
 * So a tab's features are the ones a Node worker computes for the same prompt on the same kind of
 * adapter: the same kernels, the same capture, the same casts. Different adapters (a browser's
 * GPU against Dawn on another driver) may round differently; the manifest checks what must match
 * (target, capture), not the rounding of a driver.
 */
import {
  makePromptTask,
  makeSampleRef,
  type PromptTask,
  type PromptTaskInput,
  type SampleRef,
  type SampleRefInput,
} from '../../contracts/index.ts';
import type { PromptFailOutcome } from '../../control/control-stores.ts';
import { differences, stableJson, type RunManifest } from '../../control/redis/redis-run-record.ts';
import { DataPlaneFeatureStore } from '../../data/dataplane-feature-store.ts';
import { connectControlGateway, type ControlGatewayClient } from '../../dataplane/gateway-control-client.ts';
import type { DataPlaneClient } from '../../dataplane/types.ts';
import { connectDataPlaneGateway, type WebSocketConstructor } from '../../dataplane/ws-client.ts';
import { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { CaptureConfig } from '../../inference/capture.ts';
import { runRolloutLoop } from '../../inference/rollout-loop.ts';
import { RolloutWorker, type RolloutEndpoints } from '../../inference/rollout-worker.ts';
import { TargetFeatureSource } from '../../inference/target-feature-source.ts';
import { TargetModel } from '../../model/target/model.ts';
import type { FileStore } from '../../ports/storage.ts';
import { speclabCommand } from '../../util/cli-command.ts';
import { stableHash } from '../../util/stable-hash.ts';
import { sessionCapture } from '../session/eagle3-session.ts';

/** What a tab reports while it works (the page shows it). */
export type TabRolloutEvent =
  | { readonly kind: 'status'; readonly text: string }
  | {
      readonly kind: 'joined';
      readonly workerId: string;
      readonly auxLayerIds: readonly number[];
      readonly featurePrecision: string;
      readonly leaseMs: number;
    }
  | { readonly kind: 'leased'; readonly taskIds: readonly string[] }
  | { readonly kind: 'committed'; readonly sampleIds: readonly string[]; readonly taskIds: readonly string[] }
  | { readonly kind: 'finished'; readonly committed: number };

/**
 * The endpoints RolloutWorker calls, served by the gateway's control RPC. Tasks and fresh refs
 * coming back are rebuilt with the contract builders (validated and frozen) like local ones.
 */
export class GatewayRolloutEndpoints implements RolloutEndpoints {
  constructor(
    private readonly control: ControlGatewayClient,
    readonly runId: string,
    private readonly hooks: {
      onLeased?(tasks: readonly PromptTask[]): Promise<void> | void;
      onCommitted?(refs: readonly SampleRef[]): void;
    } = {},
  ) {}

  async registerRolloutWorker(info: Record<string, unknown> = {}): Promise<string> {
    const workerId = info.workerId === undefined ? undefined : String(info.workerId);
    const strategy = info.strategy === undefined ? undefined : String(info.strategy);
    return (await this.control.register({ workerId, strategy })).workerId;
  }

  async leasePromptTasks(workerId: string, maxTasks: number): Promise<PromptTask[]> {
    const { tasks } = await this.control.lease(workerId, maxTasks);
    const built = tasks.map((t, i) => makePromptTask(t as PromptTaskInput, `leased task ${i}`));
    if (built.length > 0) await this.hooks.onLeased?.(built);
    return built;
  }

  async failPromptTasks(workerId: string, taskIds: readonly string[], reason: string, retryable: boolean): Promise<PromptFailOutcome> {
    return this.control.fail(workerId, taskIds, reason, retryable);
  }

  async commitSamples(workerId: string, refs: readonly SampleRef[]): Promise<SampleRef[]> {
    const { fresh } = await this.control.commit(workerId, refs as unknown as Record<string, unknown>[]);
    this.hooks.onCommitted?.(refs);
    return fresh.map((r, i) => makeSampleRef(r as SampleRefInput, `committed ref ${i}`));
  }
}

/** The target description of `speclab train --cluster` (src/training/run/cluster-run.ts targetDescription; a test keeps the two equal). */
export function tabTargetDescription(config: TargetModel['config'], precision: 'f32' | 'f16'): Record<string, unknown> {
  return {
    configHash: stableHash(config),
    numLayers: config.numLayers,
    hiddenSize: config.hiddenSize,
    vocabSize: config.vocabSize,
    precision,
  };
}

export interface ManifestCapture {
  auxLayerIds: number[];
  tttLength: number;
  featurePrecision: 'f32' | 'f16';
  targetRepr: 'logits' | 'hidden_state';
}

const damagedManifest = (run: string, field: string) =>
  new Error(`run ${run}: its manifest has no valid ${field} (a record from another version, or damaged)`);

/**
 * The manifest's capture settings a rollout (`speclab rollout`, a tab) rebuilds its capture from; a
 * field that is missing or damaged is named.
 */
export function manifestCapture(manifest: RunManifest, run: string): ManifestCapture {
  const damaged = (field: string) => damagedManifest(run, field);
  const capture = manifest.capture as
    { auxLayerIds?: unknown; extra?: { ttt_length?: unknown }; featurePrecision?: unknown; targetRepr?: unknown } | undefined;
  if (!capture || typeof capture !== 'object') throw damaged('capture');
  const aux = capture.auxLayerIds;
  if (!Array.isArray(aux) || !aux.every((id) => Number.isInteger(id) && (id as number) >= 0)) throw damaged('capture.auxLayerIds');
  const ttt = capture.extra?.ttt_length;
  if (typeof ttt !== 'number' || !Number.isInteger(ttt) || ttt < 1) throw damaged('capture.extra.ttt_length');
  const featurePrecision = capture.featurePrecision ?? 'f32';
  if (featurePrecision !== 'f32' && featurePrecision !== 'f16') throw damaged('capture.featurePrecision');
  const targetRepr = capture.targetRepr;
  if (targetRepr !== 'logits' && targetRepr !== 'hidden_state') throw damaged('capture.targetRepr');
  return { auxLayerIds: aux as number[], tttLength: ttt, featurePrecision, targetRepr };
}

/** The manifest's capture settings and target precision (what a tab loads its target at); a field that is missing or damaged is named. */
export function manifestSettings(manifest: RunManifest, run: string): ManifestCapture & { targetPrecision: 'f32' | 'f16' } {
  const capture = manifestCapture(manifest, run);
  const targetPrecision = (manifest.target as { precision?: unknown } | undefined)?.precision;
  if (targetPrecision !== 'f32' && targetPrecision !== 'f16') throw damagedManifest(run, 'target.precision');
  const { auxLayerIds, tttLength, featurePrecision, targetRepr } = capture;
  return { auxLayerIds, tttLength, featurePrecision, targetPrecision, targetRepr };
}

/** Refuses, naming each differing field, unless `mine` equals the manifest's `field`. */
export function requireManifestField(manifest: RunManifest, field: 'capture' | 'target', mine: unknown, run: string): void {
  if (stableJson(manifest[field]) === stableJson(mine)) return;
  const diff = differences((manifest[field] ?? {}) as RunManifest, JSON.parse(stableJson(mine)) as RunManifest);
  const hint = field === 'target' ? "load the trainer's target" : 'a worker must capture what the trainer trains on';
  throw new Error(
    `run ${run}: this tab's ${field} differs from the run manifest's (${field}.${diff.replace(/, /g, `, ${field}.`)}; manifest → this tab): ${hint}; refusing to capture`,
  );
}

export interface TabRolloutOptions {
  /** The gateway, ws://host:port/ (data plane and control RPC on one port). */
  readonly gatewayUrl: string;
  readonly token: string;
  readonly run: string;
  readonly WebSocket: WebSocketConstructor;
  /** The target directory (a URL store in a tab: the lab target is served at ./lab-target/). */
  readonly targetFiles: FileStore;
  readonly gpu: Gpu;
  /** Prompts per capture (default 4, as speclab rollout). */
  readonly batch?: number;
  readonly pollMs?: number;
  readonly workerId?: string;
  /** How long to wait for the trainer's manifest (default 60 s). */
  readonly waitMs?: number;
  readonly onEvent?: (event: TabRolloutEvent) => void;
  /** Runs after every non-empty lease, before the capture (a page may hold a lease here). */
  readonly afterLease?: (tasks: readonly PromptTask[]) => Promise<void> | void;
  readonly stopped?: () => boolean;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Far below the gateway's idle timeout (10 min). */
const DATA_PLANE_KEEPALIVE_MS = 60_000;

/** Joins the run, captures and commits until the trainer finishes it; returns the samples committed. */
export async function runTabRollout(options: TabRolloutOptions): Promise<{ workerId: string; committed: number }> {
  const emit = options.onEvent ?? (() => {});
  const { run, gpu } = options;
  const cleanup: (() => Promise<void> | void)[] = [];
  try {
    emit({ kind: 'status', text: `connecting to ${options.gatewayUrl}` });
    const control = await connectControlGateway({ url: options.gatewayUrl, token: options.token, WebSocket: options.WebSocket, run });
    cleanup.push(() => control.close());
    const deadline = performance.now() + (options.waitMs ?? 60_000);
    let { manifest } = await control.manifest();
    while (!manifest) {
      if (performance.now() >= deadline)
        throw new Error(
          `run ${run}: no trainer published this run within ${options.waitMs ?? 60_000} ms; start ${speclabCommand('train')} --cluster … --run ${run} first`,
        );
      emit({ kind: 'status', text: `waiting for the trainer of run ${run}` });
      await sleep(250);
      ({ manifest } = await control.manifest());
    }
    const wanted = manifestSettings(manifest, run);
    emit({ kind: 'status', text: `loading the target (${wanted.targetPrecision})` });
    const source = await HfCheckpointSource.open(options.targetFiles, '');
    requireManifestField(manifest, 'target', tabTargetDescription(source.config, wanted.targetPrecision), run);
    const capture: CaptureConfig = sessionCapture(source.config, wanted.auxLayerIds, wanted);
    requireManifestField(manifest, 'capture', capture, run);

    const target = await TargetModel.load(gpu, source, { weightPrecision: wanted.targetPrecision });
    cleanup.push(() => target.destroy());
    const client: DataPlaneClient = await connectDataPlaneGateway({
      url: options.gatewayUrl,
      token: options.token,
      WebSocket: options.WebSocket,
      gpu,
    });
    cleanup.push(() => client.close());
    // Attach: the trainer registered the partition (a worker must never wipe it).
    const store = new DataPlaneFeatureStore(gpu, client, run);
    const endpoints = new GatewayRolloutEndpoints(control, run, {
      onLeased: async (tasks) => {
        emit({ kind: 'leased', taskIds: tasks.map((t) => t.taskId) });
        await options.afterLease?.(tasks);
      },
      onCommitted: (refs) =>
        emit({
          kind: 'committed',
          sampleIds: refs.map((r) => r.sampleId),
          taskIds: refs.flatMap((r) => (r.sourceTaskId === null ? [] : [r.sourceTaskId])),
        }),
    });
    const worker = await RolloutWorker.create(endpoints, new TargetFeatureSource(target), store, gpu, capture, {
      workerId: options.workerId,
    });
    emit({
      kind: 'joined',
      workerId: worker.workerId,
      auxLayerIds: capture.auxLayerIds,
      featurePrecision: wanted.featurePrecision,
      leaseMs: control.hello.promptLeaseMs,
    });
    let lastDataPlaneCall = performance.now();
    const committed = await runRolloutLoop(worker, {
      batch: options.batch ?? 4,
      pollMs: options.pollMs ?? 100,
      finished: async () => {
        // The gateway closes a connection idle for 10 minutes; a tab waiting out a long training
        // round keeps its data-plane connection alive with a cheap read now and then.
        if (performance.now() - lastDataPlaneCall > DATA_PLANE_KEEPALIVE_MS) {
          lastDataPlaneCall = performance.now();
          await client.partitionStats(run);
        }
        return (await control.heartbeat(worker.workerId)).finished;
      },
      stopped: options.stopped,
    });
    emit({ kind: 'finished', committed });
    return { workerId: worker.workerId, committed };
  } finally {
    for (const close of cleanup.reverse()) await Promise.resolve(close()).catch(() => undefined);
  }
}
