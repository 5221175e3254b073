/**
 * Node stress tests for the Dawn lifetime hazard (README, Troubleshooting). Run with --expose-gc:
 *   node --expose-gc --import tsx test/stress/run.ts [--repeats 20] [--soak-seconds 60]
 *
 * 1. gc-regression: acquire a device, keep ONLY the GPUDevice (drop the context and the instance the
 *    way a careless helper would), then force garbage collection between submits while the GPU is
 *    busy. Before the platform held the `create()` result itself this crashed (futex error / SIGSEGV).
 * 2. devices destroyed with work pending, gc() after each: Dawn ticks scheduled for a destroyed device
 *    must never find its instance collected (the process keeps one instance).
 * 3. suite x N: the GPU core and matmul suites N times in a row, each on a fresh device.
 * 4. soak: mixed matmul sizes up to 2048 for the given seconds, with gc() between submits.
 */
import process from 'node:process';
import { Gpu } from '../../src/gpu/gpu.ts';
import { acquireNodeGpu, liveNodeGpuContexts, nodePlatform } from '../../src/platform/node.ts';
import { matmul } from '../../src/kernels/matmul.ts';
import { runSuites } from '../harness/run.ts';
import { fileFixtures } from '../harness/fixtures-fs.ts';
import gpuCore from '../gpu/core.test.ts';
import matmulSuite from '../kernels/matmul.test.ts';
import { soak } from './soak.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run with node --expose-gc (npm run test:stress does)');
  process.exit(2);
}
const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const repeats = flag('--repeats', 20);
const soakSeconds = flag('--soak-seconds', 60);
let passed = 0;
let failed = 0;
async function step(name: string, fn: () => Promise<string>): Promise<void> {
  const start = performance.now();
  try {
    const detail = await fn();
    passed++;
    console.log(`[node] ok   stress › ${name} (${((performance.now() - start) / 1000).toFixed(1)} s) ${detail}`);
  } catch (err) {
    failed++;
    console.log(`[node] FAIL stress › ${name}: ${(err as Error).stack ?? err}`);
  }
}

await step('gc between submits while only the device is held', async () => {
  // Keep nothing but the device: the context (and with it the Dawn instance) becomes unreachable
  // from this code. The platform must keep the instance alive on its own.
  const device: GPUDevice = (await acquireNodeGpu()).device;
  gc();
  if (liveNodeGpuContexts() < 1) throw new Error('the platform dropped the Dawn instance of a live device');
  const ctxAgain = { device };
  const module = device.createShaderModule({
    code: '@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) { for (var i = 0u; i < 500u; i++) { x[g.x] = x[g.x] * 0.999 + 1.0; } }',
  });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const buffer = device.createBuffer({ size: 4 * 65536, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer } }] });
  for (let i = 0; i < 200; i++) {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(1024);
    pass.end();
    device.queue.submit([enc.finish()]);
    const garbage = Array.from({ length: 5000 }, (_, k) => ({ k, text: `garbage-${k}` }));
    gc();
    if (garbage.length !== 5000) throw new Error('unreachable');
    if (i % 20 === 19) await device.queue.onSubmittedWorkDone();
  }
  await ctxAgain.device.queue.onSubmittedWorkDone();
  buffer.destroy();
  device.destroy();
  return '200 submits with gc() after each';
});

await step('200 devices destroyed with GPU work and a readback pending, gc() after each', async () => {
  // A device destroyed while Dawn's pump may still have ticks scheduled for its instance: if the
  // instance could be collected by then, a tick would touch freed memory (SIGSEGV). The process keeps
  // one instance (src/platform/node.ts, rule 1). Runs under the default SPECLAB_GPU_WAIT=auto, where ticks sleep first.
  for (let i = 0; i < 200; i++) {
    const ctx = await acquireNodeGpu();
    const device = ctx.device;
    const buffer = device.createBuffer({ size: 4096, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const source = device.createBuffer({ size: 4096, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.STORAGE });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(source, 0, buffer, 0, 4096);
    device.queue.submit([enc.finish()]);
    const mapped = buffer.mapAsync(GPUMapMode.READ).catch(() => 'aborted');
    const done = device.queue.onSubmittedWorkDone();
    if (i % 2 === 0) await done;
    ctx.destroy();
    gc();
    await mapped;
    await new Promise((resolve) => setTimeout(resolve, i % 3));
    gc();
  }
  return '200 acquire / destroy cycles';
});

await step(`GPU core + matmul suites ${repeats} times in a row`, async () => {
  let total = 0;
  for (let r = 0; r < repeats; r++) {
    const ctx = await acquireNodeGpu();
    const summary = await runSuites(nodePlatform, [gpuCore, matmulSuite], { gpu: ctx, fixture: fileFixtures(nodePlatform), log: () => {} });
    ctx.destroy();
    gc();
    if (summary.failed > 0)
      throw new Error(
        `repeat ${r + 1}: ${summary.results
          .filter((x) => !x.ok)
          .map((x) => `${x.name}: ${x.error}`)
          .join('; ')}`,
      );
    total += summary.passed;
  }
  return `${total} test passes`;
});

await step(`${soakSeconds} s soak of mixed matmul sizes up to 2048 with gc() between submits`, async () => {
  const ctx = await acquireNodeGpu();
  const result = await soak(ctx, soakSeconds, gc);
  ctx.destroy();
  return JSON.stringify(result);
});

// One more check that a destroyed context still computes nothing wrong: a fresh one works.
await step('fresh device after all of the above', async () => {
  const ctx = await acquireNodeGpu();
  const gpu = new Gpu(ctx);
  const A = gpu.upload([4], 'f32', [1, 2, 3, 4]);
  const C = gpu.tensor([4], 'f32');
  await matmul(gpu, A, A, C, { M: 2, N: 2, K: 2 });
  const out = [...(await gpu.read(C))];
  gpu.destroy();
  ctx.destroy();
  if (out.join() !== '7,10,15,22') throw new Error(`got ${out}`);
  return 'ok';
});

console.log(`[node] ${passed} passed, ${failed} failed`);
await nodePlatform.exit(failed === 0 ? 0 : 1);
