/**
 * HfCheckpointSource (src/formats/hf-checkpoint-source.ts): a model directory opened from its config
 * and headers alone, then read by row ranges. Every slice of rows, converted to f32 or to f16 bits,
 * equals the same rows of the whole tensor read at once, for F32, BF16 and F16 files and sharded
 * checkpoints; a slice outside the tensor, or a bad value inside one, is refused naming the tensor.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { HfCheckpointSource } from '../../src/formats/hf-checkpoint-source.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/formats/safetensors-writer.ts';
import { tempStore } from '../data/temp-store.ts';
import { encodeTensor, qwen3Config, writeRandomCheckpoint } from '../model/synthetic-checkpoint.ts';
import { f32ToF16Ref } from '../../src/reference/cast.ts';

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

export default defineSuite('formats/hf-checkpoint-source', (t) => {
  t.test(
    'opens from the headers only; slices of rows equal the whole tensor read at once, f32 and f16, F32/BF16/F16 files',
    async ({ platform }) => {
      const tmp = tempStore(platform, 'source-slices');
      try {
        const config = qwen3Config({ tie_word_embeddings: false });
        await writeRandomCheckpoint(tmp.files, 'f32', config, 7);
        const file = new SafetensorsFile(await tmp.files.read('f32/model.safetensors'));
        for (const dtype of ['F32', 'BF16', 'F16'] as const) {
          const tensors: Record<string, TensorToWrite> = {};
          for (const name of file.names) {
            const v = file.f32(name);
            tensors[name] =
              dtype === 'F16'
                ? { dtype, shape: file.shape(name), data: new Uint8Array(Uint16Array.from(v, f32ToF16Ref).buffer) }
                : encodeTensor(v, file.shape(name), dtype);
          }
          await tmp.files.writeAtomic(`${dtype}/config.json`, encode(config));
          await tmp.files.writeAtomic(`${dtype}/model.safetensors`, writeSafetensors(tensors));
          const source = await HfCheckpointSource.open(tmp.files, dtype);
          assertEqual(source.tensors.length, file.names.length, `${dtype}: every tensor is used`);
          assertEqual(
            source.totalBytes,
            source.tensors.reduce((a, s) => a + source.entry(s.name).end - source.entry(s.name).begin, 0),
            `${dtype}: total bytes`,
          );
          for (const name of ['model.embed_tokens.weight', 'model.layers.1.mlp.down_proj.weight', 'model.norm.weight']) {
            const rows = source.tensors.find((s) => s.name === name)!.shape[0];
            for (const format of ['f32', 'f16'] as const) {
              const whole = await source.readRows(name, 0, rows, format);
              const width = whole.length / rows;
              // Uneven slices: 3 rows, then the rest in 5s.
              const parts: number[] = [];
              for (let r = 0; r < rows; r += r === 0 ? 3 : 5) {
                const n = Math.min(r === 0 ? 3 : 5, rows - r);
                parts.push(...(await source.readRows(name, r, n, format)));
              }
              assertDeepEqual(parts, [...whole], `${dtype} ${name} as ${format}: slices = whole`);
              assertEqual(whole.length, rows * width, `${dtype} ${name}: whole rows`);
            }
          }
        }
      } finally {
        await tmp.cleanup();
      }
    },
  );

  t.test('sharded: tensors are read from the shard the index names', async ({ platform }) => {
    const tmp = tempStore(platform, 'source-shards');
    try {
      const config = qwen3Config();
      await writeRandomCheckpoint(tmp.files, 'one', config, 8, 'BF16');
      const file = new SafetensorsFile(await tmp.files.read('one/model.safetensors'));
      const shards: Record<string, TensorToWrite>[] = [{}, {}, {}];
      const weightMap: Record<string, string> = {};
      file.names.forEach((name, i) => {
        shards[i % 3][name] = encodeTensor(file.f32(name), file.shape(name), 'BF16');
        weightMap[name] = `model-0000${(i % 3) + 1}-of-00003.safetensors`;
      });
      await tmp.files.writeAtomic('three/config.json', encode(config));
      for (const s of [0, 1, 2]) await tmp.files.writeAtomic(`three/model-0000${s + 1}-of-00003.safetensors`, writeSafetensors(shards[s]));
      await tmp.files.writeAtomic('three/model.safetensors.index.json', encode({ weight_map: weightMap }));
      const one = await HfCheckpointSource.open(tmp.files, 'one');
      const three = await HfCheckpointSource.open(tmp.files, 'three');
      for (const s of one.tensors) {
        const rows = s.shape[0];
        assertDeepEqual(
          [...(await three.readRows(s.name, 1, rows - 1, 'f32'))],
          [...(await one.readRows(s.name, 1, rows - 1, 'f32'))],
          `${s.name} from its shard`,
        );
      }
    } finally {
      await tmp.cleanup();
    }
  });

  t.test(
    'a slice outside the tensor, a non-finite value and an f16 overflow inside a slice are refused naming the tensor',
    async ({ platform }) => {
      const tmp = tempStore(platform, 'source-bad');
      try {
        const config = qwen3Config();
        await writeRandomCheckpoint(tmp.files, 'ok', config, 9);
        const file = new SafetensorsFile(await tmp.files.read('ok/model.safetensors'));
        const tensors: Record<string, TensorToWrite> = {};
        const up = 'model.layers.1.mlp.up_proj.weight';
        const width = file.shape(up)[1];
        for (const name of file.names) {
          const v = Float32Array.from(file.f32(name));
          if (name === up) {
            v[10 * width + 2] = Number.NaN;
            v[20 * width + 1] = 70000;
          }
          tensors[name] = encodeTensor(v, file.shape(name), 'F32');
        }
        await tmp.files.writeAtomic('bad/config.json', encode(config));
        await tmp.files.writeAtomic('bad/model.safetensors', writeSafetensors(tensors));
        const source = await HfCheckpointSource.open(tmp.files, 'bad');
        const rows = file.shape(up)[0];
        await assertRejects(
          () => source.readRows(up, rows - 2, 3, 'f32'),
          /tensor "model\.layers\.1\.mlp\.up_proj\.weight" has \d+ rows; rows \[\d+, \d+\) were asked for/,
          'outside',
        );
        await assertRejects(
          () => source.readRows(up, 8, 4, 'f32'),
          /tensor "model\.layers\.1\.mlp\.up_proj\.weight".*NaN/,
          'NaN in a slice',
        );
        await assertRejects(
          () => source.readRows(up, 18, 4, 'f16'),
          /model\.layers\.1\.mlp\.up_proj\.weight \(rows from 18\).*70000.*outside the f16 range/,
          'f16 overflow in a slice, with the slice named',
        );
        assert((await source.readRows(up, 0, 8, 'f16')).length === 8 * width, 'clean rows still read');
        await assertRejects(
          () => source.readRows('model.layers.9.mlp.up_proj.weight', 0, 1, 'f32'),
          /not a tensor this model loads/,
          'unknown tensor',
        );
      } finally {
        await tmp.cleanup();
      }
    },
  );
});
