/**
 * Training checkpoints (src/training/checkpoints/train-checkpoint.ts) on a small random EAGLE3 draft:
 * - resume gives the same loss curve: N + M optimizer steps in one go equal N steps → checkpoint →
 *   a fresh backend and model (other initial weights) → resume → M steps, loss by loss and weight
 *   by weight (cosine schedule with warmup and accumulation 2, so counters and moments matter);
 * - only complete folders are listed, saving step N deletes steps ≥ N, a damaged file is refused;
 * - resume refuses a durable ack step that is not the checkpoint step (using the checkpoint of the
 *   acked step when the newest one ran ahead of the ack), and a drifted run contract.
 */
import { makeTrainBatch, type TrainBatch } from '../../../src/contracts/index.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import type { Tensor } from '../../../src/gpu/tensor.ts';
import { EMBED_NAME, eagle3ParameterShapes, type Eagle3Config } from '../../../src/config/eagle3-config.ts';
import { Eagle3DraftModel } from '../../../src/model/eagle3/model.ts';
import { eagle3CheckpointExtras } from '../../../src/training/checkpoints/checkpoint-export.ts';
import { initialEagle3Weights } from '../../../src/model/eagle3/parameters.ts';
import type { FileStore } from '../../../src/ports/storage.ts';
import { Rng } from '../../../src/util/random.ts';
import { stableHash } from '../../../src/util/stable-hash.ts';
import { AdamWBackend, type OptimizerConfig } from '../../../src/optim/adamw-backend.ts';
import {
  COMPLETE_MARKER,
  latestCheckpoint,
  listCheckpoints,
  loadCheckpoint,
  saveCheckpoint,
  type RunContract,
} from '../../../src/training/checkpoints/train-checkpoint.ts';
import { resumeFromCheckpoint } from '../../../src/training/checkpoints/checkpoint-resume.ts';
import { Eagle3TrainStrategy } from '../../../src/training/strategies/eagle3.ts';
import { TrainerController, type BatchSource } from '../../../src/training/loop/trainer-controller.ts';
import { TrainerCore } from '../../../src/training/loop/trainer-core.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertRelClose } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';

const CONFIG: Eagle3Config = {
  hiddenSize: 64,
  intermediateSize: 96,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  vocabSize: 48,
  draftVocabSize: 16,
  targetHiddenSize: 24,
  rmsNormEps: 1e-5,
  ropeTheta: 10000,
  maxPositionEmbeddings: 64,
};
const B = 2;
const S = 9;
const TTT = 3;
const ACCUMULATION = 2;
const N = 3;
const M = 3;
const RUN = 'resume-test';
const OPTIMIZER: OptimizerConfig = {
  lr: 2e-3,
  beta1: 0.9,
  beta2: 0.999,
  eps: 1e-8,
  weightDecay: 0.01,
  maxGradNorm: 0.5,
  schedule: { kind: 'cosine', totalSteps: N + M, warmupRatio: 0.34 },
};
const CONTRACT: RunContract = {
  strategy: 'eagle3',
  tttLength: TTT,
  batchSize: B,
  accumulationSteps: ACCUMULATION,
  draftConfigHash: stableHash(CONFIG),
};

const USED = Array.from({ length: CONFIG.draftVocabSize }, (_, i) => 3 * i + 1);
const VOCAB = {
  t2d: Int32Array.from({ length: CONFIG.vocabSize }, (_, v) => (USED.includes(v) ? 1 : 0)),
  d2t: Int32Array.from(USED, (u, i) => u - i),
};
const EMBEDDING = new Rng(5).floats(CONFIG.vocabSize * CONFIG.hiddenSize, 1);

