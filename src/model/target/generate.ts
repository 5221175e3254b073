/**
 * Generation with a KV cache: prefill the prompts in one batched pass, then one token per sequence
 * per step through the decode kernel. Greedy or sampled (temperature / top-k / top-p, seeded; see
 * sampling.ts). Each step reads back one [batch, vocab] logits tensor to choose the next tokens.
 */
import { Rng } from '../../util/random.ts';
import type { TargetModel } from './model.ts';
import { checkSamplingOptions, sampleToken, type SamplingOptions } from './sampling.ts';

export interface GenerateOptions extends SamplingOptions {
  readonly maxNewTokens: number;
  /** Seed of the sampling Rng (one stream, drawn in sequence order each step). Default 0. */
  readonly seed?: number;
  /** A sequence stops after producing any of these ids (included in its output). */
  readonly eosTokenIds?: readonly number[];
}

/** Returns the new tokens of every prompt (at most maxNewTokens each). */
export async function generate(model: TargetModel, prompts: readonly (readonly number[])[], options: GenerateOptions): Promise<number[][]> {
  const { maxNewTokens } = options;
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 0)
    throw new Error(`generate: maxNewTokens must be an integer ≥ 0, got ${maxNewTokens}`);
  checkSamplingOptions(options);
  if (prompts.length === 0) return [];
  const out = prompts.map((): number[] => []);
  if (maxNewTokens === 0) return out;
  const gpu = model.gpu;
  const V = model.config.vocabSize;
  const eos = new Set(options.eosTokenIds ?? []);
  const rng = new Rng(options.seed ?? 0);
  const maxLen = Math.max(...prompts.map((p) => p.length)) + maxNewTokens;
  const cache = model.createKvCache(prompts.length, maxLen);
  const done = prompts.map(() => false);
  try {
    let logitsTensor = await model.prefill(cache, prompts);
    for (let step = 0; ; step++) {
      const logits = (await gpu.read(logitsTensor)) as Float32Array;
      gpu.release(logitsTensor);
      const next = prompts.map((_, b) => {
        if (done[b]) return out[b][out[b].length - 1];
        const id = sampleToken(logits.subarray(b * V, (b + 1) * V), options, rng);
        out[b].push(id);
        if (eos.has(id)) done[b] = true;
        return id;
      });
      if (step + 1 >= maxNewTokens || done.every(Boolean)) break;
      // Finished sequences keep decoding their last token (outputs ignored) so the batch stays aligned.
      logitsTensor = await model.decode(cache, next);
    }
    return out;
  } finally {
    cache.release(gpu);
  }
}
