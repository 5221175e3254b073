/**
 * The lab worker's "Try the draft" panel: decoding of a held-out prompt by the target alone, then
 * speculatively with the current (trained or imported) draft, streaming the tokens. Greedy, or
 * sampled (temperature, top-p, top-k, seed) with the draft's tokens accepted by the rejection rule.
 */
import type { Eagle3DraftCheckpoint } from '../../src/inference/eagle3-drafter.ts';
import { evaluateDraft } from '../../src/inference/evaluate-draft.ts';
import { timeTargetOnly } from '../../src/inference/speculative.ts';
import { isSampling } from '../../src/inference/speculative-sampling.ts';
import type { SpecSampling } from './protocol.ts';
import { auxLayersFor, lab, post } from './worker-state.ts';
import { heldOutPrompts } from './worker-conversations.ts';

async function currentDraft(): Promise<{ draft: Eagle3DraftCheckpoint; label: string } | undefined> {
  if (lab.imported) return lab.imported;
  if (lab.session) return { draft: await lab.session.currentDraft(), label: `trained draft at step ${lab.session.globalStep}` };
  return undefined;
}

export async function specRun(prompt: number, maxNewTokens: number, numDraftTokens: number, sampling: SpecSampling): Promise<void> {
  if (lab.running && !lab.pauseRequested) throw new Error('pause or stop training first: speculative decoding shares the GPU');
  const m = lab.model!;
  const chosen = await currentDraft();
  if (!chosen) throw new Error('no draft yet: train one (or import an export) first');
  const ids = heldOutPrompts()[prompt];
  if (!ids) throw new Error(`no held-out prompt ${prompt}`);
  const decode = (t: number[]) => (m.tokenizer ? m.tokenizer.decode(t) : t.join(' '));
  const now = () => performance.now();
  const sampled = isSampling(sampling);
  const base = await timeTargetOnly(m.target, [ids], maxNewTokens, now, undefined, sampled ? sampling : undefined);
  const out: number[] = [];
  const result = await evaluateDraft(m.target, lab.gpu!, chosen.draft, [ids], {
    maxNewTokens,
    numDraftTokens,
    auxLayerIds: chosen.draft.auxLayerIds ?? auxLayersFor(m.config.numLayers),
    reference: base.tokens,
    sampling: sampled ? sampling : undefined,
    now,
    onVerify: (e) => {
      for (const t of e.accepted) {
        out.push(t);
        post({ type: 'spec-token', text: decode([t]), draft: true, first: false });
      }
      out.push(e.bonus);
      post({ type: 'spec-token', text: decode([e.bonus]), draft: false, first: e.first === true });
    },
  });
  post({
    type: 'spec-done',
    stats: {
      acceptance: result.acceptanceLength,
      lossless: result.lossless,
      sampled,
      tpsDraft: result.tokensPerSecond,
      tpsTarget: base.speed.tokensPerSecond,
      text: decode(out.slice(0, maxNewTokens)),
      targetText: decode(base.tokens[0]),
      draftSource: chosen.label,
    },
  });
}
