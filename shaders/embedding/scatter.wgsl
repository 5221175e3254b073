// embedding/scatter — dTable[v, :] += sum over positions n with ids[n] == v of dOut[n, :].
// Pass 2 of the deterministic embedding backward (pass 1 is embedding/links).
//
// Shapes: ids i32 [N]; links i32 [2 * N] from embedding/links; dOut f32 [N, H];
//   dTable f32 [V, H], possibly split into row parts (one dispatch per part).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        ids
//   2 storage read        links
//   3 storage read        dOut
//   4 storage read_write  dTable part: rows [rowStart, rowStart + rowCount)
// Dispatch: ceil(N * H / WG) workgroups of WG, folded into (x, y); one invocation per (n, h).
//   Only invocations whose n heads its id's chain (first occurrence) do work: each walks the chain
//   in increasing n and adds the sum to dTable once. No two invocations touch the same element,
//   so no atomics are needed and the result does not depend on scheduling.
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: f32 sum in increasing position order, then one add into dTable (callers clear dTable
//   first unless they accumulate).

struct Params {
  n: u32,
  hidden: u32,
  rowStart: u32,
  rowCount: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> links: array<i32>;
@group(0) @binding(3) var<storage, read> dOut: array<f32>;
@group(0) @binding(4) var<storage, read_write> dTable: array<f32>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let idx = (wg.y * nwg.x + wg.x) * WG + lid.x;
  if (idx >= p.n * p.hidden) { return; }
  let n = idx / p.hidden;
  let h = idx % p.hidden;
  if (links[p.n + n] == 0) { return; }
  let row = u32(ids[n]);
  if (row < p.rowStart || row >= p.rowStart + p.rowCount) { return; }
  var sum = 0.0;
  var j = i32(n);
  loop {
    sum += dOut[u32(j) * p.hidden + h];
    j = links[u32(j)];
    if (j < 0) { break; }
  }
  let at = (row - p.rowStart) * p.hidden + h;
  dTable[at] = dTable[at] + sum;
}
