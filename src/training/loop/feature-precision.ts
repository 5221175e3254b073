/**
 * Feature precision on the trainer side: features stored as f16 (CaptureConfig.featurePrecision,
 * `--feature-precision f16`) are widened to f32 on the GPU right before the draft's forward, which
 * trains in f32 exactly as it does on f32 features (the widening is exact, so the only difference
 * is the f16 rounding of the features themselves). Also the session's one rule for what the
 * precision adds to a run's contract.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import { fmtShape, Tensor } from '../../gpu/tensor.ts';
import type { FeaturePrecision } from '../../inference/capture.ts';
import { toF32 } from '../../kernels/cast.ts';

export { FEATURE_PRECISIONS, type FeaturePrecision } from '../../inference/capture.ts';

/** The float features of an EAGLE3 batch that may arrive as f16. */
export const WIDENED_FEATURES = ['hidden_state', 'target'] as const;

/**
 * `t` as the draft will see it after widening: an f16 tensor described as f32 of the same shape
 * and parts, for shape validation only (it is never bound: its bytes are still f16).
 */
export function asWidened(t: Tensor): Tensor {
  return t.dtype === 'f16' ? new Tensor(t.shape, 'f32', t.parts, t.label, t.splitDims) : t;
}

/**
 * The batch's tensors with every f16 feature of `names` widened to a new f32 tensor; `made` lists
 * the new tensors (the caller releases them once the step is encoded). Without an f16 feature the
 * tensors are returned as they are and nothing is dispatched.
 */
export async function widenF16Features(
  gpu: Gpu | undefined,
  tensors: Readonly<Record<string, Tensor>>,
  names: readonly string[],
  where: string,
): Promise<{ tensors: Record<string, Tensor>; made: Tensor[] }> {
  const out: Record<string, Tensor> = { ...tensors };
  const made: Tensor[] = [];
  const half = names.filter((n) => tensors[n]?.dtype === 'f16');
  if (half.length === 0) return { tensors: out, made };
  if (!gpu)
    throw new Error(
      `${where}: f16 feature ${half[0]} ${fmtShape(tensors[half[0]].shape)} needs the draft's Gpu to be widened to f32 (pass { gpu } to the strategy)`,
    );
  try {
    for (const name of half) {
      const wide = await toF32(gpu, tensors[name], name);
      made.push(wide);
      out[name] = wide;
    }
  } catch (err) {
    gpu.release(...made);
    throw err;
  }
  return { tensors: out, made };
}

/**
 * What the precision adds to a run's contract hash: nothing for f32 (so every f32 run keeps the
 * contract it always had), the precision itself otherwise (its features differ from f32's, so a
 * checkpoint of one must not resume as the other).
 */
export function precisionContract(precision: FeaturePrecision): { featurePrecision?: FeaturePrecision } {
  return precision === 'f32' ? {} : { featurePrecision: precision };
}
