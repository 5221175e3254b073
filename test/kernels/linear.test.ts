/**
 * The row-split-aware linear layer (src/kernels/linear.ts) against the float64 matmul reference:
 * forward, input gradient and weight gradient with the weight split into several uneven row parts
 * (a lowered binding limit, as a 500 MiB lm_head is split under a 128 MiB one), with and without
 * the activations split too; unsplit, it equals the plain matmul bit for bit. Nothing leaks.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import type { GpuContext } from '../../src/gpu/context.ts';
import { linearForward, linearInputGrad, linearWeightGrad, type LinearShape } from '../../src/kernels/linear.ts';
import { matmul } from '../../src/kernels/matmul.ts';
import { matmulRef } from '../../src/reference/matmul.ts';
import { f16ToF32Ref, f32ToF16Ref } from '../../src/reference/cast.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertEqual, assertRejects, assertRelClose, sameBits } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

/** f32 products against float64: the matmul kernels' own bound (MATMUL_TOLERANCE for f32 variants). */
const TOL = 1e-5;
const IN = 48;
const OUT = 70;
/** 21 rows of a 48-wide weight per part: W [70, 48] splits 21 + 21 + 21 + 7. */
const LIMIT = 4096;
/** First use compiles every matmul variant's pipelines; on a shared software adapter that can take minutes. */
const SLOW = 300_000;

function data(seed: number, rows: number) {
  const rng = new Rng(seed);
  return {
    x: rng.floats(rows * IN, 1),
    w: rng.floats(OUT * IN, 0.5),
    y0: rng.floats(rows * OUT, 1),
    dy: rng.floats(rows * OUT, 1),
    dx0: rng.floats(rows * IN, 1),
    dw0: rng.floats(OUT * IN, 1),
  };
}

function lowered(ctx: GpuContext, limit: number): Gpu {
  const gpu = new Gpu(ctx);
  Object.defineProperty(gpu, 'maxBindingBytes', { value: limit });
  return gpu;
}

/** Run all five products (beta 0 and 1 variants) on `gpu`; activations are [B, S, ·] when `outer` is set. */
async function runAll(gpu: Gpu, rows: number, d: ReturnType<typeof data>, outer?: number) {
  const shape: LinearShape = { rows, inFeatures: IN, outFeatures: OUT };
  const act = (width: number) => (outer ? [outer, rows / outer, width] : [rows, width]);
  const x = gpu.upload(act(IN), 'f32', d.x, 'x');
  const w = gpu.upload([OUT, IN], 'f32', d.w, 'W');
  const dy = gpu.upload(act(OUT), 'f32', d.dy, 'dy');
  const y = gpu.tensor(act(OUT), 'f32', 'y');
  const yAcc = gpu.upload(act(OUT), 'f32', d.y0, 'yAcc');
  const dx = gpu.tensor(act(IN), 'f32', 'dx');
  const dxAcc = gpu.upload(act(IN), 'f32', d.dx0, 'dxAcc');
  const dw = gpu.zeros([OUT, IN], 'f32', 'dW');
  const dwAcc = gpu.upload([OUT, IN], 'f32', d.dw0, 'dWAcc');
  const all: Tensor[] = [x, w, dy, y, yAcc, dx, dxAcc, dw, dwAcc];
  await linearForward(gpu, x, w, y, shape);
  await linearForward(gpu, x, w, yAcc, shape, { alpha: 0.5, beta: 1 });
  await linearInputGrad(gpu, dy, w, dx, shape);
  await linearInputGrad(gpu, dy, w, dxAcc, shape, { beta: 1 });
  await linearWeightGrad(gpu, dy, x, dw, shape);
  await linearWeightGrad(gpu, dy, x, dwAcc, shape, { beta: 1 });
  const [outY, outYAcc, outDx, outDxAcc, outDw, outDwAcc] = await Promise.all([y, yAcc, dx, dxAcc, dw, dwAcc].map((t) => gpu.read(t)));
  return {
    tensors: { x, w, y, dx, dw },
    out: { y: outY, yAcc: outYAcc, dx: outDx, dxAcc: outDxAcc, dw: outDw, dwAcc: outDwAcc },
    release: () => gpu.release(...all),
  };
}

