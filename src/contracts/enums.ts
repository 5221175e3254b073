/**
 * Versions and closed vocabularies shared by every plane (docs/contracts.md §2).
 * Each enum is a zod schema so records validate against the same list the types come from.
 */
import { z } from 'zod';

/** Bump when the stored feature schema changes incompatibly; loaders reject batches mixing versions. */
export const SCHEMA_VERSION = 1;

/** Where samples come from: a live rollout fleet or a precomputed manifest. */
export const RunMode = z.enum(['online', 'offline']);
export type RunMode = z.infer<typeof RunMode>;

/**
 * Draft training strategies: the pair of SpecForge's first runtime design plus the names SpecForge's
 * later runtime added (reserved so refs stay readable).
 */
export const DraftStrategyName = z.enum(['eagle3', 'dflash', 'domino', 'dspark', 'peagle']);
export type DraftStrategyName = z.infer<typeof DraftStrategyName>;

/**
 * What the `target` feature holds: full logits `[seq, V]` (parity/debug), draft-vocab logits
 * `[seq, D]` (t2d applied at rollout), or the target's last hidden state (trainer re-runs lm_head).
 */
export const TargetRepr = z.enum(['logits', 'pruned_logits', 'hidden_state']);
export type TargetRepr = z.infer<typeof TargetRepr>;