/** Micro-batch `i` of the deterministic stream: its own seed, so any suffix can be replayed. */
function makeBatch(gpu: Gpu, i: number): TrainBatch<Tensor> {
  const rng = new Rng(1000 + i);
  const c = CONFIG;
  const lengths = [S, S - 2 - (i % 3)];
  const attention = Int32Array.from({ length: B * S }, (_, r) => (r % S < lengths[Math.floor(r / S)] ? 1 : 0));
  const loss = Int32Array.from(attention, (m, r) => (r % S >= 1 && r % S < lengths[Math.floor(r / S)] - 1 ? m : 0));
  const target = rng.floats(B * S * c.vocabSize, 3);
  for (let r = 0; r < B * S; r++) target[r * c.vocabSize + USED[(r * 5 + i) % USED.length]] += 4;
  return makeTrainBatch({
    sampleIds: [`s${i}a`, `s${i}b`],
    strategy: 'eagle3',
    tensors: {
      input_ids: gpu.upload(
        [B, S],
        'i32',
        Int32Array.from({ length: B * S }, () => rng.int(0, c.vocabSize)),
        'input_ids',
      ),
      attention_mask: gpu.upload([B, S], 'i32', attention, 'attention_mask'),
      loss_mask: gpu.upload([B, S], 'i32', loss, 'loss_mask'),
      hidden_state: gpu.upload([B, S, 3 * c.targetHiddenSize], 'f32', rng.floats(B * S * 3 * c.targetHiddenSize, 1), 'hidden_state'),
      target: gpu.upload([B, S, c.vocabSize], 'f32', target, 'target'),
    },
    metadata: { targetRepr: 'logits', tttLength: TTT },
  });
}

/** The stream from micro-batch `start` to `end` (exclusive), uploaded lazily. */
function stream(gpu: Gpu, start: number, end: number): BatchSource {
  return {
    async *[Symbol.asyncIterator]() {
      for (let i = start; i < end; i++) yield makeBatch(gpu, i);
    },
  };
}

interface Trainer {
  backend: AdamWBackend;
  model: Eagle3DraftModel;
  core: TrainerCore;
  controller: TrainerController;
  destroy(): void;
}

function trainer(gpu: Gpu, initSeed: number): Trainer {
  const backend = new AdamWBackend(gpu, OPTIMIZER);
  const model = new Eagle3DraftModel(gpu, backend, CONFIG, initialEagle3Weights(CONFIG, EMBEDDING, new Rng(initSeed), 0.05), VOCAB);
  const core = new TrainerCore(new Eagle3TrainStrategy(model, { tttLength: TTT }), backend, ACCUMULATION);
  return {
    backend,
    model,
    core,
    controller: new TrainerController(gpu, core),
    destroy() {
      model.destroy();
      backend.destroy();
    },
  };
}

async function readWeights(gpu: Gpu, backend: AdamWBackend): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (const p of backend.params) out.set(p.name, (await gpu.read(p.value)) as Float32Array);
  return out;
}

/** The draft config (as config.json would spell it) and vocabulary, kept in the checkpoint for export. */
const EXTRAS = eagle3CheckpointExtras(
  {
    architectures: ['LlamaForCausalLMEagle3'],
    hidden_size: CONFIG.hiddenSize,
    intermediate_size: CONFIG.intermediateSize,
    num_attention_heads: CONFIG.numHeads,
    num_key_value_heads: CONFIG.numKvHeads,
    head_dim: CONFIG.headDim,
    vocab_size: CONFIG.vocabSize,
    draft_vocab_size: CONFIG.draftVocabSize,
    target_hidden_size: CONFIG.targetHiddenSize,
    rms_norm_eps: CONFIG.rmsNormEps,
    rope_theta: CONFIG.ropeTheta,
    max_position_embeddings: CONFIG.maxPositionEmbeddings,
  },
  VOCAB,
);

/** Train to `maxSteps`, checkpointing and durably acking at every optimizer boundary. */
async function trainWithCheckpoints(
  gpu: Gpu,
  t: Trainer,
  files: FileStore,
  meta: InMemoryMetadataStore,
  startBatch: number,
  maxSteps: number,
  dataRng: Rng,
): Promise<number[]> {
  const result = await t.controller.fit(stream(gpu, startBatch, (N + M) * ACCUMULATION), {
    maxSteps,
    startStep: t.controller.globalStep,
    beforeAck: async (step) => {
      dataRng.next(); // stands in for a sampler that draws once per optimizer step
      await saveCheckpoint(files, gpu, t.backend, {
        runId: RUN,
        globalStep: step,
        microStep: t.core.microStep,
        epoch: t.controller.epoch,
        data: { epochBatch: t.core.microStep, epochSamples: t.core.microStep * B, samplesConsumed: t.core.microStep * B },
        rng: { data: dataRng.saveState() },
        contract: CONTRACT,
        ...EXTRAS,
      });
    },
    ackFn: (ids, step) => meta.recordTrainAck(ids, { globalStep: step, optimizerDurable: true }),
  });
  return result.losses;
}

