/**
 * Every tensor an online EAGLE3 run holds, grouped into the items of its memory plan (./memory-plan.ts),
 * and what each costs: its row parts, each rounded to the buffer pool's size class. Shapes mirror the
 * modules that allocate them (listed in ./memory-plan.ts).
 */
import { eagle3ParameterShapes } from '../../config/eagle3-config.ts';
import {
  batchSpecs,
  captureSpecs,
  chunkSpecs,
  columnBlocks,
  heldOutSpecs,
  largestShape,
  readbackSpec,
  sampleSpecs,
  t,
  targetWeightSpecs,
  times,
  widenedSpecs,
  type TargetWidth,
  type TensorSpec,
} from './memory-plan-shapes.ts';
import { sizeClass } from '../../gpu/buffer-pool.ts';
import { BYTES_PER_ELEMENT, planTensorLayout, type DType } from '../../gpu/tensor.ts';
import { sumsqWorkgroups } from '../../kernels/optim.ts';
import { mlpChunkRows } from '../../model/eagle3/mlp-chunks.ts';
import { headChunkRows } from '../../model/eagle3/step-head.ts';
import { formatBytes } from '../../util/bytes.ts';
import type { AdapterLimits, ItemKey, MemoryPlanInput, PlanItem } from './memory-plan-types.ts';

interface Costing {
  bytes: number;
  problems: string[];
  notes: string[];
}

/** What Gpu.tensor allocates for `spec`: each row part rounded to the pool's size class. */
function tensorCost(spec: TensorSpec, limits: AdapterLimits, into: Costing): void {
  const { shape, dtype } = spec;
  const maxBinding = spec.unbound ? limits.maxBufferSize : Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const elementBytes = BYTES_PER_ELEMENT[dtype];
  const total = shape.reduce((a, b) => a * b, 1) * elementBytes;
  if (spec.count === 0) return;
  let counts: number[];
  let rowBytes: number;
  try {
    const layout = planTensorLayout(shape, dtype, maxBinding);
    counts = layout.counts;
    rowBytes = (shape.length === 0 ? 1 : shape.slice(layout.splitDims).reduce((a, b) => a * b, 1)) * elementBytes;
  } catch {
    const innermost = (shape.length === 0 ? 1 : shape[shape.length - 1]) * elementBytes;
    into.problems.push(
      `${spec.name} [${shape.join(', ')}] ${dtype}: one row is ${formatBytes(innermost)}, more than one binding holds (${formatBytes(maxBinding)}); no split can fit it`,
    );
    into.bytes += total * spec.count;
    return;
  }
  if (counts.length > 1 && !spec.splittable) {
    into.problems.push(
      `${spec.name} [${shape.join(', ')}] ${dtype} is ${formatBytes(total)} and must fit one binding (${formatBytes(maxBinding)})`,
    );
  } else if (counts.length > 1) {
    into.notes.push(`${spec.name} (${formatBytes(total)}) is split into ${counts.length} parts of at most ${formatBytes(maxBinding)} each`);
  }
  for (const rows of counts) into.bytes += spec.count * sizeClass(Math.max(4, Math.ceil((rows * rowBytes) / 4) * 4));
}

/** One item of a plan before it is costed: its tensors and how it is shown. */
export interface ItemSpec {
  readonly label: string;
  readonly specs: TensorSpec[];
  readonly detail: string;
}

