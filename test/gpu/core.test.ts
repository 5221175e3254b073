import { Gpu } from '../../src/gpu/gpu.ts';
import { sizeClass } from '../../src/gpu/buffer-pool.ts';
import { CORE_DEFAULT_LIMITS, defaultLimitsRequested, featureLevelRequested } from '../../src/gpu/context.ts';
import {
  GpuDeviceLostError,
  GpuError,
  GpuInternalError,
  GpuOutOfMemoryError,
  GpuValidationError,
  toTypedError,
} from '../../src/gpu/errors.ts';
import { planRowChunks } from '../../src/gpu/tensor.ts';
import { matmul } from '../../src/kernels/matmul.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('gpu/core', (t) => {
  t.test('size classes waste at most 25% and are monotone', () => {
    let prev = 0;
    for (let n = 1; n < 1 << 20; n = Math.ceil(n * 1.07) + 1) {
      const c = sizeClass(n);
      assert(c >= n && c >= 256, `class ${c} < request ${n}`);
      assert(n < 256 || c <= n * 1.25 + 4, `class ${c} wastes more than 25% of ${n}`);
      assert(c >= prev, 'classes must not shrink as requests grow');
      prev = c;
    }
  });

  t.test('row chunk planning splits only when a binding would overflow', () => {
    assertDeepEqual(planRowChunks([10, 4], 'f32', 1 << 20), [10], 'fits one binding');
    assertDeepEqual(planRowChunks([10, 4], 'f32', 48), [3, 3, 3, 1], '16-byte rows, 48-byte limit');
    assertThrows(() => planRowChunks([2, 100], 'f32', 256), /binding limit/, 'a row larger than a binding');
  });

  t.test('buffer pool reuses released buffers of the same class', ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const a = gpu.tensor([1000], 'f32');
    gpu.release(a);
    const b = gpu.tensor([990], 'f32');
    assertEqual(b.part.buffer, a.part.buffer, 'same size class → same buffer');
    const stats = gpu.pool.stats();
    assertEqual(stats.hits, 1, 'pool hits');
    assertThrows(
      () => {
        gpu.release(b);
        gpu.release(b);
      },
      /released twice/,
      'double release',
    );
    gpu.destroy();
  });

  t.test('upload / read round trip for every dtype', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const f = gpu.upload(
      [3, 5],
      'f32',
      Float32Array.from({ length: 15 }, (_, i) => i * 0.5 - 3),
    );
    const i = gpu.upload([7], 'i32', [-3, -2, -1, 0, 1, 2, 2147483647]);
    const u = gpu.upload([2], 'u32', [0, 4294967295]);
    const h = gpu.upload([3], 'f16', [0x3c00, 0xc000, 0x7bff]);
    assertDeepEqual(
      [...(await gpu.read(f))],
      Array.from({ length: 15 }, (_, k) => k * 0.5 - 3),
      'f32',
    );
    assertDeepEqual([...(await gpu.read(i))], [-3, -2, -1, 0, 1, 2, 2147483647], 'i32');
    assertDeepEqual([...(await gpu.read(u))], [0, 4294967295], 'u32');
    assertDeepEqual([...(await gpu.read(h))], [0x3c00, 0xc000, 0x7bff], 'f16 bits (odd count padded to 4 bytes)');
    gpu.destroy();
  });

  t.test('chunked tensor: a binding limit of 1 KiB splits a 4 KiB tensor and round-trips', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    Object.defineProperty(gpu, 'maxBindingBytes', { value: 1024 });
    const data = Float32Array.from({ length: 1000 }, (_, k) => k);
    const tensor = gpu.upload([100, 10], 'f32', data, 'big');
    assertEqual(tensor.parts.length, 4, 'parts (25 rows of 40 bytes per 1 KiB binding)');
    assertThrows(() => tensor.part, /split into 4 parts/, 'single-part access names the chunking');
    assertDeepEqual([...(await gpu.read(tensor))], [...data], 'chunked round trip');
    gpu.destroy();
  });

  t.test('many dispatches are batched into few submits', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx, { maxDispatchesPerSubmit: 16 });
    const A = gpu.upload([16], 'f32', new Float32Array(16).fill(1));
    const C = gpu.zeros([16], 'f32');
    const before = { ...gpu.batcher.stats };
    for (let k = 0; k < 40; k++) await matmul(gpu, A, A, C, { M: 4, N: 4, K: 4 }, { beta: 1, variant: 'naive' });
    const out = await gpu.read(C);
    assertEqual(out[0], 160, 'accumulated 40 times 4');
    assertEqual(gpu.batcher.stats.dispatches - before.dispatches, 40, 'dispatches');
    assertEqual(gpu.batcher.stats.submits - before.submits, 3, 'submits (16 + 16 + 8)');
    gpu.destroy();
  });

  t.test(
    'while the device is idle a batch goes after idleSubmitDispatches, while it is busy after maxDispatchesPerSubmit',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx, { maxDispatchesPerSubmit: 12, idleSubmitDispatches: 4 });
      const A = gpu.upload([16], 'f32', new Float32Array(16).fill(1));
      const C = gpu.zeros([16], 'f32');
      const step = () => matmul(gpu, A, A, C, { M: 4, N: 4, K: 4 }, { beta: 1, variant: 'naive' });
      await step(); // compiles
      await gpu.sync(); // the host has seen the device finish: idle
      const s0 = gpu.batcher.stats.submits;
      for (let k = 0; k < 4; k++) await step();
      assertEqual(gpu.batcher.stats.submits, s0, 'four encoded, none submitted yet');
      await step();
      assertEqual(gpu.batcher.stats.submits, s0 + 1, 'the fifth dispatch sent the first four at once');
      // Submitted and not seen finished: the device counts as busy, so the batch grows to 12.
      for (let k = 0; k < 11; k++) await step();
      assertEqual(gpu.batcher.stats.submits, s0 + 1, 'busy: twelve pending, still one submit');
      await step();
      assertEqual(gpu.batcher.stats.submits, s0 + 2, 'the thirteenth sent the twelve');
      // A finish seen for an older submit says nothing of the newer one.
      gpu.batcher.noteFinished(s0 + 1);
      for (let k = 0; k < 5; k++) await step();
      assertEqual(gpu.batcher.stats.submits, s0 + 2, 'an older submit done does not make the device idle');
      // A readback maps once its submit has run: with nothing submitted since, the device is idle again.
      assertEqual((await gpu.read(C))[0], 4 * 23, 'accumulated 23 times 4');
      const s1 = gpu.batcher.stats.submits;
      for (let k = 0; k < 5; k++) await step();
      assertEqual(gpu.batcher.stats.submits, s1 + 1, 'after the readback the fifth dispatch submits again');
      assertEqual((await gpu.read(C))[0], 4 * 28, 'every dispatch ran once');
      gpu.destroy();
    },
  );

  t.test(
    'idleSubmitDispatches outside [1, maxDispatchesPerSubmit], or maxDispatchesPerSubmit below 1, is refused by name',
    ({ gpu: ctx }) => {
      assertThrows(() => new Gpu(ctx, { idleSubmitDispatches: 0 }), /idleSubmitDispatches must be an integer in \[1, 64\], got 0/, 'zero');
      assertThrows(
        () => new Gpu(ctx, { maxDispatchesPerSubmit: 8, idleSubmitDispatches: 9 }),
        /idleSubmitDispatches must be an integer in \[1, 8\], got 9/,
        'above the maximum',
      );
      assertThrows(
        () => new Gpu(ctx, { maxDispatchesPerSubmit: 0 }),
        /maxDispatchesPerSubmit must be a positive integer, got 0/,
        'no batch',
      );
    },
  );

  t.test('readLater does not submit while encoding continues; it resolves at the next idle turn', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const x = gpu.upload([4], 'f32', [1, 2, 3, 4]);
    const C = gpu.zeros([4], 'f32');
    // Compile the pipeline first: compiling waits on the event loop, which would let the flush run.
    await matmul(gpu, x, x, C, { M: 2, N: 2, K: 2 }, { variant: 'naive', beta: 1 });
    await gpu.sync();
    const submits = gpu.batcher.stats.submits;
    let resolved = false;
    const pending = gpu.readLater(x).then((v) => {
      resolved = true;
      return v;
    });
    // Encoding more work with only microtask awaits keeps everything in the same batch.
    for (let i = 0; i < 5; i++) await matmul(gpu, x, x, C, { M: 2, N: 2, K: 2 }, { variant: 'naive', beta: 1 });
    assertEqual(gpu.batcher.stats.submits, submits, 'no submit while the loop keeps encoding');
    assertEqual(resolved, false, 'not resolved before a submit');
    assertDeepEqual([...(await pending)], [1, 2, 3, 4], 'resolved after the idle-turn flush');
    assertEqual(gpu.batcher.stats.submits, submits + 1, 'one submit carried the copy and the five dispatches');
    gpu.destroy();
  });

  t.test('an invalid shader is a GpuValidationError naming the kernel', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const bad = {
      name: 'test/broken',
      source: '// broken\n@compute @workgroup_size(1) fn main() { let x: f32 = undefined_thing; }',
      bindings: [] as const,
    };
    const err = await assertRejects(() => gpu.pipelines.get(bad), /test\/broken/, 'broken shader');
    assert(err instanceof GpuValidationError, `expected GpuValidationError, got ${err.name}`);
    gpu.destroy();
  });

  t.test('an invalid dispatch surfaces as a typed error on readback, not as zeros', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const A = gpu.upload([4], 'f32', [1, 2, 3, 4]);
    const kernel = await gpu.pipelines.get((await import('../../src/kernels/matmul.ts')).MATMUL_KERNELS.naive);
    // Bind the same buffer as read-only and read-write in one dispatch: a validation error.
    gpu.batcher.dispatch(kernel, new Uint8Array(32), [A.binding(), A.binding(), A.binding()], [1, 1, 1]);
    await assertRejects(() => gpu.read(A), /validation/i, 'aliasing writable binding');
    gpu.destroy();
  });

  t.test('timer reports GPU time for a region', async ({ gpu: ctx, note }) => {
    const gpu = new Gpu(ctx);
    const A = gpu.upload([128 * 128], 'f32', new Float32Array(128 * 128).fill(1));
    const C = gpu.tensor([128 * 128], 'f32');
    const timed = await gpu.timer.time(() => matmul(gpu, A, A, C, { M: 128, N: 128, K: 128 }));
    assert(timed.seconds > 0 && timed.seconds < 10, `implausible region time ${timed.seconds}s`);
    note('source', timed.source);
    note('ms', Number((timed.seconds * 1e3).toFixed(3)));
    gpu.destroy();
  });

  t.test('a timed region is not split at idleSubmitDispatches: its 20 dispatches go in one submit', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx, { maxDispatchesPerSubmit: 64, idleSubmitDispatches: 4 });
    const A = gpu.upload([16], 'f32', new Float32Array(16).fill(1));
    const C = gpu.zeros([16], 'f32');
    const step = () => matmul(gpu, A, A, C, { M: 4, N: 4, K: 4 }, { beta: 1, variant: 'naive' });
    await step(); // compiles
    await gpu.sync(); // idle: outside a region the fifth dispatch would submit
    const s0 = gpu.batcher.stats.submits;
    await gpu.timer.time(async () => {
      for (let k = 0; k < 20; k++) await step();
    });
    assertEqual(gpu.batcher.stats.submits, s0 + 1, 'one submit for the region');
    assertEqual((await gpu.read(C))[0], 4 * 21, 'every dispatch ran once');
    gpu.destroy();
  });

  t.test('WebGPU error classes map to typed errors with the operation named', () => {
    const oom = toTypedError(new GPUOutOfMemoryError('no room'), 'allocate lm_head');
    assert(oom instanceof GpuOutOfMemoryError && /allocate lm_head/.test(oom.message) && /no room/.test(oom.message), oom.message);
    const bad = toTypedError(new GPUValidationError('bad binding'), 'dispatch x');
    assert(bad instanceof GpuValidationError && /dispatch x/.test(bad.message), bad.message);
    const internal = toTypedError(new GPUInternalError('driver'), 'compile');
    assert(internal instanceof GpuInternalError, internal.name);
    const lost = new GpuDeviceLostError('unknown', 'driver reset');
    assert(lost instanceof GpuError && /restart from the last checkpoint/.test(lost.message), lost.message);
  });

  t.test('a destroyed context refuses further use instead of computing garbage', async ({ platform }) => {
    const ctx = await platform.acquireGpu();
    ctx.destroy();
    assertThrows(() => ctx.throwIfFailed(), /after destroy/, 'use after destroy');
    ctx.destroy();
  });

  t.test(
    "defaultLimits: the device at WebGPU's default limits with no optional feature; SPECLAB_DEFAULT_LIMITS parsed strictly",
    async ({ platform }) => {
      const ctx = await platform.acquireGpu({ defaultLimits: true });
      try {
        const r = ctx.record;
        for (const f of ['shader-f16', 'subgroups', 'timestamp-query']) assertEqual(ctx.hasFeature(f), false, `no ${f}`);
        assertEqual(r.limits.maxComputeWorkgroupStorageSize, 16384, "16 KiB of workgroup memory, WebGPU's default");
        assertEqual(r.limits.maxStorageBuffersPerShaderStage, 8, '8 storage buffers per stage');
        assertEqual(r.limits.maxComputeInvocationsPerWorkgroup, 256, '256 invocations');
        assertEqual(r.limits.maxStorageBufferBindingSize, 128 * 1024 * 1024, '128 MiB bindings');
      } finally {
        ctx.destroy();
      }
      assertEqual(defaultLimitsRequested(undefined), false, 'unset');
      assertEqual(defaultLimitsRequested('0'), false, '0');
      assertEqual(defaultLimitsRequested('1'), true, '1');
      assertThrows(() => defaultLimitsRequested('yes'), /^SPECLAB_DEFAULT_LIMITS must be 1 or 0, got "yes"$/, 'a bad value named');
    },
  );

  t.test(
    "featureLevel compatibility at default limits: WebGPU's core defaults asked of a compatibility adapter, and a kernel runs; SPECLAB_FEATURE_LEVEL parsed strictly",
    async ({ platform, note }) => {
      const ctx = await platform.acquireGpu({ defaultLimits: true, featureLevel: 'compatibility' });
      try {
        const r = ctx.record;
        note('featureLevel', r.featureLevel);
        // Dawn (Node, Chromium) offers compatibility mode; Deno's wgpu takes the request as it can.
        if (r.runtime !== 'deno') assertEqual(r.featureLevel, 'compatibility', 'Dawn gives a compatibility-mode device');
        for (const [name, value] of Object.entries(CORE_DEFAULT_LIMITS))
          assert(r.limits[name] === undefined || r.limits[name] >= value, `${name} = ${r.limits[name]} ≥ core default ${value}`);
        for (const f of ['shader-f16', 'subgroups', 'timestamp-query']) assertEqual(ctx.hasFeature(f), false, `no ${f}`);
        const gpu = new Gpu(ctx);
        // The variant policy's choice for this device, at a size its tiled kernels take.
        const n = 64;
        const A = gpu.upload(
          [n, n],
          'f32',
          Float32Array.from({ length: n * n }, (_, i) => (i % 7) - 3),
        );
        const C = gpu.zeros([n, n], 'f32');
        await matmul(gpu, A, A, C, { M: n, N: n, K: n });
        const out = await gpu.read(C);
        let want = 0;
        for (let k = 0; k < n; k++) want += ((k % 7) - 3) * (((k * n) % 7) - 3);
        assertEqual(out[0], want, 'C[0,0] of A·A on the compatibility device');
        gpu.destroy();
      } finally {
        ctx.destroy();
      }
      assertEqual(featureLevelRequested(undefined), 'core', 'unset');
      assertEqual(featureLevelRequested('compatibility'), 'compatibility', 'compatibility');
      assertThrows(
        () => featureLevelRequested('compat'),
        /^SPECLAB_FEATURE_LEVEL must be core or compatibility, got "compat"$/,
        'a bad value named',
      );
    },
  );

  t.test('the adapter record lists features and the requested limits', ({ gpu: ctx }) => {
    const r = ctx.record;
    assert(r.limits.maxStorageBufferBindingSize >= 128 * 1024 * 1024, 'binding limit requested at the adapter value');
    assert(r.limits.maxComputeInvocationsPerWorkgroup >= 256, 'invocations limit');
    assert(Array.isArray(r.features), 'features listed');
    for (const f of ['shader-f16', 'subgroups', 'timestamp-query']) {
      assertEqual(ctx.hasFeature(f), r.features.includes(f), `feature ${f} consistent between record and device`);
    }
  });
});
