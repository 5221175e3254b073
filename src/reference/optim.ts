/**
 * Float64 reference for the optimizer step: global L2 norm with torch clip_grad_norm_ semantics
 * and one PyTorch AdamW update (decoupled weight decay, bias correction).
 */

/** ‖(g₁, g₂, …)‖₂ over every element of every gradient. */
export function globalNormRef(grads: readonly ArrayLike<number>[]): number {
  let sum = 0;
  for (const g of grads) for (let i = 0; i < g.length; i++) sum += g[i] * g[i];
  return Math.sqrt(sum);
}

/**
 * torch clip_grad_norm_: the gradients are multiplied by min(1, maxNorm / (norm + 1e-6)). Where
 * torch would spread a NaN or infinite norm into every weight, SpecLab returns -1, the sentinel
 * that makes the AdamW step a no-op and the scaled gradients zero (the step is skipped).
 */
export function clipCoefRef(norm: number, maxNorm: number): number {
  if (!Number.isFinite(norm)) return -1;
  return Math.min(1, maxNorm / (norm + 1e-6));
}

export interface RefAdamwArgs {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** 1-based step count of this update. */
  step: number;
}

/** One AdamW step; returns the new parameter and moments (inputs are not modified). */
export function adamwRef(
  param: ArrayLike<number>,
  grad: ArrayLike<number>,
  m: ArrayLike<number>,
  v: ArrayLike<number>,
  args: RefAdamwArgs,
): { param: Float64Array; m: Float64Array; v: Float64Array } {
  const { lr, beta1, beta2, eps, weightDecay, step } = args;
  const n = param.length;
  const out = { param: new Float64Array(n), m: new Float64Array(n), v: new Float64Array(n) };
  const bc1 = 1 - beta1 ** step;
  const bc2 = 1 - beta2 ** step;
  for (let i = 0; i < n; i++) {
    const g = grad[i];
    const mi = beta1 * m[i] + (1 - beta1) * g;
    const vi = beta2 * v[i] + (1 - beta2) * g * g;
    const mHat = mi / bc1;
    const vHat = vi / bc2;
    out.m[i] = mi;
    out.v[i] = vi;
    out.param[i] = param[i] * (1 - lr * weightDecay) - (lr * mHat) / (Math.sqrt(vHat) + eps);
  }
  return out;
}
