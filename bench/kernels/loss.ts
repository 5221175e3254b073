/**
 * Loss-family benchmark: GB/s of the teacher (from full logits, and from compact features: the
 * rollout's target stats and the pruned teacher), the fused soft cross-entropy (in-place gradient), the
 * metric terms and the hard-label cross-entropy, for every row layout this device runs
 * (src/kernels/row-variant.ts), timed interleaved; `vsWide` is the `wide` (original) variant's time
 * over this one's. These kernels are memory-bound; bytes count what each kernel streams (a row
 * re-read by a later pass counts again, as it does on the GPU). `benchStepLosses` times the EAGLE3
 * step's loss reduction: every TTT step's row losses in one dispatch (reduceStepLosses) against one
 * reduction per step and per total term, as the step did before. `benchStepRows` times the batched
 * heads' metric terms and soft cross-entropy of L TTT steps in one dispatch each
 * (kernels/loss-steps.ts) against one of each per step (eagle3MetricsRows, softCrossEntropyRows).
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { hardCrossEntropy, reduceStepLoss, softCrossEntropy, softCrossEntropyRows } from '../../src/kernels/loss.ts';
import { eagle3MetricsSteps, softCrossEntropySteps } from '../../src/kernels/loss-steps.ts';
import { elementView } from '../../src/gpu/tensor-views.ts';
import { LOSS_ROW_GEOMETRY } from '../../src/kernels/loss-rows.ts';
import { eagle3Metrics, eagle3MetricsRows } from '../../src/kernels/metrics.ts';
import { availableRowVariants, rowDeviceFacts, type RowVariant } from '../../src/kernels/row-variant.ts';
import { buildTeacher, buildTeacherPruned, targetStats } from '../../src/kernels/teacher.ts';
import { Rng } from '../../src/util/random.ts';
import { buildVocabMapping } from '../../src/model/eagle3/vocab-mapping.ts';
import { reduceStepLosses, rowLossStride, stepLossSlots } from '../../src/model/eagle3/step-head.ts';
import type { BenchRecord } from '../record.ts';
import { interleavedMedians } from './interleave.ts';
import type { RowBenchRecord } from './rmsnorm.ts';

export interface LossBenchShape {
  /** B·S rows; one sequence of `rows` positions. */
  rows: number;
  vocab: number;
  draftVocab: number;
}

/** The lab config (4 x 56 tokens, V = D = 2048) and a mid-sized one. */
export const LOSS_BENCH_SHAPES: readonly LossBenchShape[] = [
  { rows: 224, vocab: 2048, draftVocab: 2048 },
  { rows: 2048, vocab: 8000, draftVocab: 2000 },
];

