/**
 * The rollout → trainer feature path can run through the GPU feature store or through the
 * experience data plane (local GPU columns, host columns, or Redis), and training is the same:
 * identical losses for the same samples in the same order.
 */
import { DataFlowController } from '../../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { DataPlaneFeatureStore } from '../../../src/data/dataplane-feature-store.ts';
import { FeatureDataLoader } from '../../../src/data/feature-dataloader.ts';
import type { FeatureStore } from '../../../src/data/feature-store.ts';
import { LocalFeatureStore } from '../../../src/data/local-feature-store.ts';
import { createDataPlaneClient } from '../../../src/dataplane/factory.ts';
import type { DataPlaneClient } from '../../../src/dataplane/types.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import type { CaptureConfig } from '../../../src/inference/capture.ts';
import { RolloutWorker } from '../../../src/inference/rollout-worker.ts';
import { Rng } from '../../../src/util/random.ts';
import { AdamWBackend } from '../../../src/optim/adamw-backend.ts';
import { LinearProbeStrategy } from '../../../src/training/strategies/linear-probe.ts';
import { TrainerController } from '../../../src/training/loop/trainer-controller.ts';
import { TrainerCore } from '../../../src/training/loop/trainer-core.ts';
import { nodeOnlyImport } from '../../dataplane/backends.test.ts';
import { assert, assertEqual, relativeError } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { bigramPrompts, ToyEmbeddingTarget } from '../../inference/toy-target.ts';

const V = 16;
const H = 8;
const FIELDS = { input_ids: 'i32', hidden_state: 'f32', labels: 'i32' } as const;
const CAPTURE: CaptureConfig = { featureNames: Object.keys(FIELDS), auxLayerIds: [], targetRepr: 'hidden_state', targetHiddenSize: H };

/** Roll out 24 prompts with one worker, train the probe for one epoch, return the per-step losses. */
async function trainThrough(gpu: Gpu, store: FeatureStore): Promise<{ losses: number[]; acked: number }> {
  const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
  const worker = await RolloutWorker.create(controller, new ToyEmbeddingTarget(gpu, V, H), store, gpu, CAPTURE, { workerId: 'w0' });
  await controller.ingestPrompts(
    bigramPrompts(24, V).map((p, i) => ({ taskId: `t${String(i).padStart(3, '0')}`, payload: p, maxLength: 64 })),
  );
  while ((await worker.runOnce(6)).length > 0);
  const backend = new AdamWBackend(gpu, {
    lr: 0.05,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weightDecay: 0,
    maxGradNorm: 1,
    schedule: { kind: 'constant', totalSteps: 100, warmupRatio: 0 },
  });
  const core = new TrainerCore(new LinearProbeStrategy(gpu, backend, H, V, new Rng(9).floats(V * H, 0.1)), backend, 1);
  const lease = await controller.trainLease();
  const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: 3, padValues: { labels: -1 } });
  const result = await new TrainerController(gpu, core).fit(loader, {
    ackFn: async (_ids, step, batches) => {
      await lease.ack(
        batches.flatMap((b) => (b as unknown as { refs: Parameters<typeof lease.ack>[0] }).refs),
        { globalStep: step, optimizerDurable: true },
      );
    },
  });
  backend.destroy();
  return { losses: result.losses, acked: (await controller.status()).durableAcked };
}

async function compare(gpu: Gpu, client: DataPlaneClient, note: (k: string, v: number) => void): Promise<void> {
  const reference = await trainThrough(gpu, new LocalFeatureStore(gpu));
  const store = await DataPlaneFeatureStore.open(gpu, client, 'features', FIELDS);
  const viaDataPlane = await trainThrough(gpu, store);
  await store.drain();
  assertEqual(viaDataPlane.acked, 24, 'every sample acked through the data-plane path');
  assertEqual(viaDataPlane.losses.length, reference.losses.length, 'same number of optimizer steps');
  const err = relativeError(viaDataPlane.losses, reference.losses);
  note('lossRelErr', err);
  assert(err <= 1e-6, `losses differ by ${err} relative`);
  assertEqual((await client.partitionStats('features')).samples, 0, 'consume-once: the partition is empty after training');
  await client.close();
}

export default defineSuite('training/loop/feature-path', (t) => {
  t.test('data plane with local GPU columns trains exactly like the GPU feature store', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const client = await createDataPlaneClient(
      { impl: 'transferQueue', backend: { kind: 'local', columns: 'gpu' }, claimPollMs: 5 },
      { gpu },
    );
    await compare(gpu, client, note);
    gpu.destroy();
  });

  t.test('data plane with host columns trains exactly like the GPU feature store', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const client = await createDataPlaneClient(
      { impl: 'transferQueue', backend: { kind: 'local', columns: 'host' }, claimPollMs: 5 },
      { gpu },
    );
    await compare(gpu, client, note);
    gpu.destroy();
  });

  t.test(
    'data plane over a real Redis server trains exactly like the GPU feature store',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const { startRedisServer } = await nodeOnlyImport<typeof import('../../dataplane/redis-fixture.ts')>('../dataplane/redis-fixture.ts');
      const { connectRedis } =
        await nodeOnlyImport<typeof import('../../../src/platform/redis-node.ts')>('../../src/platform/redis-node.ts');
      const server = await startRedisServer();
      try {
        const client = await createDataPlaneClient(
          { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'path' }, claimPollMs: 5 },
          { gpu, connectRedis: (url) => connectRedis(url) },
        );
        await compare(gpu, client, note);
      } finally {
        await server.stop();
      }
      gpu.destroy();
    },
    { only: ['node'] },
  );
});
