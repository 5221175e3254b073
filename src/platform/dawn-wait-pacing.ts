/**
 * Pacing of Dawn's event pump while the host waits for the GPU (Node only).
 *
 * Why: Dawn's Node binding (npm `webgpu`) settles mapAsync, onSubmittedWorkDone and the other GPU
 * promises from a native tick that it hands to the global `setImmediate`. The tick runs
 * instance.ProcessEvents() and, while any promise is still pending, schedules itself again, so a
 * wait runs it on every turn of the event loop and the main thread spins at 100% of a core. On a
 * CPU adapter (llvmpipe) the device's workgroups run on the same cores, so that spin takes a core
 * away from the device: on a 2-core machine, llvmpipe's two worker threads got 35–44% of a core
 * each while the main thread spun, and one wait on ten 512³ matmuls took 312–496 ms spun against
 * 249–314 ms paced (bench/RESULTS.md, "Waiting for the GPU without spinning").
 *
 * What: `installWaitPacing` replaces `setImmediate` on the given global object with a wrapper that
 * recognises Dawn's tick (`isDawnTick`) and passes it to a `WaitPacer`. In `paced` mode a wait still
 * spins for its first tick and `spinTicks` more (a short wait settles as fast as before); each later
 * tick of the same wait goes to the `sleepy` scheduler, which sleeps the thread before the tick (Node:
 * setImmediate, and in that callback Atomics.wait before the tick), so the waiting thread mostly
 * sleeps while other callbacks still run between ticks. Each sleep is a small fraction of the time
 * the wait has lasted (SLEEP_FRACTION, within MIN_SLEEP_MS and MAX_SLEEP_MS): short waits overshoot
 * little, long ones wake the thread (and so preempt the device's workers) rarely. In `spin` mode
 * every tick goes to setImmediate as Dawn asked, which keeps the lowest latency and is what a
 * hardware GPU wants. Every other setImmediate call goes straight to the original, unchanged.
 */

export type WaitPacingMode = 'spin' | 'paced';

/**
 * What SPECLAB_GPU_WAIT may say: a mode, or `auto` (the platform picks from the adapters in use).
 * Unset means `auto`. Pacing was once opt-in: with it on, runs of the Node suite died with SIGSEGV.
 * The cause was memory mappings, not pacing: lavapipe maps each live descriptor set as its own page,
 * a dropped bind group is freed only when V8 collects its wrapper, and a spinning wait's garbage
 * (a native function per tick) had been what drove collections often enough; paced, the suite reached
 * the process's 65,530 mappings and the driver crashed. Bind groups are now let go and collected
 * (dawn-bind-group-reclaim.ts), and the suite ran 20 times in a row under `auto` with no crash
 * (bench/RESULTS.md, "Waiting for the GPU without spinning").
 */
export type WaitPacingSetting = WaitPacingMode | 'auto';

export const WAIT_PACING_SETTINGS: readonly WaitPacingSetting[] = ['auto', 'spin', 'paced'];

/**
 * Ticks a paced wait spins after its first, before it sleeps between polls. One tick takes about
 * 5 µs here, so a wait spins for roughly the first 0.3 ms: short GPU jobs (small kernels, tiny
 * readbacks) settle before any sleep.
 */
export const SPIN_TICKS = 64;

/**
 * How long a paced tick sleeps before it polls: SLEEP_FRACTION of the time its wait has lasted so
 * far, kept within [MIN_SLEEP_MS, MAX_SLEEP_MS]. So a wait overshoots the GPU by at most about that
 * fraction of its length (plus about 50 µs of the kernel's timer slack), and a long wait wakes the
 * thread, which preempts one of the device's workers, at most once per MAX_SLEEP_MS. Measured on a
 * 2-core llvmpipe machine (bench/RESULTS.md, "Waiting for the GPU without spinning"): sleeps doubling
 * to a 1 ms cap gave training steps most of their gain but slowed the lab target's batch-1 decode
 * (one wait of about 10 ms per token) to 0.65–1.01x of spinning; a 0.25 ms cap kept decode level but
 * lost the training step's gain (such a cap lets a long wait wake the thread up to 4,000 times a
 * second); a fixed 0.1 ms gave a long matmul wait little of its time back.
 */
export const SLEEP_FRACTION = 1 / 32;
export const MIN_SLEEP_MS = 0.05;
export const MAX_SLEEP_MS = 2;

export interface WaitPacerOptions {
  spinTicks?: number;
  sleepFraction?: number;
  minSleepMs?: number;
  maxSleepMs?: number;
  /** Milliseconds from any fixed origin (performance.now). */
  now?: () => number;
}

/** How a tick gets scheduled: at once (the runtime's setImmediate), or after a short sleep. */
export interface TickSchedulers {
  immediate(run: () => void): unknown;
  sleepy(run: () => void, ms: number): unknown;
}

export interface WaitPacingStats {
  /** Waits: ticks scheduled from outside a tick, each the start of a new wait. */
  waits: number;
  /** Dawn ticks scheduled since installation. */
  ticks: number;
  /** Of those, ticks that slept first (the `sleepy` scheduler). */
  pacedTicks: number;
}

/** Parse SPECLAB_GPU_WAIT (unset = auto); anything else fails naming the variable. */
export function parseWaitPacingSetting(value: string | undefined): WaitPacingSetting {
  if (value === undefined || value === '') return 'auto';
  if ((WAIT_PACING_SETTINGS as readonly string[]).includes(value)) return value as WaitPacingSetting;
  throw new Error(`SPECLAB_GPU_WAIT must be one of ${WAIT_PACING_SETTINGS.join(', ')}, got "${value}"`);
}

