/**
 * HF checkpoint loading from a FileStore: single file, bf16 shards with an index, tied embeddings,
 * bad checkpoints, and f16 weight precision (matrices as f16 bits from F16, BF16 and F32 files).
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { isMatrixWeight, loadHfCheckpoint, type MatrixWeight, type TargetWeights } from '../../src/formats/hf-checkpoint.ts';
import { expectedTensors } from '../../src/formats/hf-checkpoint-source.ts';
import { f32ToF16Ref } from '../../src/reference/cast.ts';
import { SafetensorsFile, bf16ToF32, f32ToBf16 } from '../../src/formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/formats/safetensors-writer.ts';
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
      assertEqual(
        total,
        [...file.header.entries.values()].reduce((a, e) => a + e.end - e.begin, 0),
        'total bytes = all tensors',
      );
      assertDeepEqual(progress[progress.length - 1], [total, total], 'ends at total');
      assert(
        progress.every((p, i) => i === 0 || p[0] > progress[i - 1][0]),
        'strictly increasing',
      );
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
      await tmp.files.writeAtomic(
        'q/model.safetensors.index.json',
        new TextEncoder().encode(JSON.stringify({ metadata: {}, weight_map: weightMap })),
      );
      const ckpt = await loadHfCheckpoint(tmp.files, 'q');
      const want = Float32Array.from(file.f32('model.layers.5.self_attn.q_proj.bias'), (v) => bf16ToF32(f32ToBf16(v)));
      assertDeepEqual([...ckpt.weights.layers[5].qBias!], [...want], 'bf16 bias widened exactly');
      assert(ckpt.weights.layers[0].oBias === undefined, 'qwen2 has no o_proj bias');

      // The index names a shard that does not hold the tensor.
      weightMap['model.norm.weight'] = 'model-00001-of-00002.safetensors';
      await tmp.files.writeAtomic('q/model.safetensors.index.json', new TextEncoder().encode(JSON.stringify({ weight_map: weightMap })));
      await assertRejects(
        () => loadHfCheckpoint(tmp.files, 'q'),
        /tensor "model\.norm\.weight" is listed in shard model-00001-of-00002\.safetensors, which does not contain it/,
        'index mismatch',
      );
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
      await assertRejects(
        () => loadHfCheckpoint(tmp.files, 'missing'),
        /missing tensor "model\.layers\.2\.mlp\.up_proj\.weight" \(expected shape \[176, 64\]\)/,
        'missing',
      );
      await write('shape', (t) => (t['model.norm.weight'] = { dtype: 'F32', shape: [32], data: new Uint8Array(128) }));
      await assertRejects(
        () => loadHfCheckpoint(tmp.files, 'shape'),
        /tensor "model\.norm\.weight" has shape \[32\], config implies \[64\]/,
        'wrong shape',
      );
      await write('int', (t) => (t['model.norm.weight'] = { dtype: 'I32', shape: [64], data: new Uint8Array(256) }));
      await assertRejects(
        () => loadHfCheckpoint(tmp.files, 'int'),
        /tensor "model\.norm\.weight" is I32, expected a float dtype/,
        'int dtype',
      );
      await write('extra', (t) => (t['model.rotary_emb.inv_freq'] = { dtype: 'F32', shape: [8], data: new Uint8Array(32) }));
      assertDeepEqual((await loadHfCheckpoint(tmp.files, 'extra')).unused, ['model.rotary_emb.inv_freq'], 'unused reported');
      await assertRejects(() => loadHfCheckpoint(tmp.files, 'nowhere'), /config\.json/, 'no checkpoint');
      for (const [what, value] of [
        ['NaN', Number.NaN],
        ['Inf', Number.POSITIVE_INFINITY],
      ] as const) {
        await write(`nonfinite-${what}`, (t) => {
          const bad = Float32Array.from(file.f32('model.layers.1.self_attn.o_proj.weight'));
          bad[7] = value;
          t['model.layers.1.self_attn.o_proj.weight'] = encodeTensor(bad, file.shape('model.layers.1.self_attn.o_proj.weight'), 'F32');
        });
        await assertRejects(
          () => loadHfCheckpoint(tmp.files, `nonfinite-${what}`),
          new RegExp(
            `nonfinite-${what}/model\\.safetensors: tensor "model\\.layers\\.1\\.self_attn\\.o_proj\\.weight" holds a non-finite value \\(${what === 'NaN' ? 'NaN' : 'Infinity'}\\) at element 7`,
          ),
          `${what} weight refused naming the tensor`,
        );
      }
    } finally {
      await tmp.cleanup();
    }
  });

  /** Every array of `w` by tensor name (a tied lm_head is the embedding). */
  const byName = (w: TargetWeights<MatrixWeight>): Map<string, MatrixWeight> => {
    const m = new Map<string, MatrixWeight>([
      ['model.embed_tokens.weight', w.embedTokens],
      ['model.norm.weight', w.finalNorm],
      ['lm_head.weight', w.lmHead],
    ]);
    const keys: Record<string, string> = {
      inputNorm: 'input_layernorm.weight',
      qProj: 'self_attn.q_proj.weight',
      kProj: 'self_attn.k_proj.weight',
      vProj: 'self_attn.v_proj.weight',
      oProj: 'self_attn.o_proj.weight',
      qNorm: 'self_attn.q_norm.weight',
      kNorm: 'self_attn.k_norm.weight',
      postAttentionNorm: 'post_attention_layernorm.weight',
      gateProj: 'mlp.gate_proj.weight',
      upProj: 'mlp.up_proj.weight',
      downProj: 'mlp.down_proj.weight',
    };
    w.layers.forEach((l, i) => {
      for (const [k, v] of Object.entries(l) as [string, MatrixWeight | undefined][]) if (v) m.set(`model.layers.${i}.${keys[k]}`, v);
    });
    return m;
  };

  for (const dtype of ['F16', 'BF16', 'F32'] as const) {
    t.test(`weightPrecision f16 reads ${dtype} matrices as f16 bits (round to nearest even), vectors as f32`, async ({ platform }) => {
      const tmp = tempStore(platform, `ckpt-f16-${dtype}`);
      try {
        const config = qwen3Config({ tie_word_embeddings: false });
        await writeRandomCheckpoint(tmp.files, 'f32', config, 11);
        const f32 = await loadHfCheckpoint(tmp.files, 'f32');
        // The same values written as `dtype`; the expected bits come from the value-level reference.
        const tensors: Record<string, TensorToWrite> = {};
        const want = new Map<string, number[]>();
        for (const [name, values] of byName(f32.weights)) {
          const v = values as Float32Array;
          const shape = expectedTensors(f32.config).find((e) => e.name === name)!.shape;
          if (dtype === 'F16') {
            const bits = Uint16Array.from(v, f32ToF16Ref);
            tensors[name] = { dtype, shape, data: new Uint8Array(bits.buffer) };
            want.set(name, [...bits]);
          } else {
            tensors[name] = encodeTensor(v, shape, dtype);
            want.set(
              name,
              Array.from(v, (x) => f32ToF16Ref(dtype === 'BF16' ? bf16ToF32(f32ToBf16(x)) : x)),
            );
          }
        }
        await tmp.files.writeAtomic('m/config.json', new TextEncoder().encode(JSON.stringify(config)));
        await tmp.files.writeAtomic('m/model.safetensors', writeSafetensors(tensors));
        const ckpt = await loadHfCheckpoint(tmp.files, 'm', { weightPrecision: 'f16' });
        const ref = await loadHfCheckpoint(tmp.files, 'm');
        const got = byName(ckpt.weights);
        const refs = byName(ref.weights);
        for (const [name, values] of got) {
          if (isMatrixWeight(name)) {
            assert(values instanceof Uint16Array, `${name} is f16 bits`);
            assertDeepEqual([...values], want.get(name)!, `${name} bits`);
          } else {
            assert(values instanceof Float32Array, `${name} stays f32`);
            assertDeepEqual([...values], [...refs.get(name)!], `${name} values as the f32 load`);
          }
        }
        assertEqual(
          [...got.keys()].filter(isMatrixWeight).length,
          2 + 7 * f32.config.numLayers,
          'embedding, lm_head and 7 matrices per layer',
        );
      } finally {
        await tmp.cleanup();
      }
    });
  }

  t.test('weightPrecision f16 refuses a value beyond ±65504 naming the tensor; tied embeddings stay one array', async ({ platform }) => {
    const tmp = tempStore(platform, 'ckpt-f16-range');
    try {
      const config = qwen3Config();
      await writeRandomCheckpoint(tmp.files, 'ok', config, 12, 'BF16');
      const ok = await loadHfCheckpoint(tmp.files, 'ok', { weightPrecision: 'f16' });
      assert(ok.weights.lmHead === ok.weights.embedTokens, 'tied lm_head is the embedding array');
      for (const dtype of ['BF16', 'F32'] as const) {
        const file = new SafetensorsFile(await tmp.files.read('ok/model.safetensors'));
        const tensors: Record<string, TensorToWrite> = {};
        for (const name of file.names) {
          const v = Float32Array.from(file.f32(name));
          if (name === 'model.layers.1.mlp.up_proj.weight') v[5] = -70000;
          tensors[name] = encodeTensor(v, file.shape(name), dtype);
        }
        await tmp.files.writeAtomic(`big-${dtype}/config.json`, new TextEncoder().encode(JSON.stringify(config)));
        await tmp.files.writeAtomic(`big-${dtype}/model.safetensors`, writeSafetensors(tensors));
        await assertRejects(
          () => loadHfCheckpoint(tmp.files, `big-${dtype}`, { weightPrecision: 'f16' }),
          /tensor "model\.layers\.1\.mlp\.up_proj\.weight": value -70\d+ at index 5 is outside the f16 range/,
          `${dtype} out of range`,
        );
        const wide = await loadHfCheckpoint(tmp.files, `big-${dtype}`);
        assertEqual(Math.round(wide.weights.layers[1].upProj[5]), dtype === 'BF16' ? -70144 : -70000, `${dtype} loads at f32 precision`);
      }
      await assertRejects(
        () => loadHfCheckpoint(tmp.files, 'ok', { weightPrecision: 'f8' as 'f16' }),
        /weightPrecision must be one of f32, f16, got "f8"/,
        'unknown precision',
      );
    } finally {
      await tmp.cleanup();
    }
  });
});
