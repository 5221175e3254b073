/**
 * Where a training step's GPU time goes, kernel by kernel:
 *
 *   npx tsx scripts/embed-shaders.ts
 *   npx tsx bench/step-profile.ts [--configs lab,fixture,mid] [--top N]
 *
 * Builds the same rigs as bench/step-roofline.ts (bench/train-rig.ts: forward + backward through the
 * TTT unroll + AdamW), runs one warm-up step (it compiles), then profiles one step: every dispatch
 * is bracketed by a timestamp written from an empty compute pass, so dispatch i takes
 * t[i + 1] − t[i] of GPU time. The bracketing passes add their own small cost, so the sum is a
 * little above an unbracketed step; read the shares, not the absolute sum. llvmpipe's timestamps
 * advance in steps of 65.536 µs, so each short dispatch is off by up to one step: read the totals
 * per kernel over many calls, not single calls. Copies and clears are bracketed as their own rows,
 * and so is the GPU's idle time between two submits of the step (the host encoding or waiting on a
 * readback), so none of it is counted as the kernel before it. Needs `timestamp-query`.
 * Prints, per config, the kernels by total time (calls, ms, share) as JSON lines, after a line with
 * the step's dispatches and its bracketed intervals (dispatches, copies, clears and idle gaps).
 */
import { Gpu } from '../src/gpu/gpu.ts';
import type { CompiledKernel } from '../src/gpu/pipeline-cache.ts';
import { MATMUL_KERNELS } from '../src/kernels/matmul.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { watchPipelineConstants } from './record.ts';
import { STEP_CONFIGS, wantedStepConfigs } from './step-configs.ts';
import { buildTrainRig } from './train-rig.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const wanted = wantedStepConfigs('bench/step-profile.ts', opt('--configs', 'lab,fixture'));
const top = Number(opt('--top', '25'));

const MAX_QUERIES = 4096;

const ctx = await nodePlatform.acquireGpu();
if (!ctx.hasFeature('timestamp-query'))
  throw new Error('bench/step-profile.ts: the adapter has no timestamp-query; a per-dispatch profile needs it');
const gpu = new Gpu(ctx);
const querySet = ctx.device.createQuerySet({ type: 'timestamp', count: MAX_QUERIES });
const resolve = ctx.device.createBuffer({ size: MAX_QUERIES * 8, usage: 0x200 | 0x04 });
const readback = ctx.device.createBuffer({ size: MAX_QUERIES * 8, usage: 0x01 | 0x08 });

