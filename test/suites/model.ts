/**
 * Suites of the target-model area: safetensors, configs, checkpoints (also through the browser's
 * picked-file and URL stores), tokenizer, float64 reference.
 */
import type { Suite } from '../harness/suite.ts';
import safetensors from '../formats/safetensors.test.ts';
import f16Bits from '../formats/f16-bits.test.ts';
import hfConfig from '../config/hf-config.test.ts';
import checkpoint from '../formats/hf-checkpoint.test.ts';
import checkpointSource from '../formats/hf-checkpoint-source.test.ts';
import hubCache from '../formats/hf-hub-cache.test.ts';
import tokenizer from '../formats/tokenizer.test.ts';
import referenceLlama from '../reference/llama.test.ts';
import browserModelFiles from '../platform/browser-model-files.test.ts';

export const modelSuites: readonly Suite[] = [
  safetensors,
  f16Bits,
  hfConfig,
  checkpoint,
  checkpointSource,
  hubCache,
  tokenizer,
  referenceLlama,
  browserModelFiles,
];
