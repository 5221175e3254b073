/**
 * A prepared EAGLE3 feature set on disk (`speclab prepare` writes it, `speclab train --offline` reads
 * it): one safetensors shard per sample in the format of offline-manifest.ts, plus `manifest.json`.
 *
 *   <dir>/manifest.json                    written last: its presence means every shard is on disk
 *   <dir>/shards/<index:08d>.safetensors   input_ids I32 [S], loss_mask I32 [S] (unshifted),
 *                                          hidden_state F32 [S, Ht] (the target's final hidden state
 *                                          after its final norm = the input of its lm_head),
 *                                          aux_hidden_state F32 [S, 3·Ht]
 * Shards are f32 by default, not SpecForge's bf16, so that offline training reproduces online
 * training exactly. `prepare --feature-precision f16` writes both hidden states as F16 (half the
 * bytes; the manifest records `featurePrecision: "f16"`): they are read back as f16 tensors and
 * widened to f32 by the trainer right before the draft's forward, so such a set trains exactly like
 * online training with --feature-precision f16.
 *
 * The manifest carries what training needs besides the shards: the target and its aux layer ids
 * (checked against the target at load), the token counts over loss-masked positions in sample order
 * (the input of the vocabulary mapping, so it need not open every shard), and the prompts used to
 * evaluate the draft (held-out ones, and the training prompts).
 *
 * `offlineEagle3Transform` is the per-sample normaliser (docs/features.md §5 plus the left shift of
 * SpecForge's TargetHead.preprocess), run by the FeatureDataLoader on the GPU after each shard is
 * read. It turns shard tensors into the online feature layout, except that `target` stays the
 * final hidden state (metadata target_repr 'hidden_state'; the strategy's target head projects it):
 *   input_ids    ← input_ids shifted left once (last 0)
 *   loss_mask    ← loss_mask with its last position zeroed
 *   hidden_state ← aux_hidden_state
 *   target       ← hidden_state shifted left once (last row 0)
 */
import { z } from 'zod';
import type { SampleRef } from '../contracts/index.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { fmtShape, type Tensor } from '../gpu/tensor.ts';
import { clearRows, copyRows } from '../gpu/tensor-views.ts';
import type { FileStore } from '../ports/storage.ts';
import { speclabCommand } from '../util/cli-command.ts';
import { OfflineManifestReader } from './offline-manifest.ts';
import { f32Bytes, writeSafetensors, type TensorToWrite } from '../formats/safetensors-writer.ts';

export const OFFLINE_MANIFEST = 'manifest.json';
export const OFFLINE_SHARD_DIR = 'shards';
export const OFFLINE_FORMAT = 'speclab-offline-eagle3';

const tokenIds = z.array(z.array(z.number().int().nonnegative()).min(1));

export const offlineManifestSchema = z
  .object({
    format: z.literal(OFFLINE_FORMAT),
    version: z.literal(1),
    /** The target's Hugging Face directory, as given to `prepare` (resolved from the working directory). */
    target: z.string().min(1),
    numLayers: z.number().int().positive(),
    hiddenSize: z.number().int().positive(),
    vocabSize: z.number().int().positive(),
    auxLayerIds: z.array(z.number().int().nonnegative()).length(3),
    samples: z.number().int().positive(),
    tokens: z.number().int().positive(),
    promptSource: z.string(),
    responseLength: z.number().int().positive(),
    seed: z.number().int().nonnegative(),
    /** [token id, count] over loss-masked positions, in first-seen order over the samples (ties in the vocab mapping follow it). */
    lossTokenCounts: z.array(z.tuple([z.number().int().nonnegative(), z.number().int().positive()])),
    trainPrompts: tokenIds,
    heldOutPrompts: tokenIds,
    /** Absent: f32 (sets written before the setting existed, and every f32 set). */
    featurePrecision: z.literal('f16').optional(),
  })
  .strict();

export type OfflineManifest = z.infer<typeof offlineManifestSchema>;

export function shardPath(index: number): string {
  return `${OFFLINE_SHARD_DIR}/${String(index).padStart(8, '0')}.safetensors`;
}

/** A hidden state read back from the GPU: f32 values, or the bits of an f16 tensor. */
type HiddenData = Float32Array | Uint16Array;

