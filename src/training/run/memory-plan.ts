/**
 * The GPU memory plan of an online EAGLE3 run, computed before anything is allocated: every tensor
 * the run will hold, grouped into items (target weights, capture activations, feature store, the
 * draft's weights, gradients and AdamW moments, the activations each TTT step keeps, …), checked
 * against a byte budget and against the adapter's buffer limits. Pure: no GPU, no globals, so
 * `speclab train` and the browser lab compute the same plan from the same settings.
 *
 * How it counts, and why that makes the total an upper bound of what the device holds:
 *   - each tensor costs what Gpu.tensor really allocates: its row parts (planRowChunks), each
 *     rounded up to the pool's size class (sizeClass: at least 256 bytes, at most 25% over);
 *   - items are added, never overlapped: the buffer pool keeps released buffers for reuse and never
 *     trims them during a run, so memory one phase frees is only reused by a later tensor of the
 *     same size class. The sum of the items is what the pool holds if nothing is ever reused;
 *   - temporaries released inside a step (logits, the backward's scratch) are counted once: the
 *     next step takes the same buffers back from the pool.
 * Shapes mirror src/model/eagle3/forward.ts and backward.ts (StepActivations, Eagle3ForwardState),
 * src/model/target/model.ts (capture forward, KV cache), src/optim/adamw-backend.ts and
 * src/data/feature-dataloader.ts; test/training/run/memory-plan.test.ts checks the plan against the
 * measured peak of a real training step.
 *
 * Limits: a tensor whose single row is larger than one binding cannot be stored at all; a tensor
 * the code binds whole (activations, a stored sample's features) must fit one binding; the ones the
 * kernels read by row part (weights, grads, moments, embeddings, logits, the collated batch's
 * hidden_state and target) are split, and the plan says so.
 */
import type { Eagle3Config } from '../../config/eagle3-config.ts';
import { eagle3ParameterShapes } from '../../config/eagle3-config.ts';
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { sizeClass } from '../../gpu/buffer-pool.ts';
import { BYTES_PER_ELEMENT, planRowChunks, type DType } from '../../gpu/tensor.ts';
import { sumsqWorkgroups } from '../../kernels/optim.ts';
import { formatBytes } from '../../util/bytes.ts';

export type Precision = 'f32' | 'f16';

/** The two adapter limits that bound one buffer (WebGPU reports no total memory). */
export interface AdapterLimits {
  readonly maxBufferSize: number;
  readonly maxStorageBufferBindingSize: number;
}

export interface MemoryPlanInput {
  readonly target: TargetModelConfig;
  readonly targetWeights: Precision;
  readonly draft: Eagle3Config;
  readonly batchSize: number;
  /** Longest training sequence in tokens (prompt plus reply): the S of every [B, S, …] tensor. */
  readonly maxLength: number;
  readonly tttLength: number;
  /** Precision of the captured features (hidden_state, target) in the store and the batch. */
  readonly features: Precision;
  /** Samples resident in the feature store at once (the session rolls out a round, then trains on it). */
  readonly featureStoreSamples: number;
  /** Tokens per batched target forward while capturing (TargetFeatureSource's maxBatchTokens). */
  readonly captureBatchTokens: number;
  /** Sequences per batched generation (continueWithTarget's chunk); 0 when the data needs none. */
  readonly generationBatch: number;
  /** Target layers whose outputs feed the draft (3 for EAGLE3). */
  readonly auxLayers?: number;
}

export interface PlanItem {
  readonly key: ItemKey;
  readonly label: string;
  readonly bytes: number;
  /** What it is made of, in words with numbers. */
  readonly detail: string;
}

export type ItemKey =
  | 'targetWeights'
  | 'targetKv'
  | 'targetCapture'
  | 'featureStore'
  | 'batch'
  | 'staging'
  | 'draftWeights'
  | 'gradients'
  | 'moments'
  | 'draftFrozen'
  | 'activations'
  | 'scratch';

/** The items of the draft's training step itself (what a step on a given batch allocates). */
export const DRAFT_STEP_ITEMS: readonly ItemKey[] = ['draftWeights', 'gradients', 'moments', 'draftFrozen', 'activations', 'scratch'];

