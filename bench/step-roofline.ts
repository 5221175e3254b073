/**
 * How far an EAGLE3 training step is from its matmul roofline, per draft config:
 *
 *   npx tsx scripts/embed-shaders.ts
 *   npx tsx bench/step-roofline.ts [--quick] [--configs mid,lab,fixture] [--warmup N] [--steps N] [--reps N]
 *
 * For each config it runs --warmup training steps through the real path (bench/train-rig.ts:
 * forward + backward through the TTT unroll + AdamW; the first compiles, and on llvmpipe the few
 * steps after it still run slower than later ones, which is why the default is 3 and not 1), records
 * every matmul dispatch of one more step (M, N, K, batch, transposes: read from the dispatch's
 * uniforms and pipeline constants, checked against the variant's grid), then runs --steps rounds:
 * one fresh training step, then each distinct matmul shape alone with the variant the policy picks (as
 * many back-to-back dispatches per timed region as fill 2 ms, since the adapter's timestamps may be
 * coarse; the median of --reps regions). A round's step and best rate are measured back to back, so
 * machine load that drifts within a run moves both alike. It prints:
 *   stepMs           median wall time of a step over the rounds
 *   matmulGflop      the step's matmul FLOPs (2·M·N·K·batch summed over its matmul dispatches)
 *   bestMatmulGflops the median over the rounds of each round's best rate on those shapes
 *   rooflineMs       matmulGflop / bestMatmulGflops: the step if it were nothing but matmuls at the best rate
 *   ratio            the median over the rounds of (round's step) / (matmulGflop / round's best rate);
 *                    a median of ratios, so not exactly stepMs / rooflineMs
 *   ratiosByRound    those per-round ratios, and bestMatmulGflopsByRound the per-round best rates
 *   matmulMs         Σ over the step's matmuls of each one's median time alone (where the matmuls go)
 *   dispatches       per step (CommandBatcher stats), and the matmul share of them
 * --quick uses small token counts (and fewer repetitions) so all three configs finish in about a
 * minute on a software adapter. Only APIs that predate this script are used, so it also runs,
 * unchanged, in an older checkout (for before / after comparisons; copy bench/step-configs.ts with it). In Node on a CPU adapter the
 * platform paces its GPU waits by default (SPECLAB_GPU_WAIT=auto, src/platform/dawn-wait-pacing.ts),
 * which gives the device back the core a spinning wait takes; SPECLAB_GPU_WAIT=spin measures without.
 */
import { Gpu } from '../src/gpu/gpu.ts';
import { MATMUL_GEOMETRY, MATMUL_KERNELS, matmul, type MatmulVariant } from '../src/kernels/matmul.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { Rng } from '../src/util/random.ts';
import { medianSeconds } from './record.ts';
import { STEP_CONFIGS, wantedStepConfigs } from './step-configs.ts';
import { buildTrainRig } from './train-rig.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const quick = args.includes('--quick');
const wanted = wantedStepConfigs('bench/step-roofline.ts', opt('--configs', 'mid,lab,fixture'));
const warmup = Number(opt('--warmup', quick ? '1' : '3'));
const steps = Number(opt('--steps', quick ? '2' : '5'));
const reps = Number(opt('--reps', quick ? '2' : '5'));
for (const [flag, n] of [
  ['--warmup', warmup],
  ['--steps', steps],
  ['--reps', reps],
] as const) {
  if (!Number.isInteger(n) || n < 1) throw new Error(`bench/step-roofline.ts: ${flag} must be a positive integer`);
}

/** One matmul dispatch as the step encoded it. */
interface MatmulCall {
  M: number;
  N: number;
  K: number;
  batch: number;
  transA: boolean;
  transB: boolean;
  variant: MatmulVariant;
}

const keyOf = (c: MatmulCall) => `${c.M}x${c.N}x${c.K} b${c.batch}${c.transA ? ' tA' : ''}${c.transB ? ' tB' : ''}`;
const flopsOf = (c: MatmulCall) => 2 * c.M * c.N * c.K * c.batch;

/**
 * Watch gpu.pipelines.get and gpu.batcher.dispatch (instance methods, wrapped for this benchmark
 * only) and return the matmul dispatches encoded while `recording` is on. The uniforms start with
 * M, N, K (src/kernels/matmul.ts); the grid is checked against the variant's tiles, so a changed
 * uniform layout stops the benchmark instead of yielding wrong FLOPs.
 */
