// copy/strided — 2-D strided copy between f32 buffers:
//   dst[dstOffset + r · dstStride + j] = src[srcOffset + r · srcStride + j]   for r < rows, j < width
// Used to place blocks of columns (aux hidden states concatenated on the last axis, vocab slices
// of a chunked lm_head) and to move row ranges between differently padded layouts (KV caches).
//
// Shapes: src, dst f32, addressed flat; the host checks that every addressed element exists.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        src
//   2 storage read_write  dst
// Dispatch: ceil(rows · width / WG) workgroups of WG, folded into (x, y); one invocation per
//   copied element (consecutive invocations copy consecutive columns).
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: a plain load and store, bit-exact.

struct Params {
  rows: u32,
  width: u32,
  srcStride: u32,
  srcOffset: u32,
  dstStride: u32,
  dstOffset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * p.width) { return; }
  let r = idx / p.width;
  let j = idx % p.width;
  dst[p.dstOffset + r * p.dstStride + j] = src[p.srcOffset + r * p.srcStride + j];
}
