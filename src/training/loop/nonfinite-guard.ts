/**
 * The policy for steps whose loss or gradient norm is NaN or infinite. The GPU has already skipped
 * such an update (optim/finalize's sentinel makes AdamW a no-op); this counts them and stops the
 * run, naming the step, once more than `limit` have happened, before that step is acked.
 */
export class NonFiniteGuard {
  private count = 0;

  constructor(
    readonly limit: number,
    private readonly flag = '--max-nonfinite-steps',
  ) {
    if (!Number.isInteger(limit) || limit < 0) throw new RangeError(`NonFiniteGuard: limit must be a non-negative integer, got ${limit}`);
  }

  /** Skipped steps seen so far. */
  get skipped(): number {
    return this.count;
  }

  /** A line to print for a skipped step, or undefined for a finite one; throws past the limit. */
  observe(step: number, loss: number, gradNorm: number): string | undefined {
    if (Number.isFinite(loss) && Number.isFinite(gradNorm)) return undefined;
    this.count += 1;
    if (this.count > this.limit) {
      throw new Error(
        `step ${step}: ${this.count} optimizer steps had a non-finite loss or gradient norm (limit ${this.flag} ${this.limit}); stopping before this step is acked. Lower --lr or --max-grad-norm, then --resume`,
      );
    }
    return `step ${step}: loss ${loss}, gradient norm ${gradNorm}: not finite; the update was skipped (${this.count} of at most ${this.limit})`;
  }
}
