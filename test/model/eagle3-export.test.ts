/**
 * SGLang export and import of the EAGLE3 draft (src/model/eagle3/export.ts) against SpecForge's own
 * export of the fixture (fixtures/eagle3/export, which holds the main variant's weights AFTER its one
 * optimizer step: every bf16 value is RNE(after_step.*), while param.* matches only ~2%): exporting
 * after_step.* (with the fixture's t2d/d2t) gives the same key set, dtypes,
 * shapes and required config fields, and bf16 bytes equal bit for bit; export → import round-trips
 * (weights within bf16 rounding, t2d/d2t exact) into a working GPU model; a directory missing a
 * required key, with a leftover `draft_model.` prefix, an unknown key or a wrong dtype is refused
 * naming the key.
 */
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/formats/safetensors-writer.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { EMBED_NAME } from '../../src/config/eagle3-config.ts';
import {
  bf16Bytes,
  eagle3SglangConfig,
  eagle3SglangSafetensors,
  readEagle3Export,
  writeEagle3Export,
} from '../../src/model/eagle3/export.ts';
import { eagle3CheckpointExtras, exportEagle3Checkpoint } from '../../src/training/checkpoints/checkpoint-export.ts';
import { runCli } from '../../src/cli/main.ts';
import { saveCheckpoint } from '../../src/training/checkpoints/train-checkpoint.ts';
import { stableHash } from '../../src/util/stable-hash.ts';
import { Eagle3DraftModel } from '../../src/model/eagle3/model.ts';
import { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { f32ToBf16 } from '../../src/formats/safetensors.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { FIXTURE_OPTIMIZER, loadEagle3Fixture, type Eagle3Fixture } from './eagle3-fixture.ts';

/** Config fields SGLang's loader and HF's LlamaConfig read; each must equal SpecForge's export. */
const REQUIRED_CONFIG_FIELDS = [
  'architectures',
  'model_type',
  'draft_vocab_size',
  'vocab_size',
  'hidden_size',
  'intermediate_size',
  'num_attention_heads',
  'num_key_value_heads',
  'head_dim',
  'num_hidden_layers',
  'hidden_act',
  'rms_norm_eps',
  'rope_theta',
  'rope_parameters',
  'max_position_embeddings',
  'tie_word_embeddings',
  'dtype',
  'attention_bias',
  'mlp_bias',
];

const bytesEqual = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** The weights SpecForge exported: the fixture's after_step.* (the embedding is param.*, frozen). */
function exportedWeights(fx: Eagle3Fixture): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = { [EMBED_NAME]: fx.params[EMBED_NAME] };
  for (const name of fx.trainable) out[name] = fx.expected(`after_step.${name}`);
  return out;
}

/** Re-serialise a safetensors file with `edit` applied to its tensor table. */
function rewrite(file: SafetensorsFile, edit: (t: Record<string, TensorToWrite>) => void): Uint8Array {
  const tensors: Record<string, TensorToWrite> = {};
  for (const name of file.names) tensors[name] = { dtype: file.entry(name).dtype, shape: file.shape(name), data: file.raw(name) };
  edit(tensors);
  return writeSafetensors(tensors, { format: 'pt' });
}

