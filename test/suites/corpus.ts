/** Suites of the corpus and tokenizer trainer (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import corpus from '../corpus/corpus.test.ts';
import bpeTrainer from '../corpus/bpe-trainer.test.ts';
import labPrompts from '../corpus/lab-prompts.test.ts';
import conversations from '../corpus/conversations.test.ts';
import chatSamples from '../corpus/chat-samples.test.ts';

export const corpusSuites: readonly Suite[] = [corpus, bpeTrainer, labPrompts, conversations, chatSamples];
