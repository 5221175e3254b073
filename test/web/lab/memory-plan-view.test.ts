/** The lab's memory plan (web/lab/memory-plan-view.ts): bundled prompts plus generated replies, or conversations as they are. */
import { labMemoryPlan, type MemoryBasis } from '../../../web/lab/memory-plan-view.ts';
import { DEFAULT_SETTINGS } from '../../../web/lab/protocol.ts';
import { parseHfConfig } from '../../../src/config/hf-config.ts';
import { assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

const config = parseHfConfig(
  JSON.stringify({
    architectures: ['LlamaForCausalLM'],
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    vocab_size: 512,
    max_position_embeddings: 1024,
    rms_norm_eps: 1e-6,
  }),
  'config.json',
);

const basis: MemoryBasis = {
  type: 'memory-basis',
  target: config,
  trainPromptLengths: [10, 12, 8],
  heldOut: 2,
  roundPrompts: 16,
  limits: { maxBufferSize: 256 * 2 ** 20, maxStorageBufferBindingSize: 128 * 2 ** 20 },
};

export default defineSuite('web/lab/memory-plan-view', (t) => {
  t.test('bundled prompts: the longest prompt plus the response; conversations: the longest row, capped by training prompts', () => {
    const settings = { ...DEFAULT_SETTINGS, draftVocabSize: 256, responseLength: 48, trainPrompts: 2 };
    assertEqual(labMemoryPlan(basis, settings).input.maxLength, 12 + 48, 'prompts 10 and 12 (the first two) + 48 generated');
    const rows = { ...basis, sequenceLengths: [40, 300, 90] };
    assertEqual(labMemoryPlan(rows, settings).input.maxLength, 300, 'rows 40 and 300 (the first two): no reply generated');
    assertEqual(labMemoryPlan(rows, { ...settings, trainPrompts: 1 }).input.maxLength, 40, 'the first row only');
  });
});
