// include/attention-lanes — what the attention/*-lanes kernels share: the common head of the
// attention kernels (include/attention-flash: Params, HEAD_DIM, LANE_DIMS, bindings 0..4) and two
// helpers for rows split across the 8 lanes of one subgroup.
//
// A "split" row holds element d = lane + 8·i of a head-dim row in lane `lane`, slot i (i < LANE_DIMS
// = ceil(HEAD_DIM / 8), set by the host); each lane loads only its own elements, so one row costs
// LANE_DIMS loads per lane instead of HEAD_DIM. A "full" row is a lane's own row, all of its
// MAX_HD ≥ HEAD_DIM elements in registers, zero past HEAD_DIM. The helpers hand the split row's
// elements to every lane with subgroupBroadcast (lane index constant, hence the unrolled bodies),
// so they must be called in uniform control flow by all 8 lanes. Elements are visited in
// increasing d. Loads of a split row clamp d into the row, so slots past HEAD_DIM hold finite
// copies that meet a zero of the full row (dotSplit) or land in a register that is never stored
// (axpySplit). The kernels index rows by subgroup_invocation_id and assume their 8 invocations are
// lanes 0..7 of one subgroup, true where subgroups have at least 8 lanes (the host checks the
// minimum; matmul/subgroup assumes the same).
enable subgroups;

#include "include/attention-flash.wgsl"

const SPLIT: u32 = MAX_HD / 8u; // slots of a split row
const_assert MAX_HD % 8u == 0u && TPR == 1u;
// Slots in use: LANE_DIMS as the host sets it, never past SPLIT (LANE_DIMS' default, from
// include/attention-flash, is flash's and may exceed it when a pipeline is built without overrides).
fn splitSlots() -> u32 { return min(LANE_DIMS, SPLIT); }

/** Σ_d full[d] · row[d], with row split across the lanes. */
fn dotSplit(full: ptr<function, array<f32, MAX_HD>>, split: ptr<function, array<f32, SPLIT>>) -> f32 {
  var s = 0.0;
  for (var i = 0u; i < splitSlots(); i++) {
    let x = (*split)[i];
    let d = 8u * i;
    s = fma((*full)[d], subgroupBroadcast(x, 0u), s);
    s = fma((*full)[d + 1u], subgroupBroadcast(x, 1u), s);
    s = fma((*full)[d + 2u], subgroupBroadcast(x, 2u), s);
    s = fma((*full)[d + 3u], subgroupBroadcast(x, 3u), s);
    s = fma((*full)[d + 4u], subgroupBroadcast(x, 4u), s);
    s = fma((*full)[d + 5u], subgroupBroadcast(x, 5u), s);
    s = fma((*full)[d + 6u], subgroupBroadcast(x, 6u), s);
    s = fma((*full)[d + 7u], subgroupBroadcast(x, 7u), s);
  }
  return s;
}

/** full[d] = a · row[d] + decay · full[d], with row split across the lanes. */
fn axpySplit(full: ptr<function, array<f32, MAX_HD>>, a: f32, decay: f32, split: ptr<function, array<f32, SPLIT>>) {
  for (var i = 0u; i < splitSlots(); i++) {
    let x = (*split)[i];
    let d = 8u * i;
    (*full)[d] = fma(a, subgroupBroadcast(x, 0u), (*full)[d] * decay);
    (*full)[d + 1u] = fma(a, subgroupBroadcast(x, 1u), (*full)[d + 1u] * decay);
    (*full)[d + 2u] = fma(a, subgroupBroadcast(x, 2u), (*full)[d + 2u] * decay);
    (*full)[d + 3u] = fma(a, subgroupBroadcast(x, 3u), (*full)[d + 3u] * decay);
    (*full)[d + 4u] = fma(a, subgroupBroadcast(x, 4u), (*full)[d + 4u] * decay);
    (*full)[d + 5u] = fma(a, subgroupBroadcast(x, 5u), (*full)[d + 5u] * decay);
    (*full)[d + 6u] = fma(a, subgroupBroadcast(x, 6u), (*full)[d + 6u] * decay);
    (*full)[d + 7u] = fma(a, subgroupBroadcast(x, 7u), (*full)[d + 7u] * decay);
  }
}
