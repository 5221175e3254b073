/**
 * The target layers an EAGLE3 draft reads, as the serving engines capture them.
 *
 * SpecLab, SpecForge and SGLang name a capture layer by the decoder layer whose output it is
 * (0-based), in the draft's `eagle_config.eagle_aux_hidden_state_layer_ids`. SGLang captures id i at
 * the start of layer i + 1 (python/sglang/srt/models/llama.py, `set_eagle3_layers_to_capture`), once
 * per layer: it never captures the last layer's output (i = N − 1), and duplicate ids give one
 * capture. Either way the draft receives fewer than three hidden states; its fc, built for three, is
 * then skipped (one state of the draft's own width) or fails, and nothing says why.
 *
 * vLLM reads a top-level `eagle_aux_hidden_state_layer_ids` first (vllm/v1/worker/gpu_model_runner.py,
 * `_get_eagle3_aux_layers_from_config`) and captures id k as the input of layer k, the output of
 * layer k − 1: the same layers are SpecLab's ids plus one. An export writes both keys, so each engine
 * reads the layers the draft was trained on.
 *
 * Three distinct layers below N − 1 exist from N = 4 layers on; smaller targets (the bundled 2-layer
 * lab target) train and evaluate in SpecLab, but no engine can serve their drafts as trained.
 */

/** The hidden states an EAGLE3 draft's fc takes (docs/eagle3.md §3). */
export const AUX_LAYER_COUNT = 3;

/** Why SGLang cannot capture `ids` of an N-layer target as trained (empty when it can). */
export function auxLayerServingProblems(ids: readonly number[], numLayers: number): string[] {
  const problems: string[] = [];
  if (ids.length !== AUX_LAYER_COUNT) problems.push(`${ids.length} layers, not ${AUX_LAYER_COUNT}`);
  const repeated = ids.filter((id, i) => ids.indexOf(id) !== i);
  if (repeated.length > 0) problems.push(`layer ${[...new Set(repeated)].join(', ')} repeated (each layer is captured once)`);
  const last = ids.filter((id) => id >= numLayers - 1);
  if (last.length > 0)
    problems.push(
      `layer ${[...new Set(last)].join(', ')} of a ${numLayers}-layer target is not capturable (SGLang captures layer i as the input of layer i + 1, so at most ${numLayers - 2})`,
    );
  return problems;
}

/** Whether any servable set exists: three distinct layers below N − 1. */
export function hasServableAuxLayers(numLayers: number): boolean {
  return numLayers - 1 >= AUX_LAYER_COUNT;
}

/** The same layers as vLLM names them (the layer whose input is captured). */
export function vllmAuxLayerIds(ids: readonly number[]): number[] {
  return ids.map((id) => id + 1);
}

/**
 * The one-line verdict for a draft on `ids` of an N-layer target: undefined when servable; else the
 * problems, and whether that is refused (a target with a servable set) or only warned of.
 */
export function auxLayerServing(ids: readonly number[], numLayers: number): { refuse: boolean; message: string } | undefined {
  const problems = auxLayerServingProblems(ids, numLayers);
  if (problems.length === 0) return undefined;
  const refuse = hasServableAuxLayers(numLayers);
  const what = `aux layers [${ids.join(', ')}]: ${problems.join('; ')}`;
  return refuse
    ? { refuse, message: `${what}; give ${AUX_LAYER_COUNT} distinct layers below ${numLayers - 1}` }
    : {
        refuse,
        message: `${what}: a ${numLayers}-layer target has no ${AUX_LAYER_COUNT} distinct layers SGLang or vLLM can capture, so this draft trains and evaluates in SpecLab only (served, it would get fewer hidden states than it was trained on)`,
      };
}
