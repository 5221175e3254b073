/**
 * `speclab export --format speculators` (src/cli/export.ts) on training checkpoints of the SpecForge
 * fixture's draft: the verifier is the run's recorded --target (its config.json read for its
 * architectures), or --verifier; the proposal count is the run's --num-draft-tokens; the tensors are
 * the SGLang export's, renamed. Refused in one line: no verifier known, a verifier of another shape
 * than the draft's target, --verifier without the format, the aux layers the SGLang export refuses,
 * and (Node) a Hugging Face id offline with no cached config.
 */
import { runCli } from '../../src/cli/main.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { speculatorsTensorName } from '../../src/model/eagle3/export-speculators.ts';
import { AdamWBackend } from '../../src/optim/adamw-backend.ts';
import { eagle3RunExtras } from '../../src/training/checkpoints/checkpoint-export.ts';
import { saveCheckpoint } from '../../src/training/checkpoints/train-checkpoint.ts';
import { assert, assertDeepEqual, assertEqual } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { FIXTURE_OPTIMIZER, loadEagle3Fixture } from '../model/eagle3-fixture.ts';

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

/** A Llama target of the fixture draft's shape (hidden 64, vocabulary 384), six layers. */
const TARGET = {
  architectures: ['LlamaForCausalLM'],
  hidden_size: 64,
  num_hidden_layers: 6,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  intermediate_size: 128,
  vocab_size: 384,
  rms_norm_eps: 1e-5,
  max_position_embeddings: 256,
};

/** Runs the CLI in this process, capturing what it prints. */
async function cli(platform: Platform, argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const [log, error] = [console.log, console.error];
  console.log = (...a: unknown[]) => out.push(a.join(' '));
  console.error = (...a: unknown[]) => err.push(a.join(' '));
  try {
    return { code: await runCli(platform, argv), out, err };
  } finally {
    [console.log, console.error] = [log, error];
  }
}