export async function benchLoss(gpu: Gpu, shape: LossBenchShape = LOSS_BENCH_SHAPES[1], reps = 5): Promise<RowBenchRecord[]> {
  const { rows: R, vocab: V, draftVocab: D } = shape;
  const rng = new Rng(9);
  const counts = new Map<number, number>();
  for (let v = 0; v < V; v++) counts.set(v, rng.int(0, 100));
  const { used, t2d } = buildVocabMapping(counts, V, D);
  const T = gpu.upload([R, V], 'f32', rng.floats(R * V, 4), 'target');
  const t2dT = gpu.upload([V], 'i32', t2d, 't2d');
  const usedT = gpu.upload([D], 'i32', used, 'used');
  const lossMask = gpu.upload([R], 'i32', new Int32Array(R).fill(1), 'lossMask');
  const p = gpu.tensor([R, D], 'f32', 'p');
  const pTilde = gpu.tensor([R, D], 'f32', 'pTilde');
  const tok = gpu.tensor([R], 'i32', 'tok');
  const positionMask = gpu.tensor([R], 'i32', 'positionMask');
  const z = gpu.upload([R, D], 'f32', rng.floats(R * D, 2), 'logits');
  const labels = gpu.upload(
    [R],
    'i32',
    Int32Array.from({ length: R }, () => rng.int(0, V)),
    'labels',
  );
  const dT = gpu.tensor([R, V], 'f32', 'dlogits');
  const lse = gpu.tensor([R], 'f32', 'lse');
  const lossOut = gpu.zeros([4], 'f32', 'lossOut');
  const metricsOut = gpu.zeros([4], 'f32', 'metricsOut');
  const tag = `R${R} V${V} D${D}`;
  const out: RowBenchRecord[] = [];
  const variants = availableRowVariants('loss', LOSS_ROW_GEOMETRY, gpu.ctx.features, rowDeviceFacts(gpu.ctx));

  const teacher = { logits: T, t2d: t2dT, used: usedT, lossMask, p, pTilde, tok, positionMask };
  const steps = { rows: R, draftVocab: D, seqLen: R, step: 0, slot: 0 };
  const kernels: { name: string; bytes: number; run: (variant: RowVariant) => Promise<void> }[] = [
    { name: 'teacher', bytes: 4 * (R * V + 4 * R * D), run: (variant) => buildTeacher(gpu, teacher, shape, { variant }) },
    // Compact features: the rollout's pass over the full logits, then the trainer's teacher from the draft columns.
    { name: 'target-stats', bytes: 4 * R * V, run: (variant) => targetStats(gpu, { logits: T, lse, tok }, shape, { variant }) },
    {
      name: 'teacher-pruned',
      bytes: 4 * 4 * R * D,
      run: (variant) => buildTeacherPruned(gpu, { logits: z, lse, tok, t2d: t2dT, lossMask, p, pTilde, positionMask }, shape, { variant }),
    },
    {
      name: 'metrics',
      bytes: 4 * 3 * R * D,
      run: (variant) =>
        eagle3Metrics(gpu, { logits: z, pTilde, tok, lossMask, positionMask, used: usedT, metricsOut }, { ...steps, variant }),
    },
    // In place: the gradient overwrites the logits each run, which keeps the byte count honest.
    {
      name: 'soft-ce fwd+bwd',
      bytes: 4 * 5 * R * D,
      run: (variant) => softCrossEntropy(gpu, { logits: z, p, positionMask, lossOut }, { ...steps, grad: 'in-place', variant }),
    },
    {
      name: 'hard-ce fwd+bwd',
      bytes: 4 * 3 * R * V,
      run: (variant) =>
        hardCrossEntropy(gpu, { logits: T, labels, dlogits: dT, lossOut }, { rows: R, vocab: V, grad: 'separate', slot: 0, variant }),
    },
  ];
  for (const k of kernels) {
    const ms = await interleavedMedians(gpu, new Map(variants.map((v) => [v, () => k.run(v)])), reps);
    for (const v of variants) {
      const s = ms.get(v)!;
      out.push({
        family: 'loss',
        variant: `${k.name} ${v}`,
        shape: tag,
        ms: s * 1e3,
        gbps: k.bytes / s / 1e9,
        vsWide: ms.get('wide')! / s,
      });
    }
  }
  gpu.release(T, t2dT, usedT, lossMask, p, pTilde, tok, positionMask, z, labels, dT, lse, lossOut, metricsOut);
  return out;
}

/** The step's loss reduction at `rows` rows and `steps` TTT steps (the fixture's 80 × 4 and the lab's 224 × 4 by default). */
export async function benchStepLosses(
  gpu: Gpu,
  shapes: readonly [number, number][] = [
    [80, 4],
    [224, 4],
    [4096, 7],
  ],
): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(10);
  for (const [R, L] of shapes) {
    const stride = rowLossStride(R, gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256);
    const table = gpu.upload([L, stride], 'f32', rng.floats(L * stride), 'rowLosses');
    const rows = Array.from({ length: L }, () => gpu.upload([R], 'f32', rng.floats(R), 'rowLoss'));
    const lossOut = gpu.zeros([L + 1], 'f32', 'lossOut');
    const ms = await interleavedMedians(
      gpu,
      new Map<string, () => Promise<void>>([
        ['step losses, 1 dispatch', () => reduceStepLosses(gpu, table, lossOut, R, L, stride)],
        [
          `step losses, ${2 * L} dispatches`,
          async () => {
            for (let k = 0; k < L; k++) await reduceStepLoss(gpu, rows[k], lossOut, stepLossSlots(k, R, L));
          },
        ],
      ]),
    );
    for (const [variant, s] of ms) out.push({ family: 'loss', variant, shape: `R${R} L${L}`, ms: s * 1e3, gbps: (4 * R * L) / s / 1e9 });
    gpu.release(table, lossOut, ...rows);
  }
  return out;
}

