/**
 * FeatureDataLoader (docs/features.md §4, with SpecForge's later runtime's fixes): the bridge that turns SampleRefs + the
 * feature store into collated GPU TrainBatches.
 *
 * Queue mode (online): refs are leased through a TrainLease, never a raw queue. The loader never
 * acks: it hands each batch's sample ids to the trainer, which acks at the optimizer boundary (the
 * durable ack must cover only what the optimizer consumed). A short final batch with `dropLast`
 * is failed terminally and its features aborted (as in SpecForge's later runtime), so no lease is stranded.
 * Refs mode (offline): a fixed list, re-iterable every epoch, shuffled per epoch with `seed + epoch`,
 * padded by wrapping to a multiple of `worldSize` and sharded rank r ← indices r, r + W, …
 * (DistributedSampler semantics).
 *
 * Per batch: homogeneity validation (strategy, schema version, target representation, feature
 * names, dtypes and ranks) → for each ref: store.get → GPU copy into the batch tensor → release
 * right after the copy is encoded (prefetch can never race a release) → right-padding with zeros and
 * an `attention_mask`. f16 features (stored with --feature-precision f16) are collated as f16; a
 * batch mixing f16 and f32 samples of a feature is refused by the homogeneity check. The next batch
 * is materialised while the trainer works on the current one.
 */
import { makeTrainBatch, type SampleRef, type TrainBatch } from '../contracts/index.ts';
import type { DraftStrategyName } from '../contracts/enums.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { BYTES_PER_ELEMENT, fmtShape, type Tensor } from '../gpu/tensor.ts';
import { f16ToF32 } from '../formats/safetensors.ts';
import { Rng } from '../util/random.ts';
import type { FeatureStore } from './feature-store.ts';

/** The loader-facing queue shape (TrainLease implements it). */
export interface RefLease {
  get(maxRefs: number, timeoutMs?: number): Promise<SampleRef[]>;
  fail(refs: readonly SampleRef[], reason: string, retryable: boolean): Promise<unknown>;
}

export interface FeatureDataLoaderOptions {
  batchSize: number;
  strategy?: DraftStrategyName;
  dropLast?: boolean;
  /** Refs mode: shuffle each epoch (seed + epoch); default false. */
  shuffle?: boolean;
  seed?: number;
  rank?: number;
  worldSize?: number;
  /** Queue mode: how long to wait for refs before treating the stream as ended. */
  leaseTimeoutMs?: number;
  /** Materialise the next batch while the current one is in use (default true). */
  prefetch?: boolean;
  /** Right-padding value per feature (default 0), e.g. `{ labels: -1 }` so padded rows are ignored. */
  padValues?: Readonly<Record<string, number>>;
  /**
   * Per-sample transform between `store.get` and collation (SpecForge's injected
   * `per_sample_transform`, e.g. the EAGLE3 offline normaliser). It may pass input tensors through;
   * tensors it creates belong to the loader, which frees them once copied into the batch.
   */
  transform?: (tensors: Readonly<Record<string, Tensor>>, ref: SampleRef) => Record<string, Tensor> | Promise<Record<string, Tensor>>;
}

/** The f16 bits of `value`, which must be exactly an f16 (a pad value is never rounded silently). */
export function f16BitsOf(value: number, what: string): number {
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const a = Math.abs(value);
  let bits = Number.NaN;
  if (a === 0) bits = sign;
  else if (a === Infinity) bits = sign | 0x7c00;
  else if (a < 2 ** -14)
    bits = sign | (a / 2 ** -24); // subnormal: a multiple of 2^-24
  else if (Number.isFinite(a)) {
    const e = Math.min(15, Math.floor(Math.log2(a)));
    bits = sign | ((e + 15) << 10) | ((a / 2 ** e - 1) * 1024);
  }
  if (!Number.isInteger(bits) || !Object.is(f16ToF32(bits), value))
    throw new RangeError(`${what} = ${value} is not exactly an f16 value; an f16 feature is padded with an exact f16`);
  return bits;
}

export class HomogeneityError extends Error {
  override name = 'HomogeneityError';
}

