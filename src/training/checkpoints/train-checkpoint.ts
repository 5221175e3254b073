/**
 * Training checkpoints (docs/durability.md §7–§8, as SpecForge's later runtime defines them) through a FileStore.
 *
 * Layout, one folder per optimizer step: `<runId>-step<N>/`
 *   weights.safetensors    f32 master weights of every backend parameter (+ optional frozen buffers
 *                          such as EAGLE3's t2d/d2t, listed in state.json as buffers)
 *   optimizer.safetensors  AdamW moments: `<name>.m` and `<name>.v` per parameter, f32
 *   state.json             counters (global, micro, optimizer step), epoch, data position, RNG
 *                          state, optimizer + schedule config, the run contract, the parameter table
 *   COMPLETE               written last: JSON with the byte size and CRC-32 of every file above
 *
 * Atomicity: a FileStore has atomic single-file writes but no folder rename, so the folder is built
 * in place and `COMPLETE` is its commit record. A folder without a valid `COMPLETE` (a crash in the
 * middle of a save) is invisible to `listCheckpoints`/`latestCheckpoint` and is replaced by the next
 * save of that step. Saving step N first deletes this run's folders for steps ≥ N (rollback: a run
 * resumed from an older step must not later "find" a checkpoint from the abandoned future).
 *
 * Resume (./checkpoint-resume.ts) refuses (fail closed, docs/durability.md §8) when the durable ack step is not the checkpoint
 * step (the checkpoint of the acked step is used when the newest is ahead): replaying consumed refs
 * against other optimizer state would train on a different stream. Also when the contract drifted.
 */
import { crc32, crc32Update } from '../../util/crc32.ts';
import { SafetensorsFile } from '../../formats/safetensors.ts';
import {
  safetensorsEntryBytes,
  safetensorsHeader,
  type SafetensorsEntrySpec,
  type TensorToWrite,
} from '../../formats/safetensors-writer.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { FileStore } from '../../ports/storage.ts';
import type { AdamWBackend, OptimizerConfig } from '../../optim/adamw-backend.ts';
import { type RunContract } from './run-contract.ts';
import { badElement } from './tensor-finiteness.ts';

export type { RunContract } from './run-contract.ts';

export const CHECKPOINT_FORMAT = 'speclab-training-checkpoint';
export const CHECKPOINT_VERSION = 1;
export const COMPLETE_MARKER = 'COMPLETE';
const FILES = ['weights.safetensors', 'optimizer.safetensors', 'state.json'] as const;

/** Where the data stream stands after the checkpointed step (SpecForge's later runtime's epoch_batch / epoch_samples). */
export interface DataPosition {
  /** Micro-batches of the current epoch already consumed. */
  readonly epochBatch: number;
  /** Samples of the current epoch already consumed. */
  readonly epochSamples: number;
  /** Samples consumed over the whole run. */
  readonly samplesConsumed: number;
}

export interface TrainingState {
  readonly format: typeof CHECKPOINT_FORMAT;
  readonly version: number;
  readonly runId: string;
  /** Optimizer steps completed (the trainer's global step; equals the durable ack step). */
  readonly globalStep: number;
  /** Micro-batches seen across epochs (TrainerCore.microStep). */
  readonly microStep: number;
  /** The backend's own optimizer step counter (drives the LR schedule). */
  readonly optimizerStep: number;
  /** Of those, the steps skipped for a non-finite gradient norm (not counted by bias correction); absent in older checkpoints (0). */
  readonly skippedSteps?: number;
  readonly epoch: number;
  readonly data: DataPosition;
  /** Named RNG states (e.g. a shuffle seed, an Rng's internal word), restored verbatim. */
  readonly rng: Readonly<Record<string, number>>;
  readonly optimizer: OptimizerConfig;
  readonly contract: RunContract;
  readonly parameters: readonly { readonly name: string; readonly shape: readonly number[] }[];
  /** Non-trained tensors stored in weights.safetensors (e.g. t2d, d2t). */
  readonly buffers: readonly string[];
  /** Free-form JSON the caller wants kept (e.g. the draft config.json for export). */
  readonly extra: Readonly<Record<string, unknown>>;
}

export interface SaveCheckpointOptions {
  runId: string;
  globalStep: number;
  microStep: number;
  epoch: number;
  data: DataPosition;
  rng?: Readonly<Record<string, number>>;
  contract: RunContract;
  buffers?: Readonly<Record<string, TensorToWrite>>;
  extra?: Readonly<Record<string, unknown>>;
}

export interface CheckpointRef {
  readonly runId: string;
  readonly step: number;
  /** Folder path inside the store. */
  readonly dir: string;
}

export interface LoadedCheckpoint {
  readonly ref: CheckpointRef;
  readonly state: TrainingState;
  readonly weights: SafetensorsFile;
  readonly optimizer: SafetensorsFile;
}