function hiddenEntry(data: HiddenData, shape: number[]): TensorToWrite {
  if (data instanceof Float32Array) return { dtype: 'F32', shape, data: f32Bytes(data) };
  return { dtype: 'F16', shape, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

/** Shard bytes from the tensors read back from the GPU (I32 ids and mask, F32 or F16 hidden states). */
export function offlineShardBytes(
  sample: { inputIds: Int32Array; lossMask: Int32Array; hidden: HiddenData; aux: HiddenData },
  hiddenSize: number,
  index: number,
): Uint8Array {
  const S = sample.inputIds.length;
  return writeSafetensors(
    {
      input_ids: {
        dtype: 'I32',
        shape: [S],
        data: new Uint8Array(sample.inputIds.buffer, sample.inputIds.byteOffset, sample.inputIds.byteLength),
      },
      loss_mask: {
        dtype: 'I32',
        shape: [S],
        data: new Uint8Array(sample.lossMask.buffer, sample.lossMask.byteOffset, sample.lossMask.byteLength),
      },
      hidden_state: hiddenEntry(sample.hidden, [S, hiddenSize]),
      aux_hidden_state: hiddenEntry(sample.aux, [S, sample.aux.length / S]),
    },
    { format: OFFLINE_FORMAT, sample: String(index) },
  );
}

/** Reads and validates `<dir>/manifest.json`; errors name the file and the field. */
export async function readOfflineManifest(files: FileStore): Promise<OfflineManifest> {
  const where = `${files.root}/${OFFLINE_MANIFEST}`;
  if (!(await files.exists(OFFLINE_MANIFEST)))
    throw new Error(`${where} not found: not a prepared feature set (run ${speclabCommand(`prepare --out ${files.root}`)})`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(await files.read(OFFLINE_MANIFEST)));
  } catch (err) {
    throw new Error(`${where}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const parsed = offlineManifestSchema.safeParse(json);
  if (!parsed.success)
    throw new Error(`${where}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/** One ref per shard (lazy: no shard is opened), checked against the manifest's sample count. */
export async function offlineRefs(files: FileStore, manifest: OfflineManifest, tttLength: number): Promise<SampleRef[]> {
  const reader = new OfflineManifestReader(files, OFFLINE_SHARD_DIR, { runId: 'offline', strategy: 'eagle3', tttLength });
  const refs = await reader.read();
  if (refs.length !== manifest.samples)
    throw new Error(`${files.root}/${OFFLINE_SHARD_DIR}: ${refs.length} shards, the manifest lists ${manifest.samples}`);
  return refs;
}

/** The normaliser of docs/features.md §5 as a FeatureDataLoader transform (layout in the file comment). */
export function offlineEagle3Transform(
  gpu: Gpu,
  hiddenSize: number,
  auxWidth: number,
): (tensors: Readonly<Record<string, Tensor>>, ref: SampleRef) => Record<string, Tensor> {
  return (t, ref) => {
    const where = `feature file ${ref.featureStoreUri.replace(/^file:\/\//, '')} (sample ${ref.sampleId})`;
    const ids = t.input_ids;
    const S = ids.shape[0];
    const expect = (name: string, shape: number[]) => {
      const x = t[name];
      if (x.shape.length !== shape.length || x.shape.some((d, i) => d !== shape[i]))
        throw new Error(`${where}: ${name} is ${fmtShape(x.shape)}, expected ${fmtShape(shape)}`);
    };
    expect('input_ids', [S]);
    expect('loss_mask', [S]);
    expect('hidden_state', [S, hiddenSize]);
    expect('aux_hidden_state', [S, auxWidth]);
    const made: Tensor[] = [];
    try {
      const inputIds = shiftedLeft(gpu, ids, 'input_ids', made);
      const target = shiftedLeft(gpu, t.hidden_state, 'target', made);
      const lossMask = gpu.clone(t.loss_mask, 'loss_mask');
      made.push(lossMask);
      clearRows(gpu, lossMask, S - 1, 1);
      return { input_ids: inputIds, loss_mask: lossMask, hidden_state: t.aux_hidden_state, target };
    } catch (err) {
      gpu.release(...made);
      throw err;
    }
  };
}

/** Rows 1.. of `src` moved to 0.., last row zero (a GPU copy, encoded into the batch). */
function shiftedLeft(gpu: Gpu, src: Tensor, label: string, made: Tensor[]): Tensor {
  const out = gpu.zeros(src.shape, src.dtype, label);
  made.push(out);
  copyRows(gpu, src, 1, out, 0, src.shape[0] - 1);
  return out;
}
