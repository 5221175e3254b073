/**
 * What the two roles of a cluster run (`speclab train --cluster … --run …`, the trainer, and
 * `speclab rollout --cluster … --run …`, its rollout workers) share, and the trainer's wiring.
 *
 * One Redis holds the run: its control plane (openRedisControlStores: prompt ledger, ref queue,
 * members, the durable ack marker), its feature store (a transferQueue data plane, keys under
 * FEATURE_KEY_PREFIX, partition = the run id) and its run record (RedisRunRecord: the manifest the
 * rollout workers check, and the finished flag they exit on). The trainer's `--out` keeps what a
 * single-process run keeps there except the ledger (checkpoints, metrics.jsonl, sequences.json).
 * Sockets come from `platform.connectRedis` (Node); a runtime without it is refused, naming the command.
 */
import { openRedisControlStores, type RedisControlStores } from '../../control/redis/redis-control-stores.ts';
import { RedisRunRecord } from '../../control/redis/redis-run-record.ts';
import { DataPlaneFeatureStore } from '../../data/dataplane-feature-store.ts';
import { createDataPlaneClient } from '../../dataplane/factory.ts';
import type { ClearTarget, DataPlaneClient } from '../../dataplane/types.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { CaptureConfig } from '../../inference/capture.ts';
import type { RedisLink } from '../../ports/redis-link.ts';
import type { TargetModel } from '../../model/target/model.ts';
import { sessionFeatureFields, type SessionCluster } from '../session/eagle3-session.ts';
import { speclabCommand } from '../../util/cli-command.ts';
import { stableHash } from '../../util/stable-hash.ts';
import { PROMPT_LEASE_MS } from './prompt-lease.ts';
import type { RunPlatform } from './platform.ts';

/** Key prefix of the run features in Redis (the control plane's keys are `speclab:{<run>}:…`). */
export const FEATURE_KEY_PREFIX = 'speclab-features';

/** The platform's Redis connector, or an error naming the command: only Node opens sockets. */
export function redisConnector(platform: RunPlatform, command: string): (url: string) => Promise<RedisLink> {
  const connect = platform.connectRedis?.bind(platform);
  if (!connect)
    throw new Error(
      `--cluster: this runtime (${platform.name}) cannot open sockets to Redis; speclab ${command} --cluster needs Node (bin/speclab.mjs)`,
    );
  return connect;
}

/** `settings`, once this runtime can reach a cluster (a --cluster run is refused before anything runs, not after its data is built). */
export function clusterRuntime<T extends { cluster?: string }>(platform: RunPlatform, settings: T): T {
  if (settings.cluster !== undefined) redisConnector(platform, 'train');
  return settings;
}

/**
 * What identifies the target of a run without its path (another machine has another path): its
 * parsed config.json (hashed, plus the sizes a person reads) and the storage precision of its
 * matrices, which changes the captured features. A rollout worker must describe its target alike.
 */
export function targetDescription(config: TargetModel['config'], precision: 'f32' | 'f16'): Record<string, unknown> {
  return {
    configHash: stableHash(config),
    numLayers: config.numLayers,
    hiddenSize: config.hiddenSize,
    vocabSize: config.vocabSize,
    precision,
  };
}

/** The run manifest the trainer publishes and every rollout worker checks before it captures. */
export function runManifest(
  run: string,
  capture: CaptureConfig,
  target: Record<string, unknown>,
  promptLeaseMs: number,
): Record<string, unknown> {
  return { run, capture, target, featurePrecision: capture.featurePrecision ?? 'f32', promptLeaseMs };
}

/** A data-plane client on the run's Redis (its own connections, closed with it). */
export function featureClient(
  connect: (url: string) => Promise<RedisLink>,
  url: string,
  gpu: Gpu,
  claimPollMs = 5,
): Promise<DataPlaneClient> {
  return createDataPlaneClient(
    { impl: 'transferQueue', backend: { kind: 'redis', url, keyPrefix: FEATURE_KEY_PREFIX }, claimPollMs },
    { gpu, connectRedis: connect },
  );
}

