/**
 * The draft's lm_head backward, on its own so the forward (which runs it as soon as a step's loss
 * gradient exists, keeping no logits alive) and the backward do not import each other.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { linearGrads } from '../../kernels/linear-grads.ts';
import type { Eagle3Parameters } from './parameters.ts';

/**
 * The lm_head part of one step's backward, run by the forward as soon as the step's loss gradient
 * exists: W_lm.grad += dLogitsᵀ · f and dF = dLogits · W_lm (logits = f · W_lmᵀ).
 */
export async function lmHeadBackward(
  gpu: Gpu,
  params: Eagle3Parameters,
  dLogits: Tensor,
  f: Tensor,
  dF: Tensor,
  rows: number,
): Promise<void> {
  const { hiddenSize: H, draftVocabSize: D } = params.config;
  const w = params.weights.lmHead;
  // lm_head [D, H] is 500 MiB at the Llama-3 draft dims: linear.ts takes it (and its grad) split.
  const shape = { rows, inFeatures: H, outFeatures: D };
  await linearGrads(gpu, { dy: dLogits, w: w.value, x: f, dx: dF, dw: w.grad }, shape);
}
