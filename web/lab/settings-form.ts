/**
 * The run settings form: every input checked against its own stated min, max and step (the HTML
 * attributes are the one source of the limits), with the message beside the input and Start
 * disabled while any is invalid.
 */
import { DEFAULT_SETTINGS, type LabSettings } from './protocol.ts';

export const SETTING_INPUTS: Record<keyof LabSettings, string> = {
  tttLength: 'ttt-length',
  draftVocabSize: 'draft-vocab',
  batchSize: 'batch-size',
  lr: 'lr',
  rolloutWorkers: 'rollout-workers',
  epochs: 'epochs',
  trainPrompts: 'train-prompts',
  responseLength: 'response-length',
};

const input = (id: string) => document.getElementById(id) as HTMLInputElement;

function labelOf(el: HTMLInputElement): string {
  return el.labels?.[0]?.firstChild?.textContent?.trim() ?? el.id;
}

/** The limits an input states (its min, max and step attributes). */
export interface NumberLimits {
  min?: number;
  max?: number;
  /** step="any" allows fractions; any other step asks for a whole number. */
  integer: boolean;
}

/** Why `raw` is not allowed by `limits` (a message naming `label`), or undefined when it is. Pure. */
export function numberProblem(label: string, raw: string, limits: NumberLimits): string | undefined {
  const text = raw.trim();
  const value = Number(text);
  if (text === '' || !Number.isFinite(value)) return `${label}: enter a number`;
  if (limits.integer && !Number.isInteger(value)) return `${label}: a whole number, please (got ${text})`;
  if (limits.min !== undefined && value < limits.min) return `${label}: at least ${limits.min} (got ${text})`;
  if (limits.max !== undefined && value > limits.max) return `${label}: at most ${limits.max} (got ${text})`;
  return undefined;
}

/** Why `el`'s value is not allowed by its own min / max / step, or undefined when it is. */
export function invalidReason(el: HTMLInputElement): string | undefined {
  return numberProblem(labelOf(el), el.value, {
    min: el.min === '' ? undefined : Number(el.min),
    max: el.max === '' ? undefined : Number(el.max),
    integer: el.step !== 'any',
  });
}

/** Marks every invalid input (aria-invalid, a message after it) and returns the messages. */
export function validateSettings(): string[] {
  const problems: string[] = [];
  for (const id of Object.values(SETTING_INPUTS)) {
    const el = input(id);
    const why = invalidReason(el);
    let note = document.getElementById(`${id}-error`);
    if (why) {
      problems.push(why);
      if (!note) {
        note = document.createElement('span');
        note.id = `${id}-error`;
        note.className = 'field-error';
        el.after(note);
      }
      note.textContent = why;
      el.setAttribute('aria-invalid', 'true');
      el.setAttribute('aria-describedby', note.id);
    } else {
      note?.remove();
      el.removeAttribute('aria-invalid');
      el.removeAttribute('aria-describedby');
    }
  }
  return problems;
}

/** The settings in the form; throws the first problem when one is invalid. */
export function readSettings(): LabSettings {
  const problems = validateSettings();
  if (problems.length > 0) throw new Error(problems[0]);
  const out = { ...DEFAULT_SETTINGS };
  for (const [key, id] of Object.entries(SETTING_INPUTS) as [keyof LabSettings, string][]) out[key] = Number(input(id).value);
  return out;
}

export function writeSettings(s: LabSettings): void {
  for (const [key, id] of Object.entries(SETTING_INPUTS) as [keyof LabSettings, string][]) input(id).value = String(s[key]);
  validateSettings();
}
