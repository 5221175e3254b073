/**
 * EAGLE3 training on f16 features against f32 features (--feature-precision): the SpecForge fixture
 * batch trained for a few AdamW steps once from its f32 features and once from the same features
 * stored as f16 (cast on the GPU as the capture casts them, widened by the strategy before the
 * forward). At every step the f16 run's loss equals the float64 reference evaluated, at that step's
 * weights, on the f16-rounded features (within the GPU's f32 error, 1e-5), and the f16 and f32
 * runs' losses agree within 1e-4 relative (the effect of rounding the features to f16; measured
 * 1.5e-7 on llvmpipe: the features move by up to 2^-11 relative, the loss far less).
 */
import { prepareCommand } from '../../../src/cli/prepare.ts';
import { parseTrainFlags, trainCommand, validateTrainConfig } from '../../../src/cli/train.ts';
import { normalizeConfigKeys } from '../../../src/cli/train-options.ts';
import { makeTrainBatch, type TrainBatch } from '../../../src/contracts/index.ts';
import { readOfflineManifest, shardPath } from '../../../src/data/offline-eagle3.ts';
import { SafetensorsFile } from '../../../src/formats/safetensors.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import type { Tensor } from '../../../src/gpu/tensor.ts';
import { toFeaturePrecision } from '../../../src/inference/capture.ts';
import { Eagle3DraftModel } from '../../../src/model/eagle3/model.ts';
import { AdamWBackend } from '../../../src/optim/adamw-backend.ts';
import { castF16ToF32Ref, castF32ToF16Ref } from '../../../src/reference/cast.ts';
import { eagle3StepReference } from '../../../src/reference/eagle3.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import { Eagle3TrainingSession, sessionSettingsSchema } from '../../../src/training/session/eagle3-session.ts';
import { asWidened, precisionContract, widenF16Features } from '../../../src/training/loop/feature-precision.ts';
import { Rng } from '../../../src/util/random.ts';
import { Eagle3TrainStrategy } from '../../../src/training/strategies/eagle3.ts';
import { TrainerCore } from '../../../src/training/loop/trainer-core.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows, relativeError } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { FIXTURE_OPTIMIZER, loadEagle3Fixture, uploadFixtureInputs, type Eagle3Fixture } from '../../model/eagle3-fixture.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

const STEPS = 3;
/** f16 vs f32 features (measured 1.5e-7 here; the bound leaves room for larger draft inputs). */
const F16_VS_F32 = 1e-4;
/** GPU f32 vs float64 on the same (f16-rounded) features, as every EAGLE3 step test holds it. */
const GPU_VS_REFERENCE = 1e-5;

/** The command-line parser of prepare and train runs in Node and Deno only. */
const CLI_ONLY = { only: ['node', 'deno'] as const };

const roundToF16 = (x: ArrayLike<number>) => castF16ToF32Ref(castF32ToF16Ref(x).bits);

async function batchOf(gpu: Gpu, fx: Eagle3Fixture, precision: 'f32' | 'f16'): Promise<TrainBatch<Tensor>> {
  const x = uploadFixtureInputs(gpu, fx);
  const floats = await toFeaturePrecision(gpu, { hidden_state: x.hiddenStates, target: x.target }, precision, 'fixture');
  return makeTrainBatch({
    sampleIds: ['s0', 's1'],
    strategy: 'eagle3',
    tensors: { input_ids: x.inputIds, attention_mask: x.attentionMask, loss_mask: x.lossMask, ...floats },
    metadata: { targetRepr: 'logits', tttLength: fx.inputs.tttLength },
  });
}

