/**
 * The draft's SwiGLU MLP of one TTT step, h_out = h1 + (silu(n·W_gᵀ) ⊙ n·W_uᵀ)·W_dᵀ with n =
 * post_attention_layernorm(h1), whole or over row chunks.
 *
 * Whole (`chunkRows` ≥ R): gate, up and act are computed once and, in training, kept for the
 * backward. Gate and up come from one projection where the weights are stacked (MlpActivations).
 * Chunked: at real widths the packed gate | up [R, 2I] f32 is the largest activation of a step (896 MiB
 * at 8,192 tokens of the Llama-3.1-8B draft, over a binding), so the forward runs `chunkRows` rows at a
 * time and keeps nothing of the MLP; the backward encodes each chunk's gate, up and act again from the
 * kept n before its gradients (one more [C, H]·[H, 2I] matmul per chunk, or two of [H, I]). Every row is computed by the
 * same kernels as in the whole MLP; the weight gradients are summed chunk by chunk (a different order
 * of the same terms, within 1e-6 relative; test/model/eagle3-mlp-chunks.test.ts).
 */
import type { Gpu } from '../../gpu/gpu.ts';
import { rowChunkRows } from '../../gpu/row-chunks.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { copyRows } from '../../gpu/tensor-views.ts';
import { linearForward } from '../../kernels/linear.ts';
import { linearGrads } from '../../kernels/linear-grads.ts';
import { linearForwardResidual } from '../../kernels/linear-residual.ts';
import { linearSwiglu } from '../../kernels/linear-swiglu.ts';
import { swigluBackward, swigluForward } from '../../kernels/swiglu.ts';
import { swigluDownGrads } from '../../kernels/swiglu-down-grads.ts';
import { rowsAsF32 } from './fc-chunks.ts';
import type { Eagle3Parameters } from './parameters.ts';

/**
 * The MLP's activations of `rows` rows, kept by a whole MLP in training: act [rows, I], and gate and
 * up either packed in one [rows, 2I] tensor (`gateUp`, gate then up in each row: one projection on
 * the stacked weights, Eagle3Parameters.gateUp) or as two [rows, I] tensors (`gate`, `up`) where the
 * weights are not stacked.
 */
export type MlpActivations = { act: Tensor } & ({ gateUp: Tensor } | { gate: Tensor; up: Tensor });

/** The tensors of `a`, to release. */
export function mlpActivationTensors(a: MlpActivations): Tensor[] {
  return 'gateUp' in a ? [a.gateUp, a.act] : [a.gate, a.up, a.act];
}

/**
 * Rows per chunk of the MLP: all R when its widest tensor, the packed gate | up [R, 2I] f32, fits one
 * binding and 128 MiB (gpu/row-chunks.ts).
 */
export function mlpChunkRows(rows: number, intermediateSize: number, maxBindingBytes: number): number {
  return rowChunkRows(rows, 2 * intermediateSize * 4, maxBindingBytes);
}

/** gate = n·W_gᵀ, up = n·W_uᵀ and act = silu(gate) ⊙ up of `rows` rows of n. */
async function mlpActivations(gpu: Gpu, params: Eagle3Parameters, n: Tensor, rows: number, tag: string): Promise<MlpActivations> {
  const { hiddenSize: H, intermediateSize: I } = params.config;
  const w = params.weights;
  const act = gpu.tensor([rows, I], 'f32', `${tag}.act`);
  if (params.gateUp) {
    const gateUp = gpu.tensor([rows, 2 * I], 'f32', `${tag}.gateUp`);
    // One dispatch where the device takes it (kernels/linear-swiglu.ts), else the product and swiglu.
    await linearSwiglu(gpu, { x: n, w: params.gateUp.value, gu: gateUp, act }, { rows, hidden: H, inter: I });
    return { gateUp, act };
  }
  const gate = gpu.tensor([rows, I], 'f32', `${tag}.gate`);
  const up = gpu.tensor([rows, I], 'f32', `${tag}.up`);
  const shape = { rows, inFeatures: H, outFeatures: I };
  await linearForward(gpu, n, w.gate.value, gate, shape);
  await linearForward(gpu, n, w.up.value, up, shape);
  await swigluForward(gpu, gate, up, act, { rows, inter: I });
  return { gate, up, act };
}

/**
 * The forward from n [R, H]. With `hOut`, writes h_out = h1 + MLP(n) into it (training's and the
 * gradient-free forward; the backward's recompute passes none). Whole and `keep`, returns gate, up
 * and act for the backward; otherwise returns undefined and releases them.
 */
