/**
 * `speclab plan --target DIR|ORG/NAME[@REV] | --target-config FILE [train flags] [--json]`: the GPU
 * memory plan of a run for each role — colocated (`speclab train`), trainer (`speclab train
 * --cluster`), rollout (`speclab rollout`) — from the target's config.json alone, so an 8B target is
 * planned before its 16 GB of weights are downloaded: a Hugging Face id is read from the Hugging Face
 * cache, or only its config.json is downloaded into it (resolveTargetConfigDir). With each plan: one
 * training sample's bytes, one checkpoint's bytes and the default cadence, and the spill. Exit code 0
 * when every role planned fits, 2 when one does not (its suggestions name the flags to change) or on a
 * usage error.
 *
 * The settings are `speclab train`'s, validated by the run's settings schema (same defaults and
 * ranges); the colocated plan is the one `speclab train` prints for a --data run whose longest
 * conversation has --max-length tokens and whose conversations fill a round
 * (src/training/run/train-memory.ts, test/cli/plan.test.ts compares the two).
 */
import { parseHfConfig, type TargetModelConfig } from '../config/hf-config.ts';
import { resolveAuxLayers, resolveDraftVocabSize } from '../training/sequences/draft-shape.ts';
import { draftConfigFor } from '../training/sequences/eagle3-data.ts';
import { SESSION_GENERATION_BATCH, sessionMemoryInput, type MemoryPlan, type MemoryPlanInput } from '../training/run/memory-plan.ts';
import { planWithRecompute, ROLE_COMMANDS, type PlanRole } from '../training/run/memory-plan-roles.ts';
import { validateTrainConfig, type TrainConfig } from '../training/run/run-config.ts';
import { resolveTargetConfigDir } from '../training/run/run-plan.ts';
import { progressFor } from '../training/run/platform.ts';
import { lineProgress } from '../training/run/progress-lines.ts';
import { checkpointCadence, checkpointSize, sampleBytes, type CheckpointSize } from '../training/run/run-footprint.ts';
import { adapterLimits, memoryPlanLines } from '../training/run/train-memory.ts';
import { formatBytes } from '../util/bytes.ts';
import { formatDuration } from '../util/format.ts';
import type { AdapterLimits } from '../training/run/memory-plan-types.ts';
import type { PlanArgs } from './plan-options.ts';
import type { Platform } from './platform.ts';
import { UsageError } from './options.ts';
import { READ_BUDGETS } from '../ports/read-budget.ts';

/**
 * The target's config: `--target-config FILE`, or `config.json` of `--target DIR`, or of a Hugging Face
 * id's snapshot. With --json nothing else reaches stdout, so the download's progress is not shown.
 */
async function readTargetConfig(
  platform: Platform,
  args: PlanArgs,
  print: (line: string) => void,
): Promise<{ path: string; shown: string; config: TargetModelConfig }> {
  let path: string;
  let shown: string;
  if (args.targetConfig !== undefined) [path, shown] = [args.targetConfig, args.targetConfig];
  else {
    const target = args.target!;
    const progress = args.json ? lineProgress(() => {}) : progressFor(platform, print);
    const dir = await resolveTargetConfigDir(platform, target, progress);
    path = `${dir.replace(/\/+$/, '')}/config.json`;
    shown = dir === target ? path : `${target} (${path})`;
  }
  const slash = path.lastIndexOf('/');
  const [dir, name] = slash < 0 ? ['.', path] : [path.slice(0, slash) || '/', path.slice(slash + 1)];
  let bytes: Uint8Array;
  try {
    bytes = await platform.files(dir).read(name, READ_BUDGETS.config);
  } catch (err) {
    throw new Error(`${path}: cannot read the target's config (${(err as Error).message})`, { cause: err });
  }
  return { path, shown, config: parseHfConfig(new TextDecoder().decode(bytes), path) };
}

/** A settings error of the target's shape (aux layer outside the target, draft vocabulary over its own) is a usage error. */
function usage<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    throw err instanceof UsageError ? err : new UsageError((err as Error).message);
  }
}