/** Check that a batch's refs can be collated together; throws naming the first offending sample. */
export function validateHomogeneous(refs: readonly SampleRef[], strategy: DraftStrategyName): void {
  const first = refs[0];
  let specsOf: SampleRef | undefined;
  for (const ref of refs) {
    if (ref.strategy !== strategy)
      throw new HomogeneityError(`sample ${ref.sampleId} has strategy ${ref.strategy}, the loader serves ${strategy}`);
    if (ref.schemaVersion !== first.schemaVersion) {
      throw new HomogeneityError(
        `batch mixes schema versions ${first.schemaVersion} (${first.sampleId}) and ${ref.schemaVersion} (${ref.sampleId})`,
      );
    }
    if (ref.metadata.target_repr !== first.metadata.target_repr) {
      throw new HomogeneityError(
        `batch mixes target representations ${String(first.metadata.target_repr)} (${first.sampleId}) and ${String(ref.metadata.target_repr)} (${ref.sampleId})`,
      );
    }
    if (Object.keys(ref.featureSpecs).length === 0) continue;
    if (!specsOf) {
      specsOf = ref;
      continue;
    }
    const a = Object.keys(specsOf.featureSpecs).sort();
    const b = Object.keys(ref.featureSpecs).sort();
    if (a.join() !== b.join())
      throw new HomogeneityError(`sample ${ref.sampleId} has features [${b}], sample ${specsOf.sampleId} has [${a}]`);
    for (const name of a) {
      const x = specsOf.featureSpecs[name];
      const y = ref.featureSpecs[name];
      if (x.dtype !== y.dtype || x.shape.length !== y.shape.length) {
        throw new HomogeneityError(
          `feature ${name}: sample ${ref.sampleId} is ${y.dtype}${fmtShape(y.shape)}, sample ${specsOf.sampleId} is ${x.dtype}${fmtShape(x.shape)}`,
        );
      }
    }
  }
}

/** The refs rank `rank` sees in `epoch` (DistributedSampler with drop_last=false). */
export function epochOrder(
  count: number,
  epoch: number,
  options: { shuffle?: boolean; seed?: number; rank?: number; worldSize?: number } = {},
): number[] {
  const world = options.worldSize ?? 1;
  const rank = options.rank ?? 0;
  if (!(rank >= 0 && rank < world)) throw new RangeError(`rank ${rank} outside world size ${world}`);
  const order = Array.from({ length: count }, (_, i) => i);
  if (options.shuffle) {
    const rng = new Rng((options.seed ?? 0) + epoch);
    for (let i = count - 1; i > 0; i--) {
      const j = rng.int(0, i + 1);
      [order[i], order[j]] = [order[j], order[i]];
    }
  }
  const padded = Math.ceil(count / world) * world;
  for (let i = count; i < padded && count > 0; i++) order.push(order[i - count]);
  return order.filter((_, i) => i % world === rank);
}

export class FeatureDataLoader {
  private epoch = 0;
  private readonly strategy: DraftStrategyName;

  constructor(
    private readonly gpu: Gpu,
    private readonly store: FeatureStore,
    private readonly source: { lease: RefLease } | { refs: readonly SampleRef[] },
    private readonly options: FeatureDataLoaderOptions,
  ) {
    if (!(Number.isInteger(options.batchSize) && options.batchSize > 0))
      throw new RangeError(`FeatureDataLoader: batchSize must be a positive integer, got ${options.batchSize}`);
    this.strategy = options.strategy ?? 'eagle3';
  }

