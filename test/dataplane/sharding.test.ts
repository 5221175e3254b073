/** DP sharding from sequence lengths (docs/dataplane.md §7): coverage, equal counts and token balance. */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { KVBatchMeta } from '../../src/dataplane/meta.ts';
import { shardBinPacked, shardContiguous, shardLengthBalanced, shardTokenTotals, type ShardPlan } from '../../src/dataplane/sharding.ts';
import { Rng } from '../../src/util/random.ts';

function batch(lengths: number[]): KVBatchMeta {
  return new KVBatchMeta({
    partition: 'train',
    taskName: 'trainer',
    sampleIds: lengths.map((_, i) => `s${i}`),
    fields: ['input_ids'],
    sequenceLengths: lengths,
    extraInfo: { step: 3 },
  });
}

/** Skewed lengths like real rollouts: many short, a few very long. */
function skewed(rng: Rng, n: number): number[] {
  return Array.from({ length: n }, () => Math.max(1, Math.round(Math.exp(rng.uniform(2, 8)))));
}

function checkCoverage(meta: KVBatchMeta, plan: ShardPlan, dp: number, what: string): void {
  assertEqual(plan.shards.length, dp, `${what}: one shard per rank`);
  const all = plan.shards.flatMap((s) => s.sampleIds);
  assertEqual(new Set(all).size, meta.size, `${what}: shards are disjoint`);
  assertDeepEqual([...all].sort(), [...meta.sampleIds].sort(), `${what}: union is the input`);
  assertDeepEqual(
    plan.order.map((i) => meta.sampleIds[i]),
    all,
    `${what}: order maps shard rows back to input positions`,
  );
  for (const s of plan.shards) {
    assertEqual(s.partition, meta.partition, `${what}: partition kept`);
    assertEqual(s.taskName, meta.taskName, `${what}: task kept`);
    assertDeepEqual(s.fields, meta.fields, `${what}: fields kept`);
    s.sampleIds.forEach((id, k) =>
      assertEqual(s.sequenceLengths![k], meta.sequenceLengths![meta.sampleIds.indexOf(id)], `${what}: length of ${id}`),
    );
  }
}

export default defineSuite('dataplane/sharding', (t) => {
  t.test('contiguous: equal blocks in input order', () => {
    const m = batch([5, 1, 7, 2, 9, 4]);
    const plan = shardContiguous(m, 3);
    checkCoverage(m, plan, 3, 'contiguous');
    assertDeepEqual(
      plan.shards.map((s) => s.sampleIds),
      [
        ['s0', 's1'],
        ['s2', 's3'],
        ['s4', 's5'],
      ],
      'blocks',
    );
    assertDeepEqual(plan.order, [0, 1, 2, 3, 4, 5], 'identity order');
    assertThrows(() => shardContiguous(m, 4), /6 rows do not split evenly over dpSize 4/, 'uneven split');
    assertThrows(() => shardContiguous(m, 0), /dpSize must be a positive integer/, 'dp 0');
  });

  t.test('length-sorted round-robin: token totals differ by at most longest − shortest', () => {
    const rng = new Rng(7);
    for (const dp of [2, 4, 8]) {
      const lengths = skewed(rng, dp * 16);
      const m = batch(lengths);
      const plan = shardLengthBalanced(m, dp);
      checkCoverage(m, plan, dp, `round-robin dp=${dp}`);
      plan.shards.forEach((s) => assertEqual(s.size, 16, `dp=${dp}: equal row counts`));
      const totals = shardTokenTotals(plan);
      const spread = Math.max(...totals) - Math.min(...totals);
      const bound = Math.max(...lengths) - Math.min(...lengths);
      assert(spread <= bound, `dp=${dp}: spread ${spread} > bound ${bound}`);
      // And much better than contiguous on the same skewed data (the reason this mode exists).
      const contiguous = shardTokenTotals(shardContiguous(m, dp));
      assert(spread <= Math.max(...contiguous) - Math.min(...contiguous), `dp=${dp}: no worse than contiguous`);
    }
    assertThrows(
      () => shardLengthBalanced(new KVBatchMeta({ partition: 'p', sampleIds: ['a', 'b'] }), 2),
      /no sequenceLengths/,
      'needs lengths',
    );
  });

  t.test('bin packing: capacity respected, bin count a multiple of dp, equal bins per rank, balanced', () => {
    const rng = new Rng(11);
    for (const dp of [1, 2, 4]) {
      const lengths = Array.from({ length: 64 }, () => rng.int(1, 2000));
      const m = batch(lengths);
      const cap = 4096;
      const plan = shardBinPacked(m, dp, { maxTokensPerBin: cap, padMultiple: 8 });
      checkCoverage(m, plan, dp, `binpack dp=${dp}`);
      const binRows = plan.shards.map((s) => s.extraInfo.binRows as number[]);
      const binTokens = plan.shards.map((s) => s.extraInfo.binTokens as number[]);
      const bins = binRows.flat().length;
      assertEqual(bins % dp, 0, `dp=${dp}: bin count ${bins} is a multiple of dp`);
      binRows.forEach((r) => assertEqual(r.length, bins / dp, `dp=${dp}: equal bins per rank`));
      for (const [r, s] of plan.shards.entries()) {
        let row = 0;
        binRows[r].forEach((count, b) => {
          const padded = s.sequenceLengths!.slice(row, row + count).reduce((a, n) => a + Math.ceil(n / 8) * 8, 0);
          assertEqual(padded, binTokens[r][b], `dp=${dp} rank ${r} bin ${b}: recorded padded tokens`);
          assert(padded <= cap, `dp=${dp} rank ${r} bin ${b}: ${padded} tokens exceed capacity ${cap}`);
          row += count;
        });
        assertEqual(row, s.size, `dp=${dp} rank ${r}: bins cover the shard`);
        assertEqual(s.extraInfo.dpRank, r, 'rank recorded');
        assertEqual(s.extraInfo.step, 3, 'input extraInfo kept');
      }
      const totals = binTokens.map((b) => b.reduce((a, n) => a + n, 0));
      const spread = Math.max(...totals) - Math.min(...totals);
      assert(spread <= cap, `dp=${dp}: rank token spread ${spread} exceeds one bin (${cap})`);
    }
  });

  t.test('bin packing raises the bin count to a multiple of dp and rejects impossible plans', () => {
    const m = batch([10, 10, 10]);
    const plan = shardBinPacked(m, 3, { maxTokensPerBin: 100 });
    assertDeepEqual(
      plan.shards.map((s) => s.extraInfo.binRows),
      [[1], [1], [1]],
      'one bin of 30 split into three bins of one row',
    );
    assertThrows(() => shardBinPacked(m, 4, { maxTokensPerBin: 100 }), /3 rows cannot fill 4 bins/, 'fewer rows than bins');
    assertThrows(
      () => shardBinPacked(batch([10, 300]), 1, { maxTokensPerBin: 256 }),
      /sample "s1" needs 300 padded tokens, more than maxTokensPerBin 256/,
      'row over capacity',
    );
    assertThrows(
      () => shardBinPacked(batch([10]), 1, { maxTokensPerBin: 256, padMultiple: 0 }),
      /padMultiple must be a positive integer/,
      'bad pad',
    );
  });
});
