/**
 * Data-parallel sharding of a claimed batch from metadata alone (docs/dataplane.md §7): the driver splits a
 * meta by `sequenceLengths` and each rank then reads only its rows. Pure functions; ids are never
 * minted, only regrouped.
 *
 * Every mode gives each rank the same number of rows (or bins): ranks with different micro-batch
 * counts desynchronise collectives and hang, which is worse than imperfect balance.
 */
import { KVBatchMeta } from './meta.ts';
import { DataPlaneError } from './types.ts';

export interface ShardPlan {
  /** One meta per DP rank. */
  readonly shards: readonly KVBatchMeta[];
  /** Input position of each row of the concatenated shards (to restore input order of results). */
  readonly order: readonly number[];
}

/** Rank r gets the r-th contiguous block of n/dp rows. Not length-aware. */
export function shardContiguous(meta: KVBatchMeta, dpSize: number): ShardPlan {
  const per = equalShare(meta, dpSize, 'shardContiguous');
  const groups = Array.from({ length: dpSize }, (_, r) => range(r * per, (r + 1) * per));
  return build(meta, groups, () => ({}));
}

/**
 * Sort rows by length and deal them round-robin: rank r gets sorted positions r, r+dp, r+2dp, …
 * Each round hands out dp consecutive sorted lengths, so any two ranks' token totals differ by at
 * most (longest − shortest) row.
 */
export function shardLengthBalanced(meta: KVBatchMeta, dpSize: number): ShardPlan {
  equalShare(meta, dpSize, 'shardLengthBalanced');
  const lengths = requireLengths(meta, 'shardLengthBalanced');
  const sorted = range(0, meta.size).sort((a, b) => lengths[a] - lengths[b] || a - b);
  const groups = Array.from({ length: dpSize }, (_, r) => sorted.filter((_, k) => k % dpSize === r));
  return build(meta, groups, () => ({}));
}

export interface BinPackOptions {
  /** Capacity of one bin (micro-batch) in padded tokens. */
  readonly maxTokensPerBin: number;
  /** Each row's length is rounded up to this multiple before packing (default 1). */
  readonly padMultiple?: number;
}

/**
 * First-fit-decreasing bin packing of padded lengths, with the bin count raised to a multiple of
 * `dpSize` (extra bins take single rows split off the fullest bins), then bins dealt so each rank
 * gets the same number of bins: per round of dp bins, the heaviest bin goes to the lightest rank.
 * Each shard's `extraInfo` carries `binRows` (rows per bin, in row order) and `binTokens`.
 */
