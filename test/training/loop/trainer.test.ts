import { DataFlowController } from '../../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { makeTrainBatch } from '../../../src/contracts/index.ts';
import { LocalFeatureStore } from '../../../src/data/local-feature-store.ts';
import { FeatureDataLoader } from '../../../src/data/feature-dataloader.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import type { CaptureConfig } from '../../../src/inference/capture.ts';
import { RolloutWorker } from '../../../src/inference/rollout-worker.ts';
import { Rng } from '../../../src/util/random.ts';
import { AdamWBackend, type OptimizerConfig } from '../../../src/optim/adamw-backend.ts';
import { learningRate } from '../../../src/optim/schedule.ts';
import { LinearProbeStrategy } from '../../../src/training/strategies/linear-probe.ts';
import { IncompleteAccumulationError, TrainerController } from '../../../src/training/loop/trainer-controller.ts';
import { TrainerCore } from '../../../src/training/loop/trainer-core.ts';
import { assert, assertEqual, assertRejects } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { bigramPrompts, ToyEmbeddingTarget } from '../../inference/toy-target.ts';

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

async function build(gpu: Gpu, prompts: number, accumulation: number) {
  const controller = new DataFlowController({ runId: 'run', store: new InMemoryMetadataStore() });
  const store = new LocalFeatureStore(gpu);
  const target = new ToyEmbeddingTarget(gpu, V, H);
  const workers = await Promise.all(
    [0, 1].map((i) => RolloutWorker.create(controller, target, store, gpu, CAPTURE, { workerId: `w${i}` })),
  );
  await controller.ingestPrompts(
    bigramPrompts(prompts, V).map((p, i) => ({ taskId: `t${String(i).padStart(3, '0')}`, payload: p, maxLength: 64 })),
  );
  const backend = new AdamWBackend(gpu, OPT);
  const strategy = new LinearProbeStrategy(gpu, backend, H, V, new Rng(9).floats(V * H, 0.1));
  const core = new TrainerCore(strategy, backend, accumulation);
  const lease = await controller.trainLease();
  const loader = new FeatureDataLoader(gpu, store, { lease }, { batchSize: 2, padValues: { labels: -1 } });
  return { controller, store, workers, backend, core, lease, loader, trainer: new TrainerController(gpu, core) };
}

