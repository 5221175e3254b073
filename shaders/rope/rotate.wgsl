// rope/rotate — rotary position embedding, Hugging Face LLaMA "rotate half" convention:
//   for pair i < headDim/2 of each head, with angle a = pos(row) · invFreq_i:
//     y[i]        = x[i] · cos a − x[i + half] · sin a
//     y[i + half] = x[i + half] · cos a + x[i] · sin a
//   invFreq_i = theta^(−2i / headDim), pos(row) = positions[row] + posOffset (EAGLE3 TTT step k
//   uses t + k). Override INVERSE rotates by −a: the backward (dx = Rᵀ dy), since R is orthogonal.
//
// Shapes: x f32 rows of nHeads · headDim at row stride strideX; y at strideY (padding untouched);
//   positions i32 [rows].
// Bindings (group 0):
//   0 uniform Params
//   1 storage read        positions
//   2 storage read        x
//   3 storage read_write  y
// Dispatch: ceil(rows · nHeads · headDim/2 / 256) workgroups of 256, folded into (x, y); one
//   invocation per rotated pair.
// Numerics: f32 like HF: invFreq = exp2(−(2i/headDim) · log2(theta)) with log2(theta) from the
//   host, the angle is the f32 product pos · invFreq, then reduced to [−π, π] with a two-part 2π
//   (Cody–Waite) before sin/cos, whose WGSL accuracy is only specified on that interval. The
//   angle's own f32 rounding (relative 6e-8) grows with the position, as it does in HF.

struct Params {
  rows: u32,
  nHeads: u32,
  headDim: u32,
  strideX: u32,
  strideY: u32,
  posOffset: i32,
  log2Theta: f32,
}

override INVERSE: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> positions: array<i32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// 2π = TWO_PI_HI + TWO_PI_LO, TWO_PI_HI with few mantissa bits so k · TWO_PI_HI is exact.
const TWO_PI_HI: f32 = 6.28125;
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let half = p.headDim / 2u;
  let idx = (wg.y * nwg.x + wg.x) * 256u + lid.x;
  if (idx >= p.rows * p.nHeads * half) { return; }
  let i = idx % half;
  let rowHead = idx / half;
  let head = rowHead % p.nHeads;
  let row = rowHead / p.nHeads;

  let invFreq = exp2(-(f32(2u * i) / f32(p.headDim)) * p.log2Theta);
  let angle = f32(positions[row] + p.posOffset) * invFreq;
  let k = round(angle * INV_TWO_PI);
  let reduced = (angle - k * TWO_PI_HI) - k * TWO_PI_LO;
  let c = cos(reduced);
  var s = sin(reduced);
  if (INVERSE) { s = -s; }

  let xa = row * p.strideX + head * p.headDim + i;
  let ya = row * p.strideY + head * p.headDim + i;
  let x1 = x[xa];
  let x2 = x[xa + half];
  y[ya] = x1 * c - x2 * s;
  y[ya + half] = x2 * c + x1 * s;
}
