// include/tree-sum-256 — WG = 256 invocations (matching @workgroup_size(256, 1, 1)) and their
// workgroup partials for the fixed-shape tree sum (halving strides, so the result is deterministic)
// that each kernel runs in its main. Included by rmsnorm/{forward,backward_dx} and
// optim/{sumsq,finalize}.

const WG: u32 = 256u;
var<workgroup> partial: array<f32, 256>;
