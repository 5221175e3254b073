/**
 * The GPU memory plan on the lab page: the same pure plan `speclab train` prints
 * (src/training/run/memory-plan.ts), for the loaded target, the adapter's limits and the settings in the
 * form, redrawn whenever one of them changes — so a visitor sees before Start what a run will hold
 * and whether it fits one binding. WebGPU reports no total memory: only the buffer limits are checked.
 */
import { draftConfigFor } from '../../src/training/sequences/eagle3-data.ts';
import { planTrainingMemory, sessionMemoryInput, type MemoryPlan } from '../../src/training/run/memory-plan.ts';
import { formatBytes } from '../../src/util/bytes.ts';
import type { LabSettings, Report } from './protocol.ts';

export type MemoryBasis = Extract<Report, { type: 'memory-basis' }>;

/**
 * The plan of a lab run with `settings` (the worker's session): lab prompts continued by the target,
 * or, with conversations, their rows as they are (no reply generated).
 */
export function labMemoryPlan(basis: MemoryBasis, settings: LabSettings): MemoryPlan {
  const rows = basis.sequenceLengths?.slice(0, settings.trainPrompts);
  const prompts = rows ?? basis.trainPromptLengths.slice(0, settings.trainPrompts);
  const maxLength = rows ? Math.max(1, ...rows) : Math.max(1, ...prompts) + settings.responseLength;
  const input = sessionMemoryInput({
    maxBindingBytes: Math.min(basis.limits.maxStorageBufferBindingSize, basis.limits.maxBufferSize),
    heldOutSequences: basis.heldOut, // the lab scores its held-out prompts while it trains
    target: basis.target,
    draft: draftConfigFor({ config: basis.target }, Math.min(settings.draftVocabSize, basis.target.vocabSize)),
    batchSize: settings.batchSize,
    tttLength: settings.tttLength,
    roundPrompts: basis.roundPrompts,
    maxLength,
    sequences: prompts.length,
    generated: Math.max(prompts.length, basis.heldOut),
  });
  return planTrainingMemory(input, { limits: basis.limits });
}

/** Renders the plan (or why there is none yet) into `container` as a compact table with a verdict. */
export function renderMemoryPlan(container: HTMLElement, basis: MemoryBasis | undefined, settings: () => LabSettings): void {
  container.replaceChildren();
  const caption = document.createElement('p');
  container.append(caption);
  if (!basis) {
    container.dataset.state = 'waiting';
    caption.textContent = 'GPU memory plan: load a model to see it.';
    return;
  }
  let plan: MemoryPlan;
  try {
    plan = labMemoryPlan(basis, settings());
  } catch (err) {
    container.dataset.state = 'error';
    caption.textContent = `GPU memory plan: ${(err as Error).message}`;
    return;
  }
  container.dataset.state = plan.fits ? 'fits' : 'does-not-fit';
  container.dataset.total = String(plan.totalBytes);
  container.dataset.largest = plan.largest.label;
  caption.textContent = `GPU memory plan: ${formatBytes(plan.totalBytes)} in all, largest ${plan.largest.label} (${formatBytes(plan.largest.bytes)}); ${plan.fits ? `fits this adapter (one binding holds ${formatBytes(plan.maxBindingBytes)})` : `does not fit: ${plan.problems.join('; ')}`}`;
  const table = document.createElement('table');
  table.className = 'memory-plan';
  for (const item of plan.items) {
    if (item.bytes === 0) continue;
    const row = table.insertRow();
    row.title = item.detail;
    row.insertCell().textContent = item.label;
    row.insertCell().textContent = formatBytes(item.bytes);
  }
  container.append(table);
  if (!plan.fits && plan.suggestions.length > 0) {
    const lower = document.createElement('p');
    lower.textContent = `Lower: ${plan.suggestions.join('; ')}`;
    container.append(lower);
  }
}