function references(rows: number, d: ReturnType<typeof data>) {
  return {
    y: matmulRef(d.x, d.w, undefined, { M: rows, N: OUT, K: IN, transB: true }),
    yAcc: matmulRef(d.x, d.w, d.y0, { M: rows, N: OUT, K: IN, transB: true, alpha: 0.5, beta: 1 }),
    dx: matmulRef(d.dy, d.w, undefined, { M: rows, N: IN, K: OUT }),
    dxAcc: matmulRef(d.dy, d.w, d.dx0, { M: rows, N: IN, K: OUT, beta: 1 }),
    dw: matmulRef(d.dy, d.x, undefined, { M: OUT, N: IN, K: rows, transA: true }),
    dwAcc: matmulRef(d.dy, d.x, d.dw0, { M: OUT, N: IN, K: rows, transA: true, beta: 1 }),
  };
}

async function splitCase(
  ctx: GpuContext,
  rows: number,
  outer: number | undefined,
  expectSplitActivations: boolean,
  note: (k: string, v: string) => void,
  tag: string,
) {
  const gpu = lowered(ctx, LIMIT);
  const d = data(rows, rows);
  const r = await runAll(gpu, rows, d, outer);
  const partRows = r.tensors.w.parts.map((p) => p.rowCount);
  assert(partRows.length >= 3 && new Set(partRows).size > 1, `W is split into >= 3 uneven parts: ${partRows.join(' + ')}`);
  assertEqual(r.tensors.x.isChunked && r.tensors.y.isChunked && r.tensors.dx.isChunked, expectSplitActivations, 'activations split');
  assert(r.tensors.dw.parts.length === partRows.length, 'dW is split like W');
  const ref = references(rows, d);
  let worst = 0;
  for (const key of Object.keys(ref) as (keyof typeof ref)[])
    worst = Math.max(worst, assertRelClose(r.out[key], ref[key], TOL, `${tag}: ${key}`));
  note(`${tag}RelErr`, worst.toExponential(2));
  r.release();
  assertEqual(gpu.pool.stats().liveBuffers, 0, `${tag}: every scratch and tensor released`);
  gpu.destroy();
}

