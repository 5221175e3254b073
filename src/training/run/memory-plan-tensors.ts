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
import { parameterBytes, planArena } from '../../optim/parameter-arena.ts';
import { fcChunkRows } from '../../model/eagle3/fc-chunks.ts';
import { mlpChunkRows } from '../../model/eagle3/mlp-chunks.ts';
import { stackedProjectionFits } from '../../model/eagle3/step-body.ts';
import { gathersFromTableOf } from '../../kernels/rmsnorm-gather.ts';
import { stepTensors } from './memory-plan-moments.ts';
import { headChunkRows, stepTableStride } from '../../model/eagle3/step-head.ts';
import { batchedHeadRows } from '../../model/eagle3/step-heads-batched.ts';
import { unrollMetricsAt } from '../../model/eagle3/forward-state.ts';
import { formatBytes } from '../../util/bytes.ts';
import type { AdapterLimits, ItemKey, MemoryPlanInput, PlanItem } from './memory-plan-types.ts';

interface Costing {
  bytes: number;
  problems: string[];
  notes: string[];
}

/**
 * The buffers Gpu.tensor allocates for `spec`: each row part rounded to the pool's size class, as
 * [class bytes, how many]. Problems and notes go to `into`; an unfittable tensor counts its bytes whole.
 */
function tensorBuffers(spec: TensorSpec, limits: AdapterLimits, into: Costing): [number, number][] {
  const { shape, dtype } = spec;
  const maxBinding = spec.unbound ? limits.maxBufferSize : Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const elementBytes = BYTES_PER_ELEMENT[dtype];
  const total = shape.reduce((a, b) => a * b, 1) * elementBytes;
  if (spec.count === 0) return [];
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
    return [[total, spec.count]];
  }
  if (counts.length > 1 && !spec.splittable) {
    into.problems.push(
      `${spec.name} [${shape.join(', ')}] ${dtype} is ${formatBytes(total)} and must fit one binding (${formatBytes(maxBinding)})`,
    );
  } else if (counts.length > 1) {
    into.notes.push(`${spec.name} (${formatBytes(total)}) is split into ${counts.length} parts of at most ${formatBytes(maxBinding)} each`);
  }
  return counts.map((rows) => [sizeClass(Math.max(4, Math.ceil((rows * rowBytes) / 4) * 4)), spec.count]);
}

/** What Gpu.tensor allocates for `spec`, in bytes. */
function tensorCost(spec: TensorSpec, limits: AdapterLimits, into: Costing): void {
  for (const [bytes, count] of tensorBuffers(spec, limits, into)) into.bytes += bytes * count;
}

/** Moments of a pooled loop: per size class, the most buffers of that class live at one moment. */
function momentsCost(moments: readonly TensorSpec[][], limits: AdapterLimits, into: Costing): void {
  const most = new Map<number, number>();
  for (const moment of moments) {
    const live = new Map<number, number>();
    for (const spec of moment)
      for (const [bytes, count] of tensorBuffers(spec, limits, into)) live.set(bytes, (live.get(bytes) ?? 0) + count);
    for (const [bytes, count] of live) most.set(bytes, Math.max(most.get(bytes) ?? 0, count));
  }
  for (const [bytes, count] of most) into.bytes += bytes * count;
}

/** One item of a plan before it is costed: its tensors and how it is shown. */
export interface ItemSpec {
  readonly label: string;
  /** Tensors held together: their bytes add up. */
  readonly specs: TensorSpec[];
  /**
   * Tensors live together at each moment of a loop whose pool reuses released buffers (the training
   * step, ./memory-plan-moments.ts): they cost, per size class, the most of that class at one moment.
   */
  readonly moments?: readonly TensorSpec[][];
  readonly detail: string;
}

