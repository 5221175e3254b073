/**
 * The two tables of a target a trainer needs when it holds no target model: the embedding (the
 * draft's frozen embedding borrows it on the GPU) and the lm_head rows of the draft vocabulary
 * (compact features' teacher, ./draft-head.ts). A `--cluster` trainer with nothing to generate or
 * evaluate reads only these from the checkpoint's files: 1 GiB of an 8B target's 15 GiB at f16.
 * Each is the bits TargetModel.load gives (the same stream, conversion and precision), so a trainer
 * on tables trains what a trainer on the whole target trains.
 */
import type { TargetModelConfig } from '../../config/hf-config.ts';
import { storageDtype, type WeightPrecision } from '../../formats/hf-checkpoint.ts';
import type { HfCheckpointSource } from '../../formats/hf-checkpoint-source.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { DraftHead } from './draft-head.ts';
import { streamTensor, type StreamOptions } from './weight-stream.ts';

/** What a trainer reads of its target besides the features; TargetModel and TargetTables both give it. */
export interface DraftTargetTables {
  readonly config: TargetModelConfig;
  /** The embedding [V, H] on the GPU, at the target's storage precision. */
  readonly embedTokens: Tensor;
  /** The lm_head rows of `used` (ascending target ids) as an f32 [D, Ht] table; the caller destroys it. */
  draftHead(used: ArrayLike<number>): Promise<DraftHead>;
}

const EMBED = 'model.embed_tokens.weight';

export class TargetTables implements DraftTargetTables {
  private constructor(
    private readonly gpu: Gpu,
    private readonly source: HfCheckpointSource,
    private readonly precision: WeightPrecision,
    readonly embedTokens: Tensor,
  ) {}

  /** Streams the embedding onto the GPU at `precision` (as TargetModel.load stores it). */
  static async load(
    gpu: Gpu,
    source: HfCheckpointSource,
    precision: WeightPrecision,
    options: Pick<StreamOptions, 'onProgress'> = {},
  ): Promise<TargetTables> {
    if (precision !== 'f32' && precision !== 'f16')
      throw new Error(`target tables: weightPrecision must be f32 or f16, got ${JSON.stringify(precision)}`);
    const embed = await streamTensor(gpu, source, EMBED, storageDtype(EMBED, precision), { done: 0, queued: 0 }, options);
    await gpu.sync();
    return new TargetTables(gpu, source, precision, embed);
  }

  get config(): TargetModelConfig {
    return this.source.config;
  }

  /** Tied embeddings: gathered from the embedding on the GPU; else read from lm_head.weight's file rows. */
  draftHead(used: ArrayLike<number>): Promise<DraftHead> {
    if (this.config.tieWordEmbeddings) return DraftHead.gather(this.gpu, { lmHead: this.embedTokens }, used);
    return DraftHead.read(this.gpu, this.source, 'lm_head.weight', used, storageDtype('lm_head.weight', this.precision));
  }

  /** Bytes the tables hold on the GPU (the embedding; a draft head is its caller's). */
  get bytes(): number {
    return this.embedTokens.byteLength;
  }

  destroy(): void {
    this.gpu.release(this.embedTokens);
  }
}
