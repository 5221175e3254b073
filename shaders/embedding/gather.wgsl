// embedding/gather — out[n, :] = table[ids'[n], :] (forward of an embedding lookup).
//
// ids' is ids read as rows of seqLen, each shifted left by shift and zero-filled (SpecForge's
// `padding(x, left=False)`: ids'[b·seqLen + t] = ids[b·seqLen + t + shift] where t + shift < seqLen,
// else 0). A TTT step k of the EAGLE3 draft reads its shifted ids this way, with no shifted copy;
// shift = 0 (seqLen = N) is the plain lookup.
//
// Shapes: ids i32 [N], N a multiple of seqLen; table f32 [V, H], possibly split into row parts (one
//   dispatch per part); out f32 [N, H].
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        ids
//   2 storage read        table part: rows [rowStart, rowStart + rowCount) of the table
//   3 storage read_write  out
// Dispatch: ceil(N * H / WG) workgroups of WG, folded into (x, y) (linear = wg.y * nwg.x + wg.x);
//   one invocation per output element. Each dispatch writes only the rows whose id falls in its
//   part; the dispatch with zeroInvalid = 1 also writes zeros for ids outside [0, vocab) (padding
//   ids such as -1), so every output row is written exactly once over all parts.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Table element type: the constant TABLE_F16 (appended by src/kernels/embedding.ts). The table is
//   bound as 32-bit words either way: f32 elements are bitcast back (exact), f16 ones (TABLE_F16 =
//   1, embedding/gather-f16) unpacked from the word holding their pair by the core builtin
//   unpack2x16float, so f16 tables need no shader-f16 feature.
// Numerics: a copy; exact (f16 elements widen exactly to f32). The shifted id and the element read:
//   include/embedding-row.wgsl (shared with the rmsnorm/gather-* kernels).

struct Params {
  n: u32,
  hidden: u32,
  vocab: u32,
  rowStart: u32,
  rowCount: u32,
  zeroInvalid: u32,
  seqLen: u32,
  shift: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> table: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

#include "include/embedding-row.wgsl"

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.n * p.hidden) { return; }
  let n = idx / p.hidden;
  let h = idx % p.hidden;
  let id = shiftedId(n);
  if (id < 0 || u32(id) >= p.vocab) {
    if (p.zeroInvalid != 0u) { out[idx] = 0.0; }
    return;
  }
  let row = u32(id);
  if (row < p.rowStart || row >= p.rowStart + p.rowCount) { return; }
  out[idx] = tableElement((row - p.rowStart) * p.hidden + h);
}