export async function mlpForward(
  gpu: Gpu,
  params: Eagle3Parameters,
  x: { n: Tensor; h1: Tensor; hOut: Tensor | undefined },
  rows: number,
  chunkRows: number,
  keep: boolean,
  tag: string,
): Promise<MlpActivations | undefined> {
  const { hiddenSize: H, intermediateSize: I } = params.config;
  const w = params.weights;
  const whole = chunkRows >= rows;
  if (!whole && !x.hOut) return undefined; // chunked: the backward makes each chunk's activations itself
  for (let r0 = 0; r0 < rows; r0 += chunkRows) {
    const n = Math.min(chunkRows, rows - r0);
    const nC = (await rowsAsF32(gpu, x.n, r0, n, rows, `${tag}.n[${r0}:]`)).rows;
    const a = await mlpActivations(gpu, params, nC, n, tag);
    if (x.hOut && whole) {
      // h_out = h1 + act · W_dᵀ: one dispatch where the device takes it, else a copy of h1 and the product.
      await linearForwardResidual(gpu, { x: a.act, w: w.down.value, res: x.h1, y: x.hOut }, { rows: n, inFeatures: I, outFeatures: H });
    } else if (x.hOut) {
      // h_out rows = h1 rows + act · W_dᵀ (matmul with beta = 1 onto a copy of h1's rows).
      const hC = gpu.tensor([n, H], 'f32', `${tag}.hOut[${r0}:]`);
      copyRows(gpu, x.h1, r0, hC, 0, n);
      await linearForward(gpu, a.act, w.down.value, hC, { rows: n, inFeatures: I, outFeatures: H }, { beta: 1 });
      copyRows(gpu, hC, 0, x.hOut, r0, n);
      gpu.release(hC);
    }
    if (nC !== x.n) gpu.release(nC);
    if (whole && keep) return a;
    gpu.release(...mlpActivationTensors(a));
  }
  return undefined;
}

/**
 * The backward from dHOut [R, H]: accumulates W_d, W_g and W_u's gradients and writes dn [R, H].
 * `kept` are the whole MLP's activations; without them each chunk's are encoded again from n.
 */
export async function mlpBackward(
  gpu: Gpu,
  params: Eagle3Parameters,
  x: { n: Tensor; dHOut: Tensor; dn: Tensor },
  kept: MlpActivations | undefined,
  rows: number,
  chunkRows: number,
  tag: string,
): Promise<void> {
  const { hiddenSize: H, intermediateSize: I } = params.config;
  const w = params.weights;
  const step = kept ? rows : Math.min(chunkRows, rows);
  for (let r0 = 0; r0 < rows; r0 += step) {
    const n = Math.min(step, rows - r0);
    const shape = (outDim: number, inDim: number) => ({ rows: n, inFeatures: inDim, outFeatures: outDim });
    const nC = (await rowsAsF32(gpu, x.n, r0, n, rows, `${tag}.n[${r0}:]`)).rows;
    const dHC = (await rowsAsF32(gpu, x.dHOut, r0, n, rows, `${tag}.dHOut[${r0}:]`)).rows;
    const a = kept ?? (await mlpActivations(gpu, params, nC, n, `${tag}.re`));
    const dnC = n === rows ? x.dn : gpu.tensor([n, H], 'f32', `${tag}.dn[${r0}:]`);
    // h_out = h1 + act·W_dᵀ; act = silu(gate) ⊙ up; gate = n·W_gᵀ, up = n·W_uᵀ.
    const grads: Tensor[] = [];
    if ('gateUp' in a && params.gateUp) {
      // Packed: W_d's gradient and dgate | dup per row (one dispatch where the device takes it,
      // kernels/swiglu-down-grads.ts), then both weight gradients and dn from one pair of products.
      const dGateUp = gpu.tensor([n, 2 * I], 'f32', `${tag}.dGateUp`);
      grads.push(dGateUp);
      const down = { dy: dHC, w: w.down.value, act: a.act, gu: a.gateUp, dgu: dGateUp, dw: w.down.grad };
      await swigluDownGrads(gpu, down, { rows: n, inter: I, hidden: H });
      await linearGrads(gpu, { dy: dGateUp, w: params.gateUp.value, x: nC, dx: dnC, dw: params.gateUp.grad }, shape(2 * I, H));
    } else if ('gate' in a) {
      const dAct = gpu.tensor([n, I], 'f32', `${tag}.dAct`);
      await linearGrads(gpu, { dy: dHC, w: w.down.value, x: a.act, dx: dAct, dw: w.down.grad }, shape(H, I));
      const dGate = gpu.tensor([n, I], 'f32', `${tag}.dGate`);
      const dUp = gpu.tensor([n, I], 'f32', `${tag}.dUp`);
      grads.push(dAct, dGate, dUp);
      await swigluBackward(gpu, a.gate, a.up, dAct, dGate, dUp, { rows: n, inter: I });
      // dn sums the gate's product, then the up's.
      await linearGrads(gpu, { dy: dGate, w: w.gate.value, x: nC, dx: dnC, dw: w.gate.grad }, shape(I, H));
      await linearGrads(gpu, { dy: dUp, w: w.up.value, x: nC, dx: dnC, dw: w.up.grad }, shape(I, H), { betaX: 1 });
    } else {
      throw new Error(`mlpBackward: activations packed as gate | up, but the parameters have no stacked gate_up weight`);
    }
    if (dnC !== x.dn) {
      copyRows(gpu, dnC, 0, x.dn, r0, n);
      gpu.release(dnC);
    }
    gpu.release(...grads);
    if (!kept) gpu.release(...mlpActivationTensors(a));
    if (nC !== x.n) gpu.release(nC);
    if (dHC !== x.dHOut) gpu.release(dHC);
  }
}
