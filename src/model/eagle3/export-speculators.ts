/**
 * EAGLE3 draft export in the speculators format (vllm-project/speculators), the one vLLM recognises
 * by its `speculators_config` and can serve from the draft folder alone (`vllm serve <draft>` starts
 * the verifier the config names). docs/export.md §7 lists the fields; in short:
 *
 *   config.json        no top-level `model_type` (vLLM picks its speculators parser from
 *                      `speculators_config`), `speculators_model_type: "eagle3"`,
 *                      `architectures: ["Eagle3Speculator"]`, the decoder layer as a Llama config in
 *                      `transformer_layer_config` (its `vocab_size` is the target's), `draft_vocab_size`,
 *                      `target_hidden_size`, the norm switches (all false: see below), vLLM's aux layer
 *                      ids, and `speculators_config` (algorithm, one greedy proposal method of
 *                      `speculative_tokens`, the verifier's name or path and architectures)
 *   model.safetensors  the SGLang export's tensors (bf16 weights, `d2t` int64, `t2d` bool, no
 *                      embedding) with the decoder layer's `midlayer.` prefix renamed `layers.0.`
 *
 * The norm switches are written out because the readers' defaults disagree with the draft:
 * vLLM takes a missing `norm_before_residual` as true, but SpecLab's draft (like SGLang's
 * LlamaForCausalLMEagle3 and SpecForge) keeps the raw incoming hidden state as the residual and
 * normalises only the attention input (docs/eagle3.md §3: `h1 = h_in + o_proj(attn)`). It passes the
 * raw, not the normalised, output to the next step (`norm_output` false), and has no norm before `fc`.
 */
import type { TensorToWrite } from '../../formats/safetensors-writer.ts';
import { writeSafetensors } from '../../formats/safetensors-writer.ts';
import type { FileStore } from '../../ports/storage.ts';
import type { Eagle3Config } from '../../config/eagle3-config.ts';
import { eagle3ExportTensors, eagle3SglangConfig, joinPath } from './export.ts';
import type { Eagle3Vocab } from './parameters.ts';
import { vllmAuxLayerIds } from './serving-layers.ts';

/** The prefix of the draft's one decoder layer: SpecForge's and SGLang's name, and the speculators name. */
const SGLANG_LAYER = 'midlayer.';
export const SPECULATORS_LAYER = 'layers.0.';

/** The target model the draft proposes for, as the speculators config names it. */
export interface SpeculatorsVerifier {
  /** A Hugging Face id or a path: what `vllm serve <draft>` loads as the target. */
  readonly nameOrPath: string;
  /** `architectures` of the verifier's config.json. */
  readonly architectures: readonly string[];
}

export interface SpeculatorsExportOptions {
  readonly verifier: SpeculatorsVerifier;
  /** Tokens proposed per verification (the greedy proposal's `speculative_tokens`; vLLM's default num_speculative_tokens). */
  readonly speculativeTokens: number;
  /**
   * The target layers whose outputs feed the draft, as SpecLab names them (the decoder layer whose
   * output is captured); written as vLLM names them (serving-layers.ts). Omitted: the serving default.
   */
  readonly auxLayerIds?: readonly number[];
}

/** A weight's name in the speculators format: the decoder layer's `midlayer.` becomes `layers.0.`. */
export function speculatorsTensorName(name: string): string {
  return name.startsWith(SGLANG_LAYER) ? SPECULATORS_LAYER + name.slice(SGLANG_LAYER.length) : name;
}

function checkOptions(o: SpeculatorsExportOptions): void {
  if (!Number.isInteger(o.speculativeTokens) || o.speculativeTokens < 1)
    throw new Error(`speculators export: speculative_tokens ${o.speculativeTokens} must be a positive integer`);
  if (o.verifier.nameOrPath.trim() === '') throw new Error('speculators export: the verifier name_or_path is empty');
  if (!o.verifier.architectures.every((a) => typeof a === 'string' && a !== ''))
    throw new Error(`speculators export: the verifier architectures ${JSON.stringify(o.verifier.architectures)} are not names`);
}

/** The decoder layer as a Llama config: the SGLang config less what the speculator holds at its top level. */
function transformerLayerConfig(c: Eagle3Config): Record<string, unknown> {
  const layer = eagle3SglangConfig(c);
  for (const key of ['architectures', 'draft_vocab_size', 'target_hidden_size']) delete layer[key];
  return layer;
}

/** The config.json of a speculators-format export. */
export function eagle3SpeculatorsConfig(c: Eagle3Config, o: SpeculatorsExportOptions): Record<string, unknown> {
  checkOptions(o);
  const config: Record<string, unknown> = {
    architectures: ['Eagle3Speculator'],
    speculators_model_type: 'eagle3',
    transformer_layer_config: transformerLayerConfig(c),
    draft_vocab_size: c.draftVocabSize,
    target_hidden_size: c.targetHiddenSize,
    norm_before_residual: false,
    norm_before_fc: false,
    fc_norm: false,
    norm_output: false,
  };
  if (o.auxLayerIds) config.eagle_aux_hidden_state_layer_ids = vllmAuxLayerIds(o.auxLayerIds);
  config.speculators_config = {
    algorithm: 'eagle3',
    proposal_methods: [{ proposal_type: 'greedy', speculative_tokens: o.speculativeTokens, verifier_accept_k: 1, accept_tolerance: 0 }],
    default_proposal_method: 'greedy',
    verifier: { name_or_path: o.verifier.nameOrPath, architectures: [...o.verifier.architectures] },
  };
  return config;
}

/** The model.safetensors bytes: the SGLang export's tensors under their speculators names, keys sorted. */
export function eagle3SpeculatorsSafetensors(
  c: Eagle3Config,
  weights: Readonly<Record<string, ArrayLike<number>>>,
  vocab: Eagle3Vocab,
): Uint8Array {
  const tensors = eagle3ExportTensors(c, weights, vocab);
  const renamed: Record<string, TensorToWrite> = {};
  for (const name of Object.keys(tensors)) renamed[speculatorsTensorName(name)] = tensors[name];
  const sorted: Record<string, TensorToWrite> = {};
  for (const name of Object.keys(renamed).sort()) sorted[name] = renamed[name];
  return writeSafetensors(sorted, { format: 'pt' });
}

/** Write `<dir>/model.safetensors` then `<dir>/config.json` (each atomically), as the SGLang export does. */
export async function writeEagle3SpeculatorsExport(
  store: FileStore,
  dir: string,
  c: Eagle3Config,
  weights: Readonly<Record<string, ArrayLike<number>>>,
  vocab: Eagle3Vocab,
  options: SpeculatorsExportOptions,
): Promise<void> {
  // The config first in memory: a bad option fails before any file is written.
  const config = eagle3SpeculatorsConfig(c, options);
  await store.writeAtomic(joinPath(dir, 'model.safetensors'), eagle3SpeculatorsSafetensors(c, weights, vocab));
  await store.writeAtomic(joinPath(dir, 'config.json'), new TextEncoder().encode(`${JSON.stringify(config, null, 2)}\n`));
}