export default defineSuite('training/loop/trainer', (t) => {
  t.test('cosine schedule with linear warmup', () => {
    const cfg = { kind: 'cosine' as const, baseLr: 1, totalSteps: 200, warmupRatio: 0.015 };
    assertEqual(learningRate(cfg, 0), 1 / 3, 'first warmup step (warmup = 3)');
    assertEqual(learningRate(cfg, 2), 1, 'end of warmup');
    assert(Math.abs(learningRate(cfg, 3 + 197 / 2) - 0.5) < 1e-9, 'half way down the cosine');
    assert(learningRate(cfg, 199) < 1e-3, 'near zero at the end');
  });

  t.test(
    'online rollout → store → loader → probe: loss falls, every sample acked once at optimizer boundaries',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const { controller, store, workers, backend, core, lease, loader, trainer } = await build(gpu, 48, 2);
      while ((await Promise.all(workers.map((w) => w.runOnce(4)))).some((r) => r.length > 0));
      const acked: string[] = [];
      const steps: number[] = [];
      const result = await trainer.fit(loader, {
        numEpochs: 1,
        ackFn: async (ids, step, batches) => {
          acked.push(...ids);
          steps.push(step);
          await lease.ack(
            batches.flatMap((b) => (b as unknown as { refs: Parameters<typeof lease.ack>[0] }).refs),
            { globalStep: step, optimizerDurable: true },
          );
        },
      });
      assertEqual(result.globalStep, 12, '48 samples / batch 2 / accumulation 2');
      assertEqual(core.microStep, 24, 'micro steps');
      assertEqual(backend.step, 12, 'optimizer steps');
      assertEqual(new Set(acked).size, 48, 'every sample acked');
      assertEqual(acked.length, 48, 'none acked twice');
      const status = await controller.status();
      assertEqual(status.durableAcked, 48, 'durable marker holds every id');
      assertEqual(status.durableGlobalStep, 12, 'marker step');
      assertEqual(status.queueDepth + status.queueInFlight, 0, 'queue drained');
      assertEqual(store.health().residentSamples, 0, 'consume-once store empty');
      const first = result.losses.slice(0, 3).reduce((a, b) => a + b) / 3;
      const last = result.losses.slice(-3).reduce((a, b) => a + b) / 3;
      note('lossFirst', Number(first.toFixed(4)));
      note('lossLast', Number(last.toFixed(4)));
      assert(last < first * 0.8, `loss should fall: first ${first}, last ${last}`);
      backend.destroy();
      assertEqual(gpu.pool.stats().liveBuffers, 0, 'no GPU buffer leaked by the whole loop');
      gpu.destroy();
    },
  );

  t.test('accumulation 2: no step after the first micro-batch, one after the second', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const backend = new AdamWBackend(gpu, OPT);
    const strategy = new LinearProbeStrategy(gpu, backend, H, V, new Rng(1).floats(V * H, 0.1));
    const core = new TrainerCore(strategy, backend, 2);
    const batch = () =>
      makeTrainBatch({
        sampleIds: ['a'],
        strategy: 'eagle3',
        tensors: { hidden_state: gpu.upload([1, 3, H], 'f32', new Rng(2).floats(3 * H)), labels: gpu.upload([1, 3], 'i32', [1, 2, -1]) },
      });
    const before = [...(await gpu.read(strategy.weight.value))];
    const r1 = await core.trainStep(batch());
    assertEqual(r1.optimizerStepped, false, 'first micro-batch');
    assertEqual([...(await gpu.read(strategy.weight.value))].join(), before.join(), 'weights unchanged before the boundary');
    const r2 = await core.trainStep(batch());
    assertEqual(r2.optimizerStepped, true, 'second micro-batch steps');
    assert((await r2.gradNorm!) > 0, 'grad norm reported');
    assertEqual(core.accumulationRemainder, 0, 'window closed');
    backend.destroy();
    gpu.destroy();
  });

  t.test('a step with a NaN gradient is skipped on the GPU and reported; the next step is a normal update', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const backend = new AdamWBackend(gpu, OPT);
    const strategy = new LinearProbeStrategy(gpu, backend, H, V, new Rng(1).floats(V * H, 0.1));
    const core = new TrainerCore(strategy, backend, 1);
    const hidden = [0, 1, 2].map((i) => Float32Array.from(new Rng(10 + i).floats(3 * H)));
    hidden[1][4] = Number.NaN;
    const weights: number[][] = [];
    const source = {
      async *[Symbol.asyncIterator]() {
        for (const [i, h] of hidden.entries()) {
          weights.push([...(await gpu.read(strategy.weight.value))]);
          yield makeTrainBatch({
            sampleIds: [`s${i}`],
            strategy: 'eagle3',
            tensors: { hidden_state: gpu.upload([1, 3, H], 'f32', h), labels: gpu.upload([1, 3], 'i32', [1, 2, 3]) },
          });
        }
        weights.push([...(await gpu.read(strategy.weight.value))]);
      },
    };
    const logs: { step: number; gradNorm: number }[] = [];
    const acked: string[] = [];
    await new TrainerController(gpu, core).fit(source, {
      onStep: (l) => logs.push({ step: l.globalStep, gradNorm: l.gradNorm }),
      ackFn: async (ids) => void acked.push(...ids),
    });
    assertEqual(logs.map((l) => Number.isFinite(l.gradNorm)).join(), 'true,false,true', 'step 2 reports its non-finite norm');
    assert(weights[1].join() !== weights[0].join(), 'step 1 updated the weights');
    assertEqual(weights[2].join(), weights[1].join(), 'step 2 left the weights as they were');
    assert(weights[3].join() !== weights[2].join(), 'step 3 updated them again');
    assertEqual(`${backend.step}/${backend.skippedSteps}/${backend.appliedUpdates}`, '3/1/2', 'steps / skipped / applied updates');
    assertEqual(acked.join(), 's0,s1,s2', "every sample acked: a skipped step consumed its batch (the stop policy is the caller's)");
    backend.destroy();
    gpu.destroy();
  });

  t.test('the free buffers of a step stay for a batch of the same shapes and go before one of other shapes', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const backend = new AdamWBackend(gpu, OPT);
    const strategy = new LinearProbeStrategy(gpu, backend, H, V, new Rng(2).floats(V * H, 0.1));
    const core = new TrainerCore(strategy, backend, 1);
    const lengths = [3, 3, 5, 5];
    const freeBefore: number[] = [];
    const source = {
      async *[Symbol.asyncIterator]() {
        for (const [i, S] of lengths.entries()) {
          const batch = makeTrainBatch({
            sampleIds: [`s${i}`],
            strategy: 'eagle3',
            tensors: {
              hidden_state: gpu.upload([1, S, H], 'f32', new Rng(20 + i).floats(S * H)),
              labels: gpu.upload([1, S], 'i32', new Int32Array(S).fill(1)),
            },
          });
          freeBefore.push(gpu.pool.stats().freeBuffers);
          yield batch;
        }
      },
    };
    const trims: number[] = [];
    const trim = gpu.trimPool.bind(gpu);
    gpu.trimPool = () => {
      trims.push(freeBefore.length);
      return trim();
    };
    await new TrainerController(gpu, core).fit(source, { ackFn: async () => {} });
    assert(freeBefore[1] > 0, `the second batch (same shapes) finds the first step's free buffers (${freeBefore[1]})`);
    assertEqual(trims.join(), '3', 'one trim, before the first batch of other shapes (the third)');
    backend.destroy();
    gpu.destroy();
  });

  t.test('a missing feature raises naming it; a window cut by the end of the stream raises and acks nothing', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const { workers, core, loader, trainer, controller } = await build(gpu, 6, 2);
    await assertRejects(
      () =>
        core.trainStep(makeTrainBatch({ sampleIds: ['x'], strategy: 'eagle3', tensors: { hidden_state: gpu.tensor([1, 2, H], 'f32') } })),
      /lacks feature "labels"/,
      'missing feature',
    );
    while ((await Promise.all(workers.map((w) => w.runOnce(4)))).some((r) => r.length > 0));
    const acked: string[] = [];
    // 6 samples, batch 2, accumulation 2 → steps after batches 2 and 4 would need 8; batch 3 is cut.
    const err = await assertRejects(
      () => trainer.fit(loader, { ackFn: async (ids) => void acked.push(...ids) }),
      /ended inside an accumulation window: 1 of 2/,
      'incomplete window',
    );
    assert(err instanceof IncompleteAccumulationError, err.name);
    assertEqual(acked.length, 4, 'only the completed window was acked');
    assertEqual((await controller.status()).durableAcked, 0, 'this ackFn records nothing durable');
    gpu.destroy();
  });
});