export default defineSuite('training/checkpoints/train-checkpoint', (t) => {
  t.test(
    'resume gives the same loss curve and the same weights as an uninterrupted run (EAGLE3, accumulation 2, cosine)',
    async ({ gpu: ctx, platform, note }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'ckpt-resume');
      try {
        // Uninterrupted: N + M steps.
        const whole = trainer(gpu, 1);
        const wholeLosses = (await whole.controller.fit(stream(gpu, 0, (N + M) * ACCUMULATION), { maxSteps: N + M })).losses;
        const wholeWeights = await readWeights(gpu, whole.backend);
        whole.destroy();
        assertEqual(wholeLosses.length, N + M, 'uninterrupted steps');

        // Interrupted: N steps with a checkpoint + durable ack at every boundary, then a "crash".
        const meta = new InMemoryMetadataStore();
        const dataRng = new Rng(77);
        const first = trainer(gpu, 1);
        const firstLosses = await trainWithCheckpoints(gpu, first, tmp.files, meta, 0, N, dataRng);
        const rngAtCrash = dataRng.saveState();
        first.destroy();
        assertDeepEqual(firstLosses, wholeLosses.slice(0, N), 'the first N losses are the same run');
        assertDeepEqual(
          (await listCheckpoints(tmp.files, RUN)).map((r) => r.step),
          [1, 2, 3],
          'one checkpoint per step',
        );

        // Fresh process: other initial weights, everything restored from the checkpoint.
        const second = trainer(gpu, 999);
        const resumed = await resumeFromCheckpoint(tmp.files, gpu, second.backend, {
          runId: RUN,
          marker: await meta.durableMarker(),
          contract: CONTRACT,
        });
        assert(resumed, 'a checkpoint to resume from');
        const s = resumed.state;
        assertEqual(s.globalStep, N, 'global step');
        assertEqual(s.optimizerStep, N, 'optimizer step');
        assertEqual(s.microStep, N * ACCUMULATION, 'micro step');
        assertDeepEqual(
          s.data,
          { epochBatch: N * ACCUMULATION, epochSamples: N * ACCUMULATION * B, samplesConsumed: N * ACCUMULATION * B },
          'data position',
        );
        assertEqual(s.rng.data, rngAtCrash, 'rng state');
        assertDeepEqual(s.optimizer, OPTIMIZER, 'optimizer + schedule config');
        assertDeepEqual([...resumed.buffers.i32('t2d')], [...VOCAB.t2d], 't2d buffer');
        assertDeepEqual([...resumed.buffers.i32('d2t')], [...VOCAB.d2t], 'd2t buffer');
        assertEqual(second.backend.step, N, 'backend step restored');
        second.core.microStep = s.microStep;
        second.controller.globalStep = s.globalStep;
        second.controller.epoch = s.epoch;
        const secondLosses = await trainWithCheckpoints(gpu, second, tmp.files, meta, s.data.epochBatch, N + M, Rng.fromState(s.rng.data));
        const secondWeights = await readWeights(gpu, second.backend);
        second.destroy();

        assertEqual(secondLosses.length, M, 'resumed steps');
        let worstLoss = 0;
        for (let i = 0; i < M; i++)
          worstLoss = Math.max(worstLoss, assertRelClose([secondLosses[i]], [wholeLosses[N + i]], 1e-6, `loss of step ${N + i + 1}`));
        let worstWeight = 0;
        for (const [name, w] of wholeWeights)
          worstWeight = Math.max(worstWeight, assertRelClose(secondWeights.get(name)!, w, 1e-6, `weight ${name}`));
        note('lossRelErr', worstLoss.toExponential(2));
        note('weightRelErr', worstWeight.toExponential(2));
        note('losses', wholeLosses.map((l) => l.toFixed(5)).join(' '));
        assertEqual((await latestCheckpoint(tmp.files, RUN))?.step, N + M, 'latest checkpoint');
      } finally {
        await tmp.cleanup();
        gpu.destroy();
      }
    },
    { timeoutMs: 600_000 },
  );

  t.test(
    'listing sees only complete folders; saving step N deletes steps ≥ N; damage and drift are refused',
    async ({ gpu: ctx, platform }) => {
      const gpu = new Gpu(ctx);
      const tmp = tempStore(platform, 'ckpt-rules');
      const files = tmp.files;
      const tr = trainer(gpu, 3);
      try {
        const save = (step: number, contract = CONTRACT) =>
          saveCheckpoint(files, gpu, tr.backend, {
            runId: RUN,
            globalStep: step,
            microStep: step * 2,
            epoch: 0,
            data: { epochBatch: step * 2, epochSamples: step * 4, samplesConsumed: step * 4 },
            contract,
          });
        for (const step of [2, 4, 6]) await save(step);
        // Another run's folders and look-alikes are not ours.
        await files.writeAtomic('other-run-step9/COMPLETE', new TextEncoder().encode('{}'));
        await files.writeAtomic(`${RUN}-step07x/COMPLETE`, new TextEncoder().encode('{}'));
        // A save that crashed before its marker: invisible.
        await files.writeAtomic(`${RUN}-step8/state.json`, new TextEncoder().encode('{}'));
        assertDeepEqual(
          (await listCheckpoints(files, RUN)).map((r) => r.step),
          [2, 4, 6],
          'complete steps only',
        );

        // Rollback: re-saving step 4 removes 4 (old), 6 and the incomplete 8.
        await save(4);
        assertDeepEqual(
          (await listCheckpoints(files, RUN)).map((r) => r.step),
          [2, 4],
          'after rollback to 4',
        );
        assertEqual(await files.exists(`${RUN}-step6`), false, 'step 6 deleted');
        assertEqual(await files.exists(`${RUN}-step8/state.json`), false, 'incomplete step 8 deleted');
        assertEqual(await files.exists('other-run-step9/COMPLETE'), true, 'other runs untouched');

        const marker = (globalStep: number | null) => ({ globalStep, optimizerDurable: true });
        await assertRejects(
          () => resumeFromCheckpoint(files, gpu, tr.backend, { runId: RUN, marker: marker(5), contract: CONTRACT }),
          /durable ack step is 5 but the latest complete checkpoint .*step4.* is step 4/,
          'ack ahead of the checkpoint',
        );
        await assertRejects(
          () => resumeFromCheckpoint(files, gpu, tr.backend, { runId: RUN, marker: marker(null), contract: CONTRACT }),
          /durable ack step is unset/,
          'no ack at all',
        );
        // A crash between the save of step 4 and its ack: the checkpoint of the acked step 2 is used.
        const behind = await resumeFromCheckpoint(files, gpu, tr.backend, { runId: RUN, marker: marker(2), contract: CONTRACT });
        assertEqual(behind?.state.globalStep, 2, 'checkpoint of the acked step');
        await assertRejects(
          () => resumeFromCheckpoint(files, gpu, tr.backend, { runId: RUN, marker: marker(3), contract: CONTRACT }),
          /durable ack step is 3 but the latest complete checkpoint/,
          'no checkpoint of the acked step',
        );
        // The acked step's COMPLETE marker deleted after the fact: named as damage, not as acks running ahead.
        const complete4 = await files.read(`${RUN}-step4/COMPLETE`);
        await files.remove(`${RUN}-step4/COMPLETE`);
        await assertRejects(
          () => resumeFromCheckpoint(files, gpu, tr.backend, { runId: RUN, marker: marker(4), contract: CONTRACT }),
          new RegExp(
            `durably acked step 4, whose checkpoint is written first, but .*${RUN}-step4 has no valid COMPLETE marker: that checkpoint was damaged`,
          ),
          'deleted COMPLETE of the acked step',
        );
        await files.writeAtomic(`${RUN}-step4/COMPLETE`, complete4);
        await assertRejects(
          () =>
            resumeFromCheckpoint(files, gpu, tr.backend, {
              runId: RUN,
              marker: marker(4),
              contract: { ...CONTRACT, accumulationSteps: 4 },
            }),
          /run contract drifted \(accumulationSteps: checkpoint 2, this run 4\)/,
          'accumulation drift',
        );
        await assertRejects(
          () =>
            resumeFromCheckpoint(files, gpu, tr.backend, {
              runId: RUN,
              marker: marker(4),
              contract: { ...CONTRACT, tttLength: 7, draftConfigHash: 'x' },
            }),
          /tttLength: checkpoint 3, this run 7; draftConfigHash/,
          'ttt + config drift',
        );
        await assertRejects(
          () => resumeFromCheckpoint(files, gpu, tr.backend, { runId: 'never-saved', marker: marker(3), contract: CONTRACT }),
          /acked step 3 but .* holds no complete checkpoint/,
          'acks without checkpoint',
        );
        assertEqual(
          await resumeFromCheckpoint(files, gpu, tr.backend, { runId: 'never-saved', marker: marker(null), contract: CONTRACT }),
          undefined,
          'fresh run',
        );
        // A crash between the FIRST save and its ack: nothing is acked, so the run starts over.
        await saveCheckpoint(files, gpu, tr.backend, {
          runId: 'first-save',
          globalStep: 2,
          microStep: 4,
          epoch: 0,
          data: { epochBatch: 4, epochSamples: 8, samplesConsumed: 8 },
          contract: CONTRACT,
        });
        assertEqual(
          await resumeFromCheckpoint(files, gpu, tr.backend, { runId: 'first-save', marker: marker(null), contract: CONTRACT }),
          undefined,
          'first save, ack lost: start over',
        );

        // A changed optimizer schedule is drift too.
        const other = new AdamWBackend(gpu, { ...OPTIMIZER, schedule: { ...OPTIMIZER.schedule, totalSteps: 99 } });
        await assertRejects(
          () => resumeFromCheckpoint(files, gpu, other, { runId: RUN, marker: marker(4), contract: CONTRACT }),
          /schedule.totalSteps: checkpoint 6, this run 99/,
          'schedule drift',
        );
        other.destroy();

        // Damage after the marker was written is caught by the recorded CRC.
        const ref = (await latestCheckpoint(files, RUN))!;
        const bytes = await files.read(`${ref.dir}/optimizer.safetensors`);
        bytes[bytes.length - 1] ^= 0xff;
        await files.writeAtomic(`${ref.dir}/optimizer.safetensors`, bytes);
        await assertRejects(() => loadCheckpoint(files, ref), /optimizer\.safetensors: .*CRC-32.*damaged/, 'damaged file');
        const marked = JSON.parse(new TextDecoder().decode(await files.read(`${ref.dir}/${COMPLETE_MARKER}`))) as { step: number };
        assertEqual(marked.step, 4, 'marker records its step');
        // Parameters are checked by name against the model.
        await save(5);
        const probe = new AdamWBackend(gpu, OPTIMIZER);
        for (const [name, shape] of eagle3ParameterShapes(CONFIG).slice(1))
          probe.addParameter(name, shape, new Float32Array(shape.reduce((a, b) => a * b, 1)));
        await assertRejects(
          () => resumeFromCheckpoint(files, gpu, probe, { runId: RUN, marker: marker(5), contract: CONTRACT }),
          /parameter keys drifted \(in the checkpoint only: fc\.weight\)/,
          'key drift',
        );
        probe.destroy();
        assert(!eagle3ParameterShapes(CONFIG).some(([n]) => n === EMBED_NAME), 'the frozen embedding is never a checkpointed parameter');
      } finally {
        tr.destroy();
        await tmp.cleanup();
        gpu.destroy();
      }
    },
    { timeoutMs: 300_000 },
  );
});
