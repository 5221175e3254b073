/**
 * The "Try the draft" panel on the page: greedy or sampled speculative decoding of a held-out prompt
 * (temperature, top-p, top-k and seed, each checked against its own min / max / step), the streamed
 * output with the accepted draft tokens highlighted, the measured acceptance length and the speed
 * against the target alone. The decoding itself runs in the worker (worker-spec.ts).
 */
import type { Command, Report, SpecSampling } from './protocol.ts';
import { invalidReason } from './settings-form.ts';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

const SAMPLING_INPUTS = { temperature: 'spec-temperature', topP: 'spec-top-p', topK: 'spec-top-k', seed: 'spec-seed' } as const;

/** The sampling inputs' values, or the first problem (naming the input) when one is out of range. */
export function readSampling(): SpecSampling | string {
  const out: Record<string, number> = {};
  for (const [key, id] of Object.entries(SAMPLING_INPUTS)) {
    const el = $<HTMLInputElement>(id);
    const why = invalidReason(el);
    if (why) el.setAttribute('aria-invalid', 'true');
    else el.removeAttribute('aria-invalid');
    if (why) return why;
    out[key] = Number(el.value);
  }
  return out as unknown as SpecSampling;
}

function showSpeed(tpsDraft: number, tpsTarget: number): void {
  const el = $('spec-speed');
  const ratio = tpsDraft / tpsTarget;
  el.dataset.state = ratio >= 1 ? 'faster' : 'slower';
  el.dataset.speedup = String(ratio);
  el.textContent =
    ratio >= 1
      ? `Speed-up: ${ratio.toFixed(2)}× faster with the draft (${tpsDraft.toFixed(1)} against ${tpsTarget.toFixed(1)} tokens/s).`
      : `Slow-down: decoding with the draft is ${(1 / ratio).toFixed(2)}× SLOWER than the target alone (${tpsDraft.toFixed(1)} against ${tpsTarget.toFixed(1)} tokens/s): the draft's passes cost more here than the accepted tokens save.`;
}

/** Wires the panel's button: a click checks the sampling inputs and asks the worker to decode. */
export function initSpecPanel(send: (cmd: Command) => void, button: HTMLButtonElement): void {
  button.addEventListener('click', () => {
    const stats = $('spec-stats');
    const sampling = readSampling();
    if (typeof sampling === 'string') {
      stats.dataset.state = 'invalid';
      stats.textContent = sampling;
      return;
    }
    $('spec-output').textContent = '';
    stats.dataset.state = 'running';
    stats.textContent = sampling.temperature > 0 ? `sampling at temperature ${sampling.temperature}…` : 'decoding (greedy)…';
    $('spec-speed').textContent = '';
    button.disabled = true;
    send({
      type: 'spec-run',
      prompt: Number($<HTMLSelectElement>('spec-prompt').value || 0),
      maxNewTokens: 32,
      numDraftTokens: 3,
      sampling,
    });
  });
}

/** Renders a report of the panel; false for any other report. */
export function handleSpecReport(r: Report, button: HTMLButtonElement): boolean {
  switch (r.type) {
    case 'spec-token': {
      const span = document.createElement('span');
      span.textContent = r.text;
      if (r.draft) span.className = 'draft';
      $('spec-output').append(span);
      return true;
    }
    case 'spec-done': {
      const s = r.stats;
      const el = $('spec-stats');
      Object.assign(el.dataset, {
        state: 'done',
        acceptance: String(s.acceptance),
        lossless: String(s.lossless),
        sampled: String(s.sampled),
        tpsDraft: String(s.tpsDraft),
        tpsTarget: String(s.tpsTarget),
        text: s.text,
        targetText: s.targetText,
      });
      const verdict = s.sampled
        ? 'sampled: accepted by the rejection rule, so the text is distributed exactly as sampling from the target alone (a target-only draw follows for comparison)'
        : s.lossless
          ? 'identical to target-only greedy decoding'
          : 'DIFFERS from target-only decoding';
      el.textContent = `${s.draftSource}: acceptance length ${s.acceptance.toFixed(3)} tokens per target verification (measured, bonus included); ${verdict}.`;
      if (s.sampled)
        el.append(Object.assign(document.createElement('span'), { className: 'detail', textContent: ` Target alone: “${s.targetText}”` }));
      showSpeed(s.tpsDraft, s.tpsTarget);
      button.disabled = false;
      return true;
    }
    case 'spec-error': {
      const el = $('spec-stats');
      el.dataset.state = 'error';
      el.textContent = r.message;
      button.disabled = false;
      return true;
    }
    default:
      return false;
  }
}
