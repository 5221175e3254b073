// rope/table — rotary position embedding (Hugging Face "rotate half") with cos/sin read from
// a host-built table instead of evaluated in the shader:
//   y[i]        = x[i] · cos[p, i] − x[i + half] · sin[p, i]
//   y[i + half] = x[i + half] · cos[p, i] + x[i] · sin[p, i]       p = positions[row], i < half
// The table carries every RoPE scaling (default, linear, llama3) and HF's own float32 angle
// rounding, and its accuracy does not depend on the WGSL implementation's sin/cos.
//
// Shapes: x, y f32 [rows, nHeads · headDim], each at its own row stride and element offset (row r,
//   head h, element i at offset + r · stride + h · headDim + i; dense is stride nHeads · headDim,
//   offset 0): the EAGLE3 draft rotates q and k where one projection left them side by side in a
//   row, and writes the gradient back into such a row; positions i32 [rows], each in [0, P);
//   table f32 [P, headDim / 2, 2] = (cos, sin) pairs.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        positions
//   2 storage read        table
//   3 storage read        x
//   4 storage read_write  y
// Dispatch: ceil(rows · nHeads · headDim/2 / WG) workgroups of WG, folded into (x, y); one
//   invocation per rotated pair.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/rope-rotate.wgsl (f32, as HF's q·cos + rotate_half(q)·sin), the same bits as
//   rope/qkv-split and rope/qkv-join.

#include "include/rope-rotate.wgsl"

struct Params {
  rows: u32,
  nHeads: u32,
  headDim: u32,
  tableRows: u32,
  strideX: u32,
  offsetX: u32,
  strideY: u32,
  offsetY: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> positions: array<i32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let half = p.headDim / 2u;
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * p.nHeads * half) { return; }
  let i = idx % half;
  let rowHead = idx / half;
  let row = rowHead / p.nHeads;
  // Positions are checked on the host; the clamp only keeps a bad one inside the table.
  let pos = min(u32(max(positions[row], 0i)), p.tableRows - 1u);
  let c = table[(pos * half + i) * 2u];
  let s = table[(pos * half + i) * 2u + 1u];
  let within = (rowHead % p.nHeads) * p.headDim + i;
  let a = p.offsetX + row * p.strideX + within;
  let b = p.offsetY + row * p.strideY + within;
  let r = ropeRotatePair(x[a], x[a + half], c, s);
  y[b] = r.x;
  y[b + half] = r.y;
}
