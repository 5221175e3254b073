/**
 * The disaggregated run (docs/control-plane.md §9) against a real redis-server: one trainer session
 * in cluster mode and two rollout workers, each with its own Redis connections, controller and
 * data-plane feature store, share a run's control plane and feature store on Redis. The trainer
 * must train on exactly the stream of the single-process session: equal losses at every step and
 * bit-equal final weights, every sample durably acked once. The three run concurrently in this
 * process (separate processes are the same code with other sockets: test/cli/ covers the commands).
 * Node-only (it runs redis-server); Node-only modules load at run time.
 */
import { DataFlowController } from '../../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { openRedisControlStores } from '../../../src/control/redis/redis-control-stores.ts';
import { RedisRunRecord } from '../../../src/control/redis/redis-run-record.ts';
import { DataPlaneFeatureStore } from '../../../src/data/dataplane-feature-store.ts';
import { createDataPlaneClient } from '../../../src/dataplane/factory.ts';
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { runRolloutLoop } from '../../../src/inference/rollout-loop.ts';
import { RolloutWorker } from '../../../src/inference/rollout-worker.ts';
import { TargetFeatureSource } from '../../../src/inference/target-feature-source.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import type { RedisLink } from '../../../src/ports/redis-link.ts';
import {
  Eagle3TrainingSession,
  sessionCapture,
  sessionFeatureFields,
  sessionSettingsSchema,
  type SessionStep,
} from '../../../src/training/session/eagle3-session.ts';
import { Rng } from '../../../src/util/random.ts';
import { tempStore } from '../../data/temp-store.ts';
import { assert, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

type RedisFixture = typeof import('../../dataplane/redis-fixture.ts');
type RedisPlatform = typeof import('../../../src/platform/redis-node.ts');

function nodeOnlyImport<T>(specifier: string): Promise<T> {
  return import(/* @vite-ignore */ specifier) as Promise<T>;
}

// Three rounds of four prompts, batch 2: rollout of round r + 1 waits for the trainer to ingest it.
const SETTINGS = sessionSettingsSchema.parse({
  epochs: 2,
  roundPrompts: 4,
  batchSize: 2,
  tttLength: 3,
  lr: 1e-2,
  responseLength: 10,
  checkpointEvery: 4,
  rolloutWorkers: 1,
  seed: 5,
});
const RUN = 'cluster-test';

async function runAll(session: Eagle3TrainingSession): Promise<SessionStep[]> {
  const steps: SessionStep[] = [];
  for (let st = await session.step(); st; st = await session.step()) steps.push(st);
  return steps;
}

export default defineSuite('training/session/cluster-session', (t) => {
  t.test(
    'one trainer and two rollout workers over Redis train on the single-process stream: equal losses, equal weights, every sample acked once',
    async (ctx) => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../../dataplane/redis-fixture.ts');
      const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../../src/platform/redis-node.ts');
      const tmp = tempStore(ctx.platform, 'cluster-session');
      const server = await startRedisServer({ durable: true });
      const gpu = new Gpu(ctx.gpu);
      const links: RedisLink[] = [];
      const connect = async () => {
        const link = await connectRedis(server.url);
        links.push(link);
        return link;
      };
      const closers: (() => Promise<void>)[] = [];
      // Rollout loops stop (and are awaited) before their connections close, whatever failed.
      let stopLoops = false;
      let loops: Promise<number>[] = [];
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const checkpoint = await loadHfCheckpoint(tmp.files, 'target');
        const target = TargetModel.create(gpu, checkpoint);
        closers.push(async () => target.destroy());
        const rng = new Rng(17);
        const prompts = Array.from({ length: 6 }, () =>
          Array.from({ length: 4 + rng.int(0, 4) }, () => rng.int(0, checkpoint.config.vocabSize)),
        );
        const base = {
          gpu,
          target,
          embedTokens: checkpoint.weights.embedTokens,
          trainPrompts: prompts,
          settings: SETTINGS,
          runId: RUN,
          now: () => performance.now(),
        };

        const single = await Eagle3TrainingSession.open({
          ...base,
          storage: { checkpoints: ctx.platform.files(`${tmp.files.root}/single`), metadata: new InMemoryMetadataStore() },
        });
        const singleSteps = await runAll(single);
        const singleWeights = await single.currentWeights();
        single.destroy();

        const dataPlane = async () => {
          const client = await createDataPlaneClient(
            { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'features' }, claimPollMs: 5 },
            { gpu, connectRedis: () => connect() },
          );
          closers.push(() => client.close());
          return client;
        };
        const trainerLink = await connect();
        const stores = await openRedisControlStores(trainerLink, RUN, { url: server.url });
        const record = new RedisRunRecord(trainerLink, RUN);
        const capture = sessionCapture(target.config, single.auxLayerIds, SETTINGS);
        const features = await DataPlaneFeatureStore.open(gpu, await dataPlane(), RUN, sessionFeatureFields(capture));
        const session = await Eagle3TrainingSession.open({
          ...base,
          storage: { checkpoints: ctx.platform.files(`${tmp.files.root}/cluster`), metadata: stores.metadata },
          cluster: { stores, features, pollMs: 5, stallMs: 120_000 },
        });
        await record.publish({ run: RUN, capture });

        // Each rollout worker: its own connections, controller and feature store, as a separate process has.
        // Workers only commit (enqueueCommits false): the trainer enqueues each round from the ledger
        // once all of it is committed, so a slow worker's enqueue can never race the trainer's acks.
        const rollout = async (i: number): Promise<number> => {
          const link = await connect();
          const controller = DataFlowController.over(RUN, await openRedisControlStores(link, RUN, { url: server.url }), {
            enqueueCommits: false,
          });
          const store = new DataPlaneFeatureStore(gpu, await dataPlane(), RUN);
          const worker = await RolloutWorker.create(controller, new TargetFeatureSource(target), store, gpu, capture, {
            workerId: `rollout-proc-${i}`,
          });
          const theirs = new RedisRunRecord(link, RUN);
          return runRolloutLoop(worker, { batch: 2, pollMs: 5, finished: () => theirs.finished(), stopped: () => stopLoops });
        };
        loops = [rollout(0), rollout(1)];
        const clusterSteps = await runAll(session);
        await record.finish();
        const committedBy = await Promise.all(loops);

        assertEqual(clusterSteps.length, singleSteps.length, 'same number of steps');
        for (const [i, st] of clusterSteps.entries()) assertEqual(st.loss, singleSteps[i].loss, `loss of step ${i + 1} (bit-equal)`);
        const weights = await session.currentWeights();
        for (const [name, w] of Object.entries(singleWeights)) {
          const same = w.length === weights[name].length && w.every((v, j) => Object.is(v, weights[name][j]));
          assert(same, `weight ${name} bit-equal to the single-process run`);
        }
        assertEqual(committedBy[0] + committedBy[1], prompts.length * SETTINGS.epochs, 'every sample committed once by the two workers');
        ctx.note('committedByWorkers', committedBy.join('+'));
        const marker = await stores.metadata.durableMarker();
        assertEqual(marker.acked.size, prompts.length * SETTINGS.epochs, 'every sample durably acked');
        assertEqual(marker.globalStep, session.totalSteps, 'ledger at the last step');
        const status = await DataFlowController.over(RUN, stores).status();
        assertEqual(status.trainBacklog, 0, 'nothing committed and unacked');
        assertEqual(status.rolloutWorkers, 2, 'both workers registered');
        session.destroy();
      } finally {
        stopLoops = true;
        await Promise.allSettled(loops);
        for (const close of closers.reverse()) await close().catch(() => undefined);
        for (const link of links) await link.close();
        gpu.destroy();
        await server.stop();
        await tmp.cleanup();
      }
    },
    { only: ['node'], timeoutMs: 600_000 },
  );
});
