/**
 * A usage error (bad command line or settings): exit code 2. Thrown by the flag parsers of src/cli/ and
 * by the settings checks of a training run (src/training/run/), so it lives below both.
 */
export class UsageError extends Error {
  override name = 'UsageError';
}
