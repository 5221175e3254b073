/**
 * The EAGLE3 draft's micro-batch (the tensors SpecForge's OnlineEagle3Model receives) and its check
 * against the draft config, shared by both modes of the forward (forward.ts) and by the training
 * strategy, which checks a batch before it builds a target for it.
 */
import { fmtShape, type Tensor } from '../../gpu/tensor.ts';
import type { Eagle3Config } from '../../config/eagle3-config.ts';

/** One micro-batch, as SpecForge's OnlineEagle3Model receives it. */
export interface Eagle3Inputs {
  /** i32 [B, S], already shifted left once. */
  inputIds: Tensor;
  /** i32 [B, S], 1 = real token. */
  attentionMask: Tensor;
  /** i32 [B, S] or [B, S, 1], unshifted. */
  lossMask: Tensor;
  /** f32 or f16 [B, S, 3·Ht] aux hidden states (f16 is widened a row chunk at a time, fc-chunks.ts). */
  hiddenStates: Tensor;
  /**
   * The teacher's source, already shifted left once: f32 [B, S, V] full-vocab target logits, or the
   * compact form (the target's final hidden state, the draft rows of its lm_head, and its full-vocab
   * logsumexp and argmax).
   */
  target: Tensor | DraftTarget;
}

/**
 * The teacher's source from compact features (kernels/teacher.ts buildTeacherPruned): the target's
 * logits of the draft tokens are hidden · headᵀ, formed a row window at a time (teacher-source.ts).
 */
export interface DraftTarget {
  /** f32 or f16 [B, S, Ht]: the target's final (normed) hidden state (f16 widened a row window at a time). */
  readonly hidden: Tensor;
  /** f32 [D, Ht]: the target's lm_head rows of the draft tokens (model/target/draft-head.ts). */
  readonly head: Tensor;
  /** f32 [B, S]: logsumexp of the target's full-vocabulary logits. */
  readonly lse: Tensor;
  /** i32 [B, S]: argmax of the target's full-vocabulary logits (a target id). */
  readonly tok: Tensor;
}

/** Whether the inputs carry the compact teacher source. */
export function isDraftTarget(target: Eagle3Inputs['target']): target is DraftTarget {
  return 'head' in target;
}

/** Checks the inputs against the config, naming the offending tensor; returns B and S. */
export function checkEagle3Inputs(c: Eagle3Config, x: Eagle3Inputs): { batch: number; seqLen: number } {
  const ids = x.inputIds;
  if (ids.shape.length !== 2) throw new Error(`eagle3: input_ids (${ids.label}) must be [B, S], got ${fmtShape(ids.shape)}`);
  const [B, S] = ids.shape;
  const expect = (name: string, t: Tensor, dtype: string, shapes: number[][]) => {
    if (!dtype.split(' or ').includes(t.dtype)) throw new Error(`eagle3: ${name} (${t.label}) must be ${dtype}, got ${t.dtype}`);
    if (!shapes.some((s) => s.length === t.shape.length && s.every((d, i) => d === t.shape[i]))) {
      throw new Error(`eagle3: ${name} (${t.label}) must have shape ${shapes.map(fmtShape).join(' or ')}, got ${fmtShape(t.shape)}`);
    }
  };
  expect('input_ids', ids, 'i32', [[B, S]]);
  expect('attention_mask', x.attentionMask, 'i32', [[B, S]]);
  expect('loss_mask', x.lossMask, 'i32', [
    [B, S],
    [B, S, 1],
  ]);
  expect('hidden_state', x.hiddenStates, 'f32 or f16', [[B, S, 3 * c.targetHiddenSize]]);
  if (isDraftTarget(x.target)) {
    const Ht = x.target.head.shape[1];
    expect('target draft head', x.target.head, 'f32', [[c.draftVocabSize, Ht]]);
    expect('target hidden', x.target.hidden, 'f32 or f16', [[B, S, Ht]]);
    expect('target_lse', x.target.lse, 'f32', [[B, S]]);
    expect('target_tok', x.target.tok, 'i32', [[B, S]]);
  } else expect('target', x.target, 'f32', [[B, S, c.vocabSize]]);
  // hidden_state and target may be split into row parts: fc (linear.ts) and the teacher kernel take
  // split tensors. The ids and the mask are bound whole by the embedding and attention kernels.
  for (const [name, t] of [
    ['input_ids', ids],
    ['attention_mask', x.attentionMask],
  ] as const) {
    if (t.isChunked) throw new Error(`eagle3: ${name} (${t.label}) is split into ${t.parts.length} parts; it must fit one binding`);
  }
  return { batch: B, seqLen: S };
}
