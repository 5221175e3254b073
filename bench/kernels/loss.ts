/**
 * Loss-family benchmark: GB/s of the teacher, the fused soft cross-entropy (in-place gradient), the
 * metric terms and the hard-label cross-entropy. These kernels are memory-bound; bytes count what
 * each kernel streams (a row re-read by a later pass counts again, as it does on the GPU).
 */
import type { Gpu } from '../../src/gpu/gpu.ts';
import { hardCrossEntropy, softCrossEntropy } from '../../src/kernels/loss.ts';
import { eagle3Metrics } from '../../src/kernels/metrics.ts';
import { buildTeacher } from '../../src/kernels/teacher.ts';
import { Rng } from '../../src/util/random.ts';
import { buildVocabMapping } from '../../src/model/eagle3/vocab-mapping.ts';
import { medianSeconds, type BenchRecord } from '../record.ts';

export interface LossBenchShape {
  /** B·S rows; one sequence of `rows` positions. */
  rows: number;
  vocab: number;
  draftVocab: number;
}

export async function benchLoss(gpu: Gpu, shape: LossBenchShape = { rows: 2048, vocab: 8000, draftVocab: 2000 }, reps = 5): Promise<BenchRecord[]> {
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
  const labels = gpu.upload([R], 'i32', Int32Array.from({ length: R }, () => rng.int(0, V)), 'labels');
  const dT = gpu.tensor([R, V], 'f32', 'dlogits');
  const lossOut = gpu.zeros([4], 'f32', 'lossOut');
  const metricsOut = gpu.zeros([4], 'f32', 'metricsOut');
  const tag = `R${R} V${V} D${D}`;
  const out: BenchRecord[] = [];
  const record = (variant: string, seconds: number, bytes: number): void => {
    out.push({ family: 'loss', variant, shape: tag, ms: seconds * 1e3, gbps: bytes / seconds / 1e9 });
  };

  const teacher = { logits: T, t2d: t2dT, used: usedT, lossMask, p, pTilde, tok, positionMask };
  record('teacher', await medianSeconds(gpu, () => buildTeacher(gpu, teacher, shape), reps), 4 * (R * V + 4 * R * D));
  const steps = { rows: R, draftVocab: D, seqLen: R, step: 0, slot: 0 };
  record('metrics', await medianSeconds(gpu, () => eagle3Metrics(gpu, { logits: z, pTilde, tok, lossMask, positionMask, used: usedT, metricsOut }, steps), reps), 4 * 3 * R * D);
  // In place: the gradient overwrites the logits each run, which keeps the byte count honest.
  record('soft-ce fwd+bwd', await medianSeconds(gpu, () => softCrossEntropy(gpu, { logits: z, p, positionMask, lossOut }, { ...steps, grad: 'in-place' }), reps), 4 * 5 * R * D);
  record('hard-ce fwd+bwd', await medianSeconds(gpu, () => hardCrossEntropy(gpu, { logits: T, labels, dlogits: dT, lossOut }, { rows: R, vocab: V, grad: 'separate', slot: 0 }), reps), 4 * 3 * R * V);
  gpu.release(T, t2dT, usedT, lossMask, p, pTilde, tok, positionMask, z, labels, dT, lossOut, metricsOut);
  return out;
}