export default defineSuite('cli/export', (t) => {
  t.test(
    '--format speculators: the verifier from the run or --verifier, checked against the draft; refusals in one line',
    async ({ gpu: ctx, platform, fixture }) => {
      const fx = await loadEagle3Fixture(fixture, '');
      const tmp = tempStore(platform, 'cli-export');
      const gpu = new Gpu(ctx);
      const backend = new AdamWBackend(gpu, FIXTURE_OPTIMIZER);
      try {
        const root = tmp.files.root;
        for (const name of fx.trainable) backend.addParameter(name, fx.file.shape(`param.${name}`), fx.params[name]);
        const save = async (runId: string, auxLayerIds: number[], settings: Record<string, unknown>) => {
          const vocab = { t2d: fx.inputs.t2d, d2t: fx.inputs.d2t };
          const run = { mode: 'online' as const, draftConfig: fx.config, auxLayerIds, targetLayers: 6, vocab, settings };
          const { extra, buffers } = eagle3RunExtras(run);
          const ref = await saveCheckpoint(tmp.files, gpu, backend, {
            runId,
            globalStep: 1,
            microStep: 1,
            epoch: 0,
            data: { epochBatch: 1, epochSamples: 2, samplesConsumed: 2 },
            contract: { strategy: 'eagle3', tttLength: 4, batchSize: 2, accumulationSteps: 1, draftConfigHash: runId },
            buffers,
            extra,
          });
          return `${root}/${ref.dir}`;
        };
        await tmp.files.writeAtomic('target/config.json', encode(TARGET));
        await tmp.files.writeAtomic('wide/config.json', encode({ ...TARGET, hidden_size: 128 }));
        await tmp.files.writeAtomic('deep/config.json', encode({ ...TARGET, num_hidden_layers: 8 }));
        const recorded = await save('recorded', [0, 2, 4], { target: `${root}/target`, numDraftTokens: 5 });

        const ok = await cli(platform, ['export', '--checkpoint', recorded, '--out', `${root}/spec`, '--format', 'speculators']);
        assertEqual(ok.code, 0, `exported (${ok.err.join(' | ')})`);
        assert(ok.out.includes(`verifier ${root}/target: the run's --target (--verifier names another)`), ok.out.join('\n'));
        assert(
          ok.out.some((l) => l.includes(`speculators format, verifier ${root}/target`)),
          ok.out.join('\n'),
        );
        const config = JSON.parse(new TextDecoder().decode(await tmp.files.read('spec/config.json'))) as Record<string, unknown>;
        const spec = config.speculators_config as { proposal_methods: { speculative_tokens: number }[]; verifier: unknown };
        assertDeepEqual(spec.verifier, { name_or_path: `${root}/target`, architectures: ['LlamaForCausalLM'] }, 'verifier');
        assertEqual(spec.proposal_methods[0].speculative_tokens, 5, "the run's --num-draft-tokens");
        assertDeepEqual(config.eagle_aux_hidden_state_layer_ids, [1, 3, 5], "vLLM's ids of the run's layers");
        assertEqual(config.norm_before_residual, false, 'norm_before_residual');

        assertEqual((await cli(platform, ['export', '--checkpoint', recorded, '--out', `${root}/sglang`])).code, 0, 'the SGLang export');
        const sglang = new SafetensorsFile(await tmp.files.read('sglang/model.safetensors'), 'sglang');
        const speculators = new SafetensorsFile(await tmp.files.read('spec/model.safetensors'), 'speculators');
        assertDeepEqual(sglang.names.map(speculatorsTensorName).sort(), speculators.names, 'the same tensors, renamed');
        for (const name of sglang.names) {
          const [a, b] = [sglang.raw(name), speculators.raw(speculatorsTensorName(name))];
          assert(a.length === b.length && a.every((x, i) => x === b[i]), `${name}: the same bytes`);
        }

        const other = await cli(platform, [
          'export',
          '--checkpoint',
          recorded,
          '--out',
          `${root}/other`,
          '--format',
          'speculators',
          '--verifier',
          `${root}/target`,
        ]);
        assertEqual(other.code, 0, '--verifier given');
        assert(!other.out.some((l) => l.includes("the run's --target")), 'no note when --verifier is given');

        const unrecorded = await save('unrecorded', [0, 2, 4], {});
        const refusals: [string[], number, RegExp][] = [
          [['--checkpoint', unrecorded, '--format', 'speculators'], 2, /^speclab export: --verifier: the checkpoint records no --target/],
          [
            ['--checkpoint', recorded, '--verifier', `${root}/target`],
            2,
            /^speclab export: --verifier: only the speculators format names a verifier/,
          ],
          [
            ['--checkpoint', recorded, '--format', 'speculators', '--verifier', `${root}/wide`],
            1,
            /: its config\.json has hidden_size 128, but the draft was trained on a target with 64; name the target it trained on$/,
          ],
          [
            ['--checkpoint', recorded, '--format', 'speculators', '--verifier', `${root}/deep`],
            1,
            /: its config\.json has num_hidden_layers 8, but the draft was trained on a target with 6/,
          ],
          [
            ['--checkpoint', recorded, '--format', 'speculators', '--verifier', `${root}/none`],
            1,
            /^speclab export: --verifier .*\/none: cannot read its config\.json/,
          ],
          [['--checkpoint', recorded, '--format', 'pt'], 2, /^speclab export: --format: must be sglang or speculators/],
          [
            ['--checkpoint', await save('six', [1, 2, 5], { target: `${root}/target` }), '--format', 'speculators'],
            1,
            /six-step1: refused to export: aux layers \[1, 2, 5\]: layer 5 of a 6-layer target is not capturable/,
          ],
        ];
        if (platform.name === 'node') {
          const offline: Platform = {
            ...platform,
            env: (n) => ({ HF_HUB_CACHE: `${root}/hub`, HF_HUB_OFFLINE: '1' })[n] ?? platform.env(n),
          };
          const args = ['--checkpoint', recorded, '--format', 'speculators', '--verifier', 'speclab-test/absent'];
          const r = await cli(offline, ['export', ...args, '--out', `${root}/refused`]);
          assertEqual(r.code, 1, 'an id offline with no cached config');
          assert(
            r.err.length === 1 &&
              /^speclab export: --verifier speclab-test\/absent: no config\.json in the Hugging Face cache/.test(r.err[0]),
            r.err.join(' | '),
          );
        }
        for (const [args, code, expected] of refusals) {
          const r = await cli(platform, ['export', ...args, '--out', `${root}/refused`]);
          assertEqual(r.code, code, `${args.join(' ')}: exit ${code}`);
          assert(r.err.length === 1 && expected.test(r.err[0]), `${args.join(' ')}: one line: ${r.err.join(' | ')}`);
        }
        assertDeepEqual(await tmp.files.list('refused'), [], 'nothing written by a refused export');
      } finally {
        backend.destroy();
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] as const },
  );
});
