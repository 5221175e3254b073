/** docs/contracts.md §12: round trip, immutability, validation, ids, TrainBatch. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { SCHEMA_VERSION, DraftStrategyName, RunMode, TargetRepr } from '../../src/contracts/enums.ts';
import { offlineSampleId, onlineSampleId } from '../../src/contracts/ids.ts';
import { makeFeatureHandle, makeFeatureSpec, makeJsonRecord, makeSampleRef } from '../../src/contracts/records.ts';
import { makeTrainBatch } from '../../src/contracts/train-batch.ts';
import { promptTask, sampleRef } from './fixtures.ts';

export default defineSuite('contracts/records', (t) => {
  t.test('records survive a JSON round trip (nested FeatureSpec included)', () => {
    const ref = sampleRef('t0');
    const back = makeSampleRef(JSON.parse(JSON.stringify(ref)));
    assertDeepEqual(back, ref, 'round-tripped SampleRef');
    assertEqual(back.featureSpecs.hidden_state.required, true, 'FeatureSpec.required default');
    assertEqual(back.schemaVersion, SCHEMA_VERSION, 'schemaVersion default');
    assertEqual(back.draftWeightVersion, null, 'absent optional field is null');
  });

  t.test('PromptTask and SampleRef are deeply frozen and independent of the input', () => {
    const payload = { input_ids: [1, 2, 3] };
    const ref = sampleRef('t1', { metadata: { nested: { list: [1, 2] } } });
    const task = promptTask('t1');
    assertThrows(() => ((ref as { sampleId: string }).sampleId = 'x'), /read.only|frozen|assign/i, 'SampleRef top-level mutation');
    assertThrows(
      () => (ref.metadata.nested as { list: number[] }).list.push(3),
      /not extensible|frozen|read.only|add property/i,
      'nested metadata mutation',
    );
    assertThrows(() => ((task as { attempt: number }).attempt = 4), /read.only|frozen|assign/i, 'PromptTask mutation');
    const fromPayload = makeSampleRef({ ...ref, metadata: { payload } });
    payload.input_ids.push(4);
    assertDeepEqual(fromPayload.metadata.payload, { input_ids: [1, 2, 3] }, 'record copied its input');
    assert(!Object.isFrozen(payload), 'caller data is not frozen');
  });

  t.test('invalid records are rejected naming the record and field', () => {
    assertThrows(
      () => makeSampleRef({ ...sampleRef('t2'), strategy: 'medusa' as 'eagle3' }),
      /SampleRef is invalid[\s\S]*strategy/,
      'unknown strategy',
    );
    assertThrows(
      () => makeSampleRef({ ...sampleRef('t2'), sample_id: 'x' } as never),
      /Unrecognized key[\s\S]*sample_id/,
      'snake_case typo',
    );
    assertThrows(() => makeFeatureSpec({ name: 'x', shape: [2, -1], dtype: 'f32' }), /FeatureSpec is invalid[\s\S]*shape/, 'negative dim');
    assertThrows(
      () => makeFeatureSpec({ name: 'target', shape: [2], dtype: 'f32', targetRepr: 'probs' as 'logits' }),
      /targetRepr/,
      'bad target repr',
    );
    assertThrows(() => makeJsonRecord({ when: new Date(0) }, 'info'), /info is invalid[\s\S]*when/, 'non-JSON metadata');
    assertThrows(() => makeFeatureHandle({ sampleId: 's', generation: 1.5, leaseToken: 'k' }), /generation/, 'fractional generation');
  });

  t.test('deterministic ids and enums', () => {
    assertEqual(onlineSampleId('run', 'task-abc'), 'run:task-abc', 'online id');
    assertEqual(offlineSampleId('run', 42), 'run:00000042', 'offline id');
    assertThrows(() => offlineSampleId('run', -1), /non-negative integer/, 'negative index');
    assertThrows(() => onlineSampleId('', 't'), /runId/, 'empty run id');
    assertDeepEqual(RunMode.options, ['online', 'offline'], 'RunMode');
    assertDeepEqual(TargetRepr.options, ['logits', 'pruned_logits', 'hidden_state'], 'TargetRepr');
    assert(
      DraftStrategyName.options.includes('eagle3') && DraftStrategyName.options.includes('dflash'),
      'DraftStrategyName has eagle3 + dflash',
    );
  });

  t.test('TrainBatch holds tensors and checks ids and strategy', () => {
    const hidden = new Float32Array(2 * 8 * 12);
    const batch = makeTrainBatch({
      sampleIds: ['a', 'b'],
      strategy: 'eagle3',
      tensors: { hidden_state: hidden },
      metadata: { targetRepr: 'hidden_state', tttLength: 7 },
    });
    assertEqual(batch.tensors.hidden_state, hidden, 'tensor kept by reference');
    batch.metadata.extra = 1;
    assertEqual(batch.metadata.extra, 1, 'TrainBatch is mutable');
    assertThrows(
      () => makeTrainBatch({ sampleIds: ['a', 'a'], strategy: 'eagle3', tensors: {} }),
      /sample a appears twice/,
      'duplicate id',
    );
    assertThrows(
      () => makeTrainBatch({ sampleIds: ['a'], strategy: 'x' as 'eagle3', tensors: {} }),
      /unknown draft strategy/,
      'bad strategy',
    );
  });
});
