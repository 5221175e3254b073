/**
 * Pacing of Dawn's event pump (src/platform/dawn-wait-pacing.ts):
 *   - the pacer spins a wait's first ticks and sleeps between the later ones only in `paced` mode,
 *     and a new wait spins again;
 *   - the installed setImmediate hands Dawn's ticks (anonymous native functions) to the pacer and
 *     everything else, arguments included, to the original, whose own properties it keeps;
 *   - SPECLAB_GPU_WAIT is parsed strictly, and `auto` paces only when every adapter is a CPU one;
 *   - in Node, the real Dawn binding's ticks go through the platform's pacer, in the mode its
 *     adapter calls for, and a long GPU job is awaited with a bounded number of ticks when paced.
 */
import { Gpu } from '../../src/gpu/gpu.ts';
import { matmul } from '../../src/kernels/matmul.ts';
import { autoWaitPacingMode, installWaitPacing, isDawnTick, MAX_SLEEP_MS, MIN_SLEEP_MS, parseWaitPacingSetting, SPIN_TICKS, WaitPacer, type WaitPacingMode, type WaitPacingStats } from '../../src/platform/dawn-wait-pacing.ts';
import { Rng } from '../../src/util/random.ts';
import { nodeOnlyImport } from '../dataplane/backends.test.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

type NodePlatform = typeof import('../../src/platform/node.ts');

/** Schedulers that record which way each tick went (and each sleep) and run it only when asked. */
function recordingSchedulers() {
  const queue: { via: 'immediate' | 'sleepy'; run: () => void }[] = [];
  const sleeps: number[] = [];
  return {
    queue,
    sleeps,
    schedulers: {
      immediate: (run: () => void) => queue.push({ via: 'immediate', run }),
      sleepy: (run: () => void, ms: number) => {
        sleeps.push(ms);
        return queue.push({ via: 'sleepy', run });
      },
    },
    /** Run queued ticks in order until none is left; returns the ways they were scheduled. */
    drain(): ('immediate' | 'sleepy')[] {
      const ways: ('immediate' | 'sleepy')[] = [];
      while (queue.length > 0) {
        const next = queue.shift()!;
        ways.push(next.via);
        next.run();
      }
      return ways;
    },
  };
}

/**
 * A stand-in for Dawn's tick in the runtimes where no Dawn binding exists: a proxy of an anonymous
 * function prints as native code and keeps the empty name. It polls `pending` times, then stops,
 * like a wait that settles after that many ProcessEvents calls.
 */
function fakeDawnTick(pacer: WaitPacer, pending: number): () => void {
  let left = pending;
  const tick: () => void = new Proxy(function () {}, {
    apply() {
      left--;
      if (left > 0) pacer.schedule(tick);
    },
  });
  return tick;
}