export default defineSuite('model/eagle3-export', (t) => {
  t.test(
    'exporting the fixture after_step.* matches SpecForge export: key set, dtypes, shapes, config fields, bf16 bits',
    async ({ fixture }) => {
      const fx = await loadEagle3Fixture(fixture, '');
      const expected = new SafetensorsFile(await fixture('eagle3/export/model.safetensors'), 'fixture export');
      const expectedConfig = JSON.parse(new TextDecoder().decode(await fixture('eagle3/export/config.json'))) as Record<string, unknown>;
      const vocab = { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t };
      const bytes = eagle3SglangSafetensors(fx.config, exportedWeights(fx), vocab);
      const diverged = {
        ...exportedWeights(fx),
        'norm.weight': Float32Array.from(exportedWeights(fx)['norm.weight'], (v, i) => (i === 3 ? Number.POSITIVE_INFINITY : v)),
      };
      assertThrows(
        () => eagle3SglangSafetensors(fx.config, diverged, vocab),
        /export: weight norm\.weight holds a non-finite value \(Infinity\) at element 3/,
        'a diverged draft is not exported',
      );
      const ours = new SafetensorsFile(bytes, 'our export');
      assertDeepEqual(ours.names, expected.names, 'key set and order');
      assert(!ours.names.some((n) => n.includes('embed')), 'no embedding exported');
      for (const name of expected.names) {
        assertEqual(ours.entry(name).dtype, expected.entry(name).dtype, `dtype of ${name}`);
        assertDeepEqual(ours.shape(name), expected.shape(name), `shape of ${name}`);
        assert(bytesEqual(ours.raw(name), expected.raw(name)), `${name}: bytes differ from SpecForge's export`);
      }
      assertDeepEqual(ours.header.metadata, expected.header.metadata, 'metadata');
      const config = eagle3SglangConfig(fx.config);
      for (const field of REQUIRED_CONFIG_FIELDS) assertDeepEqual(config[field], expectedConfig[field], `config.${field}`);
      assertEqual(config.torch_dtype, 'bfloat16', 'torch_dtype');
      assertEqual(config.rope_scaling, null, 'legacy rope_scaling mirrored (plain RoPE)');
      assert(
        bytesEqual(bytes, expected.bytes),
        'the whole model.safetensors (header, order, padding, data) is byte-identical to SpecForge export',
      );
      // The bulk converter is the scalar round-to-nearest-even one.
      const probe = Float32Array.of(1, -1.00390625, 1.0078125 + 2 ** -9, 3.4e38, -0, 1e-40, Number.POSITIVE_INFINITY, Number.NaN);
      const bulk = new Uint16Array(bf16Bytes(probe).buffer);
      assertDeepEqual([...bulk], [...probe].map(f32ToBf16), 'bf16Bytes == f32ToBf16');
    },
  );

  t.test(
    'export → import round-trips (bf16 weights, exact t2d/d2t, target embedding) into a working GPU model; SpecForge export imports too',
    async ({ gpu: ctx, platform, fixture, note }) => {
      const fx = await loadEagle3Fixture(fixture, '');
      const tmp = tempStore(platform, 'eagle3-export');
      const gpu = new Gpu(ctx);
      try {
        const weights = exportedWeights(fx);
        await writeEagle3Export(tmp.files, 'out', fx.config, weights, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
        const embedding = fx.params[EMBED_NAME];
        const back = await readEagle3Export(tmp.files, 'out', embedding);
        assertDeepEqual(back.config, fx.config, 'config round-trips');
        assertDeepEqual([...back.vocab.t2d], Array.from(fx.inputs.t2d), 't2d exact');
        assertDeepEqual([...back.vocab.d2t], Array.from(fx.inputs.d2t), 'd2t exact');
        assertEqual(back.auxLayerIds, undefined, 'no eagle_config unless aux layers are given');
        await writeEagle3Export(
          tmp.files,
          'aux',
          fx.config,
          weights,
          { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t },
          { auxLayerIds: [0, 1, 1] },
        );
        assertDeepEqual(
          (await readEagle3Export(tmp.files, 'aux', fx.params[EMBED_NAME])).auxLayerIds,
          [0, 1, 1],
          'aux layers round-trip through eagle_config',
        );
        // vLLM reads a top-level list first, naming the layer whose input it captures: the same layers + 1.
        const written = JSON.parse(new TextDecoder().decode(await tmp.files.read('aux/config.json'))) as Record<string, unknown>;
        assertDeepEqual(written.eagle_aux_hidden_state_layer_ids, [1, 2, 2], "vLLM's top-level ids: each + 1");
        assertDeepEqual(written.eagle_config, { eagle_aux_hidden_state_layer_ids: [0, 1, 1] }, "SGLang's eagle_config ids");
        assert(
          bytesEqual(new Uint8Array(back.values[EMBED_NAME].buffer), new Uint8Array(Float32Array.from(embedding).buffer)),
          'embedding is the target one',
        );
        let worst = 0;
        for (const name of fx.trainable) {
          const a = back.values[name];
          const b = weights[name];
          assertEqual(a.length, b.length, `${name} length`);
          for (let i = 0; i < a.length; i++) {
            const err = Math.abs(a[i] - b[i]);
            // bf16 keeps 8 significant bits: round to nearest is within half an ulp, ≤ 2^-8 relative.
            if (!(err <= Math.abs(b[i]) * 2 ** -8 + 1e-38)) throw new Error(`${name}[${i}]: ${a[i]} is not ${b[i]} rounded to bf16`);
            if (b[i] !== 0) worst = Math.max(worst, err / Math.abs(b[i]));
          }
        }
        note('worstBf16RelErr', worst.toExponential(2));
        // SpecForge's own export, copied into a store, imports to the same values.
        await tmp.files.writeAtomic('specforge/config.json', await fixture('eagle3/export/config.json'));
        await tmp.files.writeAtomic('specforge/model.safetensors', await fixture('eagle3/export/model.safetensors'));
        const theirs = await readEagle3Export(tmp.files, 'specforge', embedding);
        assertDeepEqual(theirs.config, fx.config, 'SpecForge config parses to the fixture config');
        for (const name of fx.trainable)
          assert(
            bytesEqual(new Uint8Array(theirs.values[name].buffer), new Uint8Array(back.values[name].buffer)),
            `${name} identical after import`,
          );
        // A working model: construct, and the GPU holds the imported values.
        const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
        const model = new Eagle3DraftModel(gpu, backend, back.config, back.values, back.vocab);
        const lm = (await gpu.read(backend.param('lm_head.weight').value)) as Float32Array;
        assert(bytesEqual(new Uint8Array(lm.buffer), new Uint8Array(back.values['lm_head.weight'].buffer)), 'lm_head on the GPU');
        model.destroy();
        backend.destroy();
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
  );

  t.test(
    'import refuses a missing key, a leftover draft_model. prefix, an unknown key, a wrong dtype, a NaN weight and a missing embedding, naming them',
    async ({ platform, fixture }) => {
      const fx = await loadEagle3Fixture(fixture, '');
      const tmp = tempStore(platform, 'eagle3-export-bad');
      try {
        const good = new SafetensorsFile(await fixture('eagle3/export/model.safetensors'), 'fixture export');
        const config = await fixture('eagle3/export/config.json');
        const embedding = fx.params[EMBED_NAME];
        const cases: [string, (t: Record<string, TensorToWrite>) => void, RegExp][] = [
          ['missing norm', (t) => delete t['norm.weight'], /model\.safetensors: missing required key "norm\.weight"/],
          ['missing d2t', (t) => delete t.d2t, /missing required key "d2t"/],
          [
            'missing q_proj',
            (t) => delete t['midlayer.self_attn.q_proj.weight'],
            /missing required key "midlayer\.self_attn\.q_proj\.weight"/,
          ],
          [
            'prefix',
            (t) => {
              t['draft_model.fc.weight'] = t['fc.weight'];
              delete t['fc.weight'];
            },
            /key "draft_model\.fc\.weight" carries a leftover "draft_model\." prefix/,
          ],
          [
            'unknown',
            (t) => {
              t['midlayer.extra.weight'] = t['norm.weight'];
            },
            /unexpected key "midlayer\.extra\.weight"/,
          ],
          [
            'd2t dtype',
            (t) => {
              t.d2t = { dtype: 'F32', shape: t.d2t.shape, data: new Uint8Array(t.d2t.data.byteLength / 2) };
            },
            /key "d2t" is F32, expected I64/,
          ],
          [
            'shape',
            (t) => {
              t['norm.weight'] = { dtype: 'BF16', shape: [32], data: t['norm.weight'].data.slice(0, 64) };
            },
            /key "norm\.weight" has shape \[32\], the config needs \[64\]/,
          ],
          [
            'NaN weight',
            (t) => {
              const d = t['fc.weight'].data.slice();
              d[2] = 0xc0;
              d[3] = 0x7f;
              t['fc.weight'] = { ...t['fc.weight'], data: d };
            },
            /weight fc\.weight holds a non-finite value \(NaN\) at element 1/,
          ],
        ];
        for (const [label, edit, pattern] of cases) {
          const dir = `bad-${label.replace(/\W/g, '-')}`;
          await tmp.files.writeAtomic(`${dir}/config.json`, config);
          await tmp.files.writeAtomic(`${dir}/model.safetensors`, rewrite(good, edit));
          await assertRejects(() => readEagle3Export(tmp.files, dir, embedding), pattern, label);
        }
        await tmp.files.writeAtomic('noembed/config.json', config);
        await tmp.files.writeAtomic('noembed/model.safetensors', good.bytes);
        await assertRejects(
          () => readEagle3Export(tmp.files, 'noembed'),
          /no embedding .* pass the target model's embed_tokens/,
          'no embedding',
        );
        await assertRejects(() => readEagle3Export(tmp.files, 'absent', embedding), /absent\/config\.json: missing/, 'absent directory');
      } finally {
        await tmp.cleanup();
      }
    },
  );

  t.test(
    'a training checkpoint of after_step.* exports (function and `speclab export`) to exactly SpecForge export',
    async ({ gpu: ctx, platform, fixture }) => {
      const fx = await loadEagle3Fixture(fixture, '');
      const tmp = tempStore(platform, 'eagle3-export-ckpt');
      const gpu = new Gpu(ctx);
      const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
      try {
        const weights = exportedWeights(fx);
        for (const name of fx.trainable) backend.addParameter(name, fx.file.shape(`param.${name}`), weights[name]);
        const draftConfig = JSON.parse(new TextDecoder().decode(await fixture('eagle3/draft_config.json'))) as Record<string, unknown>;
        const { extra, buffers } = eagle3CheckpointExtras(draftConfig, { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t });
        const contract = { strategy: 'eagle3', tttLength: 4, batchSize: 2, accumulationSteps: 1, draftConfigHash: stableHash(draftConfig) };
        const ref = await saveCheckpoint(tmp.files, gpu, backend, {
          runId: 'fx',
          globalStep: 1,
          microStep: 1,
          epoch: 0,
          data: { epochBatch: 1, epochSamples: 2, samplesConsumed: 2 },
          contract,
          buffers,
          extra,
        });
        const expected = await fixture('eagle3/export/model.safetensors');
        await exportEagle3Checkpoint(tmp.files, ref.dir, tmp.files, 'exported');
        assert(
          bytesEqual(await tmp.files.read('exported/model.safetensors'), expected),
          'checkpoint export == SpecForge export, byte for byte',
        );
        await assertRejects(
          () => exportEagle3Checkpoint(tmp.files, 'fx-step2', tmp.files, 'never'),
          /fx-step2: not a complete checkpoint/,
          'absent step',
        );
        if (platform.name !== 'browser') {
          const code = await runCli(platform, [
            'export',
            '--checkpoint',
            `${tmp.files.root}/${ref.dir}`,
            '--out',
            `${tmp.files.root}/cli-out`,
          ]);
          assertEqual(code, 0, 'speclab export exit code');
          assert(
            bytesEqual(await tmp.files.read('cli-out/model.safetensors'), expected),
            'speclab export == SpecForge export, byte for byte',
          );
          const config = JSON.parse(new TextDecoder().decode(await tmp.files.read('cli-out/config.json'))) as Record<string, unknown>;
          assertEqual(config.draft_vocab_size, 96, 'config written');
          assertEqual(
            await runCli(platform, ['export', '--checkpoint', `${tmp.files.root}/${ref.dir}`]),
            2,
            'missing --out is a usage error (exit 2)',
          );
        }
      } finally {
        backend.destroy();
        gpu.destroy();
        await tmp.cleanup();
      }
    },
  );
});