export function shardBinPacked(meta: KVBatchMeta, dpSize: number, options: BinPackOptions): ShardPlan {
  checkDp(dpSize, 'shardBinPacked');
  const lengths = requireLengths(meta, 'shardBinPacked');
  const pad = options.padMultiple ?? 1;
  const cap = options.maxTokensPerBin;
  if (!Number.isInteger(pad) || pad < 1)
    throw new DataPlaneError('invalid_argument', `shardBinPacked: padMultiple must be a positive integer, got ${pad}`);
  if (!Number.isInteger(cap) || cap < 1)
    throw new DataPlaneError('invalid_argument', `shardBinPacked: maxTokensPerBin must be a positive integer, got ${cap}`);
  if (meta.size === 0) throw new DataPlaneError('invalid_argument', 'shardBinPacked: empty meta');
  const padded = lengths.map((n) => Math.max(pad, Math.ceil(n / pad) * pad));
  padded.forEach((n, i) => {
    if (n > cap)
      throw new DataPlaneError(
        'invalid_argument',
        `shardBinPacked: sample ${JSON.stringify(meta.sampleIds[i])} needs ${n} padded tokens, more than maxTokensPerBin ${cap}`,
      );
  });

  interface Bin {
    rows: number[];
    tokens: number;
  }
  const bins: Bin[] = [];
  const byLength = range(0, meta.size).sort((a, b) => padded[b] - padded[a] || a - b);
  for (const i of byLength) {
    const bin = bins.find((b) => b.tokens + padded[i] <= cap);
    if (bin) {
      bin.rows.push(i);
      bin.tokens += padded[i];
    } else {
      bins.push({ rows: [i], tokens: padded[i] });
    }
  }

  const target = Math.max(dpSize, Math.ceil(bins.length / dpSize) * dpSize);
  if (meta.size < target) {
    throw new DataPlaneError(
      'invalid_argument',
      `shardBinPacked: ${meta.size} rows cannot fill ${target} bins (a multiple of dpSize ${dpSize})`,
    );
  }
  while (bins.length < target) {
    // Split the smallest row off the bin with the most rows (then most tokens); a single row never
    // exceeds the capacity, so the new bin is valid.
    const donor = bins.filter((b) => b.rows.length > 1).sort((a, b) => b.rows.length - a.rows.length || b.tokens - a.tokens)[0];
    const smallest = donor.rows.reduce((best, i) => (padded[i] < padded[best] ? i : best), donor.rows[0]);
    donor.rows.splice(donor.rows.indexOf(smallest), 1);
    donor.tokens -= padded[smallest];
    bins.push({ rows: [smallest], tokens: padded[smallest] });
  }

  const rankBins: Bin[][] = Array.from({ length: dpSize }, () => []);
  const rankTokens = new Array<number>(dpSize).fill(0);
  const heaviestFirst = [...bins].sort((a, b) => b.tokens - a.tokens);
  for (let round = 0; round < heaviestFirst.length; round += dpSize) {
    const ranks = range(0, dpSize).sort((a, b) => rankTokens[a] - rankTokens[b] || a - b);
    heaviestFirst.slice(round, round + dpSize).forEach((bin, k) => {
      rankBins[ranks[k]].push(bin);
      rankTokens[ranks[k]] += bin.tokens;
    });
  }
  const groups = rankBins.map((bs) => bs.flatMap((b) => b.rows));
  return build(meta, groups, (r) => ({ binRows: rankBins[r].map((b) => b.rows.length), binTokens: rankBins[r].map((b) => b.tokens) }));
}

/** Padded-or-raw token total per shard, for balance reporting. */
export function shardTokenTotals(plan: ShardPlan): number[] {
  return plan.shards.map((s) => (s.sequenceLengths ?? []).reduce((a, b) => a + b, 0));
}

function build(meta: KVBatchMeta, groups: number[][], extra: (rank: number) => Record<string, number[]>): ShardPlan {
  const shards = groups.map((rows, r) => {
    const shard = meta.subset(rows);
    const info = extra(r);
    return Object.keys(info).length === 0
      ? shard
      : shard.with({ extraInfo: { ...meta.extraInfo, ...info, dpRank: r, dpSize: groups.length } });
  });
  return { shards, order: groups.flat() };
}

function checkDp(dpSize: number, what: string): void {
  if (!Number.isInteger(dpSize) || dpSize < 1)
    throw new DataPlaneError('invalid_argument', `${what}: dpSize must be a positive integer, got ${dpSize}`);
}

function equalShare(meta: KVBatchMeta, dpSize: number, what: string): number {
  checkDp(dpSize, what);
  if (meta.size === 0 || meta.size % dpSize !== 0) {
    throw new DataPlaneError(
      'invalid_argument',
      `${what}: ${meta.size} rows do not split evenly over dpSize ${dpSize} (every rank needs the same row count)`,
    );
  }
  return meta.size / dpSize;
}

function requireLengths(meta: KVBatchMeta, what: string): readonly number[] {
  if (meta.sequenceLengths === null) {
    throw new DataPlaneError('invalid_argument', `${what}: meta has no sequenceLengths (producers must tag seq_len, or stampTags it)`);
  }
  return meta.sequenceLengths;
}

function range(start: number, stop: number): number[] {
  return Array.from({ length: Math.max(0, stop - start) }, (_, k) => start + k);
}
