/**
 * The EAGLE3 teacher of one unroll (docs/eagle3.md §5), whole or by row window.
 *
 * Whole (the step's head runs in one chunk): p and p̃ [R, D] are built once, before step 0, and every
 * step reads them under its TTT shift, as SpecForge does. Chunked (the head runs over row chunks,
 * step-head.ts): no [R, D] tensor is kept; each chunk of rows [r0, r0 + n) of step k builds the
 * teacher rows it reads, [r0 + k, r0 + k + n), on the spot: from the full-vocabulary logits, or, with
 * compact features, from the target's hidden state of those rows (f32, or f16 widened for the window)
 * times the draft rows of its lm_head.
 * Every teacher row is computed by the same kernel on the same inputs in both modes, so it is the
 * same bits; the chunked mode pays one teacher build per step instead of one per batch.
 *
 * tok and positionMask are [R] in both modes: written whole before step 0, or, chunked, by the
 * windows (step 0's windows cover every row, and later steps rewrite the same values).
 */
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { copyElements } from '../../gpu/tensor-views.ts';
import { linearForward } from '../../kernels/linear.ts';
import type { RowWindow } from '../../kernels/loss-rows.ts';
import { buildTeacher, buildTeacherPruned } from '../../kernels/teacher.ts';
import { rowsAsF32 } from './fc-chunks.ts';
import { isDraftTarget, type Eagle3Inputs } from './inputs.ts';
import type { Eagle3Parameters } from './parameters.ts';

/** p and p̃ rows of one window, as the loss and metric kernels read them. */
export interface TeacherRows {
  p: Tensor;
  pTilde: Tensor;
  /** The teacher rows p and p̃ hold. */
  window: RowWindow;
}

export class TeacherSource {
  /** Whole mode: p and p̃ [R, D], built by `prepare`. */
  private whole: TeacherRows | undefined;

  constructor(
    private readonly gpu: Gpu,
    private readonly params: Eagle3Parameters,
    private readonly inputs: Eagle3Inputs,
    private readonly rows: number,
    /** i32 [R] outputs, owned by the unroll. */
    readonly tok: Tensor,
    readonly positionMask: Tensor,
    private readonly tag: string,
  ) {}

  /** Whole mode builds p and p̃ now; chunked mode only copies the compact features' argmax into tok. */
  async prepare(chunked: boolean): Promise<void> {
    const target = this.inputs.target;
    if (isDraftTarget(target)) copyElements(this.gpu, target.tok, 0, this.tok, 0, this.rows);
    if (chunked) return;
    const D = this.params.config.draftVocabSize;
    const rows = { firstRow: 0, rows: this.rows };
    const p = this.gpu.tensor([this.rows, D], 'f32', `${this.tag}.teacher.p`);
    const pTilde = this.gpu.tensor([this.rows, D], 'f32', `${this.tag}.teacher.pTilde`);
    this.whole = { p, pTilde, window: rows };
    await this.build(this.whole);
  }

  /**
   * The teacher rows that the rows [r0, r0 + n) of step k read (r + k). Whole: the batch's teacher.
   * Chunked: those rows built now, to be released with `release` after the chunk's kernels are encoded.
   */
  async rowsFor(k: number, r0: number, n: number): Promise<TeacherRows> {
    if (this.whole) return this.whole;
    const D = this.params.config.draftVocabSize;
    const first = r0 + k;
    // A chunk whose every row is past the end (t + k ≥ S) reads no teacher row: bind one unread row.
    const window = first < this.rows ? { firstRow: first, rows: Math.min(n, this.rows - first) } : { firstRow: this.rows - 1, rows: 1 };
    const rows: TeacherRows = {
      p: this.gpu.tensor([window.rows, D], 'f32', `${this.tag}.teacher.p[${window.firstRow}:]`),
      pTilde: this.gpu.tensor([window.rows, D], 'f32', `${this.tag}.teacher.pTilde[${window.firstRow}:]`),
      window,
    };
    if (first < this.rows) await this.build(rows);
    return rows;
  }

  /** The whole teacher (p and p̃ [R, D] of every step), or undefined in chunked mode. */
  get wholeRows(): TeacherRows | undefined {
    return this.whole;
  }

  /** Releases a chunk's teacher rows (the whole teacher stays until `destroy`). */
  release(rows: TeacherRows): void {
    if (rows !== this.whole) this.gpu.release(rows.p, rows.pTilde);
  }

  destroy(): void {
    if (this.whole) this.gpu.release(this.whole.p, this.whole.pTilde);
    this.whole = undefined;
  }

  private async build(out: TeacherRows): Promise<void> {
    const gpu = this.gpu;
    const c = this.params.config;
    const target = this.inputs.target;
    const shape = { rows: this.rows, vocab: c.vocabSize, draftVocab: c.draftVocabSize };
    const { window } = out;
    if (!isDraftTarget(target)) {
      const t = { logits: target, t2d: this.params.t2d, used: this.params.used, lossMask: this.inputs.lossMask };
      await buildTeacher(gpu, { ...t, p: out.p, pTilde: out.pTilde, tok: this.tok, positionMask: this.positionMask }, shape, { window });
      return;
    }
    // Compact features: the target's logits of the draft tokens for these rows, from its hidden state.
    const [D, Ht] = target.head.shape;
    // The window's rows of the hidden state, widened from f16 features here (fc-chunks.ts rowsAsF32).
    const hidden = await rowsAsF32(gpu, target.hidden, window.firstRow, window.rows, this.rows, `${this.tag}.teacher.hidden`);
    const logits = gpu.tensor([window.rows, D], 'f32', `${this.tag}.teacher.draftLogits`);
    try {
      await linearForward(gpu, hidden.rows, target.head, logits, { rows: window.rows, inFeatures: Ht, outFeatures: D });
      await buildTeacherPruned(
        gpu,
        {
          logits,
          lse: target.lse,
          tok: target.tok,
          t2d: this.params.t2d,
          lossMask: this.inputs.lossMask,
          p: out.p,
          pTilde: out.pTilde,
          positionMask: this.positionMask,
        },
        shape,
        { window },
      );
    } finally {
      gpu.release(logits);
      if (hidden.made) gpu.release(hidden.rows);
    }
  }
}
