// include/attention-kv-offset — kvOffset, the element offset of (TTT step j, batch b, row u, kv
// head g, dim 0) in the [J, B, S, nKV, hd] key / value caches Kc and Vc. Uses p and HEAD_DIM from
// include/attention-params. Included by attention/{forward,dq,dkv}.

fn kvOffset(j: u32, b: u32, u: u32, g: u32) -> u32 {
  return (((j * p.batch + b) * p.seq + u) * p.kvHeads + g) * HEAD_DIM;
}
