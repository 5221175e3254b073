/**
 * Learning-rate schedules, stepped once per optimizer step (docs/training.md §6).
 * `cosineWithWarmup`: for step index e < warmup, lr = base · (e + 1) / warmup; afterwards a cosine from
 * base down to 0 over the remaining `total − warmup` steps. warmup = floor(warmupRatio · total).
 */
export interface ScheduleConfig {
  kind: 'cosine' | 'constant';
  baseLr: number;
  totalSteps: number;
  warmupRatio: number;
}

export function warmupSteps(config: ScheduleConfig): number {
  return Math.floor(config.warmupRatio * config.totalSteps);
}

/** Learning rate for the optimizer step with 0-based index `stepIndex`. */
export function learningRate(config: ScheduleConfig, stepIndex: number): number {
  const { baseLr, totalSteps } = config;
  if (!(totalSteps > 0)) throw new RangeError(`schedule: totalSteps must be positive, got ${totalSteps}`);
  const warmup = warmupSteps(config);
  if (stepIndex < warmup) return (baseLr * (stepIndex + 1)) / warmup;
  if (config.kind === 'constant') return baseLr;
  const span = Math.max(1, totalSteps - warmup);
  const progress = Math.min(1, (stepIndex - warmup) / span);
  return 0.5 * baseLr * (1 + Math.cos(Math.PI * progress));
}
