// rope/qkv-split — the row of one stacked q | k | v projection split three ways: q and k rotated
// by RoPE from a host-built table (as rope/table), v copied. The EAGLE3 draft's forward
// (model/eagle3/step-body.ts) writes q to its own tensor and k and v straight into their cache slots,
// in one dispatch where rope/table twice and copy/strided once took three.
//   q[r, h, i], q[r, h, i + half]  = rotate(qkv q-head h pair i)     h < qHeads
//   k[r, h, i], k[r, h, i + half]  = rotate(qkv k-head h pair i)     h < kvHeads
//   v[r, j]                        = qkv[r, (qHeads + kvHeads) · headDim + j]
// with (cos, sin) = table[positions[r], i].
//
// Shapes: qkv f32 [rows, (qHeads + 2 · kvHeads) · headDim]: row r holds q's qHeads heads, then k's
//   kvHeads heads, then v's kvHeads · headDim elements; q f32 [rows, qHeads · headDim] and
//   k, v f32 [rows, kvHeads · headDim] (dense); positions i32 [rows], each in [0, P);
//   table f32 [P, headDim / 2, 2] = (cos, sin) pairs.
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        positions
//   2 storage read        table
//   3 storage read        qkv
//   4 storage read_write  q
//   5 storage read_write  k
//   6 storage read_write  v
// Dispatch: ceil(rows · U / WG) workgroups of WG, folded into (x, y), with
//   U = (qHeads + kvHeads) · headDim / 2 + kvHeads · headDim: one invocation per rotated pair of q
//   and k, and per element of v.
//   Which item an invocation handles, and where it lies: include/rope-qkv-layout.wgsl (shared with
//   rope/qkv-join).
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/rope-rotate.wgsl, the same bits as rope/table on each part; v is copied exactly.

#include "include/rope-rotate.wgsl"
#include "include/rope-qkv-layout.wgsl"

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> positions: array<i32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;
@group(0) @binding(3) var<storage, read> qkv: array<f32>;
@group(0) @binding(4) var<storage, read_write> q: array<f32>;
@group(0) @binding(5) var<storage, read_write> k: array<f32>;
@group(0) @binding(6) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * qkvItemsPerRow()) { return; }
  let it = qkvItem(idx);
  if (!it.rotated) {
    v[it.dense] = qkv[it.stacked];
    return;
  }
  let half = qkvHalf();
  let cs = qkvCosSin(it);
  let y = ropeRotatePair(qkv[it.stacked], qkv[it.stacked + half], cs.x, cs.y);
  if (it.head < p.qHeads) {
    q[it.dense] = y.x;
    q[it.dense + half] = y.y;
  } else {
    k[it.dense] = y.x;
    k[it.dense + half] = y.y;
  }
}
