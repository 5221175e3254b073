// rope/qkv-join — the gradient of rope/qkv-split: dq and dk rotated back (the inverse table's
// (cos, −sin): the rotation by −angle, Rᵀ) and dv copied, side by side into one row of the stacked
// q | k | v layout, which the stacked projection's weight and input gradients then read whole. The
// EAGLE3 draft's backward (model/eagle3/backward.ts) reads dk and dv in place from their cache
// slots; one dispatch where rope/table twice and copy/strided once took three.
//   dqkv q-head h pair i  = rotate(dq[r, h, i], dq[r, h, i + half])   h < qHeads
//   dqkv k-head h pair i  = rotate(dk[r, h, i], dk[r, h, i + half])   h < kvHeads
//   dqkv[r, (qHeads + kvHeads) · headDim + j] = dv[r, j]
// with (c, s) = table[positions[r], i].
//
// Shapes: dq f32 [rows, qHeads · headDim]; dk, dv f32 [rows, kvHeads · headDim] (dense);
//   dqkv f32 [rows, (qHeads + 2 · kvHeads) · headDim] in rope/qkv-split's row layout (every element
//   written); positions i32 [rows], each in [0, P); table f32 [P, headDim / 2, 2].
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        positions
//   2 storage read        table
//   3 storage read        dq
//   4 storage read        dk
//   5 storage read        dv
//   6 storage read_write  dqkv
// Dispatch: as rope/qkv-split: ceil(rows · U / WG) workgroups of WG, folded into (x, y),
//   U = (qHeads + kvHeads) · headDim / 2 + kvHeads · headDim.
//   Which item an invocation handles, and where it lies: include/rope-qkv-layout.wgsl (shared with
//   rope/qkv-split).
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: include/rope-rotate.wgsl, the same bits as rope/table on each part; dv is copied exactly.

#include "include/rope-rotate.wgsl"
#include "include/rope-qkv-layout.wgsl"

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> positions: array<i32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;
@group(0) @binding(3) var<storage, read> dq: array<f32>;
@group(0) @binding(4) var<storage, read> dk: array<f32>;
@group(0) @binding(5) var<storage, read> dv: array<f32>;
@group(0) @binding(6) var<storage, read_write> dqkv: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.rows * qkvItemsPerRow()) { return; }
  let it = qkvItem(idx);
  if (!it.rotated) {
    dqkv[it.stacked] = dv[it.dense];
    return;
  }
  let half = qkvHalf();
  let cs = qkvCosSin(it);
  var y: vec2<f32>;
  if (it.head < p.qHeads) {
    y = ropeRotatePair(dq[it.dense], dq[it.dense + half], cs.x, cs.y);
  } else {
    y = ropeRotatePair(dk[it.dense], dk[it.dense + half], cs.x, cs.y);
  }
  dqkv[it.stacked] = y.x;
  dqkv[it.stacked + half] = y.y;
}
