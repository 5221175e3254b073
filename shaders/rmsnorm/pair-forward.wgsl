// rmsnorm/pair-forward — the two RMSNorms that start an EAGLE3 TTT step, in one dispatch: z =
// [input_layernorm(table[ids']) | hidden_norm(x)] (model/eagle3/step-body.ts), i.e. rmsnorm/gather-forward
// into columns [0, hidden) of y's rows and rmsnorm/forward into columns [hidden, 2·hidden), each
// saving its own 1/rms. One launch instead of two; a fixture-sized step pays about as much per launch
// as for these rows' arithmetic (bench/RESULTS.md).
//
// Shapes: ids i32 [rows], rows a multiple of seqLen (shifted left by `shift` within sequences,
//   zero-filled; an id outside [0, vocab) is a zero row, as rmsnorm/gather-forward); table
//   [vocab, hidden], f32 or f16 (TABLE_F16), one binding; x f32 rows of hidden at row stride strideX;
//   wEmb, wHidden f32 [hidden]; y f32 rows at stride strideY (≥ 2·hidden); invRmsEmb, invRmsHidden f32 [rows].
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        table (u32 words)
//   2 storage read        wEmb
//   3 storage read_write  y
//   4 storage read_write  invRmsEmb
//   5 storage read        ids
//   6 storage read        x
//   7 storage read        wHidden
//   8 storage read_write  invRmsHidden
// Dispatch: the `wide` layout over 2·rows segment rows (include/row-reduce-wide: one workgroup of 256
//   per row, folded into (x, y)); rows [0, rows) gathered, [rows, 2·rows) strided
//   (include/rmsnorm-pair-forward).
// Numerics: each row runs include/rmsnorm-norm-row on the same operands as rmsnorm/gather-forward or
//   rmsnorm/forward in the same layout, so y and both 1/rms have those two kernels' bits.

#include "include/rmsnorm-pair-forward.wgsl"

fn processRow(i: u32, lane: u32, slot: u32) { processRowUniform(i, lane, slot); }

#include "include/row-reduce-wide.wgsl"