/** Bytes a metrics + soft-CE pass streams per row of width D: z three times (two passes and the gradient), p and p̃ once. */
const stepRowBytes = (D: number) => 4 * 5 * D;

export async function benchStepRows(
  gpu: Gpu,
  shapes: readonly [number, number, number][] = [
    [80, 96, 4],
    [224, 2048, 4],
  ],
): Promise<BenchRecord[]> {
  const out: BenchRecord[] = [];
  const rng = new Rng(11);
  const align = gpu.ctx.limits.minStorageBufferOffsetAlignment ?? 256;
  for (const [R, D, L] of shapes) {
    const stride = rowLossStride(R, align);
    const statsStride = rowLossStride(4 * R, align);
    const logits = gpu.upload([L * R, D], 'f32', rng.floats(L * R * D, 2), 'logits');
    const [p, pTilde] = [0, 1].map(() => gpu.upload([R, D], 'f32', rng.floats(R * D).map(Math.abs), 'teacher'));
    const ones = gpu.upload([R], 'i32', new Int32Array(R).fill(1), 'mask');
    const tok = gpu.upload(
      [R],
      'i32',
      Int32Array.from({ length: R }, () => rng.int(0, D - 1)),
      'tok',
    );
    const used = gpu.upload(
      [D],
      'i32',
      Int32Array.from({ length: D }, (_, i) => i),
      'used',
    );
    const loss = gpu.zeros([L, stride], 'f32', 'rowLosses');
    const stats = gpu.zeros([L, statsStride], 'f32', 'rowStats');
    const t = { pTilde, tok, lossMask: ones, positionMask: ones, used };
    const scales = Array.from({ length: L }, (_, k) => 0.8 ** k / R);
    const shape = { rows: R, seqLen: R, draftVocab: D, firstStep: 0, steps: L };
    const step = (k: number) => ({
      rows: R,
      draftVocab: D,
      seqLen: R,
      step: k,
      slot: k,
      window: { firstRow: 0, rows: R },
      teacherWindow: undefined,
    });
    const ms = await interleavedMedians(
      gpu,
      new Map<string, () => Promise<void>>([
        [
          'step rows, 2 dispatches',
          async () => {
            await eagle3MetricsSteps(gpu, { logits, ...t, rowStats: stats }, { ...shape, tableStride: statsStride });
            await softCrossEntropySteps(
              gpu,
              { logits, p, positionMask: ones, rowLoss: loss },
              { ...shape, tableStride: stride, grad: 'in-place', gradScales: scales },
            );
          },
        ],
        [
          `step rows, ${2 * L} dispatches`,
          async () => {
            for (let k = 0; k < L; k++) {
              const z = elementView(gpu, logits, k * R * D, R * D, 'logits.k', [R, D]);
              const rowStats = elementView(gpu, stats, k * statsStride, 4 * R, 'rowStats.k', [R, 4]);
              const rowLoss = elementView(gpu, loss, k * stride, R, 'rowLoss.k');
              await eagle3MetricsRows(gpu, { logits: z, ...t, rowStats }, step(k));
              await softCrossEntropyRows(
                gpu,
                { logits: z, p, positionMask: ones, rowLoss },
                { ...step(k), grad: 'in-place', gradScale: 0.8 ** k },
              );
            }
          },
        ],
      ]),
    );
    for (const [variant, s] of ms)
      out.push({ family: 'loss', variant, shape: `R${R} D${D} L${L}`, ms: s * 1e3, gbps: (L * R * stepRowBytes(D)) / s / 1e9 });
    gpu.release(logits, p, pTilde, ones, tok, used, loss, stats);
  }
  return out;
}
