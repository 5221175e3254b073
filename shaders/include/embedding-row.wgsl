// include/embedding-row — which table row an output row reads, and one element of the table, shared
// by embedding/gather and the rmsnorm/gather-* kernels so that both read the same row with the same bits.
//   shiftedId(n): ids read as rows of seqLen, each shifted left by shift and zero-filled (SpecForge's
//     `padding(x, left=False)`): ids[n + shift] where n % seqLen + shift < seqLen, else 0.
//   tableElement(e): element e of the table, bound as 32-bit words: f32 bits cast back (exact), or
//     with TABLE_F16 != 0 the f16 in word e / 2 (low half first) widened by unpack2x16float (exact).
// The including shader declares Params `p` (with seqLen and shift), ids (array<i32>), table
// (array<u32>) and TABLE_F16 (a u32 constant, or a pipeline override).

fn shiftedId(n: u32) -> i32 {
  let t = n % p.seqLen + p.shift;
  if (t < p.seqLen) { return ids[n + p.shift]; }
  return 0i;
}

fn tableElement(e: u32) -> f32 {
  if (TABLE_F16 != 0u) { return unpack2x16float(table[e >> 1u])[e & 1u]; }
  return bitcast<f32>(table[e]);
}
