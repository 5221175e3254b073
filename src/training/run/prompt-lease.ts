/** Default prompt lease of a cluster run: far above one capture of a batch, short enough that a dead worker's prompts come back soon. */
export const PROMPT_LEASE_MS = 120_000;
