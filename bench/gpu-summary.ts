/**
 * The summary table of bench/gpu.sh: reads the JSON lines its benchmarks printed (one file) and
 * prints each result beside its reference — training tokens/s beside SpecForge's H200 numbers,
 * f16 weights beside f32, batch-1 decode beside its bandwidth bound, the step beside its matmul
 * roofline. Lines that are not JSON objects (progress, warnings) are skipped.
 *
 *   npx tsx bench/gpu-summary.ts /tmp/…/gpu-run.jsonl
 */
import { nodePlatform } from '../src/platform/node.ts';

type Json = Record<string, unknown>;

const path = nodePlatform.args()[0];
if (!path) throw new Error('bench/gpu-summary.ts: give the JSON-lines file bench/gpu.sh wrote');
const slash = path.lastIndexOf('/');
const text = new TextDecoder().decode(await nodePlatform.files(slash < 0 ? '.' : path.slice(0, slash) || '/').read(path.slice(slash + 1)));
const results: Json[] = [];
for (const line of text.split('\n')) {
  const trimmed = line.trim();
  if (!trimmed.startsWith('{')) continue;
  try {
    results.push(JSON.parse(trimmed) as Json);
  } catch {
    // A progress line that happens to start with a brace: not a result.
  }
}

const num = (v: unknown, digits = 2): string =>
  typeof v === 'number' ? v.toLocaleString('en-US', { maximumFractionDigits: digits }) : '—';
const at = (o: unknown, ...keys: (string | number)[]): unknown =>
  keys.reduce<unknown>((x, k) => (x && typeof x === 'object' ? (x as Record<string | number, unknown>)[k] : undefined), o);
const rows: string[][] = [];

for (const r of results) {
  if (r.f16VsF32) {
    const bound = (p: string) => num(at(r, p, 'decodeBandwidth', 'boundTokensPerSecond'));
    rows.push([
      'target',
      `${r.model}`,
      'f32 | f16 weights',
      `GPU bytes ${num(at(r, 'f32', 'gpuWeightBytes'), 0)} | ${num(at(r, 'f16', 'gpuWeightBytes'), 0)} (ratio ${num(at(r, 'f16VsF32', 'gpuBytesRatio'), 3)})`,
    ]);
    rows.push([
      'target',
      'prefill tokens/s',
      'f32 | f16',
      `${num(at(r, 'f32', 'prefill', 'tokensPerSecond'))} | ${num(at(r, 'f16', 'prefill', 'tokensPerSecond'))}`,
    ]);
    rows.push([
      'target',
      'decode tokens/s (batch 1) vs bandwidth bound',
      'f32 | f16',
      `${num(at(r, 'f32', 'decode', 0, 'tokensPerSecond'))} of ${bound('f32')} | ${num(at(r, 'f16', 'decode', 0, 'tokensPerSecond'))} of ${bound('f16')}`,
    ]);
    rows.push([
      'target',
      'logits f16 vs f32 (relative, per row)',
      '',
      `max ${num(at(r, 'f16VsF32', 'logitsRowRelDiff', 'max'), 6)}, mean ${num(at(r, 'f16VsF32', 'logitsRowRelDiff', 'mean'), 6)}`,
    ]);
  } else if (r.decodeBandwidth) {
    rows.push([
      'target',
      `${r.model}`,
      `${r.weightPrecision}`,
      `decode ${num(at(r, 'decode', 0, 'tokensPerSecond'))} tokens/s of ${num(at(r, 'decodeBandwidth', 'boundTokensPerSecond'))} bound`,
    ]);
  } else if (r.config && r.step) {
    const shape = `${r.batch} x ${r.seq}, TTT ${r.ttt}${r.shrink ? `, widths / ${r.shrink}` : ''}`;
    const peak = at(r, 'gpuMemory', 'timedSteps', 'peakBytes') ?? at(r, 'gpuMemory', 'firstStep', 'peakBytes');
    const ref =
      r.specForgeTokensPerSecond === undefined
        ? ''
        : ` vs SpecForge ${num(r.specForgeTokensPerSecond, 0)} (ratio ${num(r.ratioToSpecForge, 4)})`;
    rows.push([
      'train',
      `${r.config} ${shape}`,
      `${r.featurePrecision} features`,
      `${num(at(r, 'step', 'tokensPerSecond'))} tokens/s${ref}; peak ${num(typeof peak === 'number' ? peak / 2 ** 30 : undefined)} GiB`,
    ]);
  } else if (r.config && r.fits === false) {
    rows.push(['train', `${r.config} ${r.batch} x ${r.seq}`, `${r.featurePrecision ?? ''}`, `did not run: ${r.error ?? 'does not fit'}`]);
  } else if (Array.isArray(r.summary)) {
    for (const c of r.summary as Json[])
      rows.push([
        'step ÷ matmul',
        `${c.config}`,
        '',
        `step ${num(c.stepMs)} ms, matmul roofline ${num(c.rooflineMs)} ms: ratio ${num(c.ratio)}; ${num(c.dispatches, 0)} dispatches`,
      ]);
  }
}

const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i].length), 4));
for (const r of rows)
  console.log(
    r
      .map((cell, i) => cell.padEnd(widths[i]))
      .join('  ')
      .trimEnd(),
  );
if (rows.length === 0) console.log(`bench/gpu-summary.ts: no benchmark results in ${path}`);
await nodePlatform.exit(0);
