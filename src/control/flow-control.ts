/**
 * Producer flow control (docs/control-plane.md §7, as SpecForge's later runtime defines it): ref and byte watermarks with hysteresis
 * sharing one latch, and a per-worker prompt lease cap.
 *
 * The latch pauses when refs OR bytes reach their high watermark and resumes only when refs AND
 * bytes are back at or below their low watermarks; between the two it keeps its state, so a
 * producer hovering around one threshold does not flap.
 */

export interface FlowControlLimitsInput {
  /** Refs in flight (published − consumed) at which producers pause; ≥ 1. Default 256. */
  highWatermarkRefs?: number;
  /** Resume threshold for refs, in [0, high]; default equals high. */
  lowWatermarkRefs?: number | null;
  /** Resident feature bytes at which producers pause; null = no byte limit. */
  highWatermarkBytes?: number | null;
  /** Resume threshold for bytes, in [0, high]; needs highWatermarkBytes; default equals high. */
  lowWatermarkBytes?: number | null;
  /** Most prompt tasks one worker may hold at once; ≥ 1. Default 8. */
  maxPromptLeasePerWorker?: number;
}

export interface FlowControlLimits {
  readonly highWatermarkRefs: number;
  readonly lowWatermarkRefs: number;
  readonly highWatermarkBytes: number | null;
  readonly lowWatermarkBytes: number | null;
  readonly maxPromptLeasePerWorker: number;
}

/** Fills defaults and rejects inconsistent limits with a RangeError naming the field. */
export function resolveFlowControlLimits(input: FlowControlLimitsInput = {}): FlowControlLimits {
  const highRefs = input.highWatermarkRefs ?? 256;
  requireCount(highRefs, 'highWatermarkRefs', 1);
  const lowRefs = input.lowWatermarkRefs ?? highRefs;
  requireCount(lowRefs, 'lowWatermarkRefs', 0);
  if (lowRefs > highRefs)
    throw new RangeError(`flow control: lowWatermarkRefs (${lowRefs}) must not exceed highWatermarkRefs (${highRefs})`);

  const highBytes = input.highWatermarkBytes ?? null;
  if (highBytes !== null) requireCount(highBytes, 'highWatermarkBytes', 1);
  let lowBytes = input.lowWatermarkBytes ?? null;
  if (lowBytes !== null && highBytes === null) throw new RangeError('flow control: lowWatermarkBytes needs highWatermarkBytes');
  if (highBytes !== null) {
    lowBytes ??= highBytes;
    requireCount(lowBytes, 'lowWatermarkBytes', 0);
    if (lowBytes > highBytes)
      throw new RangeError(`flow control: lowWatermarkBytes (${lowBytes}) must not exceed highWatermarkBytes (${highBytes})`);
  }

  const cap = input.maxPromptLeasePerWorker ?? 8;
  requireCount(cap, 'maxPromptLeasePerWorker', 1);
  return Object.freeze({
    highWatermarkRefs: highRefs,
    lowWatermarkRefs: lowRefs,
    highWatermarkBytes: highBytes,
    lowWatermarkBytes: lowBytes,
    maxPromptLeasePerWorker: cap,
  });
}

/**
 * A producer may not start when the consumer's optimizer window (dp · batch · accumulation refs)
 * cannot fit under the watermarks: the producer would pause before the trainer can complete a
 * step, and the trainer would wait for refs forever (docs/control-plane.md §7).
 */
export function assertWatermarksCoverQuantum(limits: FlowControlLimits, quantum: number): void {
  requireCount(quantum, 'quantum', 1);
  if (limits.highWatermarkRefs < quantum || limits.lowWatermarkRefs < quantum) {
    throw new RangeError(
      `flow control: watermarks (high ${limits.highWatermarkRefs}, low ${limits.lowWatermarkRefs}) must be ≥ the optimizer window of ${quantum} refs, or producer and trainer deadlock`,
    );
  }
}

export interface FlowControlCounters {
  readonly pauses: number;
  readonly resumes: number;
  /** `shouldPause` calls that answered "paused". */
  readonly pausedChecks: number;
}

export class ProducerFlowControl {
  readonly limits: FlowControlLimits;
  private latched = false;
  private pauses = 0;
  private resumes = 0;
  private pausedChecks = 0;

  constructor(limits: FlowControlLimitsInput | FlowControlLimits = {}) {
    this.limits = resolveFlowControlLimits(limits);
  }

  /** How many prompts a worker already holding `alreadyLeased` may lease now (never negative). */
  promptLease(requested: number, alreadyLeased = 0): number {
    const room = this.limits.maxPromptLeasePerWorker - alreadyLeased;
    return Math.max(0, Math.min(Math.floor(requested), room));
  }

  /** Updates the latch from current load and returns whether producers should pause. */
  shouldPause(inFlightRefs: number, residentBytes = 0): boolean {
    const { highWatermarkRefs, lowWatermarkRefs, highWatermarkBytes, lowWatermarkBytes } = this.limits;
    const overHigh = inFlightRefs >= highWatermarkRefs || (highWatermarkBytes !== null && residentBytes >= highWatermarkBytes);
    const underLow = inFlightRefs <= lowWatermarkRefs && (lowWatermarkBytes === null || residentBytes <= lowWatermarkBytes);
    if (!this.latched && overHigh) {
      this.latched = true;
      this.pauses++;
    } else if (this.latched && underLow) {
      this.latched = false;
      this.resumes++;
    }
    if (this.latched) this.pausedChecks++;
    return this.latched;
  }

  get paused(): boolean {
    return this.latched;
  }

  counters(): FlowControlCounters {
    return { pauses: this.pauses, resumes: this.resumes, pausedChecks: this.pausedChecks };
  }
}

function requireCount(value: number, name: string, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`flow control: ${name} must be an integer ≥ ${min}, got ${value}`);
  }
}
