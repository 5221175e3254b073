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
import {
  autoWaitPacingMode,
  installWaitPacing,
  isDawnTick,
  isWaitPacingInstalled,
  MAX_SLEEP_MS,
  MIN_SLEEP_MS,
  parseWaitPacingSetting,
  SLEEP_FRACTION,
  SPIN_TICKS,
  WaitPacer,
  type WaitPacingMode,
  type WaitPacingStats,
} from '../../src/platform/dawn-wait-pacing.ts';
import { Rng } from '../../src/util/random.ts';
import { nodeOnlyImport } from '../dataplane/backends.test.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

type NodePlatform = typeof import('../../src/platform/node.ts');

/**
 * Schedulers that record which way each tick went (and each sleep) and run it only when asked, with
 * a clock (`now`, for the pacer) that advances 1 ms before each tick runs.
 */
function recordingSchedulers() {
  const queue: { via: 'immediate' | 'sleepy'; run: () => void }[] = [];
  const sleeps: number[] = [];
  const clock = { ms: 0 };
  return {
    queue,
    sleeps,
    now: () => clock.ms,
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
        clock.ms += 1;
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

  t.test(
    'paced mode spins a wait for its first spinTicks continuations, then sleeps a fraction of the wait so far; a new wait spins again',
    () => {
      const rec = recordingSchedulers();
      const pacer = new WaitPacer(rec.schedulers, {
        spinTicks: 4,
        sleepFraction: 0.125,
        minSleepMs: 0.25,
        maxSleepMs: 0.875,
        now: rec.now,
      });
      pacer.mode = 'paced';
      pacer.schedule(fakeDawnTick(pacer, 9));
      // The first tick and 4 continuations spin; the rest of the wait sleeps between polls.
      assertDeepEqual(
        rec.drain(),
        ['immediate', 'immediate', 'immediate', 'immediate', 'immediate', 'sleepy', 'sleepy', 'sleepy', 'sleepy'],
        'first wait',
      );
      // Continuations 5..8 are scheduled 5..8 ms into the wait: an eighth of that, capped at 0.875.
      assertDeepEqual(rec.sleeps, [0.625, 0.75, 0.875, 0.875], 'sleeps grow with the wait up to maxSleepMs');
      pacer.schedule(fakeDawnTick(pacer, 2));
      assertDeepEqual(rec.drain(), ['immediate', 'immediate'], 'a new wait starts spinning again');
      assertDeepEqual(pacer.stats, { waits: 2, ticks: 11, pacedTicks: 4 }, 'stats');
      pacer.schedule(fakeDawnTick(pacer, 7));
      rec.drain();
      assertDeepEqual(rec.sleeps.slice(4), [0.625, 0.75], 'and measures from its own start');
    },
  );

  t.test('paced mode with spinTicks 0 sleeps from the first continuation; bad options are refused', () => {
    const rec = recordingSchedulers();
    const pacer = new WaitPacer(rec.schedulers, { spinTicks: 0, now: rec.now });
    pacer.mode = 'paced';
    pacer.schedule(fakeDawnTick(pacer, 3));
    assertDeepEqual(rec.drain(), ['immediate', 'sleepy', 'sleepy'], 'ways');
    assertDeepEqual(rec.sleeps, [pacer.sleepMs(1), pacer.sleepMs(2)], 'the default sleeps, 1 and 2 ms into the wait');
    assertThrows(() => new WaitPacer(rec.schedulers, { spinTicks: -1 }), /spinTicks must be a non-negative integer, got -1/, 'negative');
    assertThrows(
      () => new WaitPacer(rec.schedulers, { spinTicks: 1.5 }),
      /spinTicks must be a non-negative integer, got 1.5/,
      'fractional',
    );
    assertThrows(
      () => new WaitPacer(rec.schedulers, { minSleepMs: 0 }),
      new RegExp(`need 0 < minSleepMs <= maxSleepMs, got 0 and ${MAX_SLEEP_MS}`),
      'zero sleep',
    );
    assertThrows(() => new WaitPacer(rec.schedulers, { sleepFraction: 0 }), /sleepFraction must be in \(0, 1\], got 0/, 'zero fraction');
    assertThrows(() => new WaitPacer(rec.schedulers, { sleepFraction: 2 }), /sleepFraction must be in \(0, 1\], got 2/, 'fraction above 1');
    assertThrows(() => new WaitPacer(rec.schedulers, { minSleepMs: 2, maxSleepMs: 1 }), /got 2 and 1/, 'min above max');
    assertThrows(
      () => new WaitPacer(rec.schedulers, { maxSleepMs: Infinity }),
      new RegExp(`got ${MIN_SLEEP_MS} and Infinity`),
      'unbounded',
    );
  });

  t.test('a sleep is SLEEP_FRACTION of the wait so far, within MIN_SLEEP_MS and MAX_SLEEP_MS', () => {
    const pacer = new WaitPacer({ immediate: () => undefined, sleepy: () => undefined });
    assertEqual(pacer.sleepMs(0), MIN_SLEEP_MS, 'at the start');
    const mid = (MIN_SLEEP_MS + MAX_SLEEP_MS) / 2;
    assertEqual(pacer.sleepMs(mid / SLEEP_FRACTION), mid, 'in between');
    assertEqual(pacer.sleepMs(1e9), MAX_SLEEP_MS, 'a very long wait');
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
    let resolve: unknown;
    void new Promise((r) => (resolve = r));
    assert(!isDawnTick(resolve), "a promise's resolve function (anonymous and native, but of one parameter)");
    assert(!isDawnTick(new Proxy(function (_x: unknown) {}, {})), 'an anonymous native function of one parameter');
    assert(!isDawnTick(Math.max), 'a named built-in');
    assert(!isDawnTick('function () { [native code] }'), 'a string');
  });

  t.test('installWaitPacing: Dawn ticks go to the pacer, other callers to the original with their arguments', () => {
    const calls: unknown[][] = [];
    const custom = Symbol('custom');
    const original = Object.assign(
      (callback: (...args: never[]) => void, ...args: unknown[]) => ({ handle: calls.push([callback, ...args]) }),
      { [custom]: 'kept' },
    );
    const target = { setImmediate: original as (callback: (...args: never[]) => void, ...args: unknown[]) => unknown };
    const rec = recordingSchedulers();
    const pacer = new WaitPacer(rec.schedulers, { spinTicks: 0 });
    installWaitPacing(target, pacer);
    assert(!isWaitPacingInstalled({ setImmediate: original }), 'not installed before');
    const plain = () => undefined;
    assertDeepEqual(target.setImmediate(plain, 1, 'two'), { handle: 1 }, "the original's return value (its handle) comes back");
    const tick = new Proxy(function () {}, {});
    target.setImmediate(tick);
    target.setImmediate(tick, 'an argument');
    assertEqual(calls.length, 2, 'calls reaching the original');
    assertDeepEqual(calls[0], [plain, 1, 'two'], 'the original gets the callback and its arguments');
    assertDeepEqual(calls[1], [tick, 'an argument'], 'an anonymous native callback with arguments is not a Dawn tick');
    assert(isWaitPacingInstalled(target), 'installed after');
    assertEqual(rec.queue.length, 1, 'ticks reaching the pacer');
    assertEqual((target.setImmediate as unknown as Record<symbol, unknown>)[custom], 'kept', "the original's own properties");
    assertThrows(() => installWaitPacing(target, pacer), /already paced/, 'a second install');
  });

  t.test('SPECLAB_GPU_WAIT is parsed strictly (unset = auto); auto paces only when every live adapter is a CPU one', () => {
    assertEqual(parseWaitPacingSetting(undefined), 'auto', 'unset: the platform picks from the adapters');
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
    "Node: unpaced under spin; otherwise (auto, the default, or paced) Dawn's own ticks go through the platform's pacer, in the mode the adapter calls for",
    async ({ gpu: ctx, platform, note }) => {
      const { nodeGpuWaitPacing } = await nodeOnlyImport<NodePlatform>('../../src/platform/node.ts');
      const setting = parseWaitPacingSetting(platform.env('SPECLAB_GPU_WAIT'));
      const expected: WaitPacingMode = setting === 'auto' ? autoWaitPacingMode([ctx.record]) : setting;
      assertEqual(
        nodeGpuWaitPacing().mode,
        expected,
        `mode on ${ctx.record.description || ctx.record.vendor} (fallback: ${ctx.record.isFallbackAdapter})`,
      );
      assertEqual(nodeGpuWaitPacing().installed, setting !== 'spin', 'the pacer is installed unless the setting is spin');

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
        if (setting === 'spin') {
          assertEqual(ticks, 0, 'with the setting spin, Dawn ticks through the original setImmediate, not the pacer');
        } else if (expected === 'spin') {
          assert(ticks > 0, "the wait ran Dawn's ticks through the pacer");
          assertEqual(paced, 0, 'spin mode never sleeps');
        } else {
          assert(ticks > 0, "the wait ran Dawn's ticks through the pacer");
          // Spinning ticks take microseconds each; a paced one sleeps SLEEP_FRACTION of the wait
          // so far (at least MIN_SLEEP_MS), so a wait of w ms runs SPIN_TICKS + 1 spinning ticks and
          // about ln(w / MIN_SLEEP_MS) / SLEEP_FRACTION + w / MAX_SLEEP_MS paced ones (a spinning
          // wait here runs tens of thousands). The bound allows twice that.
          assert(waits >= 1, 'at least one wait');
          const pacedBound = (w: number) => Math.log(Math.max(w, MIN_SLEEP_MS) / MIN_SLEEP_MS) / SLEEP_FRACTION + w / MAX_SLEEP_MS;
          assert(
            ticks <= waits * (SPIN_TICKS + 1) + 2 * waits * pacedBound(ms) + 20,
            `${waits} paced wait(s) of ${ms.toFixed(0)} ms in all ran ${ticks} ticks`,
          );
          if (ms > 50) assert(paced > 0, `a ${ms.toFixed(0)} ms wait slept between polls`);
        }
      } finally {
        gpu.release(a, b, c);
      }
    },
    { only: ['node'] },
  );
});