export interface MemoryPlan {
  readonly input: MemoryPlanInput;
  readonly items: readonly PlanItem[];
  readonly totalBytes: number;
  readonly largest: PlanItem;
  readonly budgetBytes: number | undefined;
  readonly limits: AdapterLimits;
  /** Bytes one binding may hold: min(maxStorageBufferBindingSize, maxBufferSize). */
  readonly maxBindingBytes: number;
  readonly fits: boolean;
  /** Why it does not fit, one sentence each (over budget, a tensor no binding can hold). */
  readonly problems: readonly string[];
  /** Tensors split into row parts to fit a binding. */
  readonly notes: readonly string[];
  /** What to lower, with the total each change gives. */
  readonly suggestions: readonly string[];
}

interface TensorSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: DType;
  /** The kernels that read it take row parts (vocabulary tables); everything else is bound whole. */
  readonly splittable?: boolean;
  /** Identical tensors of this shape (per layer, per TTT step, per stored sample). */
  readonly count: number;
  /** Not a storage binding (the uniform arena, readback buffers): only maxBufferSize bounds it. */
  readonly unbound?: boolean;
}

const t = (name: string, shape: readonly number[], dtype: DType = 'f32', splittable = false): TensorSpec => ({
  name,
  shape,
  dtype,
  splittable,
  count: 1,
});
/** `n` copies of each spec, costed once and multiplied (a million stored samples stay cheap to plan). */
const times = (n: number, specs: readonly TensorSpec[]): TensorSpec[] => specs.map((s) => ({ ...s, count: s.count * n }));

interface Costing {
  bytes: number;
  problems: string[];
  notes: string[];
}

