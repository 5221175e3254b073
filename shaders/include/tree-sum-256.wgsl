// include/tree-sum-256 — WG = 256 invocations (matching @workgroup_size(256, 1, 1)) and their
// workgroup partials for the fixed-shape tree sum (halving strides, so the result is deterministic)
// that each kernel runs in its main. Included by rmsnorm/{forward,backward_dx} and optim/finalize,
// whose grids do not depend on WG (one workgroup per row, or exactly one); optim/sumsq, whose grid
// does, takes its WG from the host instead.

const WG: u32 = 256u;
var<workgroup> partial: array<f32, 256>;
