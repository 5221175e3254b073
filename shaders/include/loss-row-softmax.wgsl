// include/loss-row-softmax — the one-row-per-workgroup layout of the cross-entropy kernels: WG = 256
// invocations (matching their @workgroup_size), LOWEST as the "no value yet" max, and the
// per-invocation online (max, Σexp) partials that a fixed-order tree combines. Included by
// loss/{hard-ce,soft-ce}.

const WG: u32 = 256u;
const LOWEST: f32 = -3.4028234e38;

var<workgroup> redMax: array<f32, 256>;
var<workgroup> redSum: array<f32, 256>;