/** What Gpu.tensor allocates for `spec`: each row part rounded to the pool's size class. */
function tensorCost(spec: TensorSpec, limits: AdapterLimits, into: Costing): void {
  const { shape, dtype } = spec;
  const maxBinding = spec.unbound ? limits.maxBufferSize : Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const rowBytes = (shape.length === 0 ? 1 : shape.slice(1).reduce((a, b) => a * b, 1)) * BYTES_PER_ELEMENT[dtype];
  const total = (shape.length === 0 ? 1 : shape[0]) * rowBytes;
  if (spec.count === 0) return;
  let counts: number[];
  try {
    counts = planRowChunks(shape, dtype, maxBinding);
  } catch {
    into.problems.push(
      `${spec.name} [${shape.join(', ')}] ${dtype}: one row is ${formatBytes(rowBytes)}, more than one binding holds (${formatBytes(maxBinding)}); no split can fit it`,
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

function targetWeightSpecs(c: TargetModelConfig, dtype: DType): TensorSpec[] {
  const H = c.hiddenSize;
  const qw = c.numHeads * c.headDim;
  const kvw = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  // Matrices are stored in `dtype` and may be split into row parts; norms and biases stay f32.
  const m = (name: string, shape: number[]) => t(name, shape, dtype, true);
  const layer = [
    t('input_layernorm', [H]),
    m('q_proj', [qw, H]),
    m('k_proj', [kvw, H]),
    m('v_proj', [kvw, H]),
    m('o_proj', [H, qw]),
    t('post_attention_layernorm', [H]),
    m('gate_proj', [I, H]),
    m('up_proj', [I, H]),
    m('down_proj', [H, I]),
    ...(c.qkvBias ? [t('q_bias', [qw]), t('k_bias', [kvw]), t('v_bias', [kvw])] : []),
    ...(c.oBias ? [t('o_bias', [H])] : []),
    ...(c.qkNorm ? [t('q_norm', [c.headDim]), t('k_norm', [c.headDim])] : []),
    ...(c.mlpBias ? [t('gate_bias', [I]), t('up_bias', [I]), t('down_bias', [H])] : []),
  ];
  return [
    m('model.embed_tokens.weight', [c.vocabSize, H]),
    ...times(c.numLayers, layer),
    t('model.norm.weight', [H]),
    ...(c.tieWordEmbeddings ? [] : [m('lm_head.weight', [c.vocabSize, H])]),
  ];
}

/** One batched capture forward of `rows` tokens: the layer's working set (released per layer) and what the capture keeps. */
function captureSpecs(c: TargetModelConfig, rows: number, seq: number, aux: number): TensorSpec[] {
  const H = c.hiddenSize;
  const qw = c.numHeads * c.headDim;
  const kvw = c.numKvHeads * c.headDim;
  const batch = Math.max(1, Math.floor(rows / seq));
  return [
    t('ids, positions, mask', [3 * rows], 'i32'),
    t('h', [rows, H]),
    t('invRms', [rows]),
    t('attn.x', [rows, H]),
    t('attn.qRaw', [rows, qw]),
    t('attn.kRaw', [rows, kvw]),
    t('attn.v', [rows, kvw]),
    t('attn.q', [rows, qw]),
    t('attn.k', [rows, kvw]),
    ...(c.qkNorm ? [t('attn.qNormed', [rows, qw]), t('attn.kNormed', [rows, kvw])] : []),
    t('attn.o', [rows, qw]),
    t('attn.lse', [batch, c.numHeads, seq]),
    t('mlp.x', [rows, H]),
    t('mlp.gate', [rows, c.intermediateSize]),
    t('mlp.up', [rows, c.intermediateSize]),
    t('mlp.act', [rows, c.intermediateSize]),
    ...times(aux, [t('hidden_states (aux)', [rows, H])]),
    t('final norm', [rows, H]),
    t('target.logits', [rows, c.vocabSize], 'f32', true),
  ];
}

/** Every tensor of the run, by item. */
function itemSpecs(x: MemoryPlanInput): Record<ItemKey, { label: string; specs: TensorSpec[]; detail: string }> {
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
  const sample = [
    t('hidden_state', [S, aux * tc.hiddenSize], feat),
    t('target', [S, tc.vocabSize], feat),
    t('input_ids', [S], 'i32'),
    t('loss_mask', [S], 'i32'),
  ];
  const step = [
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
    t('gate', [R, I]),
    t('up', [R, I]),
    t('act', [R, I]),
    t('hOut', [R, H]),
    t('invRmsFinal', [R]),
    t('dF', [R, H]),
  ];
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
    targetCapture: {
      label: 'target capture activations',
      specs: captureSpecs(tc, captureRows, S, aux),
      detail: `${captureRows} tokens per capture forward, logits ${captureRows} × ${tc.vocabSize}`,
    },
    featureStore: {
      label: 'feature store',
      specs: times(x.featureStoreSamples, sample),
      detail: `${x.featureStoreSamples} samples resident × ${S} tokens (hidden ${aux} × ${tc.hiddenSize}, target logits ${tc.vocabSize}), ${feat}`,
    },
    batch: {
      label: 'training batch',
      specs: [
        t('input_ids', [B, S], 'i32'),
        t('attention_mask', [B, S], 'i32'),
        t('loss_mask', [B, S], 'i32'),
        t('hidden_state', [B, S, aux * tc.hiddenSize], feat, true),
        t('target', [B, S, tc.vocabSize], feat, true),
      ],
      detail: `batch ${B} × ${S} tokens, ${feat}`,
    },
    staging: {
      label: 'staging and uniforms',
      specs: [
        t('uniform arena', [512 * 64], 'u32'),
        t('loss readback', [L + 1]),
        t('metrics readback', [4 * L]),
        t('grad-norm readback', [2]),
        t('timer', [8]),
      ].map((s) => ({ ...s, unbound: true })),
      detail: '512 uniform slots of 256 bytes, readback buffers for losses and metrics, timer',
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
      label: 'frozen draft embedding',
      specs: [
        t('embed_tokens.weight', [V, H], 'f32', true),
        t('t2d', [V], 'i32'),
        t('used', [D], 'i32'),
        t('rope.forward', [ropeRows, d.headDim / 2, 2]),
        t('rope.inverse', [ropeRows, d.headDim / 2, 2]),
      ],
      detail: `[${V}, ${H}] f32 embedding, vocabulary maps, RoPE tables for ${ropeRows} positions`,
    },
    activations: {
      label: `activations (${L} TTT steps)`,
      specs: [
        ...times(L, step),
        ...times(L, [t('positions', [R], 'i32')]),
        t('hidden0', [R, H]),
        t('kCache', [L, B, S, d.numKvHeads, d.headDim]),
        t('vCache', [L, B, S, d.numKvHeads, d.headDim]),
        t('teacher.p', [R, D]),
        t('teacher.pTilde', [R, D]),
        t('teacher.tok', [R], 'i32'),
        t('teacher.positionMask', [R], 'i32'),
        t('losses', [L + 1]),
        t('metrics', [4 * L]),
      ],
      detail: `${L} × ${R} rows × (emb, z, qRot, o, lse, h1, n, gate, up, act, hOut, dF) + KV caches [${L}, ${R}, ${kvDim}] + teacher [${R}, ${D}] × 2`,
    },
    scratch: {
      label: 'step scratch (logits, backward)',
      specs: [
        t('ids.shifted', [B, S], 'i32'),
        t('q', [R, qDim]),
        t('k/v', [R, kvDim]),
        t('kRot', [R, kvDim]),
        t('f', [R, H]),
        t('logits', [R, D]),
        t('dKCache', [L, B, S, d.numKvHeads, d.headDim]),
        t('dVCache', [L, B, S, d.numKvHeads, d.headDim]),
        t('dEmb.scratch', [R, H]),
        t('dHOut', [R, H]),
        t('dAct', [R, I]),
        t('dGate', [R, I]),
        t('dUp', [R, I]),
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
      ],
      detail: `temporaries of one step, reused by the next: logits [${R}, ${D}], backward scratch and dK/dV caches`,
    },
  };
}

function checkInput(x: MemoryPlanInput): void {
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
  for (const [field, value] of [
    ['targetWeights', x.targetWeights],
    ['features', x.features],
  ] as const) {
    if (value !== 'f32' && value !== 'f16') throw new Error(`memory plan: ${field} must be "f32" or "f16", got ${JSON.stringify(value)}`);
  }
}

function costItems(x: MemoryPlanInput, limits: AdapterLimits): { items: PlanItem[]; problems: string[]; notes: string[] } {
  const problems: string[] = [];
  const notes: string[] = [];
  const items: PlanItem[] = [];
  for (const [key, item] of Object.entries(itemSpecs(x)) as [ItemKey, ReturnType<typeof itemSpecs>[ItemKey]][]) {
    const cost: Costing = { bytes: 0, problems: [], notes: [] };
    for (const spec of item.specs) tensorCost(spec, limits, cost);
    // One sentence per distinct problem: 80 layers of the same oversized tensor say it once.
    for (const p of new Set(cost.problems)) problems.push(`${item.label}: ${p}`);
    for (const n of new Set(cost.notes)) notes.push(`${item.label}: ${n}`);
    items.push({ key, label: item.label, bytes: cost.bytes, detail: item.detail });
  }
  return { items, problems, notes };
}

const totalOf = (items: readonly PlanItem[]) => items.reduce((a, i) => a + i.bytes, 0);

/** Tokens per batched capture forward and prompts per batched generation, as a session runs them (TargetFeatureSource, continueWithTarget). */
export const SESSION_CAPTURE_BATCH_TOKENS = 8192;
export const SESSION_GENERATION_BATCH = 16;

/** What an Eagle3TrainingSession's plan needs to know of its run (`speclab train` and the lab both build it here). */
export interface SessionMemoryRun {
  readonly target: TargetModelConfig;
  readonly draft: Eagle3Config;
  readonly batchSize: number;
  readonly tttLength: number;
  readonly roundPrompts: number;
  readonly featurePrecision?: Precision;
  /** Storage of the frozen target's weights (--target-precision). */
  readonly targetPrecision?: Precision;
  /** Longest training sequence in tokens. */
  readonly maxLength: number;
  /** Training sequences (a round holds at most this many). */
  readonly sequences: number;
  /** Sequences the target generates in batches (training continuations, held-out prompts). */
  readonly generated: number;
}

/** The plan input of a session: the target's weights in f32 (as the session loads them), one round resident in the store. */
export function sessionMemoryInput(run: SessionMemoryRun): MemoryPlanInput {
  return {
    target: run.target,
    targetWeights: run.targetPrecision ?? 'f32',
    draft: run.draft,
    batchSize: run.batchSize,
    maxLength: run.maxLength,
    tttLength: run.tttLength,
    features: run.featurePrecision ?? 'f32',
    featureStoreSamples: Math.max(1, Math.min(run.roundPrompts, run.sequences)),
    captureBatchTokens: SESSION_CAPTURE_BATCH_TOKENS,
    generationBatch: Math.max(0, Math.min(SESSION_GENERATION_BATCH, run.generated)),
  };
}

/** The plan for `input`, checked against `budgetBytes` (when given) and the adapter's limits. */
export function planTrainingMemory(input: MemoryPlanInput, options: { limits: AdapterLimits; budgetBytes?: number }): MemoryPlan {
  checkInput(input);
  const { limits, budgetBytes } = options;
  if (budgetBytes !== undefined && !(Number.isSafeInteger(budgetBytes) && budgetBytes > 0))
    throw new Error(`memory plan: budgetBytes must be a positive whole number of bytes, got ${budgetBytes}`);
  const maxBindingBytes = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const { items, problems, notes } = costItems(input, limits);
  const totalBytes = totalOf(items);
  const largest = items.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  if (budgetBytes !== undefined && totalBytes > budgetBytes)
    problems.unshift(`the plan needs ${formatBytes(totalBytes)}, over the budget of ${formatBytes(budgetBytes)}`);
  const fits = problems.length === 0;
  const suggestions = fits ? [] : suggest(input, limits, budgetBytes);
  return { input, items, totalBytes, largest, budgetBytes, limits, maxBindingBytes, fits, problems, notes, suggestions };
}

/** Would `x` fit? (no problems, total within the budget) */
function fitsWith(x: MemoryPlanInput, limits: AdapterLimits, budget: number | undefined): { fits: boolean; total: number } {
  const { items, problems } = costItems(x, limits);
  const total = totalOf(items);
  return { fits: problems.length === 0 && (budget === undefined || total <= budget), total };
}

/** For each knob, the first smaller value that fits (halving), or what its floor still needs. */
function suggest(x: MemoryPlanInput, limits: AdapterLimits, budget: number | undefined): string[] {
  const out: string[] = [];
  const knobs: [string, keyof MemoryPlanInput, number][] = [
    ['batch size', 'batchSize', x.batchSize],
    ['max length', 'maxLength', x.maxLength],
    ['TTT length', 'tttLength', x.tttLength],
    ['feature-store samples', 'featureStoreSamples', x.featureStoreSamples],
  ];
  for (const [name, key, value] of knobs) {
    if (value <= 1) continue;
    let tried = value;
    let result = { fits: false, total: 0 };
    while (tried > 1 && !result.fits) {
      tried = Math.max(1, Math.floor(tried / 2));
      result = fitsWith({ ...x, [key]: tried }, limits, budget);
    }
    out.push(`${name} ${value} → ${tried}: ${formatBytes(result.total)}${result.fits ? ' (fits)' : ' (still does not fit)'}`);
  }
  for (const [name, key] of [
    ['feature precision', 'features'],
    ['target weight precision', 'targetWeights'],
  ] as const) {
    if (x[key] !== 'f32') continue;
    const result = fitsWith({ ...x, [key]: 'f16' }, limits, budget);
    out.push(`${name} f32 → f16: ${formatBytes(result.total)}${result.fits ? ' (fits)' : ' (still does not fit)'}`);
  }
  // When no single change is enough: all of them at once, or what stays whatever is lowered.
  const floor: MemoryPlanInput = {
    ...x,
    batchSize: 1,
    maxLength: 1,
    tttLength: 1,
    featureStoreSamples: 1,
    features: 'f16',
    targetWeights: 'f16',
  };
  const all = fitsWith(floor, limits, budget);
  if (!out.some((s) => s.endsWith('(fits)')))
    out.push(
      all.fits
        ? `all of these together: ${formatBytes(all.total)} (fits)`
        : `even all of them at their minimum need ${formatBytes(all.total)}: raise the budget or use a smaller model`,
    );
  return out;
}

/** The plan as a small table: item, bytes, share, what it is; then the verdict. */
export function formatMemoryPlan(plan: MemoryPlan): string[] {
  const width = Math.max(...plan.items.map((i) => i.label.length), 'total'.length);
  const lines = plan.items.map(
    (i) =>
      `  ${i.label.padEnd(width)}  ${formatBytes(i.bytes).padStart(10)}  ${((100 * i.bytes) / Math.max(plan.totalBytes, 1)).toFixed(1).padStart(5)}%  ${i.detail}`,
  );
  const budget =
    plan.budgetBytes === undefined
      ? 'no byte budget (WebGPU reports no total memory; --gpu-memory-budget sets one)'
      : `budget ${formatBytes(plan.budgetBytes)}`;
  lines.push(
    `  ${'total'.padEnd(width)}  ${formatBytes(plan.totalBytes).padStart(10)}  ${budget}; one binding holds ${formatBytes(plan.maxBindingBytes)}`,
  );
  for (const n of plan.notes) lines.push(`  note: ${n}`);
  lines.push(plan.fits ? '  fits' : `  does not fit: ${plan.problems.join('; ')}`);
  if (!plan.fits && plan.suggestions.length > 0) lines.push(`  lower: ${plan.suggestions.join('; ')}`);
  return lines;
}

/** One line for a refused run: the largest item, the total, the budget, the first problem, what to lower. */
export function memoryPlanRefusal(plan: MemoryPlan): string {
  const budget = plan.budgetBytes === undefined ? 'no byte budget' : `budget ${formatBytes(plan.budgetBytes)}`;
  const lower = plan.suggestions.length > 0 ? `; lower: ${plan.suggestions.join('; ')}` : '';
  return `GPU memory plan does not fit: ${plan.problems.join('; ')} (total ${formatBytes(plan.totalBytes)}, ${budget}, largest item ${plan.largest.label} ${formatBytes(plan.largest.bytes)})${lower}`;
}