/**
 * The mode `auto` picks: `paced` when every live GPU context runs on a fallback (CPU) adapter,
 * where spinning slows the device itself; `spin` when any runs on hardware (its waits are short
 * and latency matters, e.g. one sync per decoded token) or none is open.
 */
export function autoWaitPacingMode(liveAdapters: readonly { isFallbackAdapter: boolean }[]): WaitPacingMode {
  return liveAdapters.length > 0 && liveAdapters.every((a) => a.isFallbackAdapter) ? 'paced' : 'spin';
}

/**
 * Dawn's tick is an anonymous native function of no parameters (Napi::Function::New): empty name,
 * length 0, native source. Bound functions are native too but are named "bound …", and a promise's
 * resolve / reject functions are anonymous and native but take one parameter, so neither a library's
 * bound callback nor `await new Promise((r) => setImmediate(r))` is taken for it.
 */
export function isDawnTick(fn: unknown): fn is () => void {
  return typeof fn === 'function' && fn.name === '' && fn.length === 0 && Function.prototype.toString.call(fn).includes('[native code]');
}

/** Schedules Dawn's ticks: spinning, or spinning briefly and then sleeping between polls. */
export class WaitPacer {
  mode: WaitPacingMode = 'spin';
  readonly stats: WaitPacingStats = { waits: 0, ticks: 0, pacedTicks: 0 };
  /** True while a tick runs: a tick scheduled then continues the same wait. */
  private inTick = false;
  /** Ticks the current wait has scheduled after its first (0 for the first). */
  private continued = 0;
  /** When the current wait's first tick was scheduled (ms, from `now`). */
  private waitStart = 0;

  readonly spinTicks: number;
  readonly sleepFraction: number;
  readonly minSleepMs: number;
  readonly maxSleepMs: number;
  private readonly now: () => number;

  constructor(
    private readonly schedulers: TickSchedulers,
    options: WaitPacerOptions = {},
  ) {
    const {
      spinTicks = SPIN_TICKS,
      sleepFraction = SLEEP_FRACTION,
      minSleepMs = MIN_SLEEP_MS,
      maxSleepMs = MAX_SLEEP_MS,
      now = () => performance.now(),
    } = options;
    if (!Number.isInteger(spinTicks) || spinTicks < 0)
      throw new Error(`WaitPacer: spinTicks must be a non-negative integer, got ${spinTicks}`);
    if (!(sleepFraction > 0 && sleepFraction <= 1)) throw new Error(`WaitPacer: sleepFraction must be in (0, 1], got ${sleepFraction}`);
    if (!(minSleepMs > 0 && maxSleepMs >= minSleepMs && Number.isFinite(maxSleepMs)))
      throw new Error(`WaitPacer: need 0 < minSleepMs <= maxSleepMs, got ${minSleepMs} and ${maxSleepMs}`);
    this.spinTicks = spinTicks;
    this.sleepFraction = sleepFraction;
    this.minSleepMs = minSleepMs;
    this.maxSleepMs = maxSleepMs;
    this.now = now;
  }

  /** The sleep before a paced tick of a wait that has lasted `elapsedMs` so far. */
  sleepMs(elapsedMs: number): number {
    return Math.min(this.maxSleepMs, Math.max(this.minSleepMs, elapsedMs * this.sleepFraction));
  }

  schedule(tick: () => void): unknown {
    this.continued = this.inTick ? this.continued + 1 : 0;
    if (this.continued === 0) {
      this.stats.waits++;
      this.waitStart = this.now();
    }
    this.stats.ticks++;
    const run = () => {
      this.inTick = true;
      try {
        tick();
      } finally {
        this.inTick = false;
      }
    };
    if (this.mode === 'paced' && this.continued > this.spinTicks) {
      this.stats.pacedTicks++;
      return this.schedulers.sleepy(run, this.sleepMs(this.now() - this.waitStart));
    }
    return this.schedulers.immediate(run);
  }
}

type SetImmediate = (callback: (...args: never[]) => void, ...args: unknown[]) => unknown;

/** Whether `target.setImmediate` is already a pacing wrapper (installed by any copy of this module). */
export function isWaitPacingInstalled(target: { setImmediate: SetImmediate }): boolean {
  return Boolean((target.setImmediate as { speclabWaitPacing?: boolean }).speclabWaitPacing);
}

/**
 * Route Dawn's ticks through `pacer` by replacing `target.setImmediate` (once; a second call with
 * the same target is refused, since the wrapper would wrap itself). Other callers get the original,
 * and its return value.
 */
export function installWaitPacing(target: { setImmediate: SetImmediate }, pacer: WaitPacer): void {
  const original = target.setImmediate;
  if (isWaitPacingInstalled(target)) throw new Error('installWaitPacing: setImmediate is already paced');
  const paced = (callback: (...args: never[]) => void, ...args: unknown[]): unknown => {
    if (args.length === 0 && isDawnTick(callback)) return pacer.schedule(callback);
    return original.call(target, callback, ...args);
  };
  // Keep the original's own properties (Node's util.promisify.custom among them).
  for (const key of Reflect.ownKeys(original)) {
    if (key === 'length' || key === 'name' || key === 'prototype') continue;
    Object.defineProperty(paced, key, Object.getOwnPropertyDescriptor(original, key)!);
  }
  Object.defineProperty(paced, 'speclabWaitPacing', { value: true });
  target.setImmediate = paced;
}
