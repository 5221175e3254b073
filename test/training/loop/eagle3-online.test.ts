/**
 * The online EAGLE3 pipeline end to end on the fixtures: the GPU target (hf/llama-tiny) captures
 * features for the fixture's two prompts through a RolloutWorker, the feature path carries them to
 * the FeatureDataLoader, and one Eagle3TrainStrategy step on the collated batch reproduces the loss
 * SpecForge computed for the same inputs (eagle3/eagle3_reference.safetensors `total_loss`).
 * The same run through the experience data plane (local GPU columns; Redis in Node) gives the same
 * losses, so the feature-path switch does not change training.
 */
import { DataFlowController } from '../../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { DataPlaneFeatureStore } from '../../../src/data/dataplane-feature-store.ts';
import { FeatureDataLoader } from '../../../src/data/feature-dataloader.ts';
import type { FeatureStore } from '../../../src/data/feature-store.ts';
import { LocalFeatureStore } from '../../../src/data/local-feature-store.ts';
import { SafetensorsFile } from '../../../src/formats/safetensors.ts';
import { createDataPlaneClient } from '../../../src/dataplane/factory.ts';
import type { DataPlaneClient } from '../../../src/dataplane/types.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { RolloutWorker } from '../../../src/inference/rollout-worker.ts';
import { eagle3CaptureConfig, TargetFeatureSource } from '../../../src/inference/target-feature-source.ts';
import { Eagle3DraftModel } from '../../../src/model/eagle3/model.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import { AdamWBackend } from '../../../src/optim/adamw-backend.ts';
import { Eagle3TrainStrategy } from '../../../src/training/strategies/eagle3.ts';
import { TrainerController } from '../../../src/training/loop/trainer-controller.ts';
import { TrainerCore } from '../../../src/training/loop/trainer-core.ts';
import { tempStore } from '../../data/temp-store.ts';
import { nodeOnlyImport } from '../../dataplane/backends.test.ts';
import { assertEqual, assertRelClose } from '../../harness/assert.ts';
import { defineSuite, type TestContext } from '../../harness/suite.ts';
import { FIXTURE_OPTIMIZER, loadEagle3Fixture } from '../../model/eagle3-fixture.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

const TTT = 4;

async function loadTarget(ctx: TestContext, gpu: Gpu): Promise<TargetModel> {
  const tmp = tempStore(ctx.platform, 'eagle3-online');
  try {
    await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'm');
    return TargetModel.create(gpu, await loadHfCheckpoint(tmp.files, 'm'));
  } finally {
    await tmp.cleanup();
  }
}

/** Roll out the fixture's prompts, train one step per batch of 2; returns the per-step losses. */
async function onlineRun(ctx: TestContext, gpu: Gpu, target: TargetModel, store: FeatureStore): Promise<number[]> {
  const ref = new SafetensorsFile(await ctx.fixture('eagle3/eagle3_reference.safetensors'), 'eagle3_reference.safetensors');
  const [B, S] = ref.shape('raw.input_ids');
  const ids = ref.i32('raw.input_ids');
  const mask = ref.i32('attention_mask');
  const lossMask = ref.i32('raw.loss_mask');
  const prompts = [];
  for (let b = 0; b < B; b++) {
    let len = 0;
    while (len < S && mask[b * S + len]) len++;
    prompts.push({
      taskId: `p${b}`,
      payload: { input_ids: [...ids.subarray(b * S, b * S + len)], loss_mask: [...lossMask.subarray(b * S, b * S + len)] },
      maxLength: S,
    });
  }
  const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
  await controller.ingestPrompts(prompts);
  // SpecForge's own layers for this 6-layer target (its rule gives [1, 2, 2]; SpecLab's default differs there).
  const capture = { ...eagle3CaptureConfig(target.config, [1, 2, 2]), extra: { ttt_length: TTT } };
  const worker = await RolloutWorker.create(controller, new TargetFeatureSource(target), store, gpu, capture, { workerId: 'w0' });
  while ((await worker.runOnce(8)).length > 0);

  const fx = await loadEagle3Fixture(ctx.fixture, '');
  const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
  const draft = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
  const core = new TrainerCore(new Eagle3TrainStrategy(draft, { tttLength: TTT }), backend, 1);
  const lease = await controller.trainLease();
  const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: 2 });
  const result = await new TrainerController(gpu, core).fit(loader, {
    ackFn: async (_ids, step, batches) => {
      await lease.ack(
        batches.flatMap((b) => (b as unknown as { refs: Parameters<typeof lease.ack>[0] }).refs),
        { globalStep: step, optimizerDurable: true },
      );
    },
  });
  assertEqual((await controller.status()).durableAcked, B, 'both samples durably acked');
  draft.destroy();
  backend.destroy();
  return result.losses;
}

