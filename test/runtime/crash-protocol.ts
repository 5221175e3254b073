/**
 * What test/runtime/crash.ts (the parent) and test/runtime/crash-child.ts (one life of the run) agree
 * on. A separate module because importing the child would run it.
 */
export const RUN_ID = 'crash';
export const PROMPTS = 16;
/** Prompts leased per rollout round. */
export const ROUND = 4;
export const BATCH = 2;
/** The optimizer step at which the after-step and ack kill points fire. */
export const KILL_STEP = 3;

export type KillAt = 'none' | 'after-put' | 'after-step' | 'ack-torn' | 'ack-unsynced';
export const KILL_POINTS: readonly KillAt[] = ['none', 'after-put', 'after-step', 'ack-torn', 'ack-unsynced'];

/** One line of `<dir>/events.jsonl`: what one life trained (at an optimizer boundary) or durably acked. */
export interface ChildEvent {
  pid: number;
  kind: 'trained' | 'acked';
  step: number;
  ids: string[];
}

export function taskId(i: number): string {
  return `t${String(i).padStart(3, '0')}`;
}
