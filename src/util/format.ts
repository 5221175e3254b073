/** Human-readable numbers for progress lines and reports. */

/**
 * A duration for a progress line; '?' when it is not finite (an ETA before the first step).
 * 'compact' (`speclab train`): tenths of a second under a minute, "5m3s", "1h5m".
 * 'clock' (`speclab pretrain` and its model card): whole seconds, zero-padded, "0m05s", "1h05m".
 */
export function formatDuration(seconds: number, style: 'compact' | 'clock' = 'compact'): string {
  if (!Number.isFinite(seconds)) return '?';
  if (style === 'clock') {
    const s = Math.max(0, Math.round(seconds));
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const r = s % 60;
    return h ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(r).padStart(2, '0')}s`;
  }
  if (seconds < 59.95) return `${seconds.toFixed(1)}s`;
  // Rounded to whole seconds first, so 299.7 s is "5m0s", not "4m60s".
  const whole = Math.round(seconds);
  const m = Math.floor(whole / 60);
  return m < 60 ? `${m}m${whole - m * 60}s` : `${Math.floor(m / 60)}h${m % 60}m`;
}
