/** HF checkpoint loading from a FileStore: single file, bf16 shards with an index, tied embeddings, and bad checkpoints. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { expectedTensors, loadHfCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { SafetensorsFile, bf16ToF32, f32ToBf16, writeSafetensors, type TensorToWrite } from '../../src/formats/safetensors.ts';
import { parseHfConfig } from '../../src/config/hf-config.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint, encodeTensor, qwen3Config, writeRandomCheckpoint } from '../model/synthetic-checkpoint.ts';

export default defineSuite('formats/hf-checkpoint', (t) => {
  t.test('llama-tiny loads with exact values and monotonic byte progress', async ({ platform, fixture }) => {
    const tmp = tempStore(platform, 'ckpt-llama');
    try {
      await copyFixtureCheckpoint(fixture, 'llama-tiny', tmp.files, 'm');
      const progress: [number, number][] = [];
      const ckpt = await loadHfCheckpoint(tmp.files, 'm', { onProgress: (done, total) => progress.push([done, total]) });
      const file = new SafetensorsFile(await fixture('hf/llama-tiny/model.safetensors'));
      assertEqual(ckpt.weights.layers.length, 6, 'layers');
      assertDeepEqual([...ckpt.weights.layers[3].kProj], [...file.f32('model.layers.3.self_attn.k_proj.weight')], 'k_proj values');
      assertDeepEqual([...ckpt.weights.lmHead.subarray(0, 8)], [...file.f32('lm_head.weight').subarray(0, 8)], 'lm_head values');
      assertDeepEqual(ckpt.unused, [], 'no unused tensors');
      const total = progress[0][1];
      assertEqual(total, [...file.header.entries.values()].reduce((a, e) => a + e.end - e.begin, 0), 'total bytes = all tensors');
      assertDeepEqual(progress[progress.length - 1], [total, total], 'ends at total');
      assert(progress.every((p, i) => i === 0 || p[0] > progress[i - 1][0]), 'strictly increasing');
      assertEqual(progress.length, file.names.length + 1, 'one report per tensor plus the start');
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('sharded bf16 checkpoint with model.safetensors.index.json', async ({ platform, fixture }) => {
    const tmp = tempStore(platform, 'ckpt-shards');
    try {
      const file = new SafetensorsFile(await fixture('hf/qwen2-tiny/model.safetensors'));
      const shards: Record<string, TensorToWrite>[] = [{}, {}];
      const weightMap: Record<string, string> = {};
      file.names.forEach((name, i) => {
        const s = name === 'model.norm.weight' ? 1 : i % 2; // pinned to shard 2 for the mismatch check below
        shards[s][name] = encodeTensor(file.f32(name), file.shape(name), 'BF16');
        weightMap[name] = `model-0000${s + 1}-of-00002.safetensors`;
      });
      await tmp.files.writeAtomic('q/config.json', await fixture('hf/qwen2-tiny/config.json'));
      for (const s of [0, 1]) await tmp.files.writeAtomic(`q/model-0000${s + 1}-of-00002.safetensors`, writeSafetensors(shards[s]));
      await tmp.files.writeAtomic('q/model.safetensors.index.json', new TextEncoder().encode(JSON.stringify({ metadata: {}, weight_map: weightMap })));
      const ckpt = await loadHfCheckpoint(tmp.files, 'q');
      const want = Float32Array.from(file.f32('model.layers.5.self_attn.q_proj.bias'), (v) => bf16ToF32(f32ToBf16(v)));
      assertDeepEqual([...ckpt.weights.layers[5].qBias!], [...want], 'bf16 bias widened exactly');
      assert(ckpt.weights.layers[0].oBias === undefined, 'qwen2 has no o_proj bias');

      // The index names a shard that does not hold the tensor.
      weightMap['model.norm.weight'] = 'model-00001-of-00002.safetensors';
      await tmp.files.writeAtomic('q/model.safetensors.index.json', new TextEncoder().encode(JSON.stringify({ weight_map: weightMap })));
      await assertRejects(() => loadHfCheckpoint(tmp.files, 'q'), /tensor "model\.norm\.weight" is listed in shard model-00001-of-00002\.safetensors, which does not contain it/, 'index mismatch');
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('tied embeddings share the embedding; unused tensors reported', async ({ platform }) => {
    const tmp = tempStore(platform, 'ckpt-tied');
    try {
      await writeRandomCheckpoint(tmp.files, 'q3', qwen3Config(), 5, 'BF16');
      const ckpt = await loadHfCheckpoint(tmp.files, 'q3');
      assert(ckpt.weights.lmHead === ckpt.weights.embedTokens, 'lm_head is the embedding');
      assertEqual(ckpt.weights.layers[1].qNorm!.length, 12, 'q_norm over head_dim');
      const names = expectedTensors(parseHfConfig(qwen3Config())).map((e) => e.name);
      assert(names.includes('model.layers.1.self_attn.k_norm.weight'), 'k_norm expected');
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('missing, wrong-shaped, non-float and non-finite tensors are refused, naming the tensor', async ({ platform, fixture }) => {
    const tmp = tempStore(platform, 'ckpt-bad');
    try {
      const file = new SafetensorsFile(await fixture('hf/llama-tiny/model.safetensors'));
      const config = await fixture('hf/llama-tiny/config.json');
      const write = async (dir: string, edit: (t: Record<string, TensorToWrite>) => void): Promise<void> => {
        const tensors: Record<string, TensorToWrite> = {};
        for (const name of file.names) tensors[name] = { dtype: 'F32', shape: file.shape(name), data: file.raw(name) };
        edit(tensors);
        await tmp.files.writeAtomic(`${dir}/config.json`, config);
        await tmp.files.writeAtomic(`${dir}/model.safetensors`, writeSafetensors(tensors));
      };
      await write('missing', (t) => delete t['model.layers.2.mlp.up_proj.weight']);
      await assertRejects(() => loadHfCheckpoint(tmp.files, 'missing'), /missing tensor "model\.layers\.2\.mlp\.up_proj\.weight" \(expected shape \[176, 64\]\)/, 'missing');
      await write('shape', (t) => (t['model.norm.weight'] = { dtype: 'F32', shape: [32], data: new Uint8Array(128) }));
      await assertRejects(() => loadHfCheckpoint(tmp.files, 'shape'), /tensor "model\.norm\.weight" has shape \[32\], config implies \[64\]/, 'wrong shape');
      await write('int', (t) => (t['model.norm.weight'] = { dtype: 'I32', shape: [64], data: new Uint8Array(256) }));
      await assertRejects(() => loadHfCheckpoint(tmp.files, 'int'), /tensor "model\.norm\.weight" is I32, expected a float dtype/, 'int dtype');
      await write('extra', (t) => (t['model.rotary_emb.inv_freq'] = { dtype: 'F32', shape: [8], data: new Uint8Array(32) }));
      assertDeepEqual((await loadHfCheckpoint(tmp.files, 'extra')).unused, ['model.rotary_emb.inv_freq'], 'unused reported');
      await assertRejects(() => loadHfCheckpoint(tmp.files, 'nowhere'), /config\.json/, 'no checkpoint');
      for (const [what, value] of [['NaN', Number.NaN], ['Inf', Number.POSITIVE_INFINITY]] as const) {
        await write(`nonfinite-${what}`, (t) => {
          const bad = Float32Array.from(file.f32('model.layers.1.self_attn.o_proj.weight'));
          bad[7] = value;
          t['model.layers.1.self_attn.o_proj.weight'] = encodeTensor(bad, file.shape('model.layers.1.self_attn.o_proj.weight'), 'F32');
        });
        await assertRejects(() => loadHfCheckpoint(tmp.files, `nonfinite-${what}`), new RegExp(`nonfinite-${what}/model\\.safetensors: tensor "model\\.layers\\.1\\.self_attn\\.o_proj\\.weight" holds a non-finite value \\(${what === 'NaN' ? 'NaN' : 'Infinity'}\\) at element 7`), `${what} weight refused naming the tensor`);
      }
    } finally {
      await tmp.cleanup();
    }
  });
});
