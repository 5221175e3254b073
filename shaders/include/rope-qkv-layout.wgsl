// include/rope-qkv-layout — the work layout of rope/qkv-split and rope/qkv-join (their contract,
// bindings and dispatch are stated there), one source for both: the Params they read, which part of a
// stacked q | k | v row invocation idx handles, where that part lies in the stacked row and in the dense
// q, k or v, and its (cos, sin). Per row, U = (qHeads + kvHeads) · headDim/2 + kvHeads · headDim work
// items: the rotated pairs of the q heads, then of the k heads, then the elements of v. The including
// shader declares `p` (binding 0), `positions` (1) and `table` (2) with these names.

struct Params {
  rows: u32,
  qHeads: u32,
  kvHeads: u32,
  headDim: u32,
  tableRows: u32,
}

struct QkvItem {
  row: u32,
  // A rotated pair: head (q heads first, then k heads) and pair index i < headDim / 2; else element e of v.
  rotated: bool,
  head: u32,
  i: u32,
  e: u32,
  // Index of the item's first element in the stacked row layout, and in the dense q, k or v it belongs to.
  stacked: u32,
  dense: u32,
}

fn qkvHalf() -> u32 { return p.headDim / 2u; }

fn qkvKvWidth() -> u32 { return p.kvHeads * p.headDim; }

// The work items of one row; the host sizes the grid as rows times this.
fn qkvItemsPerRow() -> u32 { return (p.qHeads + p.kvHeads) * qkvHalf() + qkvKvWidth(); }

// Item idx < rows · qkvItemsPerRow().
fn qkvItem(idx: u32) -> QkvItem {
  let half = qkvHalf();
  let rotated = (p.qHeads + p.kvHeads) * half;
  let kvWidth = qkvKvWidth();
  let row = idx / qkvItemsPerRow();
  let j = idx % qkvItemsPerRow();
  let wide = row * (p.qHeads * p.headDim + 2u * kvWidth);
  var it: QkvItem;
  it.row = row;
  it.rotated = j < rotated;
  if (!it.rotated) {
    it.e = j - rotated;
    it.stacked = wide + (p.qHeads + p.kvHeads) * p.headDim + it.e;
    it.dense = row * kvWidth + it.e;
    return it;
  }
  it.head = j / half;
  it.i = j % half;
  it.stacked = wide + it.head * p.headDim + it.i;
  if (it.head < p.qHeads) {
    it.dense = row * p.qHeads * p.headDim + it.head * p.headDim + it.i;
  } else {
    it.dense = row * kvWidth + (it.head - p.qHeads) * p.headDim + it.i;
  }
  return it;
}

// (cos, sin) of a rotated item from the table at its row's position.
fn qkvCosSin(it: QkvItem) -> vec2<f32> {
  let half = qkvHalf();
  // Positions are checked on the host; the clamp only keeps a bad one inside the table.
  let pos = min(u32(max(positions[it.row], 0i)), p.tableRows - 1u);
  return vec2<f32>(table[(pos * half + it.i) * 2u], table[(pos * half + it.i) * 2u + 1u]);
}
