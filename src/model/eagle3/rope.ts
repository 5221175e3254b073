/**
 * RoPE for the draft from host-built (cos, sin) tables (src/kernels/rope-table.ts), the way HF and
 * SpecForge use a float32 cos/sin cache: the angle is the f32 product position · invFreq and cos/sin
 * are exact for that angle, so the result does not depend on the WGSL sin/cos accuracy (about 1e-4
 * on some software adapters, e.g. Chromium's SwiftShader).
 *
 * Two tables: (cos, sin) for the forward and (cos, −sin), the rotation by −angle, for the backward
 * (R is orthogonal, so dx = Rᵀ dy = R(−a) dy). TTT step k reads row t + k (docs/eagle3.md §4: positions + the
 * number of cached steps), via a per-step positions tensor. Tables grow on demand.
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { buildRopeTable, inverseRopeTable } from '../../kernels/rope-table.ts';
import type { Eagle3Config } from '../../config/eagle3-config.ts';

export class Eagle3Rope {
  private forwardTable: Tensor | undefined;
  private inverseTable: Tensor | undefined;
  private rows = 0;

  constructor(
    private readonly gpu: Gpu,
    private readonly config: Eagle3Config,
  ) {}

  /** Tables covering positions 0..positions−1 (rebuilt larger when needed). */
  tables(positions: number): { forward: Tensor; inverse: Tensor } {
    if (!this.forwardTable || !this.inverseTable || positions > this.rows) {
      this.destroy();
      // Round up so growing sequence lengths do not rebuild the table every batch.
      const rows = Math.max(positions, Math.min(this.config.maxPositionEmbeddings + 20, 2 * positions));
      const { headDim, ropeTheta } = this.config;
      const table = buildRopeTable({ headDim, ropeTheta, ropeScaling: { type: 'default' } }, rows);
      const inverse = inverseRopeTable(table);
      this.forwardTable = this.gpu.upload([rows, headDim / 2, 2], 'f32', table, 'eagle3.rope.forward');
      this.inverseTable = this.gpu.upload([rows, headDim / 2, 2], 'f32', inverse, 'eagle3.rope.inverse');
      this.rows = rows;
    }
    return { forward: this.forwardTable, inverse: this.inverseTable };
  }

  /** i32 [B·S] positions t + step for each TTT step (rows r = b·S + t). */
  stepPositions(batch: number, seqLen: number, steps: number): Tensor[] {
    return Array.from({ length: steps }, (_, k) =>
      this.gpu.upload(
        [batch * seqLen],
        'i32',
        Int32Array.from({ length: batch * seqLen }, (_, r) => (r % seqLen) + k),
        `eagle3.positions.s${k}`,
      ),
    );
  }

  destroy(): void {
    if (this.forwardTable) this.gpu.release(this.forwardTable);
    if (this.inverseTable) this.gpu.release(this.inverseTable);
    this.forwardTable = undefined;
    this.inverseTable = undefined;
    this.rows = 0;
  }
}
