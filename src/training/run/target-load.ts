/**
 * Loading a run's target: its weights streamed from the files onto the GPU (TargetModel.load) with
 * the bytes read shown as progress, then one line of what was loaded. Every command that loads a
 * target (train, train --offline, prepare, rollout, eval) loads it here.
 */
import type { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import type { WeightPrecision } from '../../formats/hf-checkpoint.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { TargetModel } from '../../model/target/model.ts';
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
