/**
 * Writes the browser lab's bundled prompts, `assets/lab-target/lab-prompts.json`: the same corpus
 * prompts `speclab train` takes from the Brown corpus for the lab target (first tokens of paragraphs
 * of the train split; held-out ones from the held-out split), as token ids and text, so a tab needs
 * neither the corpus package nor a download.
 *
 *   npx tsx scripts/build-lab-prompts.ts [--train 256] [--held-out 8] [--length 8]
 * Deterministic: the same options give the same file (test/corpus/lab-prompts.test.ts checks it).
 */
import { validateTrainConfig } from '../src/training/run/run-config.ts';
import { labCorpusPrompts, LAB_TARGET_DIR } from '../src/training/run/run-plan.ts';
import { ChatTokenizer } from '../src/formats/tokenizer.ts';
import { buildLabPromptsFile, LAB_PROMPTS_FILE } from '../src/corpus/lab-prompts.ts';
import { nodePlatform } from '../src/platform/node.ts';

const args = nodePlatform.args();
const opt = (name: string, fallback: number): number => {
  const i = args.indexOf(name);
  const value = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name}: expected a positive integer, got ${args[i + 1]}`);
  return value;
};
const config = validateTrainConfig({
  trainPrompts: opt('--train', 256),
  evalPrompts: opt('--held-out', 8),
  promptLength: opt('--length', 8),
});
const { train, held } = await labCorpusPrompts(nodePlatform, config);
const lab = nodePlatform.files(LAB_TARGET_DIR);
const tokenizer = await ChatTokenizer.load(lab, '');
await lab.writeAtomic(
  LAB_PROMPTS_FILE,
  buildLabPromptsFile(train, held, (ids) => tokenizer.decode(ids)),
);
console.log(
  `${lab.root}/${LAB_PROMPTS_FILE}: ${train.length} training prompts, ${held.length} held out, ${config.promptLength} tokens each`,
);
