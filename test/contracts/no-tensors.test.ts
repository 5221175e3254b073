/** docs/contracts.md §10, §12: the no-tensor guard and its breadcrumb paths. */
import { defineSuite } from '../harness/suite.ts';
import { assertEqual, assertThrows } from '../harness/assert.ts';
import { assertNoTensors } from '../../src/contracts/no-tensors.ts';
import { makeSampleRef } from '../../src/contracts/records.ts';
import { Tensor } from '../../src/gpu/tensor.ts';
import { promptTask, sampleRef } from './fixtures.ts';

/** Shaped like a torch tensor seen through a bridge: dtype + shape + device. */
const frameworkTensor = { dtype: 'bfloat16', shape: [2, 3], device: 'cuda:0' };
const gpuBufferLike = { size: 16, usage: 128, mapAsync: async () => {}, getMappedRange: () => new ArrayBuffer(0) };

export default defineSuite('contracts/no-tensors', (t) => {
  t.test('metadata records pass', () => {
    assertNoTensors(sampleRef('t0'), 'ref');
    assertNoTensors(promptTask('t0'), 'task');
    assertNoTensors({ ids: Array.from({ length: 10_000 }, (_, i) => i), m: new Map([['k', [1, 2]]]), s: new Set(['a']) });
  });

  t.test('a tensor in metadata is reported with its path', () => {
    const ref = { ...sampleRef('t1'), metadata: { smuggled: new Float32Array(4) } };
    assertThrows(() => assertNoTensors(ref), /<root>\.metadata\.smuggled is a tensor-like value \(Float32Array/, 'typed array in metadata');
    assertThrows(() => makeSampleRef(ref as never), /SampleRef\.metadata\.smuggled/, 'makeSampleRef runs the guard first');
  });

  t.test('a tensor in a payload list, Map or Set is reported with its path', () => {
    const items: unknown[] = [1, 'a', null, frameworkTensor];
    assertThrows(
      () => assertNoTensors({ payload: { items } }, 'task'),
      /task\.payload\.items\[3\] is a tensor-like value \(Object \(tensor-like: dtype, shape, device\)/,
      'array element',
    );
    assertThrows(
      () => assertNoTensors({ m: new Map([['w', { b: new ArrayBuffer(8) }]]) }),
      /<root>\.m\.get\("w"\)\.b is a tensor-like value \(ArrayBuffer/,
      'Map value',
    );
    assertThrows(
      () => assertNoTensors({ s: new Set([gpuBufferLike]) }),
      /<root>\.s\.<element 0> is a tensor-like value \(.*GPUBuffer-like/,
      'Set element',
    );
    assertThrows(
      () => assertNoTensors({ 'odd key': new DataView(new ArrayBuffer(4)) }),
      /<root>\["odd key"\] is a tensor-like value \(DataView/,
      'quoted key',
    );
    if (typeof SharedArrayBuffer !== 'undefined') {
      assertThrows(
        () => assertNoTensors([new SharedArrayBuffer(4)]),
        /<root>\[0\] is a tensor-like value \(SharedArrayBuffer/,
        'SharedArrayBuffer',
      );
    }
  });

  t.test('a SpecLab Tensor and a real GPUBuffer are rejected', ({ gpu }) => {
    const buffer = gpu.device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE });
    try {
      const tensor = new Tensor([2, 2], 'f32', [{ buffer, byteOffset: 0, byteLength: 16, rowStart: 0, rowCount: 2 }], 'x');
      assertThrows(() => assertNoTensors({ t: tensor }), /<root>\.t is a tensor-like value \(Tensor \(SpecLab Tensor/, 'SpecLab Tensor');
      assertThrows(() => assertNoTensors({ b: [buffer] }), /<root>\.b\[0\] is a tensor-like value \(GPUBuffer/, 'GPUBuffer');
    } finally {
      buffer.destroy();
    }
  });

  t.test('cycles terminate and shared objects are fine', () => {
    const a: Record<string, unknown> = { name: 'a' };
    const b: Record<string, unknown> = { a };
    a.b = b;
    a.self = a;
    assertNoTensors({ a, again: a });
    b.bad = new Uint8Array(1);
    const err = assertThrows(
      () => assertNoTensors({ a }),
      /<root>\.a\.b\.bad is a tensor-like value \(Uint8Array/,
      'tensor behind a cycle',
    );
    assertEqual(err.name, 'TypeError', 'error type');
  });
});
