// copy/cast-f32-f16 — f32 → f16, round to nearest even, with an overflow count:
//   dst16[dstOffset + i] = f16(src[srcOffset + i])   for i < count
//   overflow[0] += #{ i : |src[srcOffset + i]| > 65504 or src[srcOffset + i] is not finite }
// Stores captured features compactly (SpecForge keeps bf16; WGSL has no bf16, so SpecLab's compact
// format is f16). The host reads the counter and refuses the features when it is not zero.
//
// Shapes: src f32 addressed flat (bound as u32 words: the conversion reads the IEEE bits, so no
//   float operation can flush, canonicalise or reorder anything); dst f16 as pairs packed in u32
//   words, element 2j in the low half of word j (the little-endian layout of an f16 buffer).
//   dstOffset is even (the host checks), so every invocation owns whole words; an odd count leaves
//   the high half of the last word 0 (the host pads f16 buffers to 4 bytes, so the word exists).
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        src       array<u32> (f32 bits)
//   2 storage read_write  dst       array<u32> (two f16 per word)
//   3 storage read_write  overflow  array<atomic<u32>>, element 0 counts (the host zeroes it first)
// Dispatch: ceil(ceil(count / 2) / WG) workgroups of WG, folded into (x, y); one invocation per
//   output word (two elements).
// WG is ELEMENTWISE_WG in src/kernels/elementwise-common.ts, appended as a constant.
// Numerics: exact IEEE round to nearest, ties to even, in integer arithmetic (not pack2x16float,
//   whose rounding mode and subnormal handling WGSL leaves to the implementation): f16 subnormals
//   are produced exactly, f32 subnormals become ±0, values rounding past 65504 become ±inf, NaN
//   stays NaN (quiet, payload not kept). Bit-identical to src/reference/cast.ts on every adapter.

struct Params {
  count: u32,
  srcOffset: u32,
  dstOffset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
@group(0) @binding(3) var<storage, read_write> overflow: array<atomic<u32>>;

// 65504, the largest finite f16, as f32 bits: any larger magnitude (inf and NaN included) overflows.
const F16_MAX_BITS: u32 = 0x477fe000u;

fn to_f16(x: u32) -> u32 {
  let sign = (x >> 16u) & 0x8000u;
  let exp = (x >> 23u) & 0xffu;
  let mant = x & 0x7fffffu;
  if (exp == 0xffu) { return sign | 0x7c00u | select(0u, 0x200u, mant != 0u); }
  let e = i32(exp) - 112; // rebias 127 → 15
  if (e >= 31) { return sign | 0x7c00u; }
  if (e <= 0) {
    // Subnormal f16 (or zero): shift the mantissa with its implicit bit into place.
    if (e < -10) { return sign; }
    let m = mant | 0x800000u;
    let shift = u32(14 - e);
    var half = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (half & 1u) == 1u)) { half += 1u; }
    return sign | half;
  }
  var half = (u32(e) << 10u) | (mant >> 13u);
  let rem = mant & 0x1fffu;
  // A carry out of the mantissa correctly bumps the exponent (up to inf).
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u) == 1u)) { half += 1u; }
  return sign | half;
}

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let j = (wg.y * nwg.x + wg.x) * WG + lid.x;
  let i = 2u * j;
  if (i >= p.count) { return; }
  let a = src[p.srcOffset + i];
  var word = to_f16(a);
  var over = select(0u, 1u, (a & 0x7fffffffu) > F16_MAX_BITS);
  if (i + 1u < p.count) {
    let b = src[p.srcOffset + i + 1u];
    word = word | (to_f16(b) << 16u);
    over += select(0u, 1u, (b & 0x7fffffffu) > F16_MAX_BITS);
  }
  dst[p.dstOffset / 2u + j] = word;
  if (over > 0u) { atomicAdd(&overflow[0], over); }
}