async function limitsOf(platform: Platform, given: PlanArgs['limits']): Promise<{ limits: AdapterLimits; source: string }> {
  if (given !== 'this-adapter') {
    const defaults = given.maxStorageBufferBindingSize === 128 * 2 ** 20 && given.maxBufferSize === 256 * 2 ** 20;
    return { limits: given, source: defaults ? "WebGPU's defaults" : 'given' };
  }
  const ctx = await platform.acquireGpu();
  try {
    return { limits: adapterLimits(ctx.limits), source: 'this adapter' };
  } finally {
    ctx.destroy();
  }
}

/** The colocated (session) input of a --data run with these settings: every round full, every sequence --max-length tokens. */
export function planInput(tc: TargetModelConfig, config: TrainConfig, draftVocabSize: number, limits: AdapterLimits): MemoryPlanInput {
  return sessionMemoryInput({
    maxBindingBytes: Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize),
    heldOutSequences: config.evalEvery > 0 ? config.evalPrompts : 0,
    target: tc,
    draft: draftConfigFor({ config: tc }, draftVocabSize),
    batchSize: config.batchSize,
    tttLength: config.tttLength,
    roundPrompts: config.roundPrompts,
    featurePrecision: config.featurePrecision,
    targetRepr: config.targetRepr,
    targetPrecision: config.targetPrecision,
    maxLength: config.maxLength,
    sequences: config.roundPrompts,
    // The acceptance measurement decodes one held-out prompt at a time (held-out rows bring their replies);
    // with --regenerate the target also writes the training replies, in batches.
    generated: config.regenerate ? Math.max(SESSION_GENERATION_BATCH, config.evalPrompts) : Math.min(1, config.evalPrompts),
  });
}

interface RoleReport {
  readonly role: PlanRole;
  readonly plan: MemoryPlan;
  readonly sampleBytes: number;
  readonly checkpoint: CheckpointSize | undefined;
  readonly checkpointEvery: number | undefined;
  readonly spillBytes: number;
  readonly sharedStoreBytes: number;
}

function roleReport(role: PlanRole, x: MemoryPlanInput, config: TrainConfig, plan: MemoryPlan): RoleReport {
  const sample = sampleBytes(x);
  const trains = role !== 'rollout';
  return {
    role,
    plan,
    sampleBytes: sample,
    checkpoint: trains ? checkpointSize(x.draft) : undefined,
    checkpointEvery: trains ? checkpointCadence(config).every : undefined,
    // A colocated run spills the committed round to <out>/spill; a cluster run's Redis holds this round and the next.
    spillBytes: role === 'colocated' ? config.roundPrompts * sample : 0,
    sharedStoreBytes: role === 'colocated' ? 0 : 2 * config.roundPrompts * sample,
  };
}

function jsonLine(r: RoleReport): string {
  const { plan } = r;
  return JSON.stringify({
    role: r.role,
    command: ROLE_COMMANDS[r.role],
    totalBytes: plan.totalBytes,
    phases: plan.phases,
    fits: plan.fits,
    sampleBytes: r.sampleBytes,
    checkpointBytes: r.checkpoint?.bytes ?? 0,
    checkpointEvery: r.checkpointEvery ?? null,
    spillBytes: r.spillBytes,
    sharedStoreBytes: r.sharedStoreBytes,
    budgetBytes: plan.budgetBytes ?? null,
    limits: plan.limits,
    largest: { key: plan.largest.key, label: plan.largest.label, bytes: plan.largest.bytes },
    items: plan.items.map((i) => ({ key: i.key, label: i.label, bytes: i.bytes, detail: i.detail })),
    problems: plan.problems,
    notes: plan.notes,
    suggestions: plan.suggestions,
  });
}

