import { Gpu } from '../../src/gpu/gpu.ts';
import { sizeClass } from '../../src/gpu/buffer-pool.ts';
import { copyStrided } from '../../src/kernels/copy-strided.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('gpu/buffer-pool', (t) => {
  t.test('memoryStats counts tensors, pooled free buffers, staging and uniforms; peak and resetMemoryPeak', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const base = gpu.memoryStats();
    // A fresh Gpu already holds its uniform arena (512 slots of 256 bytes).
    assert(base.liveBytes >= 512 * 256, `baseline ${base.liveBytes} holds the uniform arena`);
    assertEqual(base.peakBytes, base.liveBytes, 'peak at creation');

    const a = gpu.tensor([1000], 'f32', 'a');
    const b = gpu.tensor([3, 7], 'f32', 'b');
    const ab = sizeClass(4000) + sizeClass(84);
    assertEqual(gpu.memoryStats().liveBytes, base.liveBytes + ab, 'two tensors, by size class');

    // Released buffers stay allocated in the pool's free list: the device still holds them.
    gpu.release(a);
    assertEqual(gpu.memoryStats().liveBytes, base.liveBytes + ab, 'released but pooled');
    const freed = gpu.pool.trim();
    assertEqual(freed, sizeClass(4000), 'trim frees the released buffer');
    assertEqual(gpu.memoryStats().liveBytes, base.liveBytes + sizeClass(84), 'after trim');
    assertEqual(gpu.memoryStats().peakBytes, base.liveBytes + ab, 'peak remembers both tensors');

    gpu.resetMemoryPeak();
    assertEqual(gpu.memoryStats().peakBytes, gpu.memoryStats().liveBytes, 'reset peak = live');

    // A readback creates a staging buffer of the tensor's size class, kept in the ring.
    const beforeRead = gpu.memoryStats().liveBytes;
    await gpu.read(b);
    assertEqual(gpu.memoryStats().liveBytes, beforeRead + sizeClass(84), 'staging buffer counted');
    gpu.release(b);
    gpu.destroy();
    await gpu.staging.drain();
    assertEqual(gpu.memoryStats().liveBytes, 0, 'destroy frees everything counted');
  });

  t.test('readOnce reads a split tensor slice by slice, holding one slice of staging at a time', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    // 4 parts of 3 rows × 5 f32 (60 bytes each) under a 64-byte binding; slices of 16 bytes cut rows and parts.
    const values = Float32Array.from({ length: 12 * 5 }, (_, i) => i * 0.5 - 7);
    Object.defineProperty(gpu, 'maxBindingBytes', { value: 64 });
    const x = gpu.upload([12, 5], 'f32', values, 'x');
    assertEqual(x.parts.length, 4, 'four parts');
    await gpu.sync();
    const before = gpu.memoryStats().liveBytes;
    gpu.resetMemoryPeak();
    const back = (await gpu.readOnce(x, 16)) as Float32Array;
    assertEqual(Array.from(back).join(), Array.from(values).join(), 'every value, in order');
    assertEqual(gpu.memoryStats().peakBytes, before + sizeClass(16), 'one slice of staging at the peak');
    assertEqual(gpu.memoryStats().liveBytes, before, 'no staging left');
    const whole = (await gpu.readOnce(x)) as Float32Array;
    assertEqual(Array.from(whole).join(), Array.from(values).join(), 'the default slice: the same values');
    for (const bad of [0, 6, 1.5]) {
      let message = '';
      await gpu.readOnce(x, bad).catch((err: Error) => (message = err.message));
      assert(/Gpu.readOnce: sliceBytes must be a positive multiple of 4/.test(message), `slice ${bad} refused: ${message}`);
    }
    gpu.release(x);
    gpu.destroy();
  });

  t.test('chunked tensors count every part', ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    Object.defineProperty(gpu, 'maxBindingBytes', { value: 1024 });
    const base = gpu.memoryStats().liveBytes;
    const big = gpu.tensor([100, 10], 'f32', 'big');
    assertEqual(big.parts.length, 4, 'parts');
    const expected = big.parts.reduce((s, p) => s + sizeClass(p.byteLength), 0);
    assertEqual(gpu.memoryStats().liveBytes - base, expected, 'sum of the parts');
    gpu.destroy();
  });
  t.test(
    'discard destroys a tensor once the work reading it is submitted: the copy still reads it, the pool keeps nothing',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      const values = Float32Array.from({ length: 300 }, (_, i) => i - 100);
      const sample = gpu.upload([300], 'f32', values, 'sample');
      const batch = gpu.zeros([300], 'f32', 'batch');
      const before = gpu.memoryStats().liveBytes;
      gpu.copyInto(sample, batch, 0);
      gpu.discard(sample);
      assertEqual(gpu.memoryStats().liveBytes, before - sizeClass(300 * 4), 'its buffer is gone at once');
      assertEqual(gpu.pool.stats().freeBuffers, 0, 'nothing pooled');
      assertEqual(Array.from((await gpu.read(batch)) as Float32Array).join(), Array.from(values).join(), 'the encoded copy read it');
      assertThrows(() => gpu.discard(sample), /BufferPool.discard: buffer "sample" does not belong to this pool/, 'twice: refused');
      gpu.release(batch);
      gpu.destroy();
    },
  );

  t.test(
    'a label gets the buffer it had last time when that one is free, so a repeated step reuses its bind groups',
    async ({ gpu: ctx }) => {
      const gpu = new Gpu(ctx);
      let created = 0;
      const count = ctx.bindGroupCreated.bind(ctx);
      ctx.bindGroupCreated = () => {
        created++;
        count();
      };
      // One "step": a and b live together, a is released first. Last-in-first-out alone would hand a
      // the buffer b had (b's, released last, is on top), and so rotate the two every step.
      const buffersOf: string[] = [];
      const ids = new Map<GPUBuffer, number>();
      const id = (t: { part: { buffer: GPUBuffer } }) => ids.get(t.part.buffer) ?? ids.set(t.part.buffer, ids.size).get(t.part.buffer)!;
      const createdBy: number[] = [];
      for (let step = 0; step < 4; step++) {
        const before = created;
        const a = gpu.tensor([64], 'f32', 'step.a');
        const b = gpu.tensor([64], 'f32', 'step.b');
        await copyStrided(gpu, a, b, { rows: 1, width: 64 });
        buffersOf.push(`${id(a)} ${id(b)}`);
        gpu.release(a);
        gpu.release(b);
        createdBy.push(created - before);
      }
      assertDeepEqual(buffersOf, ['0 1', '0 1', '0 1', '0 1'], 'each label keeps its buffer');
      assertDeepEqual(createdBy, [1, 0, 0, 0], 'one bind group, created by the first step only');
      // A label whose buffer is leased takes the last released one.
      const held = gpu.tensor([64], 'f32', 'step.a');
      const other = gpu.tensor([64], 'f32', 'step.a');
      assert(id(held) === 0 && id(other) === 1, 'a second step.a gets the free buffer');
      gpu.release(held, other);
      // A trimmed buffer is forgotten: the label gets a new one.
      gpu.pool.trim();
      const fresh = gpu.tensor([64], 'f32', 'step.a');
      assert(id(fresh) === 2, 'after trim, a new buffer');
      gpu.release(fresh);
      gpu.destroy();
    },
  );
});
