import { Gpu } from '../../src/gpu/gpu.ts';
import { storageBindings } from '../../src/gpu/pipeline-cache.ts';
import { allKernels, KERNEL_FAMILIES } from '../../src/kernels/registry.ts';
import { shaderSource } from '../../src/kernels/shader-source.ts';
import { SHADERS } from '../../src/kernels/shaders.gen.ts';
import { assert, assertDeepEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('kernels/registry', (t) => {
  t.test('every embedded shader belongs to exactly one registered kernel, and names are unique', () => {
    const names = allKernels().map((k) => k.name);
    assertDeepEqual([...new Set(names)].sort(), [...names].sort(), 'kernel names are unique');
    assertDeepEqual([...names].sort(), Object.keys(SHADERS).sort(), 'registered kernels = embedded shaders');
    for (const f of KERNEL_FAMILIES) assert(f.kernels.length > 0, `family ${f.family} has kernels`);
  });

  t.test('shaderSource appends launch geometry as u32 constants after the unchanged shader text', () => {
    const plain = shaderSource('matmul/naive');
    const specialised = shaderSource('matmul/naive', { WG_X: 16, WG_Y: 8 });
    assert(specialised.startsWith(plain), 'the shader text (and so every line number) is unchanged');
    assert(/\nconst WG_X: u32 = 16u;\nconst WG_Y: u32 = 8u;\n$/.test(specialised), 'one const per entry, at the end');
    assertThrows(() => shaderSource('matmul/naive', { TRANS_A: 1 }), /declares TRANS_A itself/, 'a name the shader declares');
    assertThrows(() => shaderSource('matmul/naive', { WG_X: 1.5 }), /not a u32/, 'a non-integer');
    assertThrows(() => shaderSource('matmul/naive', { wg: 1 }), /upper-case WGSL identifier/, 'a lower-case name');
  });

  t.test(
    'every kernel compiles on this device; one needing a missing feature or more storage buffers than the device binds is refused clearly',
    async ({ gpu: ctx, note }) => {
      const gpu = new Gpu(ctx);
      const allowed = ctx.limits.maxStorageBuffersPerShaderStage ?? 8;
      let compiled = 0;
      let refused = 0;
      let refusedForStorage = 0;
      for (const kernel of allKernels()) {
        const missing = (kernel.requires ?? []).filter((f) => !ctx.hasFeature(f));
        if (missing.length > 0) {
          await assertRejects(() => gpu.pipelines.get(kernel), new RegExp(`needs the WebGPU feature "${missing[0]}"`), kernel.name);
          refused++;
        } else if (storageBindings(kernel) > allowed) {
          await assertRejects(() => gpu.pipelines.get(kernel), /storage buffers, and this device allows/, kernel.name);
          refusedForStorage++;
        } else {
          await gpu.pipelines.get(kernel);
          compiled++;
        }
      }
      // A kernel past any device's limit is refused before its shader is compiled (so this one never is).
      const tooWide = { name: 'test/too-wide', source: '', bindings: Array(allowed + 1).fill('read') as 'read'[] };
      await assertRejects(() => gpu.pipelines.get(tooWide), new RegExp(`test/too-wide binds ${allowed + 1} storage buffers`), 'too wide');
      note('compiled', compiled);
      note('refusedForMissingFeature', refused);
      note('refusedForStorageLimit', refusedForStorage);
      gpu.destroy();
    },
  );
});
