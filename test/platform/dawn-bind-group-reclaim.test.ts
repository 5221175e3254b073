/**
 * Reclaiming dropped bind groups (src/platform/dawn-bind-group-reclaim.ts):
 *   - the reclaimer collects once per `every` bind groups, and refuses a count that is no count;
 *   - a destroyed Gpu lets go of its bind groups even while the object itself stays referenced;
 *   - in Node, bind groups dropped by caches that are let go (as each test's Gpu is) do not pile up:
 *     the platform runs collections as they are created, and on a CPU adapter the driver's memory
 *     mappings (one per live descriptor set) stay within a bound, far below the 65,530 a process
 *     may hold.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { PipelineCache } from '../../src/gpu/pipeline-cache.ts';
import { CEILING_KERNELS, copyVec4 } from '../../src/kernels/ceiling.ts';
import { BindGroupReclaimer, RECLAIM_EVERY_BIND_GROUPS } from '../../src/platform/dawn-bind-group-reclaim.ts';
import { nodeOnlyImport } from '../dataplane/backends.test.ts';
import { assert, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

type NodePlatform = typeof import('../../src/platform/node.ts');
type NodeFs = typeof import('node:fs');

export default defineSuite('platform/dawn-bind-group-reclaim', (t) => {
  t.test('the reclaimer collects once per `every` bind groups; a count that is no count is refused', () => {
    let collected = 0;
    const r = new BindGroupReclaimer(() => collected++, 3);
    for (let i = 0; i < 8; i++) r.created();
    assertEqual(collected, 2, 'collections after 8 bind groups, every 3');
    assertEqual(r.collections, 2, 'counted');
    r.created();
    assertEqual(collected, 3, 'the ninth');
    for (const bad of [0, -1, 1.5, Number.NaN])
      assertThrows(() => new BindGroupReclaimer(() => {}, bad), /every must be a positive integer/, String(bad));
  });

  t.test('Gpu.destroy() lets go of the bind groups its pipeline cache held', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const src = gpu.tensor([1024], 'f32', 'src');
    const dst = gpu.tensor([1024], 'f32', 'dst');
    await copyVec4(gpu, src, dst, 4);
    await gpu.sync();
    assert(gpu.pipelines.bindGroupCount > 0, 'the copy bound its buffers through the cache');
    gpu.release(src, dst);
    gpu.destroy();
    assertEqual(gpu.pipelines.bindGroupCount, 0, 'bind groups held after destroy()');
  });

  t.test(
    'Node: bind groups of dropped caches are collected as they are made; the driver mappings they hold stay bounded',
    async ({ gpu: ctx, note }) => {
      const { nodeBindGroupCollections } = await nodeOnlyImport<NodePlatform>('../../src/platform/node.ts');
      const { existsSync, readFileSync } = await nodeOnlyImport<NodeFs>('node:fs');
      // Linux lists a process's mappings; the CPU adapter's are named after its memfd allocations.
      const driverMappings = () =>
        existsSync('/proc/self/maps')
          ? readFileSync('/proc/self/maps', 'utf8')
              .split('\n')
              .filter((l) => l.includes('memfd:')).length
          : 0;
      const buffer = ctx.device.createBuffer({ size: 1 << 20, usage: GPUBufferUsage.STORAGE });
      const uniforms = ctx.device.createBuffer({ size: 256, usage: GPUBufferUsage.UNIFORM });
      const align = ctx.limits.minStorageBufferOffsetAlignment;
      const before = { collections: nodeBindGroupCollections(), mappings: driverMappings() };
      let peak = before.mappings;
      const perCache = 1000;
      const total = 20 * RECLAIM_EVERY_BIND_GROUPS;
      try {
        for (let made = 0; made < total; made += perCache) {
          // A cache per batch, let go after it, as a test's Gpu is: its bind groups become garbage.
          const cache = new PipelineCache(ctx);
          const kernel = await cache.get(CEILING_KERNELS.copy);
          for (let i = 0; i < perCache; i++) {
            const offset = (i % 1024) * align;
            cache.bindGroup(kernel, [
              { buffer: uniforms, offset: 0, size: 16 },
              { buffer, offset, size: 256 },
              { buffer, offset: (1 << 19) + offset, size: 256 },
            ]);
          }
          peak = Math.max(peak, driverMappings());
          // A GPU wait between batches, as tests and runs have: later event-loop turns run the
          // finalizers of collected wrappers, and the device reuses the descriptor sets they held.
          ctx.device.queue.submit([]);
          await ctx.device.queue.onSubmittedWorkDone();
        }
        const collections = nodeBindGroupCollections() - before.collections;
        note('collections', collections);
        note('peakMappingsAdded', peak - before.mappings);
        assert(collections >= Math.floor(total / RECLAIM_EVERY_BIND_GROUPS) - 1, `${collections} collections for ${total} bind groups`);
        // Dropped groups wait for at most one reclaim period, then for their finalizers and the device
        // to reuse their sets (a GPU wait later); with one live cache and the driver's pool granularity,
        // a few periods: a sixth of the 65,530 mappings a process may hold, however many are made.
        const bound = 4 * RECLAIM_EVERY_BIND_GROUPS + 2 * perCache + 1024;
        assert(
          peak - before.mappings <= bound,
          `driver mappings grew by ${peak - before.mappings} (bound ${bound}) for ${total} bind groups`,
        );
      } finally {
        buffer.destroy();
        uniforms.destroy();
      }
    },
    { only: ['node'] },
  );
});
