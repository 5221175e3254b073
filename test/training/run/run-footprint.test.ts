/**
 * What a run writes besides its GPU memory (src/training/run/run-footprint.ts): the checkpoint's two
 * safetensors files sized exactly as writeSafetensors writes them, a sample's bytes by hand, and the
 * checkpoint cadence of the session's rule (every --checkpoint-every steps and at each round's end).
 */
import { eagle3ParameterShapes } from '../../../src/config/eagle3-config.ts';
import { parseHfConfig } from '../../../src/config/hf-config.ts';
import { writeSafetensors, type TensorToWrite } from '../../../src/formats/safetensors-writer.ts';
import { draftConfigFor } from '../../../src/training/sequences/eagle3-data.ts';
import { checkpointCadence, checkpointSize, sampleBytes } from '../../../src/training/run/run-footprint.ts';
import { assertDeepEqual, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

const target = parseHfConfig(
  {
    architectures: ['LlamaForCausalLM'],
    hidden_size: 64,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    intermediate_size: 128,
    vocab_size: 300,
    rms_norm_eps: 1e-5,
  },
  'tiny config',
);

export default defineSuite('training/run/run-footprint', (t) => {
  t.test("a checkpoint's files: the sizes writeSafetensors writes", () => {
    const draft = draftConfigFor({ config: target }, 40);
    const zeros = (shape: number[], bytes: number): TensorToWrite => ({
      dtype: bytes === 1 ? 'BOOL' : bytes === 8 ? 'I64' : 'F32',
      shape,
      data: new Uint8Array(shape.reduce((a, b) => a * b, 1) * bytes),
    });
    const params = eagle3ParameterShapes(draft);
    const weights: Record<string, TensorToWrite> = Object.fromEntries(params.map(([n, s]) => [n, zeros(s, 4)]));
    weights.t2d = zeros([draft.vocabSize], 1);
    weights.d2t = zeros([draft.draftVocabSize], 8);
    const moments = Object.fromEntries(params.flatMap(([n, s]) => [[`${n}.m`, zeros(s, 4)] as const, [`${n}.v`, zeros(s, 4)] as const]));
    const size = checkpointSize(draft);
    assertEqual(size.weightsFile, writeSafetensors(weights, { format: 'pt', speclab: 'weights' }).byteLength, 'weights.safetensors');
    assertEqual(
      size.optimizerFile,
      writeSafetensors(moments, { format: 'pt', speclab: 'adamw-moments' }).byteLength,
      'optimizer.safetensors',
    );
    assertEqual(size.bytes, size.weightsFile + size.optimizerFile, 'both files');
  });

  t.test('one sample and the cadence', () => {
    const draft = draftConfigFor({ config: target }, 40);
    const x = {
      target,
      targetWeights: 'f32' as const,
      draft,
      batchSize: 1,
      maxLength: 100,
      tttLength: 1,
      features: 'f16' as const,
      featureStoreSamples: 1,
      captureBatchTokens: 8192,
      generationBatch: 0,
    };
    assertEqual(sampleBytes(x), 100 * (3 * 64 + 300) * 2 + 2 * 100 * 4, 'hidden states and logits in f16, two i32 vectors');
    assertEqual(sampleBytes({ ...x, features: 'f32' }), 100 * (3 * 64 + 300) * 4 + 2 * 100 * 4, 'f32');
    assertDeepEqual(
      checkpointCadence({ checkpointEvery: 8, roundPrompts: 16, batchSize: 1 }),
      { every: 8, stepsPerRound: 16, checkpointEvery: 8 },
      '--checkpoint-every first',
    );
    assertDeepEqual(
      checkpointCadence({ checkpointEvery: 8, roundPrompts: 16, batchSize: 4 }),
      { every: 4, stepsPerRound: 4, checkpointEvery: 8 },
      'round ends first',
    );
    assertEqual(
      checkpointCadence({ checkpointEvery: 8, roundPrompts: 5, batchSize: 2 }).stepsPerRound,
      3,
      'a short last batch still ends the round',
    );
  });
});