function watchMatmuls(gpu: Gpu): { calls: MatmulCall[]; recording: boolean } {
  const state = { calls: [] as MatmulCall[], recording: false };
  const variantByName = new Map(Object.entries(MATMUL_KERNELS).map(([v, def]) => [def.name, v as MatmulVariant]));
  const constantsOf = new WeakMap<object, Record<string, unknown>>();
  const get = gpu.pipelines.get.bind(gpu.pipelines);
  gpu.pipelines.get = async (def, constants = {}) => {
    const kernel = await get(def, constants);
    constantsOf.set(kernel, constants);
    return kernel;
  };
  const dispatch = gpu.batcher.dispatch.bind(gpu.batcher);
  gpu.batcher.dispatch = (kernel, uniforms, resources, workgroups) => {
    const variant = variantByName.get(kernel.def.name);
    if (state.recording && variant !== undefined && uniforms) {
      const u = new DataView(uniforms.buffer, uniforms.byteOffset, uniforms.byteLength);
      const [M, N, K] = [u.getUint32(0, true), u.getUint32(4, true), u.getUint32(8, true)];
      const { TILE_M, TILE_N } = MATMUL_GEOMETRY[variant];
      const [x, y = 1, batch = 1] = workgroups;
      if (x !== Math.ceil(N / TILE_N) || y !== Math.ceil(M / TILE_M)) {
        throw new Error(
          `bench/step-roofline.ts: ${kernel.def.name} dispatch [${workgroups.join(', ')}] does not match M=${M} N=${N} K=${K}; has the matmul uniform layout changed?`,
        );
      }
      const c = constantsOf.get(kernel) ?? {};
      state.calls.push({ M, N, K, batch, transA: Boolean(c.TRANS_A), transB: Boolean(c.TRANS_B), variant });
    }
    dispatch(kernel, uniforms, resources, workgroups);
  };
  return state;
}

/**
 * llvmpipe's timestamps advance in steps of 65.536 µs (2^16 ns), and most of the fixture's matmuls take
 * 3–4 such steps, so one dispatch per timed region measured them to ±30% and the "best rate" came from
 * whichever shape rounded down. Each timed region therefore holds enough back-to-back dispatches of the
 * shape to span at least this long. This lives here, not in bench/record.ts's medianSeconds, because
 * this script must run unchanged in older checkouts, whose record.ts does not have it.
 */
const MIN_REGION_SECONDS = 2e-3;
const MAX_REPEATS = 256;

/** One matmul shape set up to be timed alone, with the variant the policy picks. */
interface MatmulProbe {
  /** Median seconds of one dispatch, over `reps` regions of back-to-back dispatches. */
  time(): Promise<number>;
  release(): void;
}

async function matmulProbe(gpu: Gpu, c: MatmulCall, rng: Rng): Promise<MatmulProbe> {
  const a = gpu.upload([c.batch * c.M * c.K], 'f32', rng.floats(c.batch * c.M * c.K), 'roofline.A');
  const b = gpu.upload([c.batch * c.K * c.N], 'f32', rng.floats(c.batch * c.K * c.N), 'roofline.B');
  const out = gpu.tensor([c.batch * c.M * c.N], 'f32', 'roofline.C');
  const once = () => matmul(gpu, a, b, out, { M: c.M, N: c.N, K: c.K }, { batch: c.batch, transA: c.transA, transB: c.transB });
  const single = await medianSeconds(gpu, once, 1);
  const repeats = Math.min(MAX_REPEATS, Math.max(1, Math.ceil(MIN_REGION_SECONDS / Math.max(single, 1e-6))));
  return {
    time: async () =>
      (await medianSeconds(
        gpu,
        async () => {
          for (let i = 0; i < repeats; i++) await once();
        },
        reps,
      )) / repeats,
    release: () => gpu.release(a, b, out),
  };
}

