/**
 * The draft's training step as the buffer pool sees it: what the step keeps for its whole length, and
 * the tensors live together at each point ("moment") of its forward and backward
 * (model/eagle3/forward.ts, step-body.ts, backward.ts, mlp-chunks.ts, fc-chunks.ts, step-head.ts).
 *
 * The pool (gpu/buffer-pool.ts) hands a released buffer to the next tensor of the same size class
 * and destroys free buffers only at the step's end (Gpu.trimPool), so the step's transient tensors
 * cost, per size class, the most of that class live at any one moment: Σ over classes of
 * (class bytes × the largest count at a moment). A sum of every transient tensor would count the
 * backward's twenty [S, H] temporaries at once, where the code holds a handful (at 32,768 tokens of
 * an 8B draft, 10.8 GiB against about 4).
 *
 * The moments follow the backward of one TTT step, whose body's tensors are released one by one after
 * their last reader: the head (its dF), the body again (under recompute), the MLP, the post-attention
 * norm, the attention, the projections, the two input norms; then the fc's weight gradient. Each
 * moment lists what is live there, from the code; the measured peak of a real step is checked against
 * the plan (test/training/run/memory-plan.test.ts).
 */
import { sizeClass } from '../../gpu/buffer-pool.ts';
import { chunkSpecs, t, times, type TensorSpec } from './memory-plan-shapes.ts';
import { rowLossStride } from '../../model/eagle3/step-head.ts';
import { unrollMetricsAt } from '../../model/eagle3/forward-state.ts';

/** The step's shapes (B·S rows), and how its loops are chunked. */
export interface StepShape {
  readonly batch: number;
  readonly seq: number;
  readonly tttLength: number;
  readonly hidden: number;
  readonly intermediate: number;
  readonly draftVocab: number;
  readonly heads: number;
  readonly qDim: number;
  readonly kvDim: number;
  /** The target's hidden size (compact features' width) and the aux hidden states' width. */
  readonly targetHidden: number;
  readonly auxWidth: number;
  readonly compact: boolean;
  /** f16 features: the fc (and a compact teacher) widen a row chunk at a time. */
  readonly f16Features: boolean;
  readonly recompute: boolean;
  /** The q, k and v projections run as one, on the stacked weights (model/eagle3/step-body.ts stackedProjectionFits). */
  readonly stackedProjection: boolean;
  /** input_layernorm gathers its embedding rows itself (kernels/rmsnorm-gather.ts: the table is one binding), so no emb is kept. */
  readonly gatheredInputNorm: boolean;
  /** Rows per chunk of the MLP, the head and the fc over f16 features. */
  readonly mlpRows: number;
  readonly headRows: number;
  readonly fcRows: number;
  /** Row stride of the steps' [L, stride] row-loss table (model/eagle3/step-head.ts rowLossStride), or 0 for one [R] tensor per step. */
  readonly rowLossStride: number;
  /** Row stride of the steps' [L, stride] table of [R, 4] metric terms (rowLossStride of 4R), or 0 for one [R, 4] tensor per head. */
  readonly rowStatsStride: number;
  /**
   * The most rows of a step (at most B·S) whose heads run all at once before the first body of the
   * backward (model/eagle3/step-heads-batched.ts batchedHeadRows), or 0 where no step's do.
   */
  readonly batchedHeadRows: number;
}

/** What the step keeps through its forward and backward, and its moments. */
export interface StepTensors {
  /** Every step's kept tensors, the K/V caches, the teacher, positions and loss rows; with the bodies of all steps unless recomputed. */
  readonly kept: TensorSpec[];
  readonly moments: TensorSpec[][];
}