/** `gpu` must be the one the data plane client was built with: one Gpu, one command stream. */
async function viaDataPlane(
  ctx: TestContext,
  gpu: Gpu,
  client: DataPlaneClient,
  reference: number[],
  note: (k: string, v: number) => void,
): Promise<void> {
  const target = await loadTarget(ctx, gpu);
  const store = await DataPlaneFeatureStore.open(gpu, client, 'eagle3', {
    input_ids: 'i32',
    hidden_state: 'f32',
    target: 'f32',
    loss_mask: 'i32',
  });
  const losses = await onlineRun(ctx, gpu, target, store);
  await store.drain();
  note('lossRelErrVsFeatureStore', assertRelClose(losses, reference, 1e-6, 'losses through the data plane'));
  await client.close();
  target.destroy();
}

export default defineSuite('training/loop/eagle3-online', (t) => {
  let reference: number[] = [];

  t.test(
    "target capture → feature store → loader → EAGLE3 step reproduces SpecForge's loss",
    async (ctx) => {
      const gpu = new Gpu(ctx.gpu);
      const target = await loadTarget(ctx, gpu);
      reference = await onlineRun(ctx, gpu, target, new LocalFeatureStore(gpu));
      const fx = await loadEagle3Fixture(ctx.fixture, '');
      ctx.note('lossRelErrVsSpecForge', assertRelClose(reference, fx.expected('total_loss'), 1e-5, 'online loss vs SpecForge total_loss'));
      target.destroy();
      gpu.destroy();
    },
    { timeoutMs: 600_000 },
  );

  t.test(
    'the same run through the data plane (local GPU columns) gives the same loss',
    async (ctx) => {
      const gpu = new Gpu(ctx.gpu);
      const client = await createDataPlaneClient(
        { impl: 'transferQueue', backend: { kind: 'local', columns: 'gpu' }, claimPollMs: 5 },
        { gpu },
      );
      await viaDataPlane(ctx, gpu, client, reference, ctx.note);
      gpu.destroy();
    },
    { timeoutMs: 600_000 },
  );

  t.test(
    'the same run through the data plane over a real Redis server gives the same loss',
    async (ctx) => {
      const { startRedisServer } = await nodeOnlyImport<typeof import('../../dataplane/redis-fixture.ts')>('./redis-fixture.ts');
      const { connectRedis } =
        await nodeOnlyImport<typeof import('../../../src/platform/redis-node.ts')>('../../src/platform/redis-node.ts');
      const server = await startRedisServer();
      try {
        const gpu = new Gpu(ctx.gpu);
        const client = await createDataPlaneClient(
          { impl: 'transferQueue', backend: { kind: 'redis', url: server.url, keyPrefix: 'eagle3' }, claimPollMs: 5 },
          { gpu, connectRedis: (url) => connectRedis(url) },
        );
        await viaDataPlane(ctx, gpu, client, reference, ctx.note);
        gpu.destroy();
      } finally {
        await server.stop();
      }
    },
    { only: ['node'], timeoutMs: 600_000 },
  );
});
