/**
 * Float64 reference for the end of a SwiGLU MLP with gate | up packed per row: the backward that
 * kernels/swiglu-down-grads.ts computes, and the forward it differentiates (for the central-difference
 * check, test/reference/swiglu-down.test.ts):
 *   forward    act = silu(gate) ⊙ up,  hOut = act · Wᵀ + h1          gu [R, 2I], W [H, I], h1 [R, H]
 *   backward   dAct = dY · W,  dgu = dgate | dup of act given dAct,  dW = dW0 + dYᵀ · act
 */
import { matmulRef } from './matmul.ts';
import { swigluBackwardRef, swigluForwardRef } from './swiglu.ts';

export interface SwigluDownRefShape {
  rows: number;
  inter: number;
  hidden: number;
}

/** gate [R, I] and up [R, I] of a packed gu [R, 2I]. */
function unpack(gu: ArrayLike<number>, rows: number, inter: number): { gate: Float64Array; up: Float64Array } {
  const gate = new Float64Array(rows * inter);
  const up = new Float64Array(rows * inter);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < inter; c++) {
      gate[r * inter + c] = gu[r * 2 * inter + c];
      up[r * inter + c] = gu[r * 2 * inter + inter + c];
    }
  }
  return { gate, up };
}

export function swigluDownForwardRef(
  gu: ArrayLike<number>,
  w: ArrayLike<number>,
  h1: ArrayLike<number>,
  s: SwigluDownRefShape,
): Float64Array {
  const { gate, up } = unpack(gu, s.rows, s.inter);
  const act = swigluForwardRef(gate, up);
  return matmulRef(act, w, h1, { M: s.rows, N: s.hidden, K: s.inter, transB: true, beta: 1 });
}

export function swigluDownGradsRef(
  dy: ArrayLike<number>,
  w: ArrayLike<number>,
  gu: ArrayLike<number>,
  dw0: ArrayLike<number>,
  s: SwigluDownRefShape,
): { dgu: Float64Array; dw: Float64Array } {
  const { rows: R, inter: I, hidden: H } = s;
  const { gate, up } = unpack(gu, R, I);
  const act = swigluForwardRef(gate, up);
  const dAct = matmulRef(dy, w, undefined, { M: R, N: I, K: H });
  const { dgate, dup } = swigluBackwardRef(gate, up, dAct);
  const dgu = new Float64Array(R * 2 * I);
  for (let r = 0; r < R; r++) {
    for (let c = 0; c < I; c++) {
      dgu[r * 2 * I + c] = dgate[r * I + c];
      dgu[r * 2 * I + I + c] = dup[r * I + c];
    }
  }
  const dw = matmulRef(dy, act, dw0, { M: H, N: I, K: R, transA: true, beta: 1 });
  return { dgu, dw };
}