const state = { recording: false, names: [] as string[] };
// Matmuls are split by shape (M×N×K, batch, transposes from the uniforms and pipeline constants,
// as bench/step-roofline.ts reads them), since their rate depends on it.
const matmulNames = new Set(Object.values(MATMUL_KERNELS).map((def) => def.name));
const constantsOf = watchPipelineConstants(gpu);
const labelOf = (
  kernel: CompiledKernel,
  uniforms: ArrayBufferView | undefined,
  workgroups: readonly [number, number?, number?],
): string => {
  if (!matmulNames.has(kernel.def.name) || !uniforms) return kernel.def.name;
  const u = new DataView(uniforms.buffer, uniforms.byteOffset, uniforms.byteLength);
  const c = constantsOf.get(kernel) ?? {};
  return `${kernel.def.name} ${u.getUint32(0, true)}x${u.getUint32(4, true)}x${u.getUint32(8, true)} b${workgroups[2] ?? 1}${c.TRANS_A ? ' tA' : ''}${c.TRANS_B ? ' tB' : ''}`;
};
const mark = () => {
  const index = state.names.length;
  if (index >= MAX_QUERIES - 1)
    throw new Error(
      `bench/step-profile.ts: more than ${MAX_QUERIES - 1} bracketed intervals (dispatches, copies, clears, idle gaps) in one step`,
    );
  gpu.batcher
    .rawEncoder()
    .beginComputePass({ timestampWrites: { querySet, beginningOfPassWriteIndex: index } })
    .end();
};
/** Open the interval of the command about to be encoded, labelled `name`. */
const bracket = (name: string) => {
  mark();
  state.names.push(name);
};
const dispatch = gpu.batcher.dispatch.bind(gpu.batcher);
gpu.batcher.dispatch = (kernel, uniforms, resources, workgroups) => {
  if (state.recording) bracket(labelOf(kernel, uniforms, workgroups));
  dispatch(kernel, uniforms, resources, workgroups);
};
// Each submit closes the interval of the command before it; the time until the next submit's first
// command is the GPU waiting for the host to encode and submit more.
const IDLE = '(GPU idle between submits)';
const flush = gpu.batcher.flush.bind(gpu.batcher);
gpu.batcher.flush = () => {
  if (state.recording && gpu.batcher.hasPendingWork) bracket(IDLE);
  flush();
};
// Copies and clears get their own brackets, so their time is not added to the dispatch before them.
const copyBuffer = gpu.batcher.copyBuffer.bind(gpu.batcher);
gpu.batcher.copyBuffer = (src, srcOffset, dst, dstOffset, size) => {
  if (state.recording) bracket('(copyBufferToBuffer)');
  copyBuffer(src, srcOffset, dst, dstOffset, size);
};
const clearBuffer = gpu.batcher.clearBuffer.bind(gpu.batcher);
gpu.batcher.clearBuffer = (buffer, offset, size) => {
  if (state.recording) bracket(`(clearBuffer ${Math.round((size ?? buffer.size) / 1024)} KiB)`);
  clearBuffer(buffer, offset, size);
};

console.log(JSON.stringify({ adapter: ctx.record.description || ctx.record.vendor }));
for (const name of wanted) {
  const { config, shape } = await STEP_CONFIGS[name](false);
  const rig = await buildTrainRig(gpu, config, shape);
  await rig.step();
  const plain = await rig.step();
  state.names = [];
  state.recording = true;
  await rig.step();
  state.recording = false;
  mark();
  // The step ends with a submit, so its last interval runs from that submit to the mark just above,
  // encoded after the step returned: not part of the step.
  if (state.names.at(-1) === IDLE) state.names.pop();
  const n = state.names.length;
  const encoder = gpu.batcher.rawEncoder();
  encoder.resolveQuerySet(querySet, 0, n + 1, resolve, 0);
  encoder.copyBufferToBuffer(resolve, 0, readback, 0, (n + 1) * 8);
  await gpu.batcher.finish();
  await readback.mapAsync(0x0001);
  const t = new BigUint64Array(readback.getMappedRange().slice(0, (n + 1) * 8));
  readback.unmap();
  rig.destroy();
  const byKernel = new Map<string, { calls: number; ns: number }>();
  let total = 0;
  for (let i = 0; i < n; i++) {
    const ns = Number(t[i + 1] - t[i]);
    total += ns;
    const e = byKernel.get(state.names[i]) ?? { calls: 0, ns: 0 };
    e.calls++;
    e.ns += ns;
    byKernel.set(state.names[i], e);
  }
  console.log(
    JSON.stringify({
      config: name,
      tokens: `${shape.batch} x ${shape.seq}, TTT ${shape.ttt}`,
      plainStepMs: +(plain.seconds * 1e3).toFixed(1),
      profiledGpuMs: +(total / 1e6).toFixed(1),
      dispatches: state.names.filter((x) => !x.startsWith('(')).length,
      bracketed: n,
    }),
  );
  const rows = [...byKernel.entries()].sort(([, a], [, b]) => b.ns - a.ns).slice(0, top);
  for (const [kernel, e] of rows)
    console.log(JSON.stringify({ config: name, kernel, calls: e.calls, ms: +(e.ns / 1e6).toFixed(2), share: +(e.ns / total).toFixed(3) }));
}
querySet.destroy();
resolve.destroy();
readback.destroy();
gpu.destroy();
await nodePlatform.exit(0);