/** Every tensor of the colocated run, by item (./memory-plan-roles.ts takes each role's items from here). */
export function itemSpecs(
  x: MemoryPlanInput,
  limits: AdapterLimits,
): Record<Exclude<ItemKey, 'sampleReadback' | 'sampleBeingBatched'>, ItemSpec> {
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
  // The trainer's copies live in arena slabs (optim/parameter-arena.ts): one buffer per slab, and a
  // parameter over a binding alone, in its own row parts.
  const arena = planArena(
    params.map(([, shape]) => parameterBytes(shape)),
    maxBinding,
  );
  const arenaSpecs = (suffix: string) => [
    ...arena.slabBytes.map((bytes, i) => t(`arena${i}${suffix}`, [bytes / 4])),
    ...params.filter((_, i) => arena.placements[i].slab < 0).map(([name, shape]) => t(`${name}${suffix}`, shape, 'f32', true)),
  ];
  const partials = arenaSpecs('').reduce((a, spec) => a + sumsqWorkgroups(spec.shape.reduce((p, q) => p * q, 1)), 0);
  const compact = (x.targetRepr ?? 'logits') === 'hidden_state';
  const target: TargetWidth = { width: compact ? tc.hiddenSize : tc.vocabSize, compact };
  const sample = sampleSpecs(S, aux * tc.hiddenSize, target, feat);
  // The MLP, the head and the fc over f16 features run over row chunks when their widest tensor is
  // over a binding or 128 MiB (model/eagle3/mlp-chunks.ts, step-head.ts, fc-chunks.ts).
  const M = mlpChunkRows(R, I, maxBinding);
  const C = headChunkRows(R, D, maxBinding);
  const F = fcChunkRows(R, aux * tc.hiddenSize, maxBinding);
  // The draft's input_layernorm reads the target's own embedding table (stored in the target's precision).
  const gatheredInputNorm = gathersFromTableOf([tc.vocabSize, tc.hiddenSize], x.targetWeights, maxBinding);
  const step = stepTensors({
    batch: B,
    seq: S,
    tttLength: L,
    hidden: H,
    intermediate: I,
    draftVocab: D,
    heads: d.numHeads,
    qDim,
    kvDim,
    targetHidden: tc.hiddenSize,
    auxWidth: aux * tc.hiddenSize,
    compact,
    f16Features: feat === 'f16',
    recompute: x.recompute === true,
    stackedProjection: stackedProjectionFits(R, qDim + 2 * kvDim, maxBinding),
    gatheredInputNorm,
    mlpRows: M,
    headRows: C,
    fcRows: F,
    // The device's binding alignment is at most 256 bytes, so this stride is not below the one it uses.
    rowLossStride: stepTableStride(R, L, 256, maxBinding),
    rowStatsStride: stepTableStride(4 * R, L, 256, maxBinding),
    batchedHeadRows: batchedHeadRows(R, L, D, H, maxBinding),
  });
  const ropeRows = S + L - 1;
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
      specs: [...batchSpecs(B, S, aux * tc.hiddenSize, target, feat), ...widenedSpecs(B, S, target, feat)],
      detail: `batch ${B} × ${S} tokens, ${feat}${
        feat !== 'f16' ? '' : compact ? ', read by the draft a row chunk at a time' : ', the logits widened to f32 for the step'
      }`,
    },
    staging: {
      label: 'staging and uniforms',
      specs: [
        ...[
          t('uniform arena', [512 * 64], 'u32'),
          t('loss and metrics readback', [unrollMetricsAt(L, 256) + 4 * L]),
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
      specs: arenaSpecs(''),
      detail: `${params.length} tensors, hidden ${H}, intermediate ${I}, draft vocab ${D}`,
    },
    gradients: {
      label: 'draft gradients',
      specs: [...arenaSpecs('.grad'), t('grad-norm-partials', [partials]), t('grad-norm', [2])],
      detail: 'one f32 gradient per weight',
    },
    moments: { label: 'AdamW moments', specs: [...arenaSpecs('.m'), ...arenaSpecs('.v')], detail: 'm and v per weight, f32' },
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
      specs: step.kept,
      detail: `${
        x.recompute
          ? `${L} × ${R} rows × hOut; each step's body is recomputed in the backward (--recompute)`
          : `${L} × ${R} rows × (${gatheredInputNorm ? '' : 'emb, '}z, qRot, o, lse, h1, n, ${M < R ? '' : 'gate, up, act, '}hOut)`
      } + KV caches [${L}, ${R}, ${kvDim}]${C < R ? '' : ` + teacher [${R}, ${D}] × 2`}`,
    },
    scratch: {
      label: 'step scratch (logits, backward)',
      // A split weight writes its output column block by column block (kernels/linear.ts); the MLP's and
      // lm_head's matmuls are over one chunk's rows. Counted all at once: a bound on what one matmul holds.
      specs: params.flatMap(([name, shape]) =>
        chunkSpecs(R, name.includes('.mlp.') ? M : name === 'lm_head.weight' ? C : R, (n) => columnBlocks(name, shape, n, maxBinding)),
      ),
      moments: step.moments,
      detail: `what one step holds at its fullest, per buffer size class (memory-plan-moments.ts)${
        x.recompute ? `, the step's body recomputed` : ''
      }: ${C < R ? `the head over chunks of ${C} rows (logits and teacher [${C}, ${D}])` : `logits [${R}, ${D}]`}${
        M < R ? `, the MLP over chunks of ${M} rows` : ''
      }${feat === 'f16' && F < R ? `, f16 features widened ${F} rows at a time` : ''}, backward scratch and dK/dV caches, column blocks of split weights`,
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
    if (item.moments) momentsCost(item.moments, limits, cost);
    // One sentence per distinct problem: 80 layers of the same oversized tensor say it once.
    for (const p of new Set(cost.problems)) problems.push(`${item.label}: ${p}`);
    for (const n of new Set(cost.notes)) notes.push(`${item.label}: ${n}`);
    items.push({ key, label: item.label, bytes: cost.bytes, detail: item.detail });
  }
  return { items, problems, notes };
}
