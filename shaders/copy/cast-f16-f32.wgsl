// copy/cast-f16-f32 — f16 → f32, exact:
//   dst[dstOffset + i] = f32(src16[srcOffset + i])   for i < count
// Widens f16 features right before the draft's forward, which trains in f32.
//
// Shapes: src f16 as pairs packed in u32 words, element 2j in the low half of word j (the
//   little-endian layout of an f16 buffer); srcOffset is even (the host checks), so pairs never
//   straddle words. dst f32 addressed flat.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        src  array<u32> (two f16 per word)
//   2 storage read_write  dst  array<f32>
// Dispatch: ceil(ceil(count / 2) / WG) workgroups of WG, folded into (x, y); one invocation per
//   input word (two elements; the second is skipped past an odd count).
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended as a constant.
// Numerics: unpack2x16float; every f16 (subnormals and ±inf included) is exactly an f32, so the
//   result is bit-exact (NaN stays NaN, its payload is not promised).

struct Params {
  count: u32,
  srcOffset: u32,
  dstOffset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let j = (wg.y * nwg.x + wg.x) * WG + lid.x;
  let i = 2u * j;
  if (i >= p.count) { return; }
  let v = unpack2x16float(src[p.srcOffset / 2u + j]);
  dst[p.dstOffset + i] = v.x;
  if (i + 1u < p.count) { dst[p.dstOffset + i + 1u] = v.y; }
}