/** The median; the mean of the middle two for an even count (--quick takes 2 rounds). */
function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((x, y) => x - y);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
const watch = watchMatmuls(gpu);
console.log(
  JSON.stringify({
    adapter: `${ctx.record.description || ctx.record.vendor} (fallback: ${ctx.record.isFallbackAdapter})`,
    timer: gpu.timer.usesTimestamps ? 'timestamp-query' : 'wall-clock',
    quick,
    warmup,
    steps,
    reps,
  }),
);
const summary: Record<string, unknown>[] = [];
for (const name of wanted) {
  const { config, shape } = await STEP_CONFIGS[name](quick);
  const rig = await buildTrainRig(gpu, config, shape);
  const warm = await rig.step();
  for (let i = 1; i < warmup; i++) await rig.step();
  watch.calls.length = 0;
  watch.recording = true;
  const recorded = await rig.step();
  watch.recording = false;
  const calls = [...watch.calls];

  // Distinct shapes, each set up once to be timed alone.
  const counts = new Map<string, { call: MatmulCall; count: number }>();
  for (const c of calls) {
    const e = counts.get(keyOf(c));
    if (e) e.count++;
    else counts.set(keyOf(c), { call: c, count: 1 });
  }
  const rng = new Rng(11);
  const byShape = new Map<string, { call: MatmulCall; count: number; probe: MatmulProbe; seconds: number[] }>();
  for (const [key, e] of counts) byShape.set(key, { ...e, probe: await matmulProbe(gpu, e.call, rng), seconds: [] });

  // Rounds: one step, then every shape alone, so that each round's step and best rate are measured
  // under the same machine load (on a shared machine both drift within a run; measured apart, the
  // ratio moved with the best rate alone). Every round's step is a fresh one, taken after the
  // shapes' operands exist, so all rounds run under the same memory.
  const flops = calls.reduce((s, c) => s + flopsOf(c), 0);
  const timed: { seconds: number }[] = [];
  const ratios: number[] = [];
  const bests: number[] = [];
  for (let round = 0; round < steps; round++) {
    timed.push(await rig.step());
    for (const e of byShape.values()) e.seconds.push(await e.probe.time());
    const best = Math.max(...[...byShape.values()].map((e) => flopsOf(e.call) / e.seconds[round]));
    bests.push(best);
    ratios.push(timed[round].seconds / (flops / best));
  }
  for (const e of byShape.values()) e.probe.release();
  rig.destroy();
  const stepSeconds = median(timed.map((t) => t.seconds));
  const best = median(bests);
  const shapeSeconds = (e: { seconds: number[] }) => median(e.seconds);
  const matmulSeconds = [...byShape.values()].reduce((s, e) => s + e.count * shapeSeconds(e), 0);
  const rooflineSeconds = flops / best;
  const row = {
    config: name,
    draft: `H ${config.hiddenSize} I ${config.intermediateSize} heads ${config.numHeads}/${config.numKvHeads} hd ${config.headDim} V ${config.vocabSize} D ${config.draftVocabSize}`,
    tokens: `${shape.batch} x ${shape.seq}, TTT ${shape.ttt}`,
    firstStepMs: +(warm.seconds * 1e3).toFixed(1),
    stepMs: +(stepSeconds * 1e3).toFixed(1),
    stepsMs: timed.map((t) => +(t.seconds * 1e3).toFixed(1)),
    matmulGflop: +(flops / 1e9).toFixed(4),
    bestMatmulGflops: +(best / 1e9).toFixed(2),
    bestMatmulGflopsByRound: bests.map((b) => +(b / 1e9).toFixed(2)),
    rooflineMs: +(rooflineSeconds * 1e3).toFixed(2),
    ratio: +median(ratios).toFixed(1),
    ratiosByRound: ratios.map((r) => +r.toFixed(2)),
    matmulMs: +(matmulSeconds * 1e3).toFixed(1),
    matmulShareOfStep: +(matmulSeconds / stepSeconds).toFixed(3),
    dispatches: recorded.dispatches,
    matmulDispatches: calls.length,
    loss: +recorded.loss.toFixed(4),
  };
  summary.push(row);
  console.log(JSON.stringify(row));
  const shapes = [...byShape.entries()]
    .sort(([, x], [, y]) => y.count * shapeSeconds(y) - x.count * shapeSeconds(x))
    .map(([key, e]) => ({
      shape: key,
      variant: e.call.variant,
      count: e.count,
      ms: +(shapeSeconds(e) * 1e3).toFixed(3),
      gflops: +(flopsOf(e.call) / shapeSeconds(e) / 1e9).toFixed(2),
      gflopsByRound: e.seconds.map((t) => +(flopsOf(e.call) / t / 1e9).toFixed(2)),
    }));
  console.log(JSON.stringify({ config: name, matmulShapes: shapes }));
}
console.log(
  JSON.stringify({
    summary: summary.map((r) => ({
      config: r.config,
      stepMs: r.stepMs,
      rooflineMs: r.rooflineMs,
      ratio: r.ratio,
      bestMatmulGflops: r.bestMatmulGflops,
      dispatches: r.dispatches,
    })),
  }),
);
gpu.destroy();
await nodePlatform.exit(0);
