/**
 * `speclab plan` (src/cli/plan.ts): a target folder that holds only config.json is planned for each
 * role, exit code 0 when every role fits and 2 when one does not; `--json` prints one line per role
 * with the documented fields, each role's total the sum of its items; the colocated plan is the one
 * `speclab train` prints for the same settings (a --data run whose conversations reach --max-length);
 * and a refused plan's suggestions name only flags its role has, at values that run. A Hugging Face id
 * (Node) is planned from config.json alone: downloaded by itself into the Hugging Face cache from a
 * local server answering the Hub's routes (test/platform/fake-hub.ts), then read from the cache
 * offline; a folder of the id's spelling wins; a gated, missing or offline-uncached id is one line.
 */
import type { GpuContext } from '../../src/gpu/context.ts';
import { runCli } from '../../src/cli/main.ts';
import type { Platform } from '../../src/cli/platform.ts';
import { PLAN_DEF } from '../../src/cli/plan-options.ts';
import { ROLLOUT_DEF } from '../../src/cli/cluster-options.ts';
import { TRAIN_OPTIONS } from '../../src/cli/train-options.ts';
import { assert, assertDeepEqual, assertEqual } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';

const SERVER = { only: ['node', 'deno'] as const };
const COMMIT = '0123456789abcdef0123456789abcdef01234567';
const encode = (text: string) => new TextEncoder().encode(text);

/** A small Llama's config.json: the plan needs nothing else. */
const TINY_CONFIG = JSON.stringify({
  architectures: ['LlamaForCausalLM'],
  hidden_size: 64,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  intermediate_size: 128,
  vocab_size: 1000,
  rms_norm_eps: 1e-5,
  max_position_embeddings: 4096,
});
const BIG_LIMITS = ['--max-storage-binding-size', '1GiB', '--max-buffer-size', '2GiB'];

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

/** `platform` with these environment variables over its own. */
const withEnv = (platform: Platform, vars: Record<string, string>): Platform => ({
  ...platform,
  env: (name) => (name in vars ? vars[name] : platform.env(name)),
});

interface RoleLine {
  role: string;
  totalBytes: number;
  phases: { phase: string; bytes: number }[];
  fits: boolean;
  sampleBytes: number;
  checkpointBytes: number;
  checkpointEvery: number | null;
  spillBytes: number;
  items: { key: string; bytes: number }[];
  largest: { bytes: number };
  suggestions: string[];
}

