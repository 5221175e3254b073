// include/attention-flash — the common head of the flash-style attention kernels: Params and
// HEAD_DIM (include/attention-params), the LANE_DIMS override, DPT and bindings 0..4 (0 uniform
// Params, 1 read Q, 2 read Kc, 3 read Vc, 4 read mask); each kernel declares its own bindings from
// 5 on. TPR, MAX_HD and the row / key block sizes are a FlashGeometry record of src/kernels/attention.ts,
// appended to each kernel's source as constants. Included by attention/{forward,dq,dkv}.

#include "include/attention-params.wgsl"
// ceil(HEAD_DIM / TPR), set by the host. Loops over an invocation's dims then have a constant trip
// count and unroll, so the private arrays stay in registers with constant indices (dynamic
// indexing made llvmpipe's JIT take tens of seconds per pipeline).
override LANE_DIMS: u32 = 16u;
// Head dims one invocation owns at most: the size of its per-row register arrays.
const_assert MAX_HD % TPR == 0u;
const DPT: u32 = MAX_HD / TPR;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> Kc: array<f32>;
@group(0) @binding(3) var<storage, read> Vc: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<i32>;
