/** The target's position limit, checked before any generation (speclab train, eval and pretrain). */

/** What a positions error names: the flag of the generated length, which prompts, the flag that shortens them. */
export interface PositionsContext {
  flag: string;
  which?: string;
  promptFlag?: string;
}

/**
 * Refuses generating `newTokens` after the longest prompt when that runs past the target's
 * max_position_embeddings: the positions it was trained on, past which its output means nothing.
 * Checked as soon as the prompts are known, before any generation; the error names the flag to lower.
 */
export function checkPositions(
  prompts: readonly (readonly number[])[],
  newTokens: number,
  maxPositions: number,
  on: PositionsContext,
): void {
  const longest = prompts.reduce((a, p) => Math.max(a, p.length), 0);
  if (longest + newTokens <= maxPositions) return;
  const which = on.which ? `${on.which} ` : '';
  const shorter = on.promptFlag ? ` (${on.promptFlag})` : '';
  throw new Error(
    `${on.flag} ${newTokens}: the longest ${which}prompt (${longest} tokens) plus ${newTokens} generated tokens is ${longest + newTokens}, over the target's max_position_embeddings ${maxPositions}; lower ${on.flag} or use shorter prompts${shorter}`,
  );
}
