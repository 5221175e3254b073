import { Gpu } from '../src/gpu/gpu.ts';
import { matmul, type MatmulVariant } from '../src/kernels/matmul.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { Rng } from '../src/util/random.ts';
import { medianSeconds } from './record.ts';
const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
const rng = new Rng(1);
const shapes = [[224, 2048, 128], [224, 128, 2048], [2048, 128, 224], [224, 256, 128], [128, 384, 224]];
const variants: MatmulVariant[] = ['subgroup', 'blocked'];
const res: Record<string, number[]> = {};
for (let round = 0; round < 5; round++) {
  for (const [M, N, K] of shapes) for (const tA of [false, true]) for (const tB of [false, true]) for (const v of variants) {
    const a = gpu.upload([M * K], 'f32', rng.floats(M * K), 'A');
    const b = gpu.upload([K * N], 'f32', rng.floats(K * N), 'B');
    const c = gpu.tensor([M * N], 'f32', 'C');
    const once = () => matmul(gpu, a, b, c, { M, N, K }, { transA: tA, transB: tB, variant: v });
    const s = await medianSeconds(gpu, async () => { for (let i = 0; i < 4; i++) await once(); }, 3) / 4;
    const key = `${M}x${N}x${K}${tA ? ' tA' : ''}${tB ? ' tB' : ''} ${v}`;
    (res[key] ??= []).push(2 * M * N * K / s / 1e9);
    gpu.release(a, b, c);
  }
}
for (const [k, xs] of Object.entries(res)) { xs.sort((x, y) => x - y); console.log(k.padEnd(34), xs[2].toFixed(2), xs.map((x) => x.toFixed(1)).join(' ')); }
gpu.destroy();
await nodePlatform.exit(0);
