/** Seeded pseudo-random numbers (mulberry32 + Box-Muller) so tests and benchmarks are repeatable. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0 || 0x9e3779b9;
  }
  /** The generator's whole state (one 32-bit word), e.g. for a training checkpoint. */
  saveState(): number {
    return this.state;
  }
  /** Continue exactly where a generator whose `saveState()` returned `state` stood. */
  static fromState(state: number): Rng {
    if (!Number.isInteger(state) || state < 0 || state > 0xffffffff)
      throw new RangeError(`Rng.fromState: state must be a 32-bit unsigned integer, got ${state}`);
    const rng = new Rng(1);
    rng.state = state;
    return rng;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }
  normal(): number {
    const u = Math.max(this.next(), 1e-12);
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
  int(lo: number, hiExclusive: number): number {
    return lo + Math.floor(this.next() * (hiExclusive - lo));
  }
  /** Float32Array of n values uniform in [-scale, scale]. */
  floats(n: number, scale = 1): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = (this.next() * 2 - 1) * scale;
    return out;
  }
}
