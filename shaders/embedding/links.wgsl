// embedding/links — for each position n, the next position with the same id, and whether n is the
// first occurrence of its id. Pass 1 of the deterministic embedding backward (no float atomics).
//
// Shapes: ids i32 [N]; links i32 [2 * N]:
//   links[n]     = smallest n' > n with ids[n'] == ids[n], or -1 when there is none;
//   links[N + n] = 1 when no n' < n has ids[n'] == ids[n] (n heads its chain), else 0.
//   Ids outside [0, vocab) never head a chain (they are ignored by the backward).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        ids
//   2 storage read_write  links
// Dispatch: ceil(N / WG) workgroups of WG, folded into (x, y); one invocation per position.
//   Every workgroup streams all N ids through a WG-entry workgroup tile: O(N^2) integer
//   compares, no floats (N is the token count of one batch, a few thousand).
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended to this source as a
//   constant; the host sizes the grid with the same value.
// Numerics: integers only; exact and deterministic.

struct Params {
  n: u32,
  vocab: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> links: array<i32>;

var<workgroup> tile: array<i32, WG>;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let n = (wg.y * nwg.x + wg.x) * WG + lid.x;
  var mine: i32 = -1;
  if (n < p.n) { mine = ids[n]; }
  let valid = n < p.n && mine >= 0 && u32(mine) < p.vocab;
  var next: i32 = -1;
  var head = valid;
  // Every invocation of the workgroup takes part in the tile loads (barriers need uniform flow).
  let tiles = (p.n + WG - 1u) / WG;
  for (var t = 0u; t < tiles; t++) {
    let j0 = t * WG;
    if (j0 + lid.x < p.n) { tile[lid.x] = ids[j0 + lid.x]; } else { tile[lid.x] = -1; }
    workgroupBarrier();
    if (valid) {
      let count = min(WG, p.n - j0);
      for (var k = 0u; k < count; k++) {
        let j = j0 + k;
        if (tile[k] != mine) { continue; }
        if (j < n) { head = false; }
        if (j > n && next < 0) { next = i32(j); }
      }
    }
    workgroupBarrier();
  }
  if (n < p.n) {
    links[n] = next;
    links[p.n + n] = select(0, 1, head);
  }
}