/** STEPS trainer steps on the fixture batch in `precision`; per step the loss and the float64 loss at the step's weights. */
async function train(gpu: Gpu, fx: Eagle3Fixture, precision: 'f32' | 'f16'): Promise<{ losses: number[]; reference: number[] }> {
  const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
  const model = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
  const core = new TrainerCore(new Eagle3TrainStrategy(model, { tttLength: fx.inputs.tttLength, gpu }), backend, 1);
  const batch = await batchOf(gpu, fx, precision);
  assertEqual(batch.tensors.hidden_state.dtype, precision, 'stored precision');
  const features = precision === 'f16' ? { hiddenStates: roundToF16(fx.inputs.hiddenStates), target: roundToF16(fx.inputs.target) } : {};
  const losses: number[] = [];
  const reference: number[] = [];
  for (let step = 0; step < STEPS; step++) {
    const weights: Record<string, Float32Array> = { ...fx.params };
    for (const name of fx.trainable) weights[name] = (await gpu.read(backend.param(name).value)) as Float32Array;
    reference.push(eagle3StepReference(fx.config, weights, { ...fx.inputs, ...features }, { withGrad: false }).totalLoss);
    const r = await core.trainStep(batch);
    assert(r.optimizerStepped, `step ${step + 1} stepped`);
    losses.push(await r.loss);
  }
  gpu.release(...Object.values(batch.tensors));
  model.destroy();
  backend.destroy();
  return { losses, reference };
}

