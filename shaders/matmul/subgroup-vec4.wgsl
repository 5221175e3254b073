// matmul/subgroup-vec4 — matmul/subgroup with every operand read as vec4<f32>: on a CPU adapter a
// storage load costs about the same per lane whether it fetches one f32 or four (each is a per-lane,
// bounds-checked access), so reading four elements per load halves the time of the loads that bound
// matmul/subgroup. One 8-lane subgroup per workgroup (llvmpipe: one SIMD vector), A shared across the
// lanes by subgroupBroadcast, a 32 x 32 tile of C per workgroup.
//
// Same contract as matmul/tiled: C_b = alpha * op(A_b) · op(B_b) + beta * C_b, TRANS_A / TRANS_B
// storage layouts, batch strides (0 broadcasts); B f32 here (matmul/subgroup-vec4-f16w reads an f16 B
// through the same body, include/matmul-subgroup-vec4). What vec4 access needs (the host refuses
// any other shape, naming it, and the policy then picks matmul/subgroup): K, N and the three batch
// strides multiples of 4, and M a multiple of 4 when TRANS_A (A's rows are then its contiguous axis).
// Bindings (group 0): 0 uniform Params, 1 read A, 2 read B, 3 read_write C, all as array<vec4<f32>>.
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch) workgroups of WG_X invocations, which must
// form one subgroup with subgroup_invocation_id 0..WG_X-1 (as for matmul/subgroup). Lane l owns the
// rows row0 + 4l + c (c < 4) for its A loads and the columns col0 + 4l .. + 3 (one vec4 of C per
// row) for all THREAD_M rows. Per four k it loads four vec4s of A and four of B:
//   A not transposed: a[c] = A[row 4l + c, k .. k+3];  transposed: A[k + j, rows 4l .. 4l+3] for
//   j < 4, transposed in registers into the same a[c];
//   B not transposed: b[j] = B[k + j, columns];  transposed: B[column 4l + j, k .. k+3] for j < 4,
//   transposed in registers into the same b[j];
// then row 4l' + c takes a[c] from lane l' (an unrolled subgroupBroadcast: lane indices must be
// constants) and adds its four k in increasing order. The geometry is MATMUL_GEOMETRY['subgroup-vec4']
// in src/kernels/matmul.ts, appended as constants; the const_asserts hold it to this unrolled code.
// Edges: rows and column quads past the end are clamped for loading and not stored.
// Numerics: f32 fma per k in increasing k order, the order of matmul/naive and matmul/subgroup (the
// same bits on an adapter whose fma is the same). beta == 0 never reads C (C may hold NaN garbage).
enable subgroups;

#include "include/matmul-params.wgsl"

@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<f32>>;

fn loadB4(second: bool, q: u32) -> vec4<f32> { return B[q]; }

#include "include/matmul-subgroup-vec4-one.wgsl"
