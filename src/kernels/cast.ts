/**
 * Casts between f32 and f16 tensors (shaders/copy/cast-f32-f16.wgsl, cast-f16-f32.wgsl), without
 * the `shader-f16` feature: f16 values travel as pairs packed in u32 words.
 *
 *   castF32ToF16: dst = f16(src), round to nearest even, and overflow[0] += the number of values
 *                 with |x| > 65504 or not finite (the caller zeroes the counter and refuses on > 0).
 *   castF16ToF32: dst = f32(src), exact.
 *
 * Both take row-split tensors: an f16 tensor of a shape has half the bytes of the f32 one, so the
 * two may be split at different rows; one dispatch runs per overlap of a src part and a dst part.
 * An overlap must start at an even f16 element (pairs never straddle a word): always true for a
 * single-part tensor and for rows of an even width; a split tensor with odd rows is refused.
 * An odd element count is handled (the last word's high half is written 0 / not read).
 */
import type { Gpu } from '../gpu/gpu.ts';
import type { KernelDef } from '../gpu/kernel-def.ts';
import { fmtShape, type Tensor, type TensorPart } from '../gpu/tensor.ts';
import { UniformWriter } from '../gpu/uniform-arena.ts';
import { checkNoAlias, ELEMENTWISE_CONSTANTS, elementGrid } from './elementwise-common.ts';
import { shaderSource } from './shader-source.ts';

export const CAST_KERNELS = {
  f32ToF16: {
    name: 'copy/cast-f32-f16',
    source: shaderSource('copy/cast-f32-f16', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'write', 'write'],
  },
  f16ToF32: {
    name: 'copy/cast-f16-f32',
    source: shaderSource('copy/cast-f16-f32', ELEMENTWISE_CONSTANTS),
    bindings: ['uniform', 'read', 'write'],
  },
} as const satisfies Record<string, KernelDef>;

interface Segment {
  src: TensorPart;
  dst: TensorPart;
  count: number;
  srcOffset: number;
  dstOffset: number;
}

/**
 * The overlaps of src's and dst's parts, with element offsets inside each part. A part is a range
 * of elements (rowStart · rowElements on), so the two may be split at different rows, or over
 * different leading dimensions (an f16 [B, S, V] by B, its f32 widening by B·S).
 */
function segments(op: string, src: Tensor, dst: Tensor, half: 'src' | 'dst'): Segment[] {
  const out: Segment[] = [];
  for (const s of src.parts) {
    const sStart = s.rowStart * src.rowElements;
    const sEnd = sStart + s.rowCount * src.rowElements;
    for (const d of dst.parts) {
      const dStart = d.rowStart * dst.rowElements;
      const a = Math.max(sStart, dStart);
      const b = Math.min(sEnd, dStart + d.rowCount * dst.rowElements);
      if (b <= a) continue;
      const seg = { src: s, dst: d, count: b - a, srcOffset: a - sStart, dstOffset: a - dStart };
      const offset = half === 'src' ? seg.srcOffset : seg.dstOffset;
      if (offset % 2 !== 0) {
        const t = half === 'src' ? src : dst;
        throw new Error(
          `${op}: f16 tensor ${t.label} ${fmtShape(t.shape)} is split into parts at an odd element (rows of ${t.rowElements}); row-split f16 tensors need an even row width`,
        );
      }
      out.push(seg);
    }
  }
  return out;
}

function checkPair(op: string, src: Tensor, dst: Tensor, from: 'f32' | 'f16', to: 'f32' | 'f16'): void {
  if (src.dtype !== from) throw new Error(`${op}: src (${src.label} ${fmtShape(src.shape)}) must be ${from}, got ${src.dtype}`);
  if (dst.dtype !== to) throw new Error(`${op}: dst (${dst.label} ${fmtShape(dst.shape)}) must be ${to}, got ${dst.dtype}`);
  if (src.shape.join() !== dst.shape.join())
    throw new Error(
      `${op}: dst (${dst.label}) is ${fmtShape(dst.shape)}, src (${src.label}) is ${fmtShape(src.shape)}; the shapes must be equal`,
    );
  checkNoAlias(op, dst, [['src', src]], 'dst');
}

const bind = (p: TensorPart): GPUBufferBinding => ({ buffer: p.buffer, offset: p.byteOffset, size: p.byteLength });

/** Encode dst = f16(src) and add src's overflowing values (|x| > 65504, ±inf, NaN) into overflow[0] (u32). */
export async function castF32ToF16(gpu: Gpu, src: Tensor, dst: Tensor, overflow: Tensor): Promise<void> {
  const op = 'castF32ToF16';
  checkPair(op, src, dst, 'f32', 'f16');
  if (overflow.dtype !== 'u32' || overflow.numel < 1 || overflow.isChunked)
    throw new Error(
      `${op}: overflow (${overflow.label} ${fmtShape(overflow.shape)}) must be a single-part u32 tensor of at least 1 element, got ${overflow.dtype}`,
    );
  checkNoAlias(
    op,
    overflow,
    [
      ['src', src],
      ['dst', dst],
    ],
    'overflow',
  );
  if (src.numel === 0) return;
  const segs = segments(op, src, dst, 'dst');
  const kernel = await gpu.pipelines.get(CAST_KERNELS.f32ToF16);
  for (const s of segs) {
    const uniforms = new UniformWriter().u32(s.count).u32(s.srcOffset).u32(s.dstOffset).finish();
    gpu.batcher.dispatch(kernel, uniforms, [bind(s.src), bind(s.dst), overflow.binding()], elementGrid(gpu, Math.ceil(s.count / 2)));
  }
}

/** Encode dst = f32(src), exact. */
export async function castF16ToF32(gpu: Gpu, src: Tensor, dst: Tensor): Promise<void> {
  const op = 'castF16ToF32';
  checkPair(op, src, dst, 'f16', 'f32');
  if (src.numel === 0) return;
  const segs = segments(op, src, dst, 'src');
  const kernel = await gpu.pipelines.get(CAST_KERNELS.f16ToF32);
  for (const s of segs) {
    const uniforms = new UniformWriter().u32(s.count).u32(s.srcOffset).u32(s.dstOffset).finish();
    gpu.batcher.dispatch(kernel, uniforms, [bind(s.src), bind(s.dst)], elementGrid(gpu, Math.ceil(s.count / 2)));
  }
}

/** A new f16 tensor holding f16(src); overflowing values are counted into `overflow[0]`. */
export async function toF16(gpu: Gpu, src: Tensor, overflow: Tensor, label = src.label): Promise<Tensor> {
  const out = gpu.tensor(src.shape, 'f16', label);
  try {
    await castF32ToF16(gpu, src, out, overflow);
  } catch (err) {
    gpu.release(out);
    throw err;
  }
  return out;
}

/** A new f32 tensor holding f32(src). */
export async function toF32(gpu: Gpu, src: Tensor, label = src.label): Promise<Tensor> {
  const out = gpu.tensor(src.shape, 'f32', label);
  try {
    await castF16ToF32(gpu, src, out);
  } catch (err) {
    gpu.release(out);
    throw err;
  }
  return out;
}
