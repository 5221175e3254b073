import { Gpu } from '../../src/gpu/gpu.ts';
import { sizeClass } from '../../src/gpu/buffer-pool.ts';
import { assert, assertEqual } from '../harness/assert.ts';
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
});
