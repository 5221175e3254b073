// include/tree-sum-256 — WG = 256 invocations (matching @workgroup_size(256, 1, 1)) and their
// workgroup partials for the fixed-shape tree sum (halving strides, so the result is deterministic)
// that the kernel runs in its main. Included by optim/finalize, whose grid does not depend on WG
// (exactly one workgroup); optim/sumsq, whose grid does, takes its WG from the host instead. (The
// one-row-per-workgroup kernels use include/row-reduce-wide.)

const WG: u32 = 256u;
var<workgroup> partial: array<f32, 256>;
