/**
 * How a user runs SpecLab's command line from a clone, as the README documents it: `speclab` is not
 * on PATH there, so every message that tells the user to run a command (a resume hint, "train with:",
 * "see … --help") prints this form, which runs as printed from the clone's root.
 */
export const SPECLAB_CLI = 'node bin/speclab.mjs';

/** `words` (e.g. `train --out runs/a --resume`) as a command line the user can run. */
export function speclabCommand(words: string): string {
  return `${SPECLAB_CLI} ${words}`;
}