export default defineSuite('cli/plan', (t) => {
  t.test(
    'a folder with only config.json: exit 0 when every role fits, 2 over the budget; --json lines carry the fields',
    async ({ platform }) => {
      const tmp = tempStore(platform, 'plan');
      try {
        await tmp.files.writeAtomic('target/config.json', encode(TINY_CONFIG));
        assertDeepEqual(await tmp.files.list('target'), ['config.json'], 'nothing but the config');
        const target = `${tmp.files.root}/target`;
        const flags = ['--max-length', '256', '--batch-size', '2', '--feature-precision', 'f16', ...BIG_LIMITS];
        const ok = await cli(platform, ['plan', '--target', target, ...flags, '--json']);
        assertEqual(ok.code, 0, `fits: exit 0 (${ok.err.join(' | ')})`);
        const lines = ok.out.map((l) => JSON.parse(l) as RoleLine);
        assertDeepEqual(
          lines.map((l) => l.role),
          ['colocated', 'trainer', 'rollout'],
          'one line per role',
        );
        // One sample with compact features (the default): 256 tokens × (3 × 64 aux + 64 final hidden) f16,
        // input_ids, loss_mask and the target's argmax i32, its logsumexp f32.
        const sample = 256 * (3 * 64 + 64) * 2 + 4 * 256 * 4;
        for (const l of lines) {
          for (const field of ['totalBytes', 'sampleBytes', 'checkpointBytes', 'spillBytes'] as const)
            assert(Number.isSafeInteger(l[field]), `${l.role}: ${field} is a byte count`);
          assertEqual(l.fits, true, `${l.role}: fits`);
          assertDeepEqual(
            l.phases.map((p) => p.phase),
            ['generation', 'capture', 'batching', 'step'],
            `${l.role}: four phases`,
          );
          assertEqual(l.totalBytes, Math.max(...l.phases.map((p) => p.bytes)), `${l.role}: total = the largest phase`);
          assert(
            l.phases.every((p) => p.bytes <= l.items.reduce((a, i) => a + i.bytes, 0)),
            `${l.role}: each phase holds some of the items`,
          );
          assertEqual(l.largest.bytes, Math.max(...l.items.map((i) => i.bytes)), `${l.role}: largest item`);
          assertEqual(l.sampleBytes, sample, `${l.role}: one sample's bytes`);
        }
        const [colocated, trainer, rollout] = lines;
        const keys = (l: RoleLine) => l.items.map((i) => i.key);
        const capture = (l: RoleLine) => l.items.find((i) => i.key === 'targetCapture');
        // The trainer captures only the held-out sequences of --eval-every, a batch at a time, not a round.
        assert(capture(trainer) && capture(trainer)!.bytes < capture(colocated)!.bytes, 'the trainer captures a held-out batch at a time');
        assert(!keys(rollout).some((k) => k.startsWith('draft') || k === 'moments'), 'the rollout holds no draft');
        assert(trainer.totalBytes < colocated.totalBytes && rollout.totalBytes < colocated.totalBytes, 'each process holds less');
        assertEqual(trainer.checkpointBytes, colocated.checkpointBytes, 'the trainer writes the same checkpoints');
        assert(colocated.checkpointBytes > 0 && rollout.checkpointBytes === 0, 'a rollout writes no checkpoint');
        // Default cadence: --checkpoint-every 8 and a round of 16 prompts at batch 2 (8 steps).
        assertEqual(colocated.checkpointEvery, 8, 'checkpoint cadence');
        assertEqual(colocated.spillBytes, 16 * sample, 'the spill holds one round');

        // Full-vocabulary logits on the wire (--target-repr logits): 256 × (3 × 64 + 1000) f16 + two i32 vectors.
        const logits = await cli(platform, ['plan', '--target', target, ...flags, '--target-repr', 'logits', '--json']);
        assertEqual(logits.code, 0, `--target-repr logits fits (${logits.err.join(' | ')})`);
        for (const l of logits.out.map((line) => JSON.parse(line) as RoleLine))
          assertEqual(l.sampleBytes, 256 * (3 * 64 + 1000) * 2 + 2 * 256 * 4, `${l.role}, --target-repr logits: one sample's bytes`);
        const bad = await cli(platform, ['plan', '--target', target, ...flags, '--target-repr', 'pruned']);
        assertEqual(bad.code, 2, '--target-repr takes hidden_state or logits');
        assert(
          bad.err.some((l) => l.includes('--target-repr')),
          `the refusal names the flag: ${bad.err.join(' | ')}`,
        );

        const text = await cli(platform, ['plan', '--target-config', `${target}/config.json`, ...flags]);
        assertEqual(text.code, 0, 'the config file itself, text form');
        const all = text.out.join('\n');
        for (const heading of ['colocated (speclab train):', 'trainer (speclab train --cluster):', 'rollout (speclab rollout --batch 4):'])
          assert(text.out.includes(heading), `${heading} printed:\n${all}`);
        assert(/^one checkpoint: \S+ \S+ \(weights\.safetensors/m.test(all) && /^checkpoint cadence/m.test(all), `footprint:\n${all}`);

        const over = await cli(platform, ['plan', '--target', target, ...flags, '--gpu-memory-budget', '64KiB', '--json']);
        assertEqual(over.code, 2, 'over the budget: exit 2');
        assert(
          over.out.map((l) => JSON.parse(l) as RoleLine).every((l) => !l.fits && l.suggestions.length > 0),
          'every role refused, with suggestions',
        );
        const usage = await cli(platform, ['plan', '--max-length', '256']);
        assertEqual(usage.code, 2, 'no target: usage error');
        assert(/--target DIR .* or --target-config FILE/.test(usage.err.join(' ')), usage.err.join(' | '));
        assertEqual((await cli(platform, ['plan', '--target', target, '--batch-size', '0'])).code, 2, 'a value out of range');
        assertEqual(
          (await cli(platform, ['plan', '--target', target, '--aux-layers', '1,2,9'])).code,
          2,
          'an aux layer outside the target',
        );
        assertEqual((await cli(platform, ['plan', '--target', `${tmp.files.root}/none`])).code, 1, 'no config.json: the read fails');
      } finally {
        await tmp.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    "a refused plan's suggestions name only flags of its role, at values that run",
    async ({ platform }) => {
      const tmp = tempStore(platform, 'plan-flags');
      try {
        await tmp.files.writeAtomic('target/config.json', encode(TINY_CONFIG));
        // The rollout role may name `speclab rollout --batch`, the flag --rollout-batch stands for.
        const flags = new Set([...TRAIN_OPTIONS, ...PLAN_DEF.options, ...ROLLOUT_DEF.options].map((o) => o.flag));
        const notOf: Record<string, string[]> = {
          colocated: ['--rollout-batch', '--batch'],
          trainer: ['--round-prompts', '--rollout-batch', '--batch'],
          rollout: ['--round-prompts', '--batch-size', '--ttt-length'],
        };
        // Over a budget, and past a binding (one 1024-token sequence's hidden state [1024, 64] f32, 256 KiB, must fit one).
        for (const limit of [
          ['--gpu-memory-budget', '256KiB', ...BIG_LIMITS],
          ['--max-storage-binding-size', '128KiB', '--max-buffer-size', '1MiB'],
        ]) {
          const r = await cli(platform, ['plan', '--target', `${tmp.files.root}/target`, '--max-length', '1024', ...limit, '--json']);
          assertEqual(r.code, 2, `refused: ${limit.join(' ')}`);
          for (const line of r.out.map((l) => JSON.parse(l) as RoleLine)) {
            assert(line.suggestions.length > 0, `${line.role}: suggestions`);
            for (const s of line.suggestions) {
              assert(!/feature-store|samples resident/.test(s), `${line.role}: no internal names: ${s}`);
              for (const flag of s.match(/--[a-z-]+/g) ?? []) {
                assert(flags.has(flag as `--${string}`), `${line.role}: ${flag} is a real flag (${s})`);
                assert(!notOf[line.role].includes(flag), `${line.role} has no ${flag} (${s})`);
              }
              for (const [, to] of s.matchAll(/→ (\d+)/g)) assert(Number(to) >= 1, `${line.role}: ${s} proposes a value that runs`);
              assert(!/--max-length \d+ → 1\b/.test(s), `${line.role}: a sequence keeps two tokens: ${s}`);
            }
          }
        }
      } finally {
        await tmp.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    'the colocated plan is the one speclab train prints for the same settings',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'plan-train');
      try {
        // Replies far longer than --max-length: every conversation is truncated to exactly 32 tokens.
        const reply = 'the jury said the election was well conducted and the city was pleased with it '.repeat(6);
        const rows = Array.from({ length: 6 }, (_, i) =>
          JSON.stringify({
            conversations: [
              { role: 'user', content: `question ${i}` },
              { role: 'assistant', content: reply },
            ],
          }),
        );
        await tmp.files.writeAtomic('chats.jsonl', encode(rows.join('\n') + '\n'));
        const limits = ctx.gpu.limits;
        const settings = ['--max-length', '32', '--round-prompts', '2', '--batch-size', '2', '--eval-prompts', '2', '--ttt-length', '3'];
        const budget = ['--gpu-memory-budget', '64KiB'];
        const shared: GpuContext = Object.create(ctx.gpu, { destroy: { value: () => undefined } }) as GpuContext;
        const platform: Platform = Object.create(ctx.platform, { acquireGpu: { value: async () => shared } }) as Platform;
        const train = await cli(platform, [
          'train',
          '--target',
          'assets/lab-target',
          '--data',
          `${tmp.files.root}/chats.jsonl`,
          '--chat-template',
          'speclab',
          '--out',
          `${tmp.files.root}/run`,
          ...settings,
          ...budget,
        ]);
        assertEqual(train.code, 2, `train refused by its plan (${train.err.join(' | ')})`);
        const plan = await cli(platform, [
          'plan',
          '--target',
          'assets/lab-target',
          ...settings,
          ...budget,
          '--max-storage-binding-size',
          String(limits.maxStorageBufferBindingSize),
          '--max-buffer-size',
          String(limits.maxBufferSize),
          '--role',
          'colocated',
        ]);
        assertEqual(plan.code, 2, 'plan: does not fit either');
        const start = plan.out.indexOf('colocated (speclab train):') + 1;
        assert(start > 0, `colocated block:\n${plan.out.join('\n')}`);
        // The suggestions differ by design: the plan names flags (--batch-size 2 → 1), train its settings.
        const table = (lines: string[]) => lines.filter((l) => !l.startsWith('  lower: '));
        const trainTable = table(train.out.slice(train.out.indexOf(train.out.find((l) => l.startsWith('GPU memory plan'))!)));
        assert(trainTable.length > 10, `train printed its plan:\n${train.out.join('\n')}`);
        assertDeepEqual(table(plan.out.slice(start)), trainTable, 'the same plan, line for line');
        assert(
          plan.out.some((l) => l.startsWith('  lower: --batch-size 2 → 1')),
          `flag-named suggestions:\n${plan.out.join('\n')}`,
        );
      } finally {
        await tmp.cleanup();
      }
    },
    { ...SERVER, timeoutMs: 300_000 },
  );
  t.test(
    '--target ORG/NAME: config.json alone downloaded into the Hugging Face cache, then read offline; a folder of that name wins; refusals are one line',
    async ({ platform }) => {
      const fs = await import('node:fs/promises');
      const path = await import('node:path');
      const { startFakeHub } = await import('../platform/fake-hub.ts');
      // The weights are listed by the Hub but must never be asked for.
      const files = { 'config.json': encode(TINY_CONFIG), 'model.safetensors': new Uint8Array(4096) };
      const hub = await startFakeHub({
        'speclab-test/tiny': { files, commit: COMMIT },
        'speclab-test/gated': { files, commit: COMMIT, token: 'hf_other' },
      });
      const tmp = tempStore(platform, 'plan-hub');
      try {
        const cache = path.resolve(tmp.files.root, 'hub');
        const env = { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.url, HF_TOKEN: '', HF_HOME: `${cache}/home`, HF_HUB_OFFLINE: '0' };
        const online = withEnv(platform, env);
        const flags = ['--max-length', '256', ...BIG_LIMITS];
        await tmp.files.writeAtomic('target/config.json', encode(TINY_CONFIG));
        const local = await cli(platform, ['plan', '--target', `${tmp.files.root}/target`, ...flags, '--json']);
        const first = await cli(online, ['plan', '--target', 'speclab-test/tiny', ...flags, '--json']);
        assertEqual(first.code, 0, `planned from the Hub (${first.err.join(' | ')})`);
        assertDeepEqual(first.out, local.out, 'the same JSON lines as the folder, and nothing else on stdout');
        const snapshot = path.join(cache, 'models--speclab-test--tiny', 'snapshots', COMMIT);
        assertDeepEqual(await fs.readdir(snapshot), ['config.json'], 'config.json alone in the snapshot');
        assertEqual(await fs.readFile(path.join(cache, 'models--speclab-test--tiny', 'refs', 'main'), 'utf8'), COMMIT, 'refs/main');
        assert(hub.log.includes(`GET /speclab-test/tiny/resolve/${COMMIT}/config.json`), `config.json fetched:\n${hub.log.join('\n')}`);
        assert(!hub.log.some((l) => l.includes('model.safetensors')), `no weights asked for:\n${hub.log.join('\n')}`);

        // Offline, with the Hub unreachable: from the cache, by branch or by commit, and no request.
        const requests = hub.log.length;
        const offline = withEnv(platform, { ...env, HF_HUB_OFFLINE: '1', HF_ENDPOINT: 'http://127.0.0.1:1' });
        for (const id of ['speclab-test/tiny', `speclab-test/tiny@${COMMIT}`]) {
          const cached = await cli(offline, ['plan', '--target', id, ...flags]);
          assertEqual(cached.code, 0, `${id} offline (${cached.err.join(' | ')})`);
          assert(cached.out.includes(`target ${id}: the Hugging Face cache's ${snapshot}`), `says where:\n${cached.out.join('\n')}`);
          assert(
            cached.out.some((l) => l.startsWith(`plan: target ${id} (${snapshot}/config.json) (LlamaForCausalLM, 4 layers`)),
            cached.out[1],
          );
        }
        assertEqual(hub.log.length, requests, 'no request once cached');

        // A folder spelled as the id wins over the cache (here a 6-layer config).
        await tmp.files.writeAtomic('spelled/config.json', encode(JSON.stringify({ ...JSON.parse(TINY_CONFIG), num_hidden_layers: 6 })));
        const spelled: Platform = {
          ...offline,
          files: (root) => platform.files(root === 'speclab-test/tiny' ? `${tmp.files.root}/spelled` : root),
        };
        const folder = await cli(spelled, ['plan', '--target', 'speclab-test/tiny', ...flags]);
        assert(
          folder.out.some((l) => l.startsWith('plan: target speclab-test/tiny/config.json (LlamaForCausalLM, 6 layers')),
          folder.out[0],
        );

        const refusals: [Platform, string, RegExp][] = [
          [
            offline,
            'speclab-test/absent',
            /^speclab plan: --target speclab-test\/absent: no config\.json in the Hugging Face cache \(.*models--speclab-test--absent\) and HF_HUB_OFFLINE is set/,
          ],
          [
            online,
            'speclab-test/gated',
            /^speclab plan: --target speclab-test\/gated: the Hub answered 401: no such model, or a gated or private one that needs a token \(set HF_TOKEN/,
          ],
          [
            online,
            'speclab-test/absent@v2',
            /^speclab plan: --target speclab-test\/absent@v2: no model speclab-test\/absent at revision v2 on http:\/\/127\.0\.0\.1:\d+ \(404\)$/,
          ],
        ];
        for (const [p, id, expected] of refusals) {
          const r = await cli(p, ['plan', '--target', id, ...flags]);
          assertEqual(r.code, 1, `${id}: the config could not be read (exit 1)`);
          assert(r.err.length === 1 && expected.test(r.err[0]), `${id}: one line: ${r.err.join(' | ')}`);
        }
      } finally {
        await hub.close();
        await tmp.cleanup();
      }
    },
    { only: ['node'] as const },
  );
});
