// rmsnorm/gather-forward — rmsnorm/forward of embedding rows gathered on the fly: y = w ⊙ x /
// sqrt(mean(x²) + eps) with x[r] = table[ids'[r]] (ids' the ids shifted left by `shift` within rows
// of seqLen, zero-filled; an id outside [0, vocab) is a zero row), invRms saved. The EAGLE3 draft's
// input_layernorm of a TTT step's embeddings in one dispatch, without the [rows, hidden] tensor
// embedding/gather would write for it (model/eagle3/step-body.ts).
//
// Shapes: ids i32 [N], N a multiple of seqLen; table [vocab, hidden], f32 or f16 (TABLE_F16), one
//   binding; w f32 [hidden]; y f32 at row stride strideY (≥ hidden); invRms f32 [rows].
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        table (u32 words)
//   2 storage read        w
//   3 storage read_write  y
//   4 storage read_write  invRms
//   5 storage read        ids
// Dispatch: one workgroup of 256 per row, rows folded into (x, y) (row = wg.y * nwg.x + wg.x): the
//   `wide` layout of rmsnorm/forward (include/row-reduce-wide).
// Numerics: x is exactly what embedding/gather writes (include/rmsnorm-gathered-x), and the row body
//   is rmsnorm/forward's (include/rmsnorm-forward-row), so y and invRms have the bits of
//   embedding/gather followed by rmsnorm/forward in the same layout.

#include "include/rmsnorm-gather-forward-x.wgsl"
#include "include/rmsnorm-forward-row.wgsl"
#include "include/row-reduce-wide.wgsl"
