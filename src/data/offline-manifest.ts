/**
 * Offline feature shards (docs/features.md §3, §5) and the reader that turns them into SampleRefs.
 *
 * Shard format: one safetensors file per sample, `*.safetensors` anywhere under the manifest folder:
 *   input_ids         [S]        I32 or I64   tokenized conversation (unshifted)
 *   loss_mask         [S]        I32/I64/U8   1 on assistant-response tokens
 *   hidden_state      [S, Ht]    F32/BF16/F16 the target's final hidden state after its final norm (the
 *                                               exact input of its lm_head, as SpecForge stores it)
 *   aux_hidden_state  [S, 3·Ht]  F32/BF16/F16 the three captured layer outputs, concatenated (low, mid, high)
 * On the GPU, F16 stays f16, other floats become f32 and integers i32 (the FeatureSpec records the stored dtype).
 *
 * The reader lists files lazily and opens none of them: a missing key or a bad file surfaces on first
 * access (`LocalFeatureStore.get` of the `file://` ref), with the file path in the message. Eager
 * validation of every shard before step 1 took hours at scale upstream.
 */
import { makeSampleRef, offlineSampleId, type SampleRef } from '../contracts/index.ts';
import type { DraftStrategyName } from '../contracts/enums.ts';
import type { FileStore } from '../ports/storage.ts';

export const OFFLINE_FEATURE_KEYS = ['input_ids', 'loss_mask', 'hidden_state', 'aux_hidden_state'] as const;
export const SHARD_SUFFIX = '.safetensors';

export interface OfflineManifestOptions {
  runId?: string;
  strategy?: DraftStrategyName;
  tttLength?: number;
  maxLen?: number;
  targetModelVersion?: string;
  tokenizerVersion?: string;
}

export function fileUri(files: FileStore, path: string): string {
  return `file://${files.root}/${path}`;
}

/** Path inside `files` of a `file://` URI, or an error naming the URI when it lies elsewhere. */
export function pathOfFileUri(files: FileStore, uri: string): string {
  const prefix = `file://${files.root}/`;
  if (!uri.startsWith(prefix)) throw new Error(`feature file ${uri} is outside the store root ${files.root}`);
  return uri.slice(prefix.length);
}

export class OfflineManifestReader {
  constructor(
    private readonly files: FileStore,
    private readonly dir = '',
    private readonly options: OfflineManifestOptions = {},
  ) {}

  /** Shard paths under the manifest folder, recursively, sorted (a deterministic order across ranks). */
  async listFeatureFiles(): Promise<string[]> {
    const out: string[] = [];
    const walk = async (rel: string) => {
      for (const name of await this.files.list(rel)) {
        const path = rel ? `${rel}/${name}` : name;
        if (name.endsWith(SHARD_SUFFIX)) out.push(path);
        else if (!name.includes('.')) await walk(path);
      }
    };
    await walk(this.dir);
    return out.sort();
  }

  /** One ref per shard; opens no file. */
  async *refs(limit?: number): AsyncGenerator<SampleRef> {
    const o = this.options;
    const runId = o.runId ?? 'offline';
    const paths = await this.listFeatureFiles();
    for (let index = 0; index < paths.length && (limit === undefined || index < limit); index++) {
      yield makeSampleRef({
        sampleId: offlineSampleId(runId, index),
        runId,
        sourceTaskId: null,
        featureStoreUri: fileUri(this.files, paths[index]),
        featureKeys: Object.fromEntries(OFFLINE_FEATURE_KEYS.map((k) => [k, k])),
        featureSpecs: {},
        strategy: o.strategy ?? 'eagle3',
        targetModelVersion: o.targetModelVersion ?? 'unknown',
        tokenizerVersion: o.tokenizerVersion ?? 'unknown',
        metadata: {
          format: `offline_${o.strategy ?? 'eagle3'}`,
          target_repr: 'hidden_state',
          ttt_length: o.tttLength ?? 7,
          max_len: o.maxLen ?? 2048,
          file_index: index,
        },
      });
    }
  }

  async read(limit?: number): Promise<SampleRef[]> {
    const out: SampleRef[] = [];
    for await (const ref of this.refs(limit)) out.push(ref);
    return out;
  }
}