/**
 * The feature store clears a sample once the loader copied it (consume-once), before the step that
 * trains it is durably acked. In a cluster run the features live in Redis beyond this trainer: a
 * trainer killed (or a Redis that died) between that read and the ack leaves a committed, unacked
 * ref that the resume requeues, and its features must still be there. So the clears of the run's
 * partition wait for the durable ack of their samples (recordTrainAck), then go out.
 */
function keepUntilAcked(client: DataPlaneClient, run: string, stores: RedisControlStores): DataPlaneClient {
  const read = new Set<string>();
  const metadata = stores.metadata;
  const ack = metadata.recordTrainAck.bind(metadata);
  metadata.recordTrainAck = async (sampleIds, trainAck) => {
    await ack(sampleIds, trainAck);
    const done = sampleIds.filter((id) => read.delete(id));
    if (done.length > 0) await client.clearSamples(run, done);
  };
  const clearSamples = (partition: string, target: ClearTarget): Promise<number> => {
    if (partition !== run || !Array.isArray(target)) return client.clearSamples(partition, target);
    for (const id of target as readonly string[]) read.add(id);
    return Promise.resolve(0);
  };
  return new Proxy(client, {
    get(t, key) {
      if (key === 'clearSamples') return clearSamples;
      const value: unknown = Reflect.get(t, key, t);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
}

/** The trainer's side of a cluster run, open: what Eagle3TrainingSession.open takes, and the end of the run. */
export interface ClusterTrainer {
  readonly stores: RedisControlStores;
  readonly cluster: SessionCluster;
  /** Tells the rollout workers the run is over (they exit 0). */
  finish(): Promise<void>;
  /** Closes the feature client and the link (the stores' metadata is closed by its user first). */
  close(): Promise<void>;
}

export interface ClusterTrainerSettings {
  cluster: string;
  run: string;
  resume: boolean;
  targetPrecision: 'f32' | 'f16';
  /** How long a rollout worker may hold prompts (the run manifest tells every worker). */
  promptLeaseMs?: number;
}

/**
 * Connects to the run's Redis (refusing a server that is not durable: the ack marker lives there),
 * checks that a fresh start finds no state of the run, opens the feature store (a fresh run
 * registers the partition, wiping it; a resumed one attaches and keeps its committed features),
 * then publishes the manifest (refused when Redis holds another one for the run).
 */
export async function openClusterTrainer(
  platform: RunPlatform,
  settings: ClusterTrainerSettings,
  gpu: Gpu,
  capture: CaptureConfig,
  targetConfig: TargetModel['config'],
  print: (line: string) => void,
): Promise<ClusterTrainer> {
  const { cluster: url, run } = settings;
  const connect = redisConnector(platform, 'train');
  const link = await connect(url);
  let client: DataPlaneClient | undefined;
  try {
    const stores = await openRedisControlStores(link, run, { url, requireDurable: true });
    if (!settings.resume) {
      const committed = (await stores.metadata.allCommittedIds()).length;
      const { globalStep } = await stores.metadata.durableMarker();
      if (committed > 0 || globalStep !== null) {
        throw new Error(
          `--run ${run}: ${url} already holds state of this run (${committed} committed samples, durable step ${globalStep ?? 'none'}); continue it with --resume (same --out), or use another --run`,
        );
      }
    }
    client = await featureClient(connect, url, gpu);
    const kept = keepUntilAcked(client, run, stores);
    const features = settings.resume
      ? new DataPlaneFeatureStore(gpu, kept, run)
      : await DataPlaneFeatureStore.open(gpu, kept, run, sessionFeatureFields(capture));
    const record = new RedisRunRecord(link, run);
    await record.publish(
      runManifest(run, capture, targetDescription(targetConfig, settings.targetPrecision), settings.promptLeaseMs ?? PROMPT_LEASE_MS),
    );
    print(
      `cluster: trainer of run ${run} on ${url}; waiting for rollout workers: ${speclabCommand('rollout')} --cluster ${url} --run ${run} --target <this target>${settings.targetPrecision === 'f16' ? ' --target-precision f16' : ''}`,
    );
    const opened = client;
    return {
      stores,
      cluster: { stores, features },
      finish: () => record.finish(),
      async close() {
        await opened.close();
        await link.close();
      },
    };
  } catch (err) {
    await client?.close().catch(() => undefined);
    await link.close().catch(() => undefined);
    throw err;
  }
}
