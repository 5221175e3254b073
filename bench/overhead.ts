/**
 * Fixed costs the step loop pays no matter how small the kernel: per dispatch (many tiny dispatches
 * in one submit) and per submit (one tiny dispatch per submit, waiting for each), plus the copy
 * bandwidth that memory-bound kernels are compared against.
 */
import type { Gpu } from '../src/gpu/gpu.ts';
import { matmul } from '../src/kernels/matmul.ts';
import { benchCopy } from './copy.ts';
import type { BenchRecord } from './record.ts';

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
  gpu.release(A, C);

  const out: BenchRecord[] = [
    { family: 'overhead', variant: 'per dispatch (batched, wall)', shape: `${dispatches} dispatches`, ms: perDispatch },
    { family: 'overhead', variant: 'per submit + wait (wall)', shape: `${submits} submits`, ms: perSubmit },
  ];
  out.push(...(await benchCopy(gpu)));
  return out;
}
