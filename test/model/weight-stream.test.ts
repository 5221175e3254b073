/**
 * Target weights streamed onto the GPU slice by slice (src/model/target/weight-stream.ts,
 * TargetModel.load) against the whole-array upload (uploadTargetWeights): every GPU tensor is
 * bit-identical, at f32 and f16 precision, from a sharded BF16 checkpoint, with slices of a few rows
 * and tensors split into parts at a lowered binding limit; the byte progress climbs to the total;
 * a refused tensor mid-stream names itself and leaves no GPU buffer behind; and the loaded model
 * gives the logits of the uploaded one.
 */
import { HfCheckpointSource } from '../../src/formats/hf-checkpoint-source.ts';
import { loadHfCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/formats/safetensors-writer.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { streamTargetWeights } from '../../src/model/target/weight-stream.ts';
import { releaseTargetWeights, uploadTargetWeights, type GpuTargetWeights } from '../../src/model/target/weights.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { encodeTensor, qwen3Config, writeRandomCheckpoint } from './synthetic-checkpoint.ts';

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

/** Every tensor of a weight set, by name, in a fixed order. */
function named(w: GpuTargetWeights): [string, Tensor][] {
  const out: [string, Tensor][] = [
    ['embed', w.embedTokens],
    ['norm', w.finalNorm],
    ['lm_head', w.lmHead],
  ];
  w.layers.forEach((l, i) => {
    for (const [k, v] of Object.entries(l)) if (v) out.push([`layer ${i} ${k}`, v as Tensor]);
  });
  return out;
}

export default defineSuite('model/weight-stream', (t) => {
  t.test(
    'streamed slice by slice (split at a 2 KiB binding, 256-byte slices, 3 BF16 shards) = uploaded whole, bit for bit, f32 and f16',
    async ({ gpu: ctx, platform }) => {
      const tmp = tempStore(platform, 'weight-stream');
      const gpu = new Gpu(ctx);
      Object.defineProperty(gpu, 'maxBindingBytes', { value: 2048 });
      try {
        const config = qwen3Config({ tie_word_embeddings: false });
        await writeRandomCheckpoint(tmp.files, 'one', config, 21, 'BF16');
        const file = new SafetensorsFile(await tmp.files.read('one/model.safetensors'));
        const shards: Record<string, TensorToWrite>[] = [{}, {}, {}];
        const weightMap: Record<string, string> = {};
        file.names.forEach((name, i) => {
          shards[i % 3][name] = encodeTensor(file.f32(name), file.shape(name), 'BF16');
          weightMap[name] = `model-0000${(i % 3) + 1}-of-00003.safetensors`;
        });
        await tmp.files.writeAtomic('m/config.json', encode(config));
        for (const s of [0, 1, 2]) await tmp.files.writeAtomic(`m/model-0000${s + 1}-of-00003.safetensors`, writeSafetensors(shards[s]));
        await tmp.files.writeAtomic('m/model.safetensors.index.json', encode({ weight_map: weightMap }));
        const source = await HfCheckpointSource.open(tmp.files, 'm');
        for (const precision of ['f32', 'f16'] as const) {
          const whole = await loadHfCheckpoint(tmp.files, 'm', { weightPrecision: precision });
          const uploaded = uploadTargetWeights(gpu, whole.config, whole.weights, precision);
          const progress: number[] = [];
          const streamed = await streamTargetWeights(gpu, source, precision, {
            sliceBytes: 256,
            onProgress: (done) => progress.push(done),
          });
          const a = named(uploaded);
          const b = named(streamed);
          assertDeepEqual(
            b.map(([n]) => n),
            a.map(([n]) => n),
            `${precision}: the same tensors`,
          );
          assert(streamed.embedTokens.isChunked, `${precision}: the embedding is split into parts`);
          for (const [i, [name, tensor]] of b.entries()) {
            assertEqual(tensor.dtype, a[i][1].dtype, `${precision} ${name}: dtype`);
            assertDeepEqual([...(await gpu.read(tensor))], [...(await gpu.read(a[i][1]))], `${precision} ${name}: bits`);
          }
          assert(progress.length > source.tensors.length, `${precision}: progress per slice (${progress.length} reports)`);
          assert(
            progress.every((p, i) => i === 0 || p >= progress[i - 1]),
            `${precision}: progress never goes back`,
          );
          assertEqual(progress.at(-1), source.totalBytes, `${precision}: progress ends at the total`);
          releaseTargetWeights(gpu, uploaded);
          releaseTargetWeights(gpu, streamed);
        }
        assertEqual(gpu.pool.stats().liveBuffers, 0, 'nothing leaked');
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
  );

  t.test('a tensor refused mid-stream names itself and releases every tensor streamed before it', async ({ gpu: ctx, platform }) => {
    const tmp = tempStore(platform, 'weight-stream-bad');
    const gpu = new Gpu(ctx);
    try {
      const config = qwen3Config();
      await writeRandomCheckpoint(tmp.files, 'ok', config, 22);
      const file = new SafetensorsFile(await tmp.files.read('ok/model.safetensors'));
      const tensors: Record<string, TensorToWrite> = {};
      for (const name of file.names) {
        const v = Float32Array.from(file.f32(name));
        if (name === 'model.layers.1.mlp.gate_proj.weight') v[v.length - 3] = Number.POSITIVE_INFINITY;
        tensors[name] = encodeTensor(v, file.shape(name), 'F32');
      }
      await tmp.files.writeAtomic('bad/config.json', encode(config));
      await tmp.files.writeAtomic('bad/model.safetensors', writeSafetensors(tensors));
      const source = await HfCheckpointSource.open(tmp.files, 'bad');
      const before = gpu.pool.stats().liveBuffers;
      await assertRejects(
        () => TargetModel.load(gpu, source, { weightPrecision: 'f32' }),
        /tensor "model\.layers\.1\.mlp\.gate_proj\.weight"/,
        'the tensor is named',
      );
      assertEqual(gpu.pool.stats().liveBuffers, before, 'every streamed tensor released');
    } finally {
      gpu.destroy();
      await tmp.cleanup();
    }
  });

  t.test('a loaded model gives the uploaded model’s logits bit for bit', async ({ gpu: ctx, platform }) => {
    const tmp = tempStore(platform, 'weight-stream-model');
    const gpu = new Gpu(ctx);
    try {
      await writeRandomCheckpoint(tmp.files, 'm', qwen3Config(), 23, 'BF16');
      const loaded = await TargetModel.load(gpu, await HfCheckpointSource.open(tmp.files, 'm'), { weightPrecision: 'f16' });
      const created = TargetModel.create(gpu, await loadHfCheckpoint(tmp.files, 'm', { weightPrecision: 'f16' }));
      const input = { inputIds: [3, 1, 4, 1, 5, 9, 2, 6], batch: 1, seqLen: 8 };
      const a = await loaded.forward(input, { logits: true });
      const b = await created.forward(input, { logits: true });
      assertDeepEqual([...(await gpu.read(a.logits!))], [...(await gpu.read(b.logits!))], 'logits');
      gpu.release(a.logits!, b.logits!, ...a.hiddenStates.values(), ...b.hiddenStates.values());
      loaded.destroy();
      created.destroy();
    } finally {
      gpu.destroy();
      await tmp.cleanup();
    }
  });
});
