/**
 * Loading a run's target: its weights streamed from the files onto the GPU (TargetModel.load) with
 * the bytes read shown as progress, then one line of what was loaded. Every command that loads a
 * target (train, train --offline, prepare, rollout, eval) loads it here; a cluster trainer with
 * nothing to generate or evaluate loads only its tables (model/target/target-tables.ts).
 */
import type { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import type { WeightPrecision } from '../../formats/hf-checkpoint.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { TargetModel } from '../../model/target/model.ts';
import { TargetTables } from '../../model/target/target-tables.ts';
import type { ProgressDisplay } from '../../ports/progress.ts';
import { formatBytes } from '../../util/bytes.ts';
import { formatDuration } from '../../util/format.ts';

export async function loadTarget(
  gpu: Gpu,
  source: HfCheckpointSource,
  precision: WeightPrecision,
  progress: ProgressDisplay,
): Promise<TargetModel> {
  const started = performance.now();
  const bar = progress.start({ label: 'loading target weights', total: source.totalBytes, unit: 'bytes' });
  let target: TargetModel;
  try {
    target = await TargetModel.load(gpu, source, { weightPrecision: precision, onProgress: (done) => bar.update(done) });
  } catch (err) {
    bar.end();
    throw err;
  }
  const seconds = (performance.now() - started) / 1000;
  bar.end(
    `target weights: ${formatBytes(source.totalBytes)} read in ${formatDuration(seconds)}, ${formatBytes(target.weightBytes)} on the GPU (${precision})`,
  );
  return target;
}

/**
 * Does this run need the whole target on its GPU? A single-process run captures with it. A cluster
 * trainer (`--cluster`) needs it only to write training sequences (prompts it continues, replies it
 * regenerates) or to evaluate (held-out prompts: the acceptance measurement, --eval-every); without
 * any of them (a dataset with its replies, --eval-prompts 0) it reads only the target's tables.
 */
export function runNeedsTargetModel(
  config: { readonly cluster?: string; readonly evalEvery: number },
  data: { readonly trainSequences?: unknown; readonly heldPrompts: readonly unknown[] },
): boolean {
  return config.cluster === undefined || data.trainSequences === undefined || data.heldPrompts.length > 0 || config.evalEvery > 0;
}

/** The embedding and, on demand, the lm_head rows of the draft vocabulary (TargetTables), with one line of what was loaded. */
export async function loadTargetTables(
  gpu: Gpu,
  source: HfCheckpointSource,
  precision: WeightPrecision,
  progress: ProgressDisplay,
): Promise<TargetTables> {
  const started = performance.now();
  const embed = source.tensors.find((t) => t.name === 'model.embed_tokens.weight');
  const bar = progress.start({ label: 'loading target embedding', total: source.totalBytes, unit: 'bytes' });
  let tables: TargetTables;
  try {
    tables = await TargetTables.load(gpu, source, precision, { onProgress: (done) => bar.update(done) });
  } catch (err) {
    bar.end();
    throw err;
  }
  bar.end(
    `target tables only (nothing to generate or evaluate): the embedding ${embed ? `[${embed.shape.join(', ')}]` : ''} read in ${formatDuration((performance.now() - started) / 1000)}, ${formatBytes(tables.bytes)} on the GPU (${precision}); the lm_head rows of the draft vocabulary follow`,
  );
  return tables;
}
