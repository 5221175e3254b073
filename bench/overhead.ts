/**
 * Fixed costs the step loop pays no matter how small the kernel: per dispatch (many tiny dispatches
 * in one submit), as wall time (the host's encoding included) and as device time (timestamps around
 * a batch encoded before it is submitted, so the device's own cost per dispatch: on a CPU adapter,
 * handing the workgroups to the driver's worker threads and back), and per submit (one tiny
 * dispatch per submit, waiting for each), plus the copy bandwidth that memory-bound kernels are
 * compared against.
 */
import type { Gpu } from '../src/gpu/gpu.ts';
import { matmul } from '../src/kernels/matmul.ts';
import { benchCopy } from './copy.ts';
import { medianSeconds, type BenchRecord } from './record.ts';

/**
 * Dispatches per timed batch for the device-time record, at most: kept below the batcher's dispatches
 * per submit, so the whole batch is encoded before the device starts it and no host time falls
 * between the timestamps.
 */
const DEVICE_BATCH = 48;

export async function benchOverhead(gpu: Gpu): Promise<BenchRecord[]> {
  const A = gpu.upload([16], 'f32', new Float32Array(16).fill(1));
  const C = gpu.tensor([16], 'f32');
  const tiny = () => matmul(gpu, A, A, C, { M: 4, N: 4, K: 4 }, { variant: 'naive' });
  await tiny();
  await gpu.sync();

  const dispatches = 2000;
  let start = performance.now();
  for (let i = 0; i < dispatches; i++) await tiny();
  await gpu.sync();
  const perDispatch = (performance.now() - start) / dispatches;

  const submits = 200;
  start = performance.now();
  for (let i = 0; i < submits; i++) {
    await tiny();
    gpu.batcher.flush();
    await gpu.device.queue.onSubmittedWorkDone();
  }
  const perSubmit = (performance.now() - start) / submits;

  const batch = Math.min(DEVICE_BATCH, gpu.batcher.maxDispatchesPerSubmit - 1);
  const perDispatchDevice =
    (await medianSeconds(gpu, async () => {
      for (let i = 0; i < batch; i++) await tiny();
    })) / batch;
  gpu.release(A, C);

  const out: BenchRecord[] = [
    { family: 'overhead', variant: 'per dispatch (batched, wall)', shape: `${dispatches} dispatches`, ms: perDispatch },
    {
      family: 'overhead',
      variant: `per dispatch (device time, ${gpu.timer.usesTimestamps ? 'timestamps' : 'wall, no timestamps'})`,
      shape: `${batch} dispatches of one workgroup`,
      ms: perDispatchDevice * 1e3,
    },
    { family: 'overhead', variant: 'per submit + wait (wall)', shape: `${submits} submits`, ms: perSubmit },
  ];
  out.push(...(await benchCopy(gpu)));
  return out;
}
