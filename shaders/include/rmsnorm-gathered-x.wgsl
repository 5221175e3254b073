// include/rmsnorm-gathered-x — x as rows of an embedding table, for the rmsnorm/gather-* kernels: row
// r of x is table row shiftedId(r) (include/embedding-row.wgsl: the TTT step's shifted ids, as
// embedding/gather reads them), and an id outside [0, vocab) is a zero row, as embedding/gather
// writes it. So a gather kernel sees exactly the x that embedding/gather would have written, without
// that [rows, hidden] tensor. The table is one binding (one row part).
// Provides gatheredRowBase / gatheredAt, named for what they read so that a kernel with a second x
// (rmsnorm/pair-*) can tell them apart; the including shader maps its row accessors onto them. The including shader
// declares Params `p` (with rows, hidden, seqLen, shift and vocab), ids (array<i32>), table
// (array<u32>) and TABLE_F16.

#include "include/embedding-row.wgsl"

// gatheredRowBase of a zero row; no table element has this index (a binding holds fewer than 2³¹ of them).
const ZERO_ROW: u32 = 0xffffffffu;

fn gatheredRowBase(row: u32) -> u32 {
  let id = shiftedId(row);
  if (id < 0i || u32(id) >= p.vocab) { return ZERO_ROW; }
  return u32(id) * p.hidden;
}

fn gatheredAt(base: u32, j: u32) -> f32 {
  if (base == ZERO_ROW) { return 0.0; }
  return tableElement(base + j);
}
