/**
 * What a rollout must capture from the target, and the loud check run before any `put`
 * (docs/features.md §6). A mismatch here means the draft would silently train on the wrong tensors
 * (wrong layers, wrong width, wrong vocabulary), so it fails with the sample id in the message.
 */
import type { TargetRepr } from '../contracts/enums.ts';
import type { Tensor } from '../gpu/tensor.ts';

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
  for (const name of capture.featureNames) if (!(name in tensors)) fail(`feature "${name}" missing from the capture (have ${Object.keys(tensors).join(', ')})`);
  for (const [name, t] of Object.entries(tensors)) if (t.shape.length === 0) fail(`feature "${name}" has a zero-rank shape`);
  if (options.recordedAuxLayerIds && options.recordedAuxLayerIds.join() !== capture.auxLayerIds.join()) {
    fail(`aux layers captured [${options.recordedAuxLayerIds}] differ from the requested [${capture.auxLayerIds}]`);
  }
  const aux = tensors[options.auxFeatureName ?? 'hidden_state'];
  if (aux && capture.auxLayerIds.length > 0) {
    const width = aux.shape[aux.shape.length - 1];
    if (width !== expectedAuxWidth(capture)) fail(`aux hidden width ${width} != ${capture.auxLayerIds.length} layers x ${capture.targetHiddenSize}`);
  }
  const target = tensors[options.targetFeatureName ?? 'target'];
  if (target) {
    const dim = target.shape[target.shape.length - 1];
    const want = expectedTargetDim(capture);
    if (want !== undefined && dim !== want) fail(`target (${capture.targetRepr}) last dim ${dim} != expected ${want}`);
    if (capture.targetRepr === 'pruned_logits' && !capture.vocabMapVersion) fail('pruned_logits targets need a vocabMapVersion');
  }
}
