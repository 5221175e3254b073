/**
 * Typed GPU failures. WebGPU reports most failures asynchronously (error scopes, uncaptured-error
 * events, the device-lost promise); SpecLab turns each into one of these classes so callers never
 * read back silent zeros from an invalid pipeline or a lost device.
 */

export class GpuError extends Error {
  override name = 'GpuError';
}

/** No adapter, or the adapter refused the device request. */
export class GpuUnavailableError extends GpuError {
  override name = 'GpuUnavailableError';
}

/** A validation error: bad shader, bad binding, bad dispatch. `label` names the operation. */
export class GpuValidationError extends GpuError {
  override name = 'GpuValidationError';
  constructor(
    readonly label: string,
    detail: string,
  ) {
    super(`WebGPU validation error in ${label}: ${detail}`);
  }
}

export class GpuOutOfMemoryError extends GpuError {
  override name = 'GpuOutOfMemoryError';
  constructor(
    readonly label: string,
    detail: string,
  ) {
    super(`GPU out of memory in ${label}: ${detail}. Use smaller shapes or batch, or a device with more memory.`);
  }
}

export class GpuInternalError extends GpuError {
  override name = 'GpuInternalError';
  constructor(
    readonly label: string,
    detail: string,
  ) {
    super(`WebGPU internal error in ${label}: ${detail}`);
  }
}

export class GpuDeviceLostError extends GpuError {
  override name = 'GpuDeviceLostError';
  constructor(
    readonly reason: string,
    detail: string,
  ) {
    super(
      `GPU device lost (${reason}): ${detail || 'no message'}. Results after this point are invalid; restart from the last checkpoint.`,
    );
  }
}

/** Map a GPUError (from an error scope or an uncaptured-error event) to a typed error. */
export function toTypedError(error: GPUError, label: string): GpuError {
  const kind = error.constructor?.name ?? '';
  if (kind.includes('OutOfMemory')) return new GpuOutOfMemoryError(label, error.message);
  if (kind.includes('Internal')) return new GpuInternalError(label, error.message);
  return new GpuValidationError(label, error.message);
}
