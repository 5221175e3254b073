/**
 * `speclab train`'s GPU memory plan (src/training/run/train-memory.ts): printed before anything is
 * allocated; a run over --gpu-memory-budget is refused with exit code 2 and one line naming the
 * largest item, the total, the budget and what to lower — with no run folder written and no GPU
 * buffer created on the device. Also the flag's and the config file's byte sizes.
 */
import type { GpuContext } from '../../../src/gpu/context.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { runCli } from '../../../src/cli/main.ts';
import type { Platform } from '../../../src/cli/platform.ts';
import { parseTrainFlags, trainCommand, validateTrainConfig } from '../../../src/cli/train.ts';
import { UsageError } from '../../../src/cli/options.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { copyFixtureCheckpoint } from '../../model/synthetic-checkpoint.ts';

/** The argv parsers need commander: Node and Deno. */
const SERVER = { only: ['node', 'deno'] as const };

/** Counts GPUBuffers the device creates while `body` runs (an own property over the device's method, removed after). */
async function countBuffers<T>(device: GPUDevice, body: () => Promise<T>): Promise<{ created: number; result: T }> {
  const original = device.createBuffer.bind(device);
  let created = 0;
  Object.defineProperty(device, 'createBuffer', { configurable: true, value: (d: GPUBufferDescriptor) => (created++, original(d)) });
  try {
    const result = await body();
    return { created, result };
  } finally {
    delete (device as unknown as Record<string, unknown>).createBuffer;
  }
}

export default defineSuite('training/run/train-memory', (t) => {
  t.test(
    '--gpu-memory-budget: byte sizes from the flag and the config file, bad text refused naming the flag',
    () => {
      assertEqual(parseTrainFlags(['--gpu-memory-budget', '8GB']).values.gpuMemoryBudget, 8e9, 'flag');
      assertEqual(validateTrainConfig({ gpuMemoryBudget: '512MiB' }).gpuMemoryBudget, 512 * 2 ** 20, 'config text');
      assertEqual(validateTrainConfig({ gpuMemoryBudget: 4096 }).gpuMemoryBudget, 4096, 'config number');
      assertEqual(validateTrainConfig({}).gpuMemoryBudget, undefined, 'default: no budget');
      assertThrows(() => parseTrainFlags(['--gpu-memory-budget', 'lots']), /--gpu-memory-budget: "lots" is not a byte size/, 'flag text');
      assertThrows(
        () => validateTrainConfig({ gpuMemoryBudget: '8 gigs' }),
        /gpuMemoryBudget \(--gpu-memory-budget\): gpuMemoryBudget: "8 gigs" is not a byte size/,
        'config text',
      );
    },
    SERVER,
  );

  t.test(
    'a run over the budget is refused (exit 2) before any GPU buffer or run folder exists',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'train-memory');
      const root = tmp.files.root;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const args = [
          '--target',
          `${root}/target`,
          '--out',
          `${root}/run`,
          '--train-prompts',
          '8',
          '--eval-prompts',
          '2',
          '--response-length',
          '16',
        ];
        const lines: string[] = [];
        const { created, result } = await countBuffers(ctx.gpu.device, () =>
          trainCommand(ctx.platform, [...args, '--gpu-memory-budget', '64KiB'], (l) => lines.push(l), ctx.gpu).then(
            () => undefined,
            (e: unknown) => e,
          ),
        );
        assert(result instanceof UsageError, `refused as a usage error (exit code 2): ${String(result)}`);
        const message = (result as Error).message;
        assert(!message.includes('\n'), 'one line');
        assert(
          /^GPU memory plan does not fit: the plan needs \S+ \S+, over the budget of 64\.0 KiB \(total \S+ \S+, budget 64\.0 KiB, largest item [A-Za-z ()0-9]+ \S+ \S+\); lower: --batch-size 4 → .*; even all of them at their lowest need \S+ \S+ and do not fit: a larger --gpu-memory-budget/.test(
            message,
          ),
          message,
        );
        assert(
          lines[0] === 'GPU memory plan (checked against a budget of 64.0 KiB):' &&
            lines.some((l) => /^ {2}target weights +\S+ \S+ +\d+\.\d%/.test(l)),
          `plan printed:\n${lines.join('\n')}`,
        );
        assertEqual(created, 0, 'GPU buffers created by the refused start');
        // The counter sees a Gpu's buffers (its uniform arena), so the zero above means something.
        const probe = await countBuffers(ctx.gpu.device, async () => new Gpu(ctx.gpu).destroy());
        assert(probe.created >= 1, `a new Gpu creates buffers: ${probe.created}`);
        assert(!(await tmp.files.exists('run')), 'no run folder');

        // Through the command line: exit code 2, the message on stderr (the device is the shared one, kept).
        const shared: GpuContext = Object.create(ctx.gpu, { destroy: { value: () => undefined } }) as GpuContext;
        const platform: Platform = Object.create(ctx.platform, { acquireGpu: { value: async () => shared } }) as Platform;
        const errors: string[] = [];
        const [log, error] = [console.log, console.error];
        console.log = () => undefined;
        console.error = (...a: unknown[]) => errors.push(a.join(' '));
        let code: number;
        try {
          code = await runCli(platform, ['train', ...args, '--gpu-memory-budget', '64KiB']);
        } finally {
          [console.log, console.error] = [log, error];
        }
        assertEqual(code, 2, `exit code (${errors.join(' | ')})`);
        assert(
          errors.length === 1 && /^speclab train: GPU memory plan does not fit: .*largest item .*lower: /.test(errors[0]),
          `one stderr line: ${errors.join(' | ')}`,
        );
        assert(!(await tmp.files.exists('run')), 'still no run folder');
      } finally {
        await tmp.cleanup();
      }
    },
    { ...SERVER, timeoutMs: 300_000 },
  );

  t.test(
    '--recompute on trains the bits of --recompute off (losses of every step, the export), and says so in the plan',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'train-recompute');
      const root = tmp.files.root;
      try {
        await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'target');
        const args = (run: string) => [
          ...['--target', `${root}/target`, '--out', `${root}/${run}`, '--train-prompts', '8', '--eval-prompts', '2'],
          ...['--response-length', '16', '--epochs', '1', '--batch-size', '2', '--ttt-length', '3', '--eval-every', '0'],
        ];
        const losses: Record<string, string[]> = {};
        for (const mode of ['off', 'on']) {
          const lines: string[] = [];
          await trainCommand(ctx.platform, [...args(mode), '--recompute', mode], (l) => lines.push(l), ctx.gpu);
          const text = lines.join('\n');
          const recomputed = /^ {2}activations \(3 TTT steps\) .*recomputed in the backward \(--recompute\)/m.test(text);
          assertEqual(recomputed, mode === 'on', `--recompute ${mode}: the plan's activations line\n${text}`);
          losses[mode] = lines.filter((l) => /^phase train {2}step /.test(l)).map((l) => /loss (\S+)/.exec(l)![1]);
        }
        assert(losses.on.length > 0, 'steps were logged');
        assertDeepEqual(losses.on, losses.off, 'the loss of every logged step');
        for (const file of ['model.safetensors', 'config.json']) {
          const [on, off] = [await tmp.files.read(`on/draft/${file}`), await tmp.files.read(`off/draft/${file}`)];
          assert(on.length > 0 && on.length === off.length && on.every((b, i) => b === off[i]), `draft/${file}: the same bytes`);
        }
      } finally {
        await tmp.cleanup();
      }
    },
    { ...SERVER, timeoutMs: 300_000 },
  );
});
