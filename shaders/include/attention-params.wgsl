// include/attention-params — the Params block of the causal / TTT attention kernels (one uniform
// layout, written by src/kernels/attention.ts for the forward and for prep, dq and dkv) and the
// HEAD_DIM override (one pipeline per head size). Included by attention/prep and, through
// include/attention-flash, by attention/{forward,dq,dkv}. attention/decode has its own Params.

struct Params {
  batch: u32,
  seq: u32,
  heads: u32,
  kvHeads: u32,
  step: u32,
  accumulate: u32,
  scale: f32,
  pad0: u32,
}

override HEAD_DIM: u32 = 64u;
