/**
 * The target model's key/value cache (model.ts `createKvCache`): per layer, the keys (RoPE applied)
 * and values of `batch` sequences of up to `maxLen` tokens, and how many tokens each sequence holds.
 * Its own file because both the entry points (model.ts: lengths, capacity, rollback) and the layers
 * (layers.ts: where a new key row is written) read it.
 */
import type { TargetModelConfig } from '../../config/hf-config.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';

/** Per-layer key/value caches for `batch` sequences of up to `maxLen` tokens. */
export class KvCache {
  /** Tokens held per sequence; the next token of sequence b goes to position lengths[b]. */
  readonly lengths: number[];
  constructor(
    readonly batch: number,
    readonly maxLen: number,
    /** Per layer, [batch, maxLen, kvHeads, headDim] (RoPE applied to keys). */
    readonly keys: readonly Tensor[],
    readonly values: readonly Tensor[],
  ) {
    this.lengths = new Array<number>(batch).fill(0);
  }

  /** An empty f32 cache for `batch` sequences of at most `maxLen` tokens of a model of config `c`. */
  static allocate(gpu: Gpu, c: TargetModelConfig, batch: number, maxLen: number): KvCache {
    const shape = [batch, maxLen, c.numKvHeads, c.headDim];
    const keys: Tensor[] = [];
    const values: Tensor[] = [];
    for (let l = 0; l < c.numLayers; l++) {
      keys.push(gpu.tensor(shape, 'f32', `kv.${l}.k`));
      values.push(gpu.tensor(shape, 'f32', `kv.${l}.v`));
    }
    return new KvCache(batch, maxLen, keys, values);
  }

  release(gpu: Gpu): void {
    gpu.release(...this.keys, ...this.values);
  }
}
