/**
 * What a rollout must capture from the target, and the loud check run before any `put`
 * (docs/features.md §6). A mismatch here means the draft would silently train on the wrong tensors
 * (wrong layers, wrong width, wrong vocabulary), so it fails with the sample id in the message.
 *
 * Feature precision: with `featurePrecision: 'f16'` the float features are cast to f16 on the GPU
 * before they enter the store (half the bytes in the store, the spill and the shards; SpecForge
 * keeps bf16, which WGSL lacks). A value f16 cannot hold (|x| > 65504, inf, NaN) refuses the
 * sample rather than storing inf: the draft would train on it silently.
 */
import type { TargetRepr } from '../contracts/enums.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { toF16 } from '../kernels/cast.ts';

/** How captured float features are stored: f32 (the default, as captured) or f16. */
export type FeaturePrecision = 'f32' | 'f16';
export const FEATURE_PRECISIONS: readonly FeaturePrecision[] = ['f32', 'f16'];

export interface CaptureConfig {
  readonly featureNames: readonly string[];
  /** Target layers whose outputs are concatenated into the draft input, in order. */
  readonly auxLayerIds: readonly number[];
  readonly targetRepr: TargetRepr;
  readonly targetHiddenSize: number;
  readonly targetVocabSize?: number;
  readonly draftVocabSize?: number;
  readonly vocabMapVersion?: string;
  readonly extra?: Readonly<Record<string, string | number | boolean>>;
  /** Float features stored as f32 (default) or f16 (see the file comment). */
  readonly featurePrecision?: FeaturePrecision;
}

export class CaptureMismatchError extends Error {
  override name = 'CaptureMismatchError';
}

export function expectedAuxWidth(capture: CaptureConfig): number {
  return capture.auxLayerIds.length * capture.targetHiddenSize;
}

export function expectedTargetDim(capture: CaptureConfig): number | undefined {
  switch (capture.targetRepr) {
    case 'hidden_state':
      return capture.targetHiddenSize;
    case 'logits':
      return capture.targetVocabSize;
    case 'pruned_logits':
      return capture.draftVocabSize;
  }
}

/** Throws CaptureMismatchError at the first failing check, prefixed with the sample id. */
export function verifyCapture(
  tensors: Readonly<Record<string, Tensor>>,
  capture: CaptureConfig,
  options: { sampleId: string; recordedAuxLayerIds?: readonly number[]; auxFeatureName?: string; targetFeatureName?: string },
): void {
  const fail = (message: string): never => {
    throw new CaptureMismatchError(`sample ${options.sampleId}: ${message}`);
  };
  for (const name of capture.featureNames)
    if (!(name in tensors)) fail(`feature "${name}" missing from the capture (have ${Object.keys(tensors).join(', ')})`);
  for (const [name, t] of Object.entries(tensors)) if (t.shape.length === 0) fail(`feature "${name}" has a zero-rank shape`);
  if (options.recordedAuxLayerIds && options.recordedAuxLayerIds.join() !== capture.auxLayerIds.join()) {
    fail(`aux layers captured [${options.recordedAuxLayerIds}] differ from the requested [${capture.auxLayerIds}]`);
  }
  const aux = tensors[options.auxFeatureName ?? 'hidden_state'];
  if (aux && capture.auxLayerIds.length > 0) {
    const width = aux.shape[aux.shape.length - 1];
    if (width !== expectedAuxWidth(capture))
      fail(`aux hidden width ${width} != ${capture.auxLayerIds.length} layers x ${capture.targetHiddenSize}`);
  }
  const target = tensors[options.targetFeatureName ?? 'target'];
  if (target) {
    const dim = target.shape[target.shape.length - 1];
    const want = expectedTargetDim(capture);
    if (want !== undefined && dim !== want) fail(`target (${capture.targetRepr}) last dim ${dim} != expected ${want}`);
    if (capture.targetRepr === 'pruned_logits' && !capture.vocabMapVersion) fail('pruned_logits targets need a vocabMapVersion');
  }
}

/**
 * Features stored f32 whatever the precision: compact features' per-row logsumexp enters the teacher
 * as exp(z − lse), where f16's 2^-11 relative rounding of an lse near 10 would scale p̃ by about 0.5%.
 * One f32 per token costs nothing beside the hidden states.
 */
export const KEPT_F32_FEATURES: readonly string[] = ['target_lse'];

/** A captured value f16 cannot hold: the sample is refused (terminally, like a capture mismatch). */
export class FeatureOverflowError extends CaptureMismatchError {
  override name = 'FeatureOverflowError';
}

/**
 * The features in `precision`: for 'f16', every f32 tensor but KEPT_F32_FEATURES cast to f16 on the
 * GPU (others as they are), the f32 originals released. Reads one overflow counter per feature back (a sync per sample:
 * the refusal must come before the put). On overflow nothing is released but the f16 copies, and
 * the caller still owns `tensors`. For 'f32' the record is returned as is.
 */
export async function toFeaturePrecision(
  gpu: Gpu,
  tensors: Readonly<Record<string, Tensor>>,
  precision: FeaturePrecision,
  sampleId: string,
): Promise<Record<string, Tensor>> {
  if (precision === 'f32') return { ...tensors };
  if (precision !== 'f16') throw new Error(`sample ${sampleId}: featurePrecision must be f32 or f16, got ${JSON.stringify(precision)}`);
  const out: Record<string, Tensor> = {};
  const made: Tensor[] = [];
  const counters: [string, Tensor][] = [];
  try {
    for (const [name, t] of Object.entries(tensors)) {
      if (t.dtype !== 'f32' || KEPT_F32_FEATURES.includes(name)) {
        out[name] = t;
        continue;
      }
      const counter = gpu.zeros([1], 'u32', `${name}-overflow`);
      counters.push([name, counter]);
      const half = await toF16(gpu, t, counter, name);
      made.push(half);
      out[name] = half;
    }
    const counts = counters.map(([, c]) => gpu.readLater(c));
    gpu.batcher.flush();
    const values = await Promise.all(counts);
    for (const [i, [name]] of counters.entries()) {
      const n = values[i][0];
      if (n > 0)
        throw new FeatureOverflowError(
          `sample ${sampleId}: feature "${name}" has ${n} value${n === 1 ? '' : 's'} outside the f16 range (|x| > 65504, inf or NaN); refusing to store it as f16 (train with --feature-precision f32)`,
        );
    }
  } catch (err) {
    gpu.release(...made);
    throw err;
  } finally {
    gpu.release(...counters.map(([, c]) => c));
  }
  gpu.release(
    ...Object.entries(tensors)
      .filter(([name, t]) => out[name] !== t)
      .map(([, t]) => t),
  );
  return out;
}
