/**
 * Old vs new attention geometry, interleaved in one run, at the draft shapes SpecLab trains and at
 * 128-wide heads (`hd128`: a Qwen3 target's capture at step 0):
 *
 *   npx tsx scripts/embed-shaders.ts
 *   npx tsx bench/attention-geometry.ts [--shapes lab,fixture] [--geometries 'flash;policy'] [--reps 5] [--steps 0,3]
 *
 * `policy` is what the variant and geometry policies pick on this device; `lanes` the lanes variant
 * (src/kernels/attention-lanes.ts); `flash` the original flash geometry; any other name in
 * ATTENTION_GEOMETRIES; or a flash geometry record to try, as fields over `flash`'s, e.g. 'TPR=2 BC=16 MAX_HD=32'. Prints one JSON line
 * per (shape, step, geometry) and, per (shape, step), the speedup of each geometry over the first.
 */
import { Gpu } from '../src/gpu/gpu.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { FLASH_GEOMETRY, type FlashGeometry } from '../src/kernels/attention.ts';
import { benchAttentionGeometries, DRAFT_ATTENTION_SHAPES } from './kernels/attention.ts';

function parseGeometry(spec: string): string | FlashGeometry {
  if (!spec.includes('=')) return spec;
  const g: Record<string, number> = { ...FLASH_GEOMETRY };
  for (const field of spec.trim().split(/\s+/)) {
    const [k, v] = field.split('=');
    if (!(k in g)) throw new Error(`bench/attention-geometry.ts: --geometries field "${k}" is not one of ${Object.keys(g).join(', ')}`);
    g[k] = Number(v);
  }
  return g as unknown as FlashGeometry;
}

const args = nodePlatform.args();
const opt = (name: string, fallback: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const shapes = opt('--shapes', 'lab,fixture').split(',');
const geometries = opt('--geometries', 'flash;policy').split(';').map(parseGeometry);
const reps = Number(opt('--reps', '5'));
const stepsArg = args.includes('--steps') ? opt('--steps', '').split(',').map(Number) : undefined;

const gpu = new Gpu(await nodePlatform.acquireGpu());
for (const name of shapes) {
  const entry = DRAFT_ATTENTION_SHAPES[name];
  if (!entry)
    throw new Error(
      `bench/attention-geometry.ts: unknown --shapes entry "${name}" (known: ${Object.keys(DRAFT_ATTENTION_SHAPES).join(', ')})`,
    );
  for (const step of stepsArg ?? [0, entry.tttStep]) {
    const rows = await benchAttentionGeometries(gpu, entry.dims, step, geometries, reps);
    for (const r of rows)
      console.log(
        JSON.stringify({
          config: name,
          ...r,
          fwdMs: +r.fwdMs.toFixed(3),
          bwdMs: +r.bwdMs.toFixed(3),
          fwdGflops: +r.fwdGflops.toFixed(3),
          bwdGflops: +r.bwdGflops.toFixed(3),
        }),
      );
    const base = rows[0];
    const speedups = rows
      .slice(1)
      .map((r) => ({ geometry: r.geometry, fwd: +(base.fwdMs / r.fwdMs).toFixed(2), bwd: +(base.bwdMs / r.bwdMs).toFixed(2) }));
    console.log(JSON.stringify({ config: name, step, speedupOver: base.geometry, speedups }));
  }
}
gpu.destroy();
await nodePlatform.exit(0);