export default defineSuite('training/loop/feature-precision', (t) => {
  t.test(
    'an f16 batch split over its B·S rows (one sequence larger than a binding) is checked and widened as split',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      try {
        // 1 KiB: an f16 [3, 200] slab (1200 B) exceeds it, so the [2, 3, 200] batch splits over its 6 rows of 400 B (its f32 rows of 800 B fit).
        Object.defineProperty(gpu, 'maxBindingBytes', { value: 1024 });
        const values = new Rng(4).floats(2 * 3 * 200, 2);
        const half = gpu.upload([2, 3, 200], 'f16', castF32ToF16Ref(values).bits, 'target');
        assertEqual(half.splitDims, 2, 'split over B·S');
        const view = asWidened(half);
        assertEqual(view.splitDims, 2, 'the f32 view keeps the split');
        const { tensors, made } = await widenF16Features(gpu, { target: half }, ['target'], 'test batch');
        assertDeepEqual(
          [...(await gpu.read(tensors.target))],
          [...castF16ToF32Ref(castF32ToF16Ref(values).bits)],
          'widened exactly across the split',
        );
        gpu.release(half, ...made);
      } finally {
        gpu.destroy();
      }
    },
  );

  t.test(
    `${STEPS} EAGLE3 steps from f16 features: the float64 loss on f16-rounded features at every step, and the f32 run's losses within ${F16_VS_F32}`,
    async ({ gpu: ctx, fixture, note }) => {
      const gpu = new Gpu(ctx);
      const fx = await loadEagle3Fixture(fixture, '');
      const f32 = await train(gpu, fx, 'f32');
      const f16 = await train(gpu, fx, 'f16');
      const vsReference = Math.max(...f16.losses.map((l, i) => Math.abs(l - f16.reference[i]) / Math.abs(f16.reference[i])));
      const f32VsReference = Math.max(...f32.losses.map((l, i) => Math.abs(l - f32.reference[i]) / Math.abs(f32.reference[i])));
      const f16VsF32 = Math.max(...f16.losses.map((l, i) => Math.abs(l - f32.losses[i]) / Math.abs(f32.losses[i])));
      note('f32Losses', f32.losses.map((x) => x.toFixed(6)).join(' '));
      note('f16Losses', f16.losses.map((x) => x.toFixed(6)).join(' '));
      note('f16VsFloat64OnF16Features', vsReference.toExponential(2));
      note('f16VsF32', f16VsF32.toExponential(2));
      assert(vsReference <= GPU_VS_REFERENCE, `f16 run vs float64 on f16-rounded features: ${vsReference} > ${GPU_VS_REFERENCE}`);
      assert(f32VsReference <= GPU_VS_REFERENCE, `f32 run vs float64 on f32 features: ${f32VsReference} > ${GPU_VS_REFERENCE}`);
      assert(f16VsF32 <= F16_VS_F32, `f16 vs f32 losses: ${f16VsF32} > ${F16_VS_F32}`);
      assert(relativeError(roundToF16(fx.inputs.hiddenStates), fx.inputs.hiddenStates) > 1e-5, 'f16 rounding changes the features');
      // The rounding moves the float64 loss (by about 1e-7 relative, at f32's own resolution, so the two GPU
      // runs' f32 losses may read back equal on some adapters); the f16 run matches the rounded reference above.
      assert(relativeError(f16.reference, f32.reference) > 0, 'f16 rounding moves the float64 loss');
      assert(f16.losses[STEPS - 1] < f16.losses[0], 'the f16 run learns');
      gpu.destroy();
    },
    { timeoutMs: 300_000 },
  );

  t.test(
    'an f16 batch needs the draft Gpu to be widened; the contract names f16 and leaves f32 as it was',
    async ({ gpu: ctx, fixture }) => {
      const gpu = new Gpu(ctx);
      const fx = await loadEagle3Fixture(fixture, '');
      const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
      const model = new Eagle3DraftModel(gpu, backend, fx.config, fx.params, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
      const batch = await batchOf(gpu, fx, 'f16');
      const strategy = new Eagle3TrainStrategy(model, { tttLength: fx.inputs.tttLength });
      strategy.validateBatch(batch);
      await assertRejects(
        () => strategy.forwardBackward(batch, 1),
        /eagle3: batch \[s0, s1\]: f16 feature target \[2, \d+, \d+\] needs the draft's Gpu/,
        'no Gpu to widen with',
      );
      assertDeepEqual(precisionContract('f32'), {}, 'f32 adds nothing to the contract');
      assertDeepEqual(precisionContract('f16'), { featurePrecision: 'f16' }, 'f16 is part of the contract');
      gpu.release(...Object.values(batch.tensors));
      model.destroy();
      backend.destroy();
      gpu.destroy();
    },
  );

  t.test(
    'speclab prepare --feature-precision f16 writes F16 shards (the f16 of the f32 ones) that train --offline trains like the f32 ones',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'f16-prepare');
      const root = tmp.files.root;
      const quiet = () => undefined;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const prepare = [
          '--target',
          `${root}/target`,
          '--train-prompts',
          '4',
          '--eval-prompts',
          '1',
          '--prompt-length',
          '5',
          '--response-length',
          '6',
        ];
        const lines: string[] = [];
        assertEqual(await prepareCommand(ctx.platform, [...prepare, '--out', `${root}/f32`], quiet, ctx.gpu), 0, 'prepare f32');
        assertEqual(
          await prepareCommand(
            ctx.platform,
            [...prepare, '--out', `${root}/f16`, '--feature-precision', 'f16'],
            (l) => lines.push(l),
            ctx.gpu,
          ),
          0,
          'prepare f16',
        );
        assert(
          lines.some((l) => /^prepared 4 f16 shards/.test(l)),
          `prepare summary:\n${lines.join('\n')}`,
        );
        assertEqual((await readOfflineManifest(ctx.platform.files(`${root}/f16`))).featurePrecision, 'f16', 'manifest records f16');
        assertEqual(
          (await readOfflineManifest(ctx.platform.files(`${root}/f32`))).featurePrecision,
          undefined,
          'an f32 manifest is as before',
        );
        for (let i = 0; i < 4; i++) {
          const wide = new SafetensorsFile(await tmp.files.read(`f32/${shardPath(i)}`));
          const half = new SafetensorsFile(await tmp.files.read(`f16/${shardPath(i)}`));
          for (const name of ['hidden_state', 'aux_hidden_state']) {
            assertEqual(half.entry(name).dtype, 'F16', `shard ${i} ${name} dtype`);
            const want = castF32ToF16Ref(wide.f32(name)).bits;
            const raw = half.raw(name).slice();
            assertEqual(new Uint16Array(raw.buffer).join(), want.join(), `shard ${i} ${name}: the f16 of the f32 shard`);
          }
          assertEqual(half.i32('input_ids').join(), wide.i32('input_ids').join(), `shard ${i} ids`);
        }
        const losses = async (features: string): Promise<number[]> => {
          const train = [
            '--offline',
            `${root}/${features}`,
            '--out',
            `${root}/run-${features}`,
            '--epochs',
            '1',
            '--batch-size',
            '2',
            '--max-new-tokens',
            '2',
            '--eval-train-prompts',
            '0',
            '--eval-every',
            '0',
          ];
          await trainCommand(ctx.platform, train, quiet, ctx.gpu);
          const log = new TextDecoder()
            .decode(await tmp.files.read(`run-${features}/metrics.jsonl`))
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as { phase?: string; loss?: number });
          return log.filter((r) => r.phase === 'train').map((r) => r.loss!);
        };
        const f32 = await losses('f32');
        const f16 = await losses('f16');
        assertEqual(f16.length, 2, 'two steps from the f16 shards');
        const diff = Math.max(...f16.map((l, i) => Math.abs(l - f32[i]) / Math.abs(f32[i])));
        ctx.note('offlineF16VsF32', diff.toExponential(2));
        assert(diff <= F16_VS_F32, `offline f16 vs f32 losses differ by ${diff}`);
      } finally {
        await tmp.cleanup();
      }
    },
    { ...CLI_ONLY, timeoutMs: 600_000 },
  );

  t.test(
    'a training session with featurePrecision f16 spills F16 features, trains like f32 and has its own run contract',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'f16-session');
      const gpu = new Gpu(ctx.gpu);
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const checkpoint = await loadHfCheckpoint(tmp.files, 'target');
        const target = TargetModel.create(gpu, checkpoint);
        const rng = new Rng(5);
        const prompts = Array.from({ length: 4 }, () => Array.from({ length: 5 }, () => rng.int(0, checkpoint.config.vocabSize)));
        const run = async (featurePrecision: 'f32' | 'f16') => {
          const root = `${tmp.files.root}/${featurePrecision}`;
          const settings = sessionSettingsSchema.parse({
            epochs: 1,
            roundPrompts: 4,
            batchSize: 2,
            tttLength: 3,
            responseLength: 6,
            seed: 2,
            featurePrecision,
          });
          const spill = ctx.platform.files(`${root}/spill`);
          const session = await Eagle3TrainingSession.open({
            gpu,
            target,
            trainPrompts: prompts,
            settings,
            runId: 'fp',
            now: () => performance.now(),
            storage: { checkpoints: ctx.platform.files(`${root}/checkpoints`), metadata: new InMemoryMetadataStore(), spill },
          });
          const losses = [(await session.step())!.loss];
          // The second sample pair is still spilled (not yet trained or acked).
          const [file] = await spill.list('');
          const spilled = new SafetensorsFile(await spill.read(file));
          const dtypes = [spilled.entry('hidden_state').dtype, spilled.entry('target').dtype];
          for (let st = await session.step(); st; st = await session.step()) losses.push(st.loss);
          const contract = session.contract;
          session.destroy();
          return { losses, dtypes, contract };
        };
        const f32 = await run('f32');
        const f16 = await run('f16');
        assertDeepEqual(f32.dtypes, ['F32', 'F32'], 'f32 spill');
        assertDeepEqual(f16.dtypes, ['F16', 'F16'], 'f16 spill');
        assertEqual(f16.losses.length, 2, 'two steps');
        const diff = Math.max(...f16.losses.map((l, i) => Math.abs(l - f32.losses[i]) / Math.abs(f32.losses[i])));
        ctx.note('sessionF16VsF32', diff.toExponential(2));
        assert(diff <= F16_VS_F32, `session f16 vs f32 losses differ by ${diff}`);
        assert(f16.contract.draftConfigHash !== f32.contract.draftConfigHash, 'an f16 checkpoint does not resume as f32');
        assertEqual(f16.contract.dataHash, f32.contract.dataHash, 'same sequences');
        target.destroy();
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { timeoutMs: 600_000 },
  );

  t.test(
    '--feature-precision: f32 by default, f16 from the flag or a config key, anything else refused naming the flag',
    () => {
      assertEqual(validateTrainConfig({}).featurePrecision, 'f32', 'default');
      assertEqual(parseTrainFlags(['--feature-precision', 'f16']).values.featurePrecision, 'f16', 'flag');
      assertDeepEqual(normalizeConfigKeys({ feature_precision: 'f16' }, 'run.json'), { featurePrecision: 'f16' }, 'snake_case config key');
      assertThrows(
        () => parseTrainFlags(['--feature-precision', 'bf16']),
        /--feature-precision: must be f32 or f16, got "bf16"/,
        'bf16 refused',
      );
      assertThrows(
        () => validateTrainConfig({ featurePrecision: 'f8' }),
        /featurePrecision \(--feature-precision\)/,
        'a config value refused naming the flag',
      );
    },
    CLI_ONLY,
  );
});
