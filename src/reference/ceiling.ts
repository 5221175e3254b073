/**
 * CPU reference of ceiling/fma (shaders/ceiling/fma.wgsl): the same recurrence per chain and lane
 * and the same summation order. Each step is x·a (exact in float64: two 24-bit mantissas) plus b,
 * rounded to float64 and then to f32: the correctly rounded fma except in rare double-rounding
 * cases, and an adapter may not fuse at all (WGSL allows it), so tests compare within a tolerance;
 * |a| < 1 damps any difference instead of growing it.
 */
const f = Math.fround;

/** `chains` vec4 chains per invocation: the kernel's CEILING_GEOMETRY.CHAINS. */
export function fmaPeakReference(invocations: number, chains: number, iters: number, a: number, b: number): Float32Array {
  const out = new Float32Array(invocations);
  const fa = f(a);
  const fb = f(b);
  for (let g = 0; g < invocations; g++) {
    let s = 0;
    for (let c = 0; c < chains; c++) {
      for (let lane = 0; lane < 4; lane++) {
        // As the shader: (f32(g % 7) + lane/8) + 0.25·c, each sum rounded to f32 (all exact here).
        let x = f(f(f(g % 7) + lane / 8) + 0.25 * c);
        for (let i = 0; i < iters; i++) x = f(x * fa + fb);
        s = f(s + x);
      }
    }
    out[g] = s;
  }
  return out;
}
