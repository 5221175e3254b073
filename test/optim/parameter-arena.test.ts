/**
 * Parameter arenas (src/optim/parameter-arena.ts): the packing plan, and an AdamWBackend whose
 * parameters share slabs stepping exactly as the float64 reference does per tensor, with the gaps
 * between views kept at zero and one dispatch per slab (a lone, row-split parameter per part).
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { Tensor } from '../../src/gpu/tensor.ts';
import { AdamWBackend, type OptimizerConfig } from '../../src/optim/adamw-backend.ts';
import { planArena } from '../../src/optim/parameter-arena.ts';
import { Rng } from '../../src/util/random.ts';
import { assertDeepEqual, assertEqual, assertRelClose, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { initialAdamwState, optimizerStepRef } from './optimizer-step-ref.ts';

const CONFIG: OptimizerConfig = {
  lr: 1e-2,
  beta1: 0.8,
  beta2: 0.95,
  eps: 1e-6,
  weightDecay: 0.01,
  maxGradNorm: 0.5,
  schedule: { kind: 'constant', totalSteps: 4, warmupRatio: 0 },
};

/** A Gpu that plans bindings of at most 4 KiB, so a small tensor is row-split as a large one is on a real adapter. */
class SmallBindingGpu extends Gpu {
  override get maxBindingBytes(): number {
    return 4096;
  }
}

export default defineSuite('optim/parameter-arena', (t) => {
  t.test('the plan packs in order at 256-byte offsets, opens a slab when one is full, and leaves a tensor over a binding alone', () => {
    const plan = planArena([400, 1000, 300, 5000, 200], 2048);
    assertDeepEqual(plan.slabBytes, [1840, 208], 'slab bytes, each rounded up to whole vec4s');
    assertDeepEqual(
      plan.placements,
      [
        { slab: 0, byteOffset: 0 },
        { slab: 0, byteOffset: 512 },
        { slab: 0, byteOffset: 1536 },
        { slab: -1, byteOffset: 0 },
        { slab: 1, byteOffset: 0 },
      ],
      'placements',
    );
  });

  t.test(
    'packed and row-split parameters step as the float64 reference; gaps stay zero; one dispatch per slab part',
    async ({ gpu: ctx, note }) => {
      const gpu = new SmallBindingGpu(ctx);
      const backend = new AdamWBackend(gpu, CONFIG);
      const rng = new Rng(17);
      // a, b and d share one slab (at bytes 0, 256 and 512); c (4,800 bytes) is over the 4 KiB binding: alone, in 2 row parts.
      const shapes: Record<string, number[]> = { a: [3, 5], b: [7], c: [40, 30], d: [257] };
      const numel = (s: number[]) => s.reduce((x, y) => x * y, 1);
      try {
        const init = Object.fromEntries(Object.entries(shapes).map(([name, s]) => [name, Float32Array.from(rng.floats(numel(s)))]));
        const params = backend.addParameters(Object.entries(shapes).map(([name, shape]) => ({ name, shape, init: init[name] })));
        assertDeepEqual(
          params.map((p) => p.value.parts.map((part) => part.byteOffset)),
          [[0], [256], [0, 0], [512]],
          'byte offsets of the views',
        );
        let ref = params.map((p) => initialAdamwState(init[p.name]));
        for (let step = 1; step <= 2; step++) {
          const grads = params.map((p) => Float32Array.from(rng.floats(p.value.numel, 0.4)));
          params.forEach((p, i) => gpu.write(p.grad, grads[i]));
          const before = gpu.batcher.stats.dispatches;
          const report = await backend.optimizerStep();
          // sum-of-squares: slab 1 + c's 2 parts; finalize 1; AdamW: slab 1 + c's 2 parts (11 per tensor).
          assertEqual(gpu.batcher.stats.dispatches - before, 7, `dispatches of step ${step}`);
          const want = optimizerStepRef(ref, grads, CONFIG, step - 1, step);
          assertRelClose([await report.gradNorm], [want.norm], 1e-5, `norm of step ${step}`);
          ref = want.states;
        }
        let worst = 0;
        for (const [i, p] of params.entries()) {
          worst = Math.max(worst, assertRelClose(await gpu.read(p.value), ref[i].param, 1e-5, `${p.name} after 2 steps`));
          assertRelClose(await gpu.read(p.m), ref[i].m, 1e-5, `${p.name}.m`);
          assertRelClose(await gpu.read(p.v), ref[i].v, 1e-5, `${p.name}.v`);
          assertEqual(
            (await gpu.read(p.grad)).some((x) => x !== 0),
            false,
            `${p.name}.grad zeroed`,
          );
        }
        note('worstRelErr', worst);
        // The slab from byte 0 to the end of d: everything outside a, b and d is still exactly zero.
        const inViews = (i: number) => i < 15 || (i >= 64 && i < 71) || (i >= 128 && i < 385);
        for (const role of ['value', 'm', 'v'] as const) {
          const part = params[0][role].parts[0];
          const slab = new Tensor([385], 'f32', [{ ...part, byteLength: 385 * 4, rowCount: 385 }], `slab ${role}`);
          const bytes = await gpu.read(slab);
          const stray = [...bytes.keys()].filter((i) => !inViews(i) && bytes[i] !== 0);
          assertDeepEqual(stray, [], `gaps of the ${role} slab`);
        }
      } finally {
        backend.destroy();
        gpu.destroy();
      }
    },
  );

  t.test('a repeated name and a wrong count of initial values are refused by name', async ({ gpu: ctx }) => {
    const gpu = new Gpu(ctx);
    const backend = new AdamWBackend(gpu, CONFIG);
    try {
      backend.addParameter('w', [2], [1, 2]);
      assertThrows(
        () => backend.addParameters([{ name: 'w', shape: [1], init: [0] }]),
        /^parameter w registered twice$/,
        'a name already held',
      );
      assertThrows(
        () =>
          backend.addParameters([
            { name: 'x', shape: [1], init: [0] },
            { name: 'x', shape: [1], init: [0] },
          ]),
        /^parameter x registered twice$/,
        'a name twice in one call',
      );
      assertThrows(
        () => backend.addParameters([{ name: 'y', shape: [2, 3], init: [0] }]),
        /^parameter y: 1 initial values for shape \[2, 3\]$/,
        'count',
      );
      assertEqual(backend.params.length, 1, 'nothing registered by a refused call');
    } finally {
      backend.destroy();
      gpu.destroy();
    }
  });
});
