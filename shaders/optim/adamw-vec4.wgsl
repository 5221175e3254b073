// optim/adamw-vec4 — optim/adamw four elements per invocation: each tensor is read and written as
// vec4<f32>, and each of the four lanes goes through the same scalar include/adamw-update.wgsl, so
// the result has optim/adamw's bits. One 16-byte load or store per tensor and invocation, where the
// scalar kernel makes four: on a CPU adapter every per-invocation access is its own load, and the
// fixture draft's AdamW step ran in half the time (bench/RESULTS.md, "Fewer barriers, wider loads").
// The host takes it when the element count is a multiple of 4 (parameter slabs are padded to 16
// bytes, optim/parameter-arena.ts) and every binding's byte offset a multiple of 16.
//
// Shapes: grad, param, m, v: f32 [4 · n] read as vec4 [n] (p.n counts vec4 groups); clip f32 [≥ 2]
//   (result of optim/finalize; with USE_CLIP = false the host binds grad there and it is not read).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        grad
//   2 storage read        clip
//   3 storage read_write  param
//   4 storage read_write  m
//   5 storage read_write  v
// Dispatch: ceil(n / WG) workgroups of WG, folded into (x, y); one invocation per vec4 group.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/adamw-update.wgsl per lane, the bits of optim/adamw.

#include "include/adamw-update.wgsl"

override USE_CLIP: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> clip: array<f32>;
@group(0) @binding(3) var<storage, read_write> param: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> m: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> v: array<vec4<f32>>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (i >= p.n) { return; }
  if (USE_CLIP && clip[1] < 0.0) { return; }
  let coef = select(1.0, clip[1], USE_CLIP);
  let g = grad[i] * coef;
  let pi = param[i];
  let mi = m[i];
  let vi = v[i];
  let a = adamwUpdate(p, g.x, pi.x, mi.x, vi.x);
  let b = adamwUpdate(p, g.y, pi.y, mi.y, vi.y);
  let c = adamwUpdate(p, g.z, pi.z, mi.z, vi.z);
  let d = adamwUpdate(p, g.w, pi.w, mi.w, vi.w);
  param[i] = vec4<f32>(a.x, b.x, c.x, d.x);
  m[i] = vec4<f32>(a.y, b.y, c.y, d.y);
  v[i] = vec4<f32>(a.z, b.z, c.z, d.z);
}