export class CheckpointRefusedError extends Error {
  override name = 'CheckpointRefusedError';
}

const RUN_ID = /^[A-Za-z0-9._-]+$/;

function checkRunId(runId: string): void {
  if (!RUN_ID.test(runId))
    throw new Error(`checkpoint: run id ${JSON.stringify(runId)} must be non-empty and use only letters, digits, '.', '_' and '-'`);
}

function checkCount(value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`checkpoint: ${what} must be a non-negative integer, got ${value}`);
}

export function checkpointDirName(runId: string, step: number): string {
  checkRunId(runId);
  checkCount(step, 'step');
  return `${runId}-step${step}`;
}

const encodeJson = (value: unknown): Uint8Array => new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`);

const STEP_FOLDER = /^([A-Za-z0-9._-]+)-step(0|[1-9][0-9]*)$/;

/** `<runId>-step<N>` → its run id and step; undefined for any other name. */
export function parseCheckpointDirName(name: string): { runId: string; step: number } | undefined {
  const match = STEP_FOLDER.exec(name);
  return match ? { runId: match[1], step: Number(match[2]) } : undefined;
}

const inFolder = (under: string, name: string): string => (under === '' ? name : `${under.replace(/\/+$/, '')}/${name}`);

/** The step folders (complete or not) of every run in folder `under` of the store, ascending by run id then step. */
async function allStepFolders(store: FileStore, under: string): Promise<CheckpointRef[]> {
  const out: CheckpointRef[] = [];
  for (const name of await store.list(under)) {
    const parsed = parseCheckpointDirName(name);
    if (parsed) out.push({ ...parsed, dir: inFolder(under, name) });
  }
  return out.sort((a, b) => (a.runId === b.runId ? a.step - b.step : a.runId < b.runId ? -1 : 1));
}

/** This run's step folders in the store (complete or not), ascending by step. */
export async function stepFolders(store: FileStore, runId: string, under = ''): Promise<CheckpointRef[]> {
  checkRunId(runId);
  return (await allStepFolders(store, under)).filter((r) => r.runId === runId);
}

interface CompleteRecord {
  step: number;
  files: Record<string, { bytes: number; crc32: number }>;
}

async function readComplete(store: FileStore, ref: CheckpointRef): Promise<CompleteRecord | undefined> {
  const path = `${ref.dir}/${COMPLETE_MARKER}`;
  if (!(await store.exists(path))) return undefined;
  let record: CompleteRecord;
  try {
    record = JSON.parse(new TextDecoder().decode(await store.read(path))) as CompleteRecord;
  } catch {
    return undefined;
  }
  if (record?.step !== ref.step || typeof record.files !== 'object' || record.files === null) return undefined;
  return record;
}

/** Complete checkpoints of `runId` (in folder `under` of the store, default its root), ascending by step. */
export async function listCheckpoints(store: FileStore, runId: string, under = ''): Promise<CheckpointRef[]> {
  const out: CheckpointRef[] = [];
  for (const ref of await stepFolders(store, runId, under)) if (await readComplete(store, ref)) out.push(ref);
  return out;
}

/** The complete checkpoint with the highest step, or undefined. */
export async function latestCheckpoint(store: FileStore, runId: string, under = ''): Promise<CheckpointRef | undefined> {
  return (await listCheckpoints(store, runId, under)).at(-1);
}

/** Every `<runId>-step<N>` folder in folder `under` of the store, whatever its run, split into complete and incomplete ones. */
export async function scanCheckpoints(store: FileStore, under = ''): Promise<{ complete: CheckpointRef[]; incomplete: CheckpointRef[] }> {
  const complete: CheckpointRef[] = [];
  const incomplete: CheckpointRef[] = [];
  for (const ref of await allStepFolders(store, under)) ((await readComplete(store, ref)) ? complete : incomplete).push(ref);
  return { complete, incomplete };
}

/**
 * Save the backend's parameters, AdamW moments and counters as step `globalStep` of `runId`.
 * Reads the GPU tensors back (after all queued work), deletes this run's folders for steps ≥
 * globalStep, writes the three files, then `COMPLETE`.
 */
export async function saveCheckpoint(
  store: FileStore,
  gpu: Gpu,
  backend: AdamWBackend,
  options: SaveCheckpointOptions,
): Promise<CheckpointRef> {
  const { runId, globalStep, microStep, epoch, data } = options;
  const dir = checkpointDirName(runId, globalStep);
  checkCount(microStep, 'microStep');
  checkCount(epoch, 'epoch');
  checkCount(data.epochBatch, 'data.epochBatch');
  checkCount(data.epochSamples, 'data.epochSamples');
  checkCount(data.samplesConsumed, 'data.samplesConsumed');
  for (const [k, v] of Object.entries(options.rng ?? {}))
    if (!Number.isFinite(v)) throw new RangeError(`checkpoint: rng.${k} must be a finite number, got ${v}`);
  const buffers = options.buffers ?? {};
  for (const name of Object.keys(buffers)) {
    if (backend.params.some((p) => p.name === name)) throw new Error(`checkpoint: buffer ${name} has the name of a trained parameter`);
  }

  // The tensor files are streamed: each tensor is read back and written before the next is read, so a
  // save holds one tensor on the host (and one in staging), not the whole checkpoint twice over.
  await gpu.sync();
  const f32 = (name: string, shape: readonly number[]) => ({ name, dtype: 'F32' as const, shape });
  const readBytes = (t: Tensor) => async () => {
    const values = (await gpu.readOnce(t)) as Float32Array;
    return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  };
  const weightsFile = streamedSafetensors(
    [
      ...backend.params.map((p) => ({ ...f32(p.name, p.value.shape), bytes: readBytes(p.value) })),
      ...Object.entries(buffers).map(([name, t]) => ({ name, dtype: t.dtype, shape: t.shape, bytes: async () => t.data })),
    ],
    { format: 'pt', speclab: 'weights' },
  );
  const optimizerFile = streamedSafetensors(
    backend.params.flatMap((p) => [
      { ...f32(`${p.name}.m`, p.value.shape), bytes: readBytes(p.m) },
      { ...f32(`${p.name}.v`, p.value.shape), bytes: readBytes(p.v) },
    ]),
    { format: 'pt', speclab: 'adamw-moments' },
  );

  const state: TrainingState = {
    format: CHECKPOINT_FORMAT,
    version: CHECKPOINT_VERSION,
    runId,
    globalStep,
    microStep,
    optimizerStep: backend.step,
    skippedSteps: backend.skippedSteps,
    epoch,
    data: { ...data },
    rng: { ...(options.rng ?? {}) },
    optimizer: backend.config,
    contract: { ...options.contract },
    parameters: backend.params.map((p) => ({ name: p.name, shape: [...p.value.shape] })),
    buffers: Object.keys(buffers),
    extra: { ...(options.extra ?? {}) },
  };
  const stateBytes = encodeJson(state);
  const files: Record<(typeof FILES)[number], () => AsyncIterable<Uint8Array>> = {
    'weights.safetensors': weightsFile,
    'optimizer.safetensors': optimizerFile,
    'state.json': async function* () {
      yield stateBytes;
    },
  };

  // Rollback semantics: anything at or after this step belongs to an abandoned future.
  for (const ref of await stepFolders(store, runId)) if (ref.step >= globalStep) await store.remove(ref.dir);
  const record: CompleteRecord = { step: globalStep, files: {} };
  for (const name of FILES) {
    const sum = { bytes: 0, crc32: 0 };
    await store.writeAtomicChunks(`${dir}/${name}`, counted(files[name](), sum));
    record.files[name] = sum;
  }
  await store.writeAtomic(`${dir}/${COMPLETE_MARKER}`, encodeJson(record));
  return { runId, step: globalStep, dir };
}

/** One tensor of a streamed safetensors file: its entry, and how to get its bytes when their turn comes. */
interface StreamedTensor extends SafetensorsEntrySpec {
  readonly bytes: () => Promise<Uint8Array>;
}

/** A safetensors file as chunks: its header, then each tensor's bytes, fetched one at a time (checked against its entry). */
function streamedSafetensors(tensors: readonly StreamedTensor[], metadata: Record<string, string>): () => AsyncIterable<Uint8Array> {
  const { header } = safetensorsHeader(tensors, metadata);
  return async function* () {
    yield header;
    for (const t of tensors) {
      const bytes = await t.bytes();
      const want = safetensorsEntryBytes(t);
      if (bytes.byteLength !== want)
        throw new Error(`checkpoint: ${t.name} read back ${bytes.byteLength} bytes, [${t.shape}] ${t.dtype} needs ${want}`);
      yield bytes;
    }
  };
}

/** `chunks` passed through, their bytes and CRC-32 summed into `sum` (the COMPLETE record). */
async function* counted(chunks: AsyncIterable<Uint8Array>, sum: { bytes: number; crc32: number }): AsyncGenerator<Uint8Array> {
  for await (const chunk of chunks) {
    sum.bytes += chunk.byteLength;
    sum.crc32 = crc32Update(sum.crc32, chunk);
    yield chunk;
  }
}

/**
 * Delete this run's folders (complete or not) for steps below `keepFrom`. A run keeps its newest
 * checkpoint and the one before it: a crash between a save and its ack resumes from the older one.
 */
export async function pruneCheckpoints(store: FileStore, runId: string, keepFrom: number): Promise<number[]> {
  const removed: number[] = [];
  for (const ref of await stepFolders(store, runId)) {
    if (ref.step >= keepFrom) continue;
    await store.remove(ref.dir);
    removed.push(ref.step);
  }
  return removed;
}

/** Read and verify (sizes, CRC-32, state format, finite tensors) a complete checkpoint folder. */
export async function loadCheckpoint(store: FileStore, ref: CheckpointRef): Promise<LoadedCheckpoint> {
  const where = `${store.root}/${ref.dir}`;
  const record = await completeRecord(store, ref);
  const bytes: Record<string, Uint8Array> = {};
  for (const name of FILES) bytes[name] = await readListed(store, ref, record, name);
  const state = parseState(bytes['state.json'], ref, where);
  const weights = new SafetensorsFile(bytes['weights.safetensors'], `${where}/weights.safetensors`);
  const optimizer = new SafetensorsFile(bytes['optimizer.safetensors'], `${where}/optimizer.safetensors`);
  for (const p of state.parameters) {
    for (const [file, key, what, nonNegative] of [
      [weights, p.name, 'a weight', false],
      [optimizer, `${p.name}.m`, "AdamW's first moment", false],
      [optimizer, `${p.name}.v`, "AdamW's second moment", true],
    ] as const) {
      if (!file.has(key)) throw new Error(`${file.source}: missing tensor "${key}"`);
      if (file.entry(key).dtype !== 'F32') throw new Error(`${file.source}: tensor "${key}" is ${file.entry(key).dtype}, expected F32`);
      if (file.shape(key).join() !== p.shape.join())
        throw new Error(`${file.source}: tensor "${key}" has shape [${file.shape(key)}], state.json says [${p.shape}]`);
      const bad = badElement(file.f32(key), nonNegative);
      if (bad)
        throw new CheckpointRefusedError(
          `${file.source}: tensor "${key}" holds ${bad}; ${what} must be finite${nonNegative ? ' and non-negative' : ''}, so this checkpoint is refused`,
        );
    }
  }
  return { ref, state, weights, optimizer };
}

/** state.json of a complete checkpoint, checked against its COMPLETE marker and parsed (the tensor files are not read). */
export async function loadCheckpointState(store: FileStore, ref: CheckpointRef): Promise<TrainingState> {
  const record = await completeRecord(store, ref);
  return parseState(await readListed(store, ref, record, 'state.json'), ref, `${store.root}/${ref.dir}`);
}

async function completeRecord(store: FileStore, ref: CheckpointRef): Promise<CompleteRecord> {
  const record = await readComplete(store, ref);
  if (!record)
    throw new Error(`${store.root}/${ref.dir}: not a complete checkpoint (no valid ${COMPLETE_MARKER} marker for step ${ref.step})`);
  return record;
}

/** One file of the folder, its size and CRC-32 checked against the COMPLETE record. */
async function readListed(store: FileStore, ref: CheckpointRef, record: CompleteRecord, name: (typeof FILES)[number]): Promise<Uint8Array> {
  const where = `${store.root}/${ref.dir}`;
  const expect = record.files[name];
  if (!expect) throw new Error(`${where}/${COMPLETE_MARKER}: does not list ${name}`);
  if (!(await store.exists(`${ref.dir}/${name}`))) throw new Error(`${where}/${name}: missing`);
  const b = await store.read(`${ref.dir}/${name}`);
  if (b.byteLength !== expect.bytes || crc32(b) !== expect.crc32) {
    throw new Error(
      `${where}/${name}: ${b.byteLength} bytes with CRC-32 ${crc32(b).toString(16)}, the ${COMPLETE_MARKER} marker recorded ${expect.bytes} bytes with ${expect.crc32.toString(16)} (damaged)`,
    );
  }
  return b;
}

/** state.json's bytes as a TrainingState of this folder's run and step, or a refusal naming the file. */
function parseState(bytes: Uint8Array, ref: CheckpointRef, where: string): TrainingState {
  let state: TrainingState;
  try {
    state = JSON.parse(new TextDecoder().decode(bytes)) as TrainingState;
  } catch (err) {
    throw new Error(`${where}/state.json: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  if (state?.format !== CHECKPOINT_FORMAT)
    throw new Error(`${where}/state.json: format is ${JSON.stringify(state?.format)}, expected ${CHECKPOINT_FORMAT}`);
  if (state.version !== CHECKPOINT_VERSION)
    throw new Error(`${where}/state.json: version ${state.version} is not supported (expected ${CHECKPOINT_VERSION})`);
  if (state.globalStep !== ref.step)
    throw new Error(`${where}/state.json: globalStep ${state.globalStep} does not match the folder's step ${ref.step}`);
  // A folder renamed from another run's would otherwise resume as this one.
  if (state.runId !== ref.runId)
    throw new CheckpointRefusedError(`${where}/state.json: runId ${JSON.stringify(state.runId)} is not the folder's run ${ref.runId}`);
  return state;
}
