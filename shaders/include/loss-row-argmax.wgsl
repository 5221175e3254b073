// include/loss-row-argmax — include/loss-row-softmax plus an argmax: WG = 256 invocations per row
// (matching @workgroup_size), LOWEST as the "no value yet" max, NO_INDEX as "no argmax yet", and
// the per-invocation (max, Σexp, argmax) partials that a fixed-order tree combines (ties go to the
// lowest index). Included by loss/{metrics,teacher}.

const WG: u32 = 256u;
const LOWEST: f32 = -3.4028234e38;
const NO_INDEX: u32 = 0xffffffffu;

var<workgroup> redMax: array<f32, 256>;
var<workgroup> redSum: array<f32, 256>;
var<workgroup> redIdx: array<u32, 256>;