  setEpoch(epoch: number): void {
    this.epoch = epoch;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<TrainBatch<Tensor>> {
    const next = 'refs' in this.source ? this.refsBatches() : this.leaseBatches(this.source.lease);
    const prefetch = this.options.prefetch !== false;
    let pending: Promise<TrainBatch<Tensor> | undefined> | undefined = this.nextBatch(next);
    try {
      for (;;) {
        const current = await pending;
        pending = undefined;
        if (!current) return;
        if (prefetch) pending = this.nextBatch(next);
        yield current;
        if (!prefetch) pending = this.nextBatch(next);
      }
    } finally {
      // The consumer stopped early (max steps): a batch prefetched but never yielded is settled so
      // no lease is stranded. File refs can be read again (retryable); consumed mem refs cannot.
      const unused = await pending?.catch(() => undefined);
      if (unused) {
        this.gpu.release(...Object.values(unused.tensors));
        if ('lease' in this.source) {
          const refs = unused.refs;
          const rereadable = refs.every((r) => r.featureStoreUri.startsWith('file://'));
          await this.source.lease.fail(refs, 'prefetched but never trained: the consumer stopped', rereadable);
        }
      }
    }
  }

  private async nextBatch(refBatches: AsyncIterator<SampleRef[]>): Promise<TrainBatch<Tensor> | undefined> {
    const r = await refBatches.next();
    if (r.done) return undefined;
    return this.materialise(r.value);
  }

  private async *refsBatches(): AsyncGenerator<SampleRef[]> {
    const refs = (this.source as { refs: readonly SampleRef[] }).refs;
    const order = epochOrder(refs.length, this.epoch, this.options);
    const size = this.options.batchSize;
    for (let i = 0; i < order.length; i += size) {
      const chunk = order.slice(i, i + size).map((k) => refs[k]);
      if (chunk.length < size && this.options.dropLast !== false) return;
      yield chunk;
    }
  }

  private async *leaseBatches(lease: RefLease): AsyncGenerator<SampleRef[]> {
    const size = this.options.batchSize;
    for (;;) {
      const refs = await lease.get(size, this.options.leaseTimeoutMs ?? 0);
      if (refs.length === 0) return;
      if (refs.length < size && this.options.dropLast !== false) {
        // Never open a window the stream cannot finish: settle the tail instead of stranding it.
        await lease.fail(refs, `short final batch (${refs.length} < ${size}) dropped`, false);
        for (const ref of refs) this.store.abort(ref.sampleId);
        return;
      }
      yield refs;
      if (refs.length < size) return;
    }
  }

  private async materialise(refs: SampleRef[]): Promise<TrainBatch<Tensor>> {
    try {
      validateHomogeneous(refs, this.strategy);
      return await this.collate(refs);
    } catch (err) {
      if ('lease' in this.source) await this.source.lease.fail(refs, `materialisation failed: ${(err as Error).message}`, false);
      throw err;
    }
  }

  /** Right-pad every feature along its first axis to the batch maximum, with zeros. */
  private async collate(refs: SampleRef[]): Promise<TrainBatch<Tensor>> {
    const samples: Record<string, Tensor>[] = [];
    const handles = [];
    const transformed: Tensor[] = [];
    try {
      for (const ref of refs) {
        const { tensors, handle } = await this.store.get(ref);
        handles.push(handle);
        if (!this.options.transform) {
          samples.push(tensors);
          continue;
        }
        const stored = new Set(Object.values(tensors));
        const out = await this.options.transform(tensors, ref);
        transformed.push(...Object.values(out).filter((t) => !stored.has(t)));
        samples.push(out);
      }
      const names = Object.keys(samples[0]);
      const lengths = samples.map((s) => s[names[0]].shape[0]);
      const maxLen = Math.max(...lengths);
      const out: Record<string, Tensor> = {};
      try {
        for (const name of names) {
          const first = samples[0][name];
          const inner = first.shape.slice(1);
          for (let i = 0; i < samples.length; i++) {
            const t = samples[i][name];
            if (!t) throw new HomogeneityError(`sample ${refs[i].sampleId} lacks feature ${name}`);
            if (t.dtype !== first.dtype || t.shape.slice(1).join() !== inner.join()) {
              throw new HomogeneityError(
                `feature ${name}: sample ${refs[i].sampleId} is ${t.dtype}${fmtShape(t.shape)}, sample ${refs[0].sampleId} is ${first.dtype}${fmtShape(first.shape)}`,
              );
            }
            if (t.shape[0] !== lengths[i])
              throw new HomogeneityError(
                `sample ${refs[i].sampleId}: feature ${name} has length ${t.shape[0]}, ${names[0]} has ${lengths[i]}`,
              );
          }
          const shape = [samples.length, maxLen, ...inner];
          const pad = this.options.padValues?.[name] ?? 0;
          // An f16 tensor is uploaded as its bits, so a pad value goes as the bits of its f16.
          const padded = first.dtype === 'f16' ? f16BitsOf(pad, `padValues.${name}`) : pad;
          const batch =
            pad === 0
              ? this.gpu.zeros(shape, first.dtype, name)
              : this.gpu.upload(shape, first.dtype, new Float64Array(shape.reduce((a, d) => a * d, 1)).fill(padded), name);
          const rowBytes = (first.numel / first.shape[0]) * BYTES_PER_ELEMENT[first.dtype];
          samples.forEach((s, i) => this.gpu.copyInto(s[name], batch, i * maxLen * rowBytes));
          out[name] = batch;
        }
        if (!('attention_mask' in out)) {
          const mask = new Int32Array(samples.length * maxLen);
          lengths.forEach((len, i) => mask.fill(1, i * maxLen, i * maxLen + len));
          out.attention_mask = this.gpu.upload([samples.length, maxLen], 'i32', mask, 'attention_mask');
        }
      } catch (err) {
        this.gpu.release(...Object.values(out));
        throw err;
      }
      return makeTrainBatch({
        sampleIds: refs.map((r) => r.sampleId),
        strategy: this.strategy,
        tensors: out,
        refs,
        metadata: {
          targetRepr: refs[0].metadata.target_repr as TrainBatch<Tensor>['metadata']['targetRepr'],
          tttLength: refs[0].metadata.ttt_length as number | undefined,
          schemaVersion: refs[0].schemaVersion,
          lengths,
        },
      });
    } finally {
      // Copies are encoded; the queue orders them before any later reuse of these buffers.
      for (const h of handles) this.store.release(h);
      this.gpu.release(...transformed);
    }
  }
}
