// rmsnorm/pair-forward-rows — rmsnorm/pair-forward in the `rows` layout (src/kernels/row-variant.ts)
// for adapters without subgroups: ROWS segment rows per workgroup, LANES lanes per row.
// Contract, shapes and bindings: rmsnorm/pair-forward.
// Dispatch: ceil(2·rows / ROWS) workgroups of LANES x ROWS invocations, folded into (x, y); LANES and
//   ROWS are RMSNORM_ROW_GEOMETRY.rows in src/kernels/rmsnorm.ts, appended as constants.
// Numerics: the bits of rmsnorm/gather-forward-rows and rmsnorm/forward-rows (include/row-reduce-tree).

#include "include/rmsnorm-pair-forward.wgsl"

// A workgroup's slots may hold rows of both norms: `second` per invocation, every invocation in the body.
fn processRow(i: u32, lane: u32, slot: u32) {
  let second = i >= p.rows;
  normRow(select(i, i - p.rows, second), lane, slot, second);
}

#include "include/row-reduce-tree.wgsl"