export default defineSuite('platform/dawn-wait-pacing', (t) => {
  t.test('spin mode schedules every tick of a wait with setImmediate', () => {
    const rec = recordingSchedulers();
    const pacer = new WaitPacer(rec.schedulers, { spinTicks: 4 });
    pacer.schedule(fakeDawnTick(pacer, 10));
    assertDeepEqual(rec.drain(), new Array(10).fill('immediate'), 'ways');
    assertDeepEqual(pacer.stats, { waits: 1, ticks: 10, pacedTicks: 0 }, 'stats');
  });

  t.test('paced mode spins a wait for its first spinTicks continuations, then sleeps longer and longer; a new wait spins again', () => {
    const rec = recordingSchedulers();
    const pacer = new WaitPacer(rec.schedulers, { spinTicks: 4, minSleepMs: 0.25, maxSleepMs: 1 });
    pacer.mode = 'paced';
    pacer.schedule(fakeDawnTick(pacer, 9));
    // The first tick and 4 continuations spin; the rest of the wait sleeps between polls.
    assertDeepEqual(rec.drain(), ['immediate', 'immediate', 'immediate', 'immediate', 'immediate', 'sleepy', 'sleepy', 'sleepy', 'sleepy'], 'first wait');
    assertDeepEqual(rec.sleeps, [0.25, 0.5, 1, 1], 'sleeps double up to maxSleepMs');
    pacer.schedule(fakeDawnTick(pacer, 2));
    assertDeepEqual(rec.drain(), ['immediate', 'immediate'], 'a new wait starts spinning again');
    assertDeepEqual(pacer.stats, { waits: 2, ticks: 11, pacedTicks: 4 }, 'stats');
    pacer.schedule(fakeDawnTick(pacer, 7));
    rec.drain();
    assertDeepEqual(rec.sleeps.slice(4), [0.25, 0.5], 'and sleeps from minSleepMs again');
  });

  t.test('paced mode with spinTicks 0 sleeps from the first continuation; bad options are refused', () => {
    const rec = recordingSchedulers();
    const pacer = new WaitPacer(rec.schedulers, { spinTicks: 0 });
    pacer.mode = 'paced';
    pacer.schedule(fakeDawnTick(pacer, 3));
    assertDeepEqual(rec.drain(), ['immediate', 'sleepy', 'sleepy'], 'ways');
    assertDeepEqual(rec.sleeps, [MIN_SLEEP_MS, 2 * MIN_SLEEP_MS], 'the default sleeps');
    assertThrows(() => new WaitPacer(rec.schedulers, { spinTicks: -1 }), /spinTicks must be a non-negative integer, got -1/, 'negative');
    assertThrows(() => new WaitPacer(rec.schedulers, { spinTicks: 1.5 }), /spinTicks must be a non-negative integer, got 1.5/, 'fractional');
    assertThrows(() => new WaitPacer(rec.schedulers, { minSleepMs: 0 }), /need 0 < minSleepMs <= maxSleepMs, got 0 and 0.25/, 'zero sleep');
    assertThrows(() => new WaitPacer(rec.schedulers, { minSleepMs: 2, maxSleepMs: 1 }), /got 2 and 1/, 'min above max');
    assertThrows(() => new WaitPacer(rec.schedulers, { maxSleepMs: Infinity }), /got 0.05 and Infinity/, 'unbounded');
  });

  t.test('the sleeps of a long wait stay at maxSleepMs', () => {
    const pacer = new WaitPacer({ immediate: () => undefined, sleepy: () => undefined });
    assertDeepEqual([1, 2, 3, 4, 5].map((n) => pacer.sleepMs(n)), [MIN_SLEEP_MS, 2 * MIN_SLEEP_MS, 4 * MIN_SLEEP_MS, MAX_SLEEP_MS, MAX_SLEEP_MS], 'first five');
    assertEqual(MAX_SLEEP_MS < 8 * MIN_SLEEP_MS && MAX_SLEEP_MS > 4 * MIN_SLEEP_MS, true, 'the defaults this test was written for');
    assertEqual(pacer.sleepMs(1e6), MAX_SLEEP_MS, 'the millionth');
  });

  t.test('a tick that throws still ends its turn: the next schedule starts a new wait', () => {
    const rec = recordingSchedulers();
    const pacer = new WaitPacer(rec.schedulers, { spinTicks: 0 });
    pacer.mode = 'paced';
    pacer.schedule(() => {
      throw new Error('boom');
    });
    assertThrows(() => rec.drain(), /boom/, 'the tick throws');
    pacer.schedule(() => undefined);
    assertDeepEqual(rec.drain(), ['immediate'], 'not taken for a continuation');
  });

  t.test('isDawnTick: only anonymous native functions', () => {
    assert(isDawnTick(new Proxy(function () {}, {})), 'an anonymous native function');
    assert(!isDawnTick(() => undefined), 'an arrow function');
    assert(!isDawnTick(function named() {}), 'a named function');
    assert(!isDawnTick((() => undefined).bind(null)), 'a bound function (native, but named "bound …")');
    assert(!isDawnTick(Math.max), 'a named built-in');
    assert(!isDawnTick('function () { [native code] }'), 'a string');
  });

  t.test('installWaitPacing: Dawn ticks go to the pacer, other callers to the original with their arguments', () => {
    const calls: unknown[][] = [];
    const custom = Symbol('custom');
    const original = Object.assign((callback: (...args: never[]) => void, ...args: unknown[]) => calls.push([callback, ...args]), { [custom]: 'kept' });
    const target = { setImmediate: original as (callback: (...args: never[]) => void, ...args: unknown[]) => unknown };
    const rec = recordingSchedulers();
    const pacer = new WaitPacer(rec.schedulers, { spinTicks: 0 });
    installWaitPacing(target, pacer);
    const plain = () => undefined;
    target.setImmediate(plain, 1, 'two');
    const tick = new Proxy(function () {}, {});
    target.setImmediate(tick);
    assertEqual(calls.length, 1, 'calls reaching the original');
    assertDeepEqual(calls[0], [plain, 1, 'two'], 'the original gets the callback and its arguments');
    assertEqual(rec.queue.length, 1, 'ticks reaching the pacer');
    assertEqual((target.setImmediate as unknown as Record<symbol, unknown>)[custom], 'kept', "the original's own properties");
    assertThrows(() => installWaitPacing(target, pacer), /already paced/, 'a second install');
  });

  t.test('SPECLAB_GPU_WAIT is parsed strictly; auto paces only when every live adapter is a CPU one', () => {
    assertEqual(parseWaitPacingSetting(undefined), 'auto', 'unset');
    assertEqual(parseWaitPacingSetting(''), 'auto', 'empty');
    for (const s of ['auto', 'spin', 'paced'] as const) assertEqual(parseWaitPacingSetting(s), s, s);
    assertThrows(() => parseWaitPacingSetting('sleepy'), /SPECLAB_GPU_WAIT must be one of auto, spin, paced, got "sleepy"/, 'unknown');
    const cpu = { isFallbackAdapter: true };
    const gpu = { isFallbackAdapter: false };
    assertEqual(autoWaitPacingMode([]), 'spin', 'no context');
    assertEqual(autoWaitPacingMode([cpu]), 'paced', 'a CPU adapter');
    assertEqual(autoWaitPacingMode([cpu, cpu]), 'paced', 'two CPU adapters');
    assertEqual(autoWaitPacingMode([gpu]), 'spin', 'a hardware GPU');
    assertEqual(autoWaitPacingMode([cpu, gpu]), 'spin', 'a hardware GPU beside a CPU adapter');
  });

  t.test(
    "Node: Dawn's own ticks go through the platform's pacer, in the mode the adapter calls for",
    async ({ gpu: ctx, platform, note }) => {
      const { nodeGpuWaitPacing } = await nodeOnlyImport<NodePlatform>('../../src/platform/node.ts');
      const setting = parseWaitPacingSetting(platform.env('SPECLAB_GPU_WAIT'));
      const expected: WaitPacingMode = setting === 'auto' ? autoWaitPacingMode([ctx.record]) : setting;
      assertEqual(nodeGpuWaitPacing().mode, expected, `mode on ${ctx.record.description || ctx.record.vendor} (fallback: ${ctx.record.isFallbackAdapter})`);

      // A GPU job of about 2.7 GFLOP: hundreds of milliseconds on a CPU adapter, so its wait is long.
      const gpu = new Gpu(ctx);
      const n = 512;
      const rng = new Rng(5);
      const a = gpu.upload([n * n], 'f32', rng.floats(n * n), 'pacing.A');
      const b = gpu.upload([n * n], 'f32', rng.floats(n * n), 'pacing.B');
      const c = gpu.tensor([n * n], 'f32', 'pacing.C');
      try {
        await matmul(gpu, a, b, c, { M: n, N: n, K: n });
        await gpu.sync(); // compiled and warm
        const before: WaitPacingStats = nodeGpuWaitPacing().stats;
        const start = performance.now();
        for (let i = 0; i < 10; i++) await matmul(gpu, a, b, c, { M: n, N: n, K: n });
        await gpu.sync();
        const ms = performance.now() - start;
        const after = nodeGpuWaitPacing().stats;
        const ticks = after.ticks - before.ticks;
        const waits = after.waits - before.waits;
        const paced = after.pacedTicks - before.pacedTicks;
        note('waitMs', +ms.toFixed(1));
        note('waits', waits);
        note('ticks', ticks);
        note('pacedTicks', paced);
        assert(ticks > 0, "the wait ran Dawn's ticks through the pacer");
        if (expected === 'spin') {
          assertEqual(paced, 0, 'spin mode never sleeps');
        } else {
          // Spinning ticks take microseconds each; paced ones sleep MIN_SLEEP_MS, twice that, … up
          // to MAX_SLEEP_MS. So each wait runs SPIN_TICKS + 1 spinning ticks, a handful of short
          // sleeps, then about one tick per MAX_SLEEP_MS (a spinning wait here runs tens of
          // thousands). The bound allows twice the ticks of the long sleeps.
          assert(waits >= 1, 'at least one wait');
          assert(ticks <= waits * (SPIN_TICKS + 1 + 10) + (2 * ms) / MAX_SLEEP_MS + 20, `${waits} paced wait(s) of ${ms.toFixed(0)} ms in all ran ${ticks} ticks`);
          if (ms > 50) assert(paced > 0, `a ${ms.toFixed(0)} ms wait slept between polls`);
        }
      } finally {
        gpu.release(a, b, c);
      }
    },
    { only: ['node'] },
  );
});