export function stepTensors(x: StepShape): StepTensors {
  const { batch: B, seq: S, tttLength: L, hidden: H, intermediate: I, draftVocab: D, qDim, kvDim } = x;
  const R = B * S;
  // The projections' outputs: side by side in one tensor, or one tensor each.
  const qkv = (suffix: string) =>
    x.stackedProjection ? [t(`q | k | v${suffix}`, [R, qDim + 2 * kvDim])] : [t(`q${suffix}`, [R, qDim]), t(`k${suffix}`, [R, kvDim])];
  const dQkv = x.stackedProjection ? [t('dq | dk | dv', [R, qDim + 2 * kvDim])] : [t('dq', [R, qDim]), t('dk', [R, kvDim])];
  const mlpChunked = x.mlpRows < R;
  const headChunked = x.headRows < R;
  // One step's body (step-body.ts), by the backward's release order (backward.ts).
  const early = [...(x.gatheredInputNorm ? [] : [t('emb', [R, H])]), t('invRmsEmb', [R]), t('invRmsHidden', [R])];
  const z = [t('z', [R, 2 * H])];
  const attention = [t('qRot', [R, qDim]), t('o', [R, qDim]), t('lse', [B, x.heads, S])];
  const post = [t('h1', [R, H]), t('invRmsPost', [R])];
  const n = [t('n', [R, H]), ...(mlpChunked ? [] : [t('gate | up', [R, 2 * I]), t('act', [R, I])])];
  const body = [...early, ...z, ...attention, ...post, ...n];
  // Under recompute the current step's body is a moment's; otherwise every step's is kept until its backward.
  const live = (specs: TensorSpec[]) => (x.recompute ? specs : []);
  const caches = [t('kCache', [L, B, S, kvDim])];
  // A step whose heads batch writes every h_out into one stack (forward.ts), at most Rb rows a step:
  // its one size class may be above L of a step's at R rows, so the larger of the two is counted.
  const stackRows = L * x.batchedHeadRows;
  const stackCounts = stackRows > 0 && sizeClass(stackRows * H * 4) > L * sizeClass(R * H * 4);
  const hOuts = stackCounts ? [t('hOut (all steps, batched heads)', [stackRows, H])] : times(L, [t('hOut', [R, H])]);
  const kept = [
    ...hOuts,
    ...times(L, [t('positions', [R], 'i32'), ...(x.rowLossStride ? [] : [t('rowLoss', [R])])]),
    ...(x.rowLossStride ? [t('rowLosses', [L, x.rowLossStride])] : []),
    ...(x.rowStatsStride ? [t('rowStats', [L, x.rowStatsStride])] : []),
    ...(x.recompute ? [] : times(L, body)),
    t('hidden0', [R, H]),
    ...times(2, caches),
    ...(headChunked ? [] : [t('teacher.p', [R, D], 'f32', true), t('teacher.pTilde', [R, D], 'f32', true)]),
    t('teacher.tok', [R], 'i32'),
    t('teacher.positionMask', [R], 'i32'),
    t('losses and metrics', [unrollMetricsAt(L, 256) + 4 * L]),
  ];

  // The fc over f16 features: a chunk's rows in f16 and widened, and h_in⁰'s (or dh_in⁰'s) rows (fc-chunks.ts).
  const F = Math.min(x.fcRows, R);
  const fcChunk = x.f16Features
    ? [
        ...(F < R ? [t('fc rows (f16)', [F, x.auxWidth], 'f16')] : []),
        t('fc rows (widened)', [F, x.auxWidth]),
        ...(F < R ? [t('fc out rows', [F, H])] : []),
      ]
    : [];
  const mlpForward = chunkSpecs(R, x.mlpRows, (m) =>
    mlpChunked ? [t('mlp n rows', [m, H]), t('mlp gate | up', [m, 2 * I]), t('mlp act', [m, I]), t('mlp h rows', [m, H])] : [],
  );
  const mlpBackward = chunkSpecs(R, x.mlpRows, (m) => [
    t('dAct', [m, I]),
    t('dGate | dUp', [m, 2 * I]),
    ...(mlpChunked ? [t('mlp gate | up (again)', [m, 2 * I]), t('mlp act (again)', [m, I]), ...times(3, [t('mlp rows', [m, H])])] : []),
  ]);
  // The head of the step being back-propagated (step-head.ts): f = norm(h_out), dF, and a chunk's logits and teacher.
  const head = [
    t('f', [R, H]),
    t('invRmsFinal', [R]),
    t('dF', [R, H]),
    ...(x.rowStatsStride ? [] : [t('rowStats', [R, 4])]),
    ...chunkSpecs(R, x.headRows, (c) => [
      t('logits', [c, D], 'f32', true),
      t('soft-ce row loss', [c]),
      ...(x.compact ? [t('target.draft_logits', [c, D], 'f32', true)] : []),
      ...(headChunked
        ? [
            t('teacher.p (chunk)', [c, D], 'f32', true),
            t('teacher.pTilde (chunk)', [c, D], 'f32', true),
            t('f (chunk)', [c, H]),
            t('dF (chunk)', [c, H]),
            ...(x.compact ? [t('target.hidden (chunk)', [c, x.targetHidden])] : []),
            ...(x.compact && x.f16Features ? [t('target.hidden (chunk, f16)', [c, x.targetHidden], 'f16')] : []),
          ]
        : []),
    ]),
  ];
  // Batched heads (step-heads-batched.ts), for a step of Rb rows: f, dF and the logits of every step
  // at once; then dF and the steps' 1/rms (a table, each step's from a 256-byte boundary) stay through
  // the whole backward. Counted beside one head per step at B·S rows, since a run's shorter
  // batches may batch their heads where B·S does not, or the other way round.
  const Rb = x.batchedHeadRows;
  const batchedHead = Rb ? [t('f (all steps)', [L * Rb, H]), t('logits (all steps)', [L * Rb, D], 'f32', true)] : [];
  const headsKept = Rb ? [t('dF (all steps)', [L * Rb, H]), t('invRmsFinal (all steps)', [L, rowLossStride(Rb, 256)])] : [];
  // What the backward holds from its start: the caches' gradients, and the batched heads' dF and 1/rms.
  const dCaches = [...times(2, [t('dKCache', caches[0].shape)]), ...headsKept];
  const dH = (name: string) => t(name, [R, H]);
  // A whole teacher from compact features is built before step 0 (teacher-source.ts): the target's
  // logits of the draft tokens [R, D], from its hidden state (widened whole when f16).
  const prepare =
    x.compact && !headChunked
      ? [
          ...(x.f16Features ? [t('target.hidden (widened)', [R, x.targetHidden])] : []),
          t('target.draft_logits (teacher)', [R, D], 'f32', true),
        ]
      : [];
  const moments: TensorSpec[][] = [
    prepare,
    // Before step 0: h_in⁰ = fc(Haux).
    fcChunk,
    // A step of the forward: its projections (stacked, model/eagle3/step-body.ts), then its MLP (over
    // row chunks, or whole and kept). kRot, v, dKRot and dv are scratch only where a cache slot cannot
    // be bound in place; counted either way.
    [...early, ...z, ...qkv(''), t('qRot', [R, qDim]), t('kRot', [R, kvDim]), t('v', [R, kvDim])],
    [...body, ...mlpForward],
    // The backward of step k: its head, with the gradient from step k + 1; or every step's head at once, first.
    [...dCaches, dH('dFromNext'), ...head],
    ...(Rb ? [[...dCaches, ...batchedHead]] : []),
    [...dCaches, ...live(body), dH('dHOut'), ...qkv(' (again)')],
    [...dCaches, ...live(body), dH('dHOut'), dH('dn'), ...mlpBackward],
    // dH1 is dHOut with the post-attention norm's dx added in place (model/eagle3/backward.ts).
    [...dCaches, ...live([...early, ...z, ...attention, ...post]), dH('dHOut = dH1'), dH('dn')],
    [
      ...dCaches,
      ...live([...early, ...z, ...attention]),
      dH('dH1'),
      t('dO', [R, qDim]),
      t('dQRot', [R, qDim]),
      t('attention.rowStats', [B, x.heads, S, 2]),
    ],
    [
      ...dCaches,
      ...live([...early, ...z]),
      dH('dH1'),
      t('dQRot', [R, qDim]),
      ...dQkv,
      t('dKRot', [R, kvDim]),
      t('dv', [R, kvDim]),
      t('dz', [R, 2 * H]),
    ],
    // (dz.hidden is a view of dz where the device's offset alignment allows, and not made at all where
    // both norms' backward is one dispatch, rmsnorm-pair.ts; counted as a copy, an upper bound.)
    [
      ...dCaches,
      ...live(early),
      dH('dH1 = dHIn'),
      t('dz', [R, 2 * H]),
      ...(x.gatheredInputNorm ? [] : [dH('dEmb.scratch')]),
      // dHIn is dH1 with hidden_norm's dx added in place.
      dH('dz.hidden'),
    ],
    // Step 0 ends with W_fc's gradient: dh_in⁰ and the fc's rows again.
    [...dCaches, dH('dHIn'), ...fcChunk],
  ];
  return { kept, moments };
}