/** Every tensor of the colocated run, by item (./memory-plan-roles.ts takes each role's items from here). */
export function itemSpecs(x: MemoryPlanInput, limits: AdapterLimits): Record<Exclude<ItemKey, 'sampleReadback'>, ItemSpec> {
  const maxBinding = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const tc = x.target;
  const d = x.draft;
  const aux = x.auxLayers ?? 3;
  const B = x.batchSize;
  const S = x.maxLength;
  const L = x.tttLength;
  const R = B * S;
  const H = d.hiddenSize;
  const I = d.intermediateSize;
  const D = d.draftVocabSize;
  const V = d.vocabSize;
  const qDim = d.numHeads * d.headDim;
  const kvDim = d.numKvHeads * d.headDim;
  const feat: DType = x.features;
  const kvw = tc.numKvHeads * tc.headDim;
  const captureRows = Math.max(1, Math.min(x.featureStoreSamples, Math.floor(x.captureBatchTokens / S))) * S;
  const params = eagle3ParameterShapes(d);
  // Weights, grads and moments may be split into row parts (the linear kernels and AdamW take parts).
  const paramSpecs = (suffix: string) => params.map(([name, shape]) => t(`${name}${suffix}`, shape, 'f32', true));
  const partials = params.reduce((a, [, shape]) => a + sumsqWorkgroups(shape.reduce((p, q) => p * q, 1)), 0);
  const compact = (x.targetRepr ?? 'logits') === 'hidden_state';
  const target: TargetWidth = { width: compact ? tc.hiddenSize : tc.vocabSize, compact };
  const sample = sampleSpecs(S, aux * tc.hiddenSize, target, feat);
  // The MLP over row chunks when [R, I] f32 is over a binding or 128 MiB (model/eagle3/mlp-chunks.ts).
  const M = mlpChunkRows(R, I, maxBinding);
  const mlpChunked = M < R;
  // What one step's body holds (model/eagle3/step-body.ts); with h_out, what a step keeps (its head runs in the backward).
  const body = [
    t('emb', [R, H]),
    t('invRmsEmb', [R]),
    t('z', [R, 2 * H]),
    t('invRmsHidden', [R]),
    t('qRot', [R, qDim]),
    t('o', [R, qDim]),
    t('lse', [B, d.numHeads, S]),
    t('h1', [R, H]),
    t('invRmsPost', [R]),
    t('n', [R, H]),
    // A whole MLP keeps gate, up and act; a chunked one keeps none (mlp-chunks.ts: one chunk's are live).
    ...(mlpChunked ? [] : [t('gate', [R, I]), t('up', [R, I]), t('act', [R, I])]),
  ];
  const kept = [t('hOut', [R, H])];
  // Under recompute every step keeps `kept`, and one body is live at a time (the forward's, then the backward's).
  const stepSpecs = x.recompute ? [...times(L, kept), ...body, t('re.ids.shifted', [B, S], 'i32')] : times(L, [...body, ...kept]);
  const ropeRows = S + L - 1;
  // The step's head runs over row chunks when [R, D] f32 is over a binding (model/eagle3/step-head.ts):
  // then no teacher or logits [R, D] exists, only a chunk's.
  const C = headChunkRows(R, D, maxBinding);
  const chunked = C < R;
  // The last chunk is smaller: its tensors are of other size classes, held beside the full chunk's.
  const headSpecs = [
    t('rowStats', [R, 4]),
    ...chunkSpecs(R, C, (n) => [
      t('logits', [n, D], 'f32', true),
      // Compact features: the target's logits of the draft tokens, the teacher's source, for the rows being built.
      ...(compact ? [t('target.draft_logits', [n, D], 'f32', true)] : []),
      ...(chunked
        ? [
            t('teacher.p (chunk)', [n, D], 'f32', true),
            t('teacher.pTilde (chunk)', [n, D], 'f32', true),
            t('f (chunk)', [n, H]),
            t('dF (chunk)', [n, H]),
            ...(compact ? [t('target.hidden (chunk)', [n, tc.hiddenSize])] : []),
          ]
        : []),
    ]),
  ];
  return {
    targetWeights: {
      label: 'target weights',
      specs: targetWeightSpecs(tc, x.targetWeights),
      detail: `${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}, ${x.targetWeights}`,
    },
    targetKv: {
      label: 'target KV cache (generation)',
      specs: times(x.generationBatch > 0 ? 2 * tc.numLayers : 0, [t('kv', [x.generationBatch, S, tc.numKvHeads, tc.headDim])]),
      detail:
        x.generationBatch > 0
          ? `2 × ${tc.numLayers} layers × ${x.generationBatch} sequences × ${S} tokens × ${kvw}`
          : 'none: the data has its replies',
    },
    targetGeneration: {
      label: 'target generation activations',
      // A generation's prefill is a forward over its prompts (model/target/model.ts prefill, extend with the
      // last row's logits): the capture's tensors over those rows, a binding's worth of logits rows at most.
      specs: x.generationBatch > 0 ? captureSpecs(tc, x.generationBatch * S, S, aux, x.targetWeights, maxBinding, true) : [],
      detail:
        x.generationBatch > 0
          ? `the prefill of ${x.generationBatch} prompt${x.generationBatch > 1 ? 's' : ''} of up to ${S} tokens`
          : 'none: no generation',
    },
    targetCapture: {
      label: 'target capture activations',
      specs: [
        ...captureSpecs(tc, captureRows, S, aux, x.targetWeights, maxBinding, compact),
        // With f16 features every sample of a capture forward is first made in f32 (TargetFeatureSource), then cast one by one.
        ...(feat === 'f16' ? times(captureRows / S, sampleSpecs(S, aux * tc.hiddenSize, target, 'f32')) : []),
      ],
      detail: `${captureRows} tokens per capture forward, ${compact ? `logits a binding's worth of rows at a time (compact features)` : `logits ${captureRows} × ${tc.vocabSize}`}${feat === 'f16' ? ', its samples in f32 before the f16 cast' : ''}`,
    },
    featureStore: {
      label: 'feature store',
      specs: times(x.featureStoreSamples, sample),
      detail: `${x.featureStoreSamples} samples resident × ${S} tokens (hidden ${aux} × ${tc.hiddenSize}, ${compact ? `target hidden ${tc.hiddenSize} + logsumexp and argmax` : `target logits ${tc.vocabSize}`}), ${feat}`,
    },
    heldOut: {
      label: 'held-out evaluation',
      specs: heldOutSpecs(x.heldOutSequences ?? 0, B, S, aux * tc.hiddenSize, target, feat),
      detail:
        (x.heldOutSequences ?? 0) > 0
          ? `${x.heldOutSequences} held-out sequences × ${S} tokens captured once for --eval-every, in batches of ${B}, ${feat}`
          : 'none: no periodic evaluation',
    },
    batch: {
      label: 'training batch',
      specs: [...batchSpecs(B, S, aux * tc.hiddenSize, target, feat), ...widenedSpecs(B, S, aux * tc.hiddenSize, target, feat)],
      detail: `batch ${B} × ${S} tokens, ${feat}${feat === 'f16' ? ', widened to f32 for the step' : ''}`,
    },
    staging: {
      label: 'staging and uniforms',
      specs: [
        ...[
          t('uniform arena', [512 * 64], 'u32'),
          t('loss readback', [L + 1]),
          t('metrics readback', [4 * L]),
          t('grad-norm readback', [2]),
          t('timer', [8]),
        ].map((s) => ({ ...s, splittable: true, unbound: true })),
        // A checkpoint reads one tensor back at a time (the largest: a weight or moment); the spill one sample;
        // each a slice at a time (Gpu.readOnce).
        readbackSpec(t('checkpoint', largestShape(params.map(([, shape]) => shape))), 'checkpoint readback'),
        ...sample.map((spec) => readbackSpec(spec, `spill readback: ${spec.name}`)),
      ],
      detail: `512 uniform slots of 256 bytes, readback buffers for losses and metrics, a slice of the largest draft tensor (a checkpoint) and of one sample (the spill), timer`,
    },
    draftWeights: {
      label: 'draft weights',
      specs: paramSpecs(''),
      detail: `${params.length} tensors, hidden ${H}, intermediate ${I}, draft vocab ${D}`,
    },
    gradients: {
      label: 'draft gradients',
      specs: [...paramSpecs('.grad'), t('grad-norm-partials', [partials]), t('grad-norm', [2])],
      detail: 'one f32 gradient per weight',
    },
    moments: { label: 'AdamW moments', specs: [...paramSpecs('.m'), ...paramSpecs('.v')], detail: 'm and v per weight, f32' },
    draftFrozen: {
      label: 'draft vocabulary and RoPE',
      // The frozen embedding is the target's own table, borrowed (Eagle3Frozen): counted once, in target weights.
      specs: [
        // Compact features: the lm_head rows of the draft vocabulary (model/target/draft-head.ts).
        ...(compact ? [t('draft_head', [D, tc.hiddenSize], 'f32', true)] : []),
        t('t2d', [V], 'i32'),
        t('used', [D], 'i32'),
        t('rope.forward', [ropeRows, d.headDim / 2, 2]),
        t('rope.inverse', [ropeRows, d.headDim / 2, 2]),
      ],
      detail: `${compact ? `the target's lm_head rows of the draft vocabulary [${D}, ${tc.hiddenSize}] f32, ` : ''}vocabulary maps and RoPE tables for ${ropeRows} positions (the frozen embedding is the target's table, not a copy)`,
    },
    drafter: {
      label: 'evaluation drafter',
      // Speculative decoding before and after training (and speclab eval) loads the draft beside the trainer's.
      // Not without generation: no held-out prompt to decode (--eval-prompts 0).
      specs:
        x.generationBatch > 0 ? [...paramSpecs(' (drafter)'), ...times(2, [t('drafter KV cache', [1, S, d.numKvHeads, d.headDim])])] : [],
      detail: `a second copy of the draft's weights for speculative decoding, and its KV cache of ${S} positions`,
    },
    activations: {
      label: `activations (${L} TTT steps)`,
      specs: [
        ...stepSpecs,
        ...times(L, [t('positions', [R], 'i32')]),
        t('hidden0', [R, H]),
        t('kCache', [L, B, S, d.numKvHeads, d.headDim]),
        t('vCache', [L, B, S, d.numKvHeads, d.headDim]),
        // Unchunked, the teacher is built once per batch; the loss kernels run per row segment, so it may be split.
        ...(chunked ? [] : [t('teacher.p', [R, D], 'f32', true), t('teacher.pTilde', [R, D], 'f32', true)]),
        t('teacher.tok', [R], 'i32'),
        // Each step's loss rows, summed into the weighted total after the backward (model/eagle3/backward.ts).
        ...times(L, [t('rowLoss', [R])]),
        t('teacher.positionMask', [R], 'i32'),
        t('losses', [L + 1]),
        t('metrics', [4 * L]),
      ],
      detail: `${
        x.recompute
          ? `${L} × ${R} rows × hOut and one step's body, recomputed in the backward (--recompute)`
          : `${L} × ${R} rows × (emb, z, qRot, o, lse, h1, n, ${mlpChunked ? '' : 'gate, up, act, '}hOut)`
      } + KV caches [${L}, ${R}, ${kvDim}]${chunked ? '' : ` + teacher [${R}, ${D}] × 2`}`,
    },
    scratch: {
      label: 'step scratch (logits, backward)',
      specs: [
        t('ids.shifted', [B, S], 'i32'),
        t('q', [R, qDim]),
        t('k/v', [R, kvDim]),
        t('kRot', [R, kvDim]),
        // The head of the step being back-propagated: f = norm(h_out), its 1/rms and dF.
        t('f', [R, H]),
        t('invRmsFinal', [R]),
        t('dF', [R, H]),
        ...headSpecs,
        t('dKCache', [L, B, S, d.numKvHeads, d.headDim]),
        t('dVCache', [L, B, S, d.numKvHeads, d.headDim]),
        t('dEmb.scratch', [R, H]),
        t('dHOut', [R, H]),
        ...chunkSpecs(R, M, (n) => [
          t('dAct', [n, I]),
          t('dGate', [n, I]),
          t('dUp', [n, I]),
          // Chunked: one chunk's gate, up and act (the forward's, or the backward's again), and its rows of n, h and dn.
          ...(mlpChunked
            ? [
                t('mlp gate (chunk)', [n, I]),
                t('mlp up (chunk)', [n, I]),
                t('mlp act (chunk)', [n, I]),
                ...times(3, [t('mlp rows (chunk)', [n, H])]),
              ]
            : []),
        ]),
        t('dn', [R, H]),
        t('dH1', [R, H]),
        t('dO', [R, qDim]),
        t('dQRot', [R, qDim]),
        t('dq', [R, qDim]),
        t('dKRot', [R, kvDim]),
        t('dk', [R, kvDim]),
        t('dv', [R, kvDim]),
        t('dz', [R, 2 * H]),
        t('dHIn', [R, H]),
        t('dz.hidden', [R, H]),
        // A weight split into row parts writes its output column by column block (kernels/linear.ts).
        // (The MLP's and lm_head's matmuls are over one chunk's rows.)
        ...params.flatMap(([name, shape]) =>
          chunkSpecs(R, name.includes('.mlp.') ? M : name === 'lm_head.weight' ? C : R, (n) => columnBlocks(name, shape, n, maxBinding)),
        ),
      ],
      detail: `temporaries of one step, reused by the next: ${
        chunked ? `the head over chunks of ${C} rows (logits and teacher [${C}, ${D}])` : `logits [${R}, ${D}]`
      }${mlpChunked ? `, the MLP over chunks of ${M} rows` : ''}, backward scratch and dK/dV caches, column blocks of split weights`,
    },
  };
}

export function checkInput(x: MemoryPlanInput): void {
  for (const [field, value] of [
    ['batchSize', x.batchSize],
    ['maxLength', x.maxLength],
    ['tttLength', x.tttLength],
    ['featureStoreSamples', x.featureStoreSamples],
    ['captureBatchTokens', x.captureBatchTokens],
  ] as const) {
    if (!Number.isInteger(value) || value < 1) throw new Error(`memory plan: ${field} must be a positive integer, got ${value}`);
  }
  if (!Number.isInteger(x.generationBatch) || x.generationBatch < 0)
    throw new Error(`memory plan: generationBatch must be a non-negative integer, got ${x.generationBatch}`);
  const heldOut = x.heldOutSequences ?? 0;
  if (!Number.isInteger(heldOut) || heldOut < 0)
    throw new Error(`memory plan: heldOutSequences must be a non-negative integer, got ${x.heldOutSequences}`);
  for (const [field, value] of [
    ['targetWeights', x.targetWeights],
    ['features', x.features],
  ] as const) {
    if (value !== 'f32' && value !== 'f16') throw new Error(`memory plan: ${field} must be "f32" or "f16", got ${JSON.stringify(value)}`);
  }
}

export function costItems(x: MemoryPlanInput, limits: AdapterLimits): { items: PlanItem[]; problems: string[]; notes: string[] } {
  return costEntries(Object.entries(itemSpecs(x, limits)) as [ItemKey, ItemSpec][], limits);
}

/** The cost of each item, in the order given, with the problems and notes of its tensors. */
export function costEntries(
  entries: readonly (readonly [ItemKey, ItemSpec])[],
  limits: AdapterLimits,
): { items: PlanItem[]; problems: string[]; notes: string[] } {
  const problems: string[] = [];
  const notes: string[] = [];
  const items: PlanItem[] = [];
  for (const [key, item] of entries) {
    const cost: Costing = { bytes: 0, problems: [], notes: [] };
    for (const spec of item.specs) tensorCost(spec, limits, cost);
    // One sentence per distinct problem: 80 layers of the same oversized tensor say it once.
    for (const p of new Set(cost.problems)) problems.push(`${item.label}: ${p}`);
    for (const n of new Set(cost.notes)) notes.push(`${item.label}: ${n}`);
    items.push({ key, label: item.label, bytes: cost.bytes, detail: item.detail });
  }
  return { items, problems, notes };
}
