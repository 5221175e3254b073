/** KVBatchMeta (docs/dataplane.md §3, upstream test_kvbatchmeta.py) with the immutable-value rules of docs/dataplane.md §5. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { KVBatchMeta } from '../../src/dataplane/meta.ts';

const meta = (n: number, extra: Partial<ConstructorParameters<typeof KVBatchMeta>[0]> = {}): KVBatchMeta =>
  new KVBatchMeta({ partition: 'train', sampleIds: Array.from({ length: n }, (_, i) => `u${i}_g0`), ...extra });

export default defineSuite('dataplane/meta', (t) => {
  t.test('size, defaults and required partition', () => {
    const m = meta(3);
    assertEqual(m.size, 3, 'size = number of ids');
    assertEqual(m.taskName, null, 'task defaults to null');
    assertEqual(m.fields, null, 'fields default to null');
    assertEqual(m.sequenceLengths, null, 'lengths default to null');
    assertEqual(m.tags, null, 'tags default to null');
    assertDeepEqual(m.extraInfo, {}, 'extraInfo defaults to {}');
    assert(meta(1).extraInfo !== m.extraInfo, 'extraInfo is a fresh object per meta');
    assertThrows(() => new KVBatchMeta({ partition: '', sampleIds: [] }), /partition must be a non-empty string/, 'partition required');
    assertThrows(() => new KVBatchMeta({ partition: 'p', sampleIds: ['a', ''] }), /sampleIds\[1\] must be a non-empty string/, 'empty id');
    assertEqual(new KVBatchMeta({ partition: 'p', sampleIds: ['a', 'a'] }).size, 2, 'duplicate ids are allowed (upstream pins this)');
  });

  t.test('the value is deeply immutable (no aliasing between parent and child)', () => {
    const m = meta(2, { tags: [{ std: 1 }, { std: 0 }], extraInfo: { pad: { multiple: 8 } } });
    assert(
      Object.isFrozen(m) && Object.isFrozen(m.sampleIds) && Object.isFrozen(m.tags) && Object.isFrozen(m.tags![0]),
      'meta, ids and tags frozen',
    );
    assert(Object.isFrozen((m.extraInfo as { pad: object }).pad), 'nested extraInfo frozen');
    assertThrows(
      () => {
        (m.tags![0] as Record<string, unknown>).std = 5;
      },
      /read only|read-only|Cannot assign|not extensible/i,
      'mutating a tag throws',
    );
    const child = m.subset([0]).stampTags({ std: [9] });
    assertEqual(m.tags![0].std, 1, 'stamping a child leaves the parent untouched');
    assertEqual(child.tags![0].std, 9, 'child has the new tag');
  });

  t.test('tags align 1:1 and hold primitives only', () => {
    assertThrows(() => meta(2, { tags: [{}] }), /tags has 1 entries for 2 samples \(must align 1:1\)/, 'misaligned tags');
    assertThrows(
      () => meta(1, { tags: [{ x: { nested: 1 } }] }),
      /tags\[0\] \(sample "u0_g0"\)\.x is a Object; tags hold primitives only/,
      'object tag',
    );
    assertThrows(() => meta(1, { tags: [{ x: Number.NaN }] }), /must be finite/, 'NaN tag');
    assertThrows(
      () => meta(1).stampTags({ std: [new Float32Array(1)] }),
      /stampTags row 0 \(sample "u0_g0"\)\.std is a Float32Array/,
      'tensor-ish tag value',
    );
    assertThrows(() => meta(2).stampTags({ std: [1] }), /tag "std" has 1 values for 2 rows/, 'length mismatch');
    const realistic = meta(2).stampTags({ std: [0.5, 0], total_reward: [1, -1], prompt_id: ['p1', 'p1'], weight_version: [3, 3] });
    assertDeepEqual(
      realistic.tags,
      [
        { std: 0.5, total_reward: 1, prompt_id: 'p1', weight_version: 3 },
        { std: 0, total_reward: -1, prompt_id: 'p1', weight_version: 3 },
      ],
      'realistic tags align',
    );
    assertDeepEqual(meta(2).stampTags({ seq_len: [17, 4] }).sequenceLengths, [17, 4], 'seq_len tag becomes sequenceLengths');
    assertThrows(() => meta(2, { sequenceLengths: [1] }), /sequenceLengths has 1 entries for 2 samples/, 'lengths misaligned');
  });

  t.test('subset, slice and drop keep rows, lengths and tags aligned', () => {
    const m = meta(5, {
      sequenceLengths: [10, 11, 12, 13, 14],
      tags: [0, 1, 2, 3, 4].map((i) => ({ i })),
      fields: ['input_ids'],
      taskName: 'trainer',
    });
    const s = m.subset([3, 0, 3]);
    assertDeepEqual(s.sampleIds, ['u3_g0', 'u0_g0', 'u3_g0'], 'subset order, duplicates repeat');
    assertDeepEqual(s.sequenceLengths, [13, 10, 13], 'lengths follow subset');
    assertDeepEqual(
      s.tags!.map((x) => x.i),
      [3, 0, 3],
      'tags follow subset',
    );
    assertEqual(s.taskName, 'trainer', 'task kept');
    assertDeepEqual(s.fields, ['input_ids'], 'fields kept');
    assertThrows(() => m.subset([5]), /subset index 0 is 5, outside \[0, 5\)/, 'out of range');
    assertThrows(() => m.subset([-1]), /outside/, 'negative indices are rejected (no wrap-around surprises)');
    assertDeepEqual(m.slice(1, 3).sampleIds, ['u1_g0', 'u2_g0'], 'slice [1,3)');
    assertDeepEqual(m.slice(3, 99).sequenceLengths, [13, 14], 'slice clamps');
    assertDeepEqual(m.slice(-2).sampleIds, ['u3_g0', 'u4_g0'], 'negative start counts from the end');
    assertDeepEqual(m.drop([3, 1, 1])!.sampleIds, ['u0_g0', 'u2_g0', 'u4_g0'], 'drop keeps order, indices as a set');
    const same = m.drop([])!;
    assert(same !== m, 'drop([]) is a fresh copy');
    assertDeepEqual(same.toJSON(), m.toJSON(), 'drop([]) equals the original');
    assertEqual(m.drop([0, 1, 2, 3, 4]), null, 'dropping everything → null');
  });

  t.test('concat checks partition and fields; lengths/tags/lease survive only when all have them', () => {
    const a = meta(2, { sequenceLengths: [1, 2], tags: [{ k: 1 }, { k: 2 }], fields: ['x'], leaseId: 'L' });
    const b = new KVBatchMeta({
      partition: 'train',
      sampleIds: ['v0'],
      sequenceLengths: [3],
      tags: [{ k: 3 }],
      fields: ['x'],
      leaseId: 'L',
    });
    const ab = a.concat(b);
    assertDeepEqual(ab.sampleIds, ['u0_g0', 'u1_g0', 'v0'], 'ids appended');
    assertDeepEqual(ab.sequenceLengths, [1, 2, 3], 'lengths appended');
    assertEqual(ab.leaseId, 'L', 'shared lease kept');
    const noTags = b.with({ tags: null, leaseId: 'M' });
    const mixed = a.concat(noTags);
    assertEqual(mixed.tags, null, 'tags dropped when either side lacks them');
    assertEqual(mixed.leaseId, null, 'different leases → none');
    assertThrows(
      () => a.concat(new KVBatchMeta({ partition: 'val', sampleIds: ['z'], fields: ['x'] })),
      /meta 1 is in partition "val", expected "train"/,
      'partition mismatch',
    );
    assertThrows(() => a.concat(b.with({ fields: ['x', 'y'] })), /meta 1 has fields \["x","y"\], expected \["x"\]/, 'fields mismatch');
  });

  t.test('withFields unions names and returns an independent meta; JSON round-trip', () => {
    const m = meta(1, { fields: ['a', 'b'] });
    const w = m.withFields(['b', 'c', 'a']);
    assertDeepEqual(w.fields, ['a', 'b', 'c'], 'first occurrence wins, order kept');
    assertDeepEqual(meta(1).withFields(['x', 'x']).fields, ['x'], 'seeds from null and dedupes');
    assertDeepEqual(m.fields, ['a', 'b'], 'original untouched');
    const full = meta(2, {
      taskName: 't',
      fields: ['a'],
      sequenceLengths: [4, 5],
      tags: [{ s: 'x' }, { s: 'y' }],
      extraInfo: { plan: [1, 2] },
      leaseId: 'L1',
    });
    const back = KVBatchMeta.fromJSON(JSON.parse(JSON.stringify(full)));
    assertDeepEqual(back.toJSON(), full.toJSON(), 'structural equality after a JSON round-trip');
    assertDeepEqual(KVBatchMeta.fromJSON(JSON.parse(JSON.stringify(meta(0)))).toJSON(), meta(0).toJSON(), 'empty meta round-trips');
    assertThrows(() => KVBatchMeta.fromJSON({ partition: 'p', sampleIds: 'a' }), /sampleIds must be an array/, 'bad record');
    assertThrows(
      () => meta(1, { extraInfo: { t: new Float32Array(2) as unknown as number } }),
      /extraInfo\.t is not JSON data/,
      'no tensors in extraInfo',
    );
  });
});
