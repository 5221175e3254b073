/**
 * What proposes draft tokens to speculative decoding (speculative.ts, docs/eagle3.md §9-§10): the
 * `DraftProposer` contract the verification loop calls, and the EAGLE3 draft as one. The draft keeps
 * its own KV cache: each call first catches up over the positions the target verified since the last
 * one (their true aux hidden states), then runs k − 1 chain steps on its own outputs. Greedy proposals
 * take the draft's argmax; sampled ones draw from the draft's distribution q and return it, for the
 * rejection rule.
 *
 * Kept apart from the verification loop because the two meet only at this interface: the loop never
 * sees the draft, and a test drives the loop with a scripted proposer.
 */
import type { Tensor } from '../gpu/tensor.ts';
import type { SamplingOptions } from '../model/target/sampling.ts';
import type { Rng } from '../util/random.ts';
import type { DraftRowsOutput, Eagle3Drafter } from './eagle3-drafter.ts';
import { draftProbabilities, sampleFrom } from './speculative-sampling.ts';

/** What a sampled proposal draws with: the run's sampling settings and its one Rng. */
export interface DraftSampler {
  readonly options: SamplingOptions;
  readonly rng: Rng;
}

/** Sampled draft tokens and the distributions they were drawn from. */
export interface SampledProposal {
  readonly tokens: number[];
  /** q_i for each token: float64 probabilities over the TARGET vocabulary (0 outside the draft's). */
  readonly probs: Float64Array[];
}

/**
 * Something that proposes draft tokens. Calls for one prompt: `begin`, then `propose` per
 * verification round, then `end`.
 */
export interface DraftProposer {
  begin(prompt: readonly number[], maxLen: number): void | Promise<void>;
  /**
   * Propose `k` ≥ 1 tokens to follow `tokens` (the accepted sequence: prompt + generated; its last
   * token has not been through the target yet). `newAux` [m, A·Ht] holds the target's aux hidden
   * states at positions tokens.length − 1 − m .. tokens.length − 2: those verified and accepted since
   * the previous call (the whole prompt on the first call). Borrowed: valid during the call only.
   */
  propose(tokens: readonly number[], newAux: Tensor, k: number): Promise<number[]>;
  /**
   * As `propose`, but each token is drawn from the draft's distribution (the sampler's settings
   * applied to the draft logits) with the sampler's Rng, and that distribution is returned with it.
   * Needed for a run with temperature > 0.
   */
  proposeSampled?(tokens: readonly number[], newAux: Tensor, k: number, sampler: DraftSampler): Promise<SampledProposal>;
  end(): void;
}

/** The EAGLE3 draft as a proposer: catch-up over newly verified positions, then k − 1 chain steps. */
export class Eagle3Proposer implements DraftProposer {
  /** Positions whose step-0 entry (true target aux) is in the draft cache. */
  private committed = 0;

  constructor(readonly drafter: Eagle3Drafter) {}

  begin(_prompt: readonly number[], maxLen: number): void {
    this.drafter.reserve(maxLen);
    this.committed = 0;
  }

  propose(tokens: readonly number[], newAux: Tensor, k: number): Promise<number[]> {
    return this.chain(tokens, newAux, k, (row) => this.drafter.greedyTargetIds(row)[0]);
  }

  async proposeSampled(tokens: readonly number[], newAux: Tensor, k: number, sampler: DraftSampler): Promise<SampledProposal> {
    const probs: Float64Array[] = [];
    const V = this.drafter.config.vocabSize;
    const drafts = await this.chain(tokens, newAux, k, (row) => {
      const q = draftProbabilities(row, sampler.options, (d) => this.drafter.toTarget(d), V);
      probs.push(q);
      return sampleFrom(q, sampler.rng);
    });
    return { tokens: drafts, probs };
  }

  /** Catch-up, then k − 1 chain steps; `pick` turns each step's draft logits [D] into a target id. */
  private async chain(
    tokens: readonly number[],
    newAux: Tensor,
    k: number,
    pick: (draftLogits: Float32Array) => number,
  ): Promise<number[]> {
    const gpu = this.drafter.gpu;
    const n = tokens.length - 1; // positions 0..n−1 are verified by the target
    const m = n - this.committed;
    if (m < 1)
      throw new Error(
        `Eagle3Proposer: no newly verified position (accepted ${tokens.length} tokens, ${this.committed} already in the draft cache)`,
      );
    const auxWidth = 3 * this.drafter.config.targetHiddenSize;
    if (newAux.numel !== m * auxWidth)
      throw new Error(`Eagle3Proposer: newAux has ${newAux.numel} values, ${m} new positions × ${auxWidth} expected`);
    // Catch-up: rows u = committed..n−1 with fc(aux[u]) and token x[u + 1]; the last row is step 0.
    const H = this.drafter.config.hiddenSize;
    const D = this.drafter.config.draftVocabSize;
    const h0 = await this.drafter.fc(newAux, m);
    let out: DraftRowsOutput | undefined;
    try {
      out = await this.drafter.rows(h0, tokens.slice(this.committed + 1, n + 1), this.committed);
    } finally {
      gpu.release(h0);
    }
    this.committed = n;
    const drafts: number[] = [];
    try {
      for (let j = 0; ; j++) {
        const rows = out.logits.shape[0];
        const logits = (await gpu.read(out.logits)) as Float32Array;
        const next = pick(logits.subarray((rows - 1) * D, rows * D));
        drafts.push(next);
        if (drafts.length === k) break;
        // Step j + 1 at position n + j: hidden = the previous raw output (last row), token = the draft just chosen.
        const hPrev = gpu.tensor([1, H], 'f32', 'draft.hPrev');
        gpu.batcher.copyBuffer(
          out.hOut.part.buffer,
          out.hOut.part.byteOffset + (rows - 1) * H * 4,
          hPrev.part.buffer,
          hPrev.part.byteOffset,
          H * 4,
        );
        const prev = out;
        out = undefined;
        try {
          out = await this.drafter.rows(hPrev, [next], n + j);
        } finally {
          gpu.release(hPrev, prev.hOut, prev.logits);
        }
      }
    } finally {
      if (out) gpu.release(out.hOut, out.logits);
    }
    return drafts;
  }

  end(): void {
    this.committed = 0;
  }
}
