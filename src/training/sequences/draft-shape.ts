/**
 * The draft's shape chosen from a run's settings and its target: which target layers feed the draft
 * (aux layers) and how large its vocabulary is. Errors name the setting and its flag.
 */
import { defaultAuxLayerIds } from '../../inference/target-feature-source.ts';
import { auxLayerServing } from '../../model/eagle3/serving-layers.ts';

export interface AuxLayerOptions {
  /** The setting as errors name it, e.g. `auxLayers (--aux-layers)`. */
  field?: string;
}

/** The aux layers of a run: the given ones, else the default rule (defaultAuxLayerIds); errors name the flag. */
export function resolveAuxLayers(given: readonly number[] | undefined, numLayers: number, options: AuxLayerOptions = {}): number[] {
  const field = options.field ?? 'auxLayers (--aux-layers)';
  const ids = given ? [...given] : defaultAuxLayerIds(numLayers);
  for (const id of ids) if (id >= numLayers) throw new Error(`${field}: layer ${id} outside 0..${numLayers - 1}`);
  // A set SGLang and vLLM cannot capture is refused before training, where the target has one they can.
  const serving = auxLayerServing(ids, numLayers);
  if (serving?.refuse) throw new Error(`${field}: ${serving.message}`);
  return ids;
}

/** `aux layers [..]` as a run prints it, with the warning of a target too small for a servable set. */
export function auxLayersLine(ids: readonly number[], numLayers: number): string {
  const serving = auxLayerServing(ids, numLayers);
  return `aux layers [${ids.join(', ')}]${serving ? `\nwarning: ${serving.message}` : ''}`;
}

/** The draft vocabulary size: the given one, else the target's capped at 32000; never above the target's. */
export function resolveDraftVocabSize(
  given: number | undefined,
  targetVocabSize: number,
  field = 'draftVocabSize (--draft-vocab-size)',
): number {
  const size = given ?? Math.min(targetVocabSize, 32000);
  if (size > targetVocabSize) throw new Error(`${field} ${size} exceeds the target vocabulary ${targetVocabSize}`);
  return size;
}