/** The lines of the run-wide figures: one sample, one checkpoint and its cadence, the spill. */
function footprintLines(x: MemoryPlanInput, config: TrainConfig, diskRate: number | undefined): string[] {
  const S = x.maxLength;
  const sample = sampleBytes(x);
  const ckpt = checkpointSize(x.draft);
  const cadence = checkpointCadence(config);
  const at = (bytes: number) =>
    diskRate === undefined ? '' : `; about ${formatDuration(bytes / diskRate)} at ${formatBytes(diskRate)}/s (--disk-rate)`;
  return [
    x.targetRepr === 'hidden_state'
      ? `one sample (as stored and sent): ${formatBytes(sample)} = ${S} tokens × (hidden ${x.auxLayers ?? 3} × ${x.target.hiddenSize} + target hidden ${x.target.hiddenSize}) ${x.features}, + input_ids, loss_mask and argmax i32, logsumexp f32 (compact features)`
      : `one sample (as stored and sent): ${formatBytes(sample)} = ${S} tokens × (hidden ${x.auxLayers ?? 3} × ${x.target.hiddenSize} + logits ${x.target.vocabSize}) ${x.features}, + input_ids and loss_mask i32`,
    `one checkpoint: ${formatBytes(ckpt.bytes)} (weights.safetensors ${formatBytes(ckpt.weightsFile)}: f32 draft weights, t2d, d2t; optimizer.safetensors ${formatBytes(ckpt.optimizerFile)}: AdamW m and v; plus state.json and COMPLETE, small JSON); two are kept${at(ckpt.bytes)}`,
    `checkpoint cadence (speclab train): every --checkpoint-every ${cadence.checkpointEvery} steps, at each round's end (--round-prompts ${config.roundPrompts} at --batch-size ${config.batchSize}: ${cadence.stepsPerRound} steps) and at the last step: at most ${cadence.every} steps apart, ${formatBytes(Math.round(ckpt.bytes / (cadence.every * config.batchSize)))} written per sample trained`,
    `spill: speclab train keeps the committed round on disk until its checkpoint: ${config.roundPrompts} samples, ${formatBytes(config.roundPrompts * sample)} in <out>/spill; a --cluster run's Redis holds up to two rounds, ${formatBytes(2 * config.roundPrompts * sample)}${at(config.roundPrompts * sample)}`,
  ];
}

export async function runPlan(platform: Platform, args: PlanArgs, print: (line: string) => void): Promise<number> {
  const config = validateTrainConfig(args.train, 'plan flags');
  const { shown, config: tc } = await readTargetConfig(platform, args, print);
  const auxLayerIds = usage(() => resolveAuxLayers(config.auxLayers, tc.numLayers));
  const draftVocabSize = usage(() => resolveDraftVocabSize(config.draftVocabSize, tc.vocabSize));
  const { limits, source } = await limitsOf(platform, args.limits);
  const x = planInput(tc, config, draftVocabSize, limits);
  const reports = args.roles.map((role) =>
    roleReport(
      role,
      x,
      config,
      planWithRecompute(role, x, { limits, budgetBytes: config.gpuMemoryBudget, rolloutBatch: args.rolloutBatch }, config.recompute),
    ),
  );
  if (args.json) {
    for (const r of reports) print(jsonLine(r));
  } else {
    print(
      `plan: target ${shown} (${tc.architecture}, ${tc.numLayers} layers, hidden ${tc.hiddenSize}, vocab ${tc.vocabSize}${tc.tieWordEmbeddings ? ', tied embeddings' : ''}); aux layers [${auxLayerIds.join(', ')}], draft vocab ${draftVocabSize}`,
    );
    print(
      `  sequences of ${config.maxLength} tokens (--max-length), --batch-size ${config.batchSize}, --ttt-length ${config.tttLength}, --round-prompts ${config.roundPrompts}, features ${config.featurePrecision}, target weights ${config.targetPrecision}; limits (${source}): storage binding ${formatBytes(limits.maxStorageBufferBindingSize)}, buffer ${formatBytes(limits.maxBufferSize)}`,
    );
    for (const line of footprintLines(x, config, args.diskRate)) print(line);
    for (const r of reports) {
      print('');
      print(`${r.role} (${ROLE_COMMANDS[r.role]}${r.role === 'rollout' ? ` --batch ${args.rolloutBatch}` : ''}):`);
      for (const line of memoryPlanLines(r.plan)) print(line);
    }
  }
  return reports.every((r) => r.plan.fits) ? 0 : 2;
}
