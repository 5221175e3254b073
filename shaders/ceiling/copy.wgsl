// ceiling/copy — the adapter's memory bandwidth as a kernel sees it: dst[i] = src[i] over vec4
// elements, each invocation copying one vec4 per grid stride. bench/ceiling.ts divides the bytes
// read and written (2 × 16 × count) by the time: the ceiling a memory-bound kernel (GEMV, a decode
// step) is given as a fraction of. (copyBufferToBuffer, bench/copy.ts, is the driver's own copy.)
//
// Shapes: src, dst vec4<f32> [count]; they must not alias.
// Bindings (group 0): 0 uniform Params { count, stride }, 1 read src, 2 read_write dst.
// Dispatch: (workgroups, 1, 1) workgroups of WG invocations, stride = workgroups × WG; invocation g
//   copies elements g, g + stride, g + 2·stride, … below count.
// WG is CEILING_GEOMETRY in src/kernels/ceiling.ts, appended as a constant.
// Numerics: an exact copy (the bits of every element, NaN payloads included, are loaded and stored as
//   vec4<u32>).

struct Params {
  count: u32,
  stride: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  for (var i = gid.x; i < p.count; i += p.stride) { dst[i] = src[i]; }
}
