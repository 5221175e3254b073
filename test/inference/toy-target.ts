/**
 * A small real feature source for runtime tests: a fixed random embedding "target" whose hidden
 * state for token t is row t of its table, and whose labels are the next tokens (−1 at the end).
 * The probe trained on it must learn the bigram structure of the prompts, so losses really fall.
 */
import type { PromptTask } from '../../src/contracts/index.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import type { CaptureConfig } from '../../src/inference/capture.ts';
import type { CapturedFeatures, FeatureSource } from '../../src/inference/rollout-worker.ts';
import { Rng } from '../../src/util/random.ts';

export class ToyEmbeddingTarget implements FeatureSource {
  readonly table: Float32Array;
  calls = 0;
  failNext = false;
  dropOne = false;
  /** Overrides the recorded aux layer ids for one sample index (capture-mismatch tests). */
  wrongLayersFor?: number;

  constructor(
    private readonly gpu: Gpu,
    readonly vocab: number,
    readonly hidden: number,
    seed = 1,
  ) {
    this.table = new Rng(seed).floats(vocab * hidden, 1);
  }

  async generateFeatures(tasks: readonly PromptTask[], capture: CaptureConfig): Promise<CapturedFeatures[]> {
    this.calls++;
    if (this.failNext) {
      this.failNext = false;
      throw new Error('toy target crashed');
    }
    const out = tasks.map((task, i) => {
      const ids = (task.payload.input_ids as number[]).map(Number);
      for (const id of ids)
        if (!(id >= 0 && id < this.vocab)) throw new Error(`task ${task.taskId}: token ${id} outside vocab ${this.vocab}`);
      const hidden = new Float32Array(ids.length * this.hidden);
      ids.forEach((id, t) => hidden.set(this.table.subarray(id * this.hidden, (id + 1) * this.hidden), t * this.hidden));
      const labels = ids.map((_, t) => (t + 1 < ids.length ? ids[t + 1] : -1));
      return {
        tensors: {
          input_ids: this.gpu.upload([ids.length], 'i32', ids),
          hidden_state: this.gpu.upload([ids.length, this.hidden], 'f32', hidden),
          labels: this.gpu.upload([ids.length], 'i32', labels),
        },
        auxLayerIds: i === this.wrongLayersFor ? capture.auxLayerIds.map((x) => x + 1) : capture.auxLayerIds,
      };
    });
    if (this.dropOne) {
      const dropped = out.pop()!;
      this.gpu.release(...Object.values(dropped.tensors));
    }
    return out;
  }
}

/** Prompts drawn from a fixed bigram chain so that the next token is predictable from the current one. */
export function bigramPrompts(count: number, vocab: number, seed = 3): { input_ids: number[] }[] {
  const rng = new Rng(seed);
  const next = Array.from({ length: vocab }, () => rng.int(0, vocab));
  return Array.from({ length: count }, () => {
    const len = rng.int(6, 12);
    const ids = [rng.int(0, vocab)];
    while (ids.length < len) ids.push(next[ids[ids.length - 1]]);
    return { input_ids: ids };
  });
}
