// include/row-reduce-subgroup — the `subgroup` layout of the row kernels
// (src/kernels/row-variant.ts): a workgroup of LANES invocations that must form one subgroup with
// subgroup_invocation_id 0..LANES-1 (the host refuses the variant unless the device's minimum
// subgroup size is ≥ LANES), reducing ROWS rows one after another without any barrier. Provides
// rowSum / rowMax / rowMinU32 (each returns the row's value to every lane; rowSumFinal = rowSum)
// and the entry point `main`, which calls the including shader's
//   fn processRow(i: u32, lane: u32, slot: u32)
// for segment rows i = workgroup · ROWS + j, j < ROWS (slot is always 0), stopping at the first i
// past the end (the including shader's `fn rowCount() -> u32`, read from its uniforms). The
// including shader must start with `enable subgroups;`. LANES and ROWS come from the kernel
// module's geometry record as WGSL constants.
// Numerics: rowSum is an xor butterfly, s += shuffleXor(s, half) for half = LANES/2, …, 1: lane 0
// adds exactly as include/row-reduce-tree's halving tree does, and every lane ends with the same
// bits (each step adds the same two values in either order), so the variants agree bit for bit at
// equal LANES. rowMax / rowMinU32 (subgroupMax / subgroupMin) are exact.

#include "include/row-reduce-subgroup-sums.wgsl"

@compute @workgroup_size(LANES, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  processRowGroup(wg.x + wg.y * nwg.x, lid);
}
