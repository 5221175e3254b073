import { Gpu } from '../../src/gpu/gpu.ts';
import { allKernels, KERNEL_FAMILIES } from '../../src/kernels/registry.ts';
import { SHADERS } from '../../src/kernels/shaders.gen.ts';
import { assert, assertDeepEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('kernels/registry', (t) => {
  t.test('every embedded shader belongs to exactly one registered kernel, and names are unique', () => {
    const names = allKernels().map((k) => k.name);
    assertDeepEqual([...new Set(names)].sort(), [...names].sort(), 'kernel names are unique');
    assertDeepEqual([...names].sort(), Object.keys(SHADERS).sort(), 'registered kernels = embedded shaders');
    for (const f of KERNEL_FAMILIES) assert(f.kernels.length > 0, `family ${f.family} has kernels`);
  });

  t.test('every kernel compiles on this device; feature-gated ones are refused clearly without the feature', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    let compiled = 0;
    let refused = 0;
    for (const kernel of allKernels()) {
      const missing = (kernel.requires ?? []).filter((f) => !ctx.hasFeature(f));
      if (missing.length === 0) {
        await gpu.pipelines.get(kernel);
        compiled++;
      } else {
        await assertRejects(() => gpu.pipelines.get(kernel), new RegExp(`needs the WebGPU feature "${missing[0]}"`), kernel.name);
        refused++;
      }
    }
    note('compiled', compiled);
    note('refusedForMissingFeature', refused);
    gpu.destroy();
  });
});