export default defineSuite('kernels/linear', (t) => {
  t.test(
    'W split 21 + 21 + 21 + 7 rows, activations whole: forward, input grad, weight grad (beta 0 and 1) match float64',
    ({ gpu, note }) => splitCase(gpu, 8, undefined, false, note, 'weightSplit'),
    { timeoutMs: SLOW },
  );

  t.test(
    'W and the [37, ·] activations split at different rows (views and scratch copies): all products match float64',
    ({ gpu, note }) => splitCase(gpu, 37, undefined, true, note, 'allSplit'),
    { timeoutMs: SLOW },
  );

  t.test('[B, S, ·] activations split by sequence (as a batch of hidden states is) match float64', ({ gpu, note }) =>
    splitCase(gpu, 36, 6, true, note, 'batchSplit'),
  );

  t.test(
    'an f16 weight split into parts (a frozen target lm_head), with [B, S, ·] output split over its B·S rows: forward matches float64 on the f16-rounded weight',
    async ({ gpu: ctx, note }) => {
      // 1 KiB: one [6, 70] output slab (1680 bytes) exceeds it, so y splits over its 24 rows of 70;
      // W [70, 48] f16 splits into 10 parts of 7 rows.
      const gpu = lowered(ctx, 1024);
      const rows = 24;
      const d = data(17, rows);
      const wBits = Uint16Array.from(d.w, f32ToF16Ref);
      const wRounded = Float64Array.from(wBits, f16ToF32Ref);
      const x = gpu.upload([rows, IN], 'f32', d.x, 'x');
      const w = gpu.upload([OUT, IN], 'f16', wBits, 'W.f16');
      const y = gpu.tensor([4, 6, OUT], 'f32', 'y');
      assertEqual(y.splitDims, 2, 'y is split over its B·S rows');
      assert(w.parts.length > 2 && y.parts.length > 2, `W and y are split (${w.parts.length}, ${y.parts.length} parts)`);
      await linearForward(gpu, x, w, y, { rows, inFeatures: IN, outFeatures: OUT });
      const ref = matmulRef(d.x, wRounded, undefined, { M: rows, N: OUT, K: IN, transB: true });
      note('relErr', assertRelClose(await gpu.read(y), ref, TOL, 'y = x·Wᵀ with f16 W').toExponential(2));
      gpu.release(x, w, y);
      assertEqual(gpu.pool.stats().liveBuffers, 0, 'every scratch released');
      gpu.destroy();
    },
    { timeoutMs: SLOW },
  );

  t.test('unsplit, each product is the plain matmul bit for bit', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const rows = 37;
    const d = data(3, rows);
    const r = await runAll(gpu, rows, d);
    assert(!r.tensors.w.isChunked && !r.tensors.x.isChunked, 'nothing split at the device limit');
    const x = gpu.upload([rows, IN], 'f32', d.x, 'x');
    const w = gpu.upload([OUT, IN], 'f32', d.w, 'W');
    const dy = gpu.upload([rows, OUT], 'f32', d.dy, 'dy');
    const y = gpu.upload([rows, OUT], 'f32', d.y0, 'y');
    const dx = gpu.upload([rows, IN], 'f32', d.dx0, 'dx');
    const dw = gpu.upload([OUT, IN], 'f32', d.dw0, 'dW');
    await matmul(gpu, x, w, y, { M: rows, N: OUT, K: IN }, { transB: true, alpha: 0.5, beta: 1 });
    await matmul(gpu, dy, w, dx, { M: rows, N: IN, K: OUT }, { beta: 1 });
    await matmul(gpu, dy, x, dw, { M: OUT, N: IN, K: rows }, { transA: true, beta: 1 });
    const [py, pdx, pdw] = await Promise.all([y, dx, dw].map((t) => gpu.read(t)));
    assert(sameBits(r.out.yAcc, py), 'forward (alpha 0.5, beta 1) equals matmul bit for bit');
    assert(sameBits(r.out.dxAcc, pdx), 'input grad (beta 1) equals matmul bit for bit');
    assert(sameBits(r.out.dwAcc, pdw), 'weight grad (beta 1) equals matmul bit for bit');
    gpu.release(x, w, dy, y, dx, dw);
    r.release();
    assertEqual(gpu.pool.stats().liveBuffers, 0, 'every tensor released');
    gpu.destroy();
  });

  t.test('split runs are deterministic: the same inputs give the same bits twice', async ({ gpu: ctx }) => {
    const gpu = lowered(ctx, LIMIT);
    const d = data(9, 37);
    const a = await runAll(gpu, 37, d);
    const b = await runAll(gpu, 37, d);
    for (const key of Object.keys(a.out) as (keyof typeof a.out)[]) {
      assert(
        Array.from(a.out[key]).every((v, i) => Object.is(v, b.out[key][i])),
        `${key} identical across runs`,
      );
    }
    a.release();
    b.release();
    gpu.destroy();
  });

  t.test('bad operands are refused naming the tensor', async ({ gpu: ctx }) => {
    const gpu = lowered(ctx, LIMIT);
    const shape: LinearShape = { rows: 8, inFeatures: IN, outFeatures: OUT };
    const x = gpu.tensor([8, IN], 'f32', 'x');
    const w = gpu.tensor([OUT, IN], 'f32', 'W');
    const short = gpu.tensor([8, OUT - 1], 'f32', 'yShort');
    const ids = gpu.tensor([8, IN], 'i32', 'ids');
    const flat = gpu.tensor([OUT * IN], 'f32', 'flatW');
    await assertRejects(
      () => linearForward(gpu, x, w, short, shape),
      /linearForward: y \(yShort \[8, 69\]\) must hold 8 × 70 elements/,
      'short output',
    );
    await assertRejects(() => linearInputGrad(gpu, short, w, x, shape), /linearInputGrad: dy \(yShort/, 'short dy');
    await assertRejects(() => linearWeightGrad(gpu, short, ids, w, shape), /linearWeightGrad: dy \(yShort/, 'short dy in weight grad');
    await assertRejects(
      () => linearForward(gpu, ids, w, gpu.tensor([8, OUT], 'f32', 'y'), shape),
      /linearForward: x \(ids\) must be f32, got i32/,
      'i32 input',
    );
    await assertRejects(
      () => linearWeightGrad(gpu, gpu.tensor([8, OUT], 'f32', 'dy'), x, flat, shape),
      /dW \(flatW \[3360\]\) is split into parts that are not whole rows of width 48/,
      'flat split weight',
    );
    await assertRejects(
      () => linearForward(gpu, x, w, short, { ...shape, rows: 0 }),
      /linearForward: rows must be a positive integer, got 0/,
      'zero rows',
    );
    gpu.destroy();
  });
});
