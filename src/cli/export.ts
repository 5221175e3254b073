/**
 * `speclab export`: turn an EAGLE3 training checkpoint into the directory SGLang loads.
 *
 *   speclab export --checkpoint <dir>/<run id>-step<N> --out <dir> [--draft-config <config.json>]
 *
 * The checkpoint folder is one written by src/training/train-checkpoint.ts (only complete ones, with a
 * valid COMPLETE marker, are accepted); the draft config and t2d/d2t are read from it unless
 * --draft-config overrides the config. Writes <out>/model.safetensors (bf16, d2t int64, t2d bool,
 * no embedding) and <out>/config.json (docs/export.md §5).
 */
import { exportEagle3Checkpoint } from '../training/checkpoint-export.ts';
import type { Platform } from './platform.ts';
import { splitPath } from '../util/paths.ts';

export const EXPORT_USAGE = 'usage: speclab export --checkpoint <dir>/<run id>-step<N> --out <dir> [--draft-config <config.json>]';

export interface ExportArgs {
  checkpoint: string;
  out: string;
  draftConfig?: string;
}

export function parseExportArgs(args: readonly string[]): ExportArgs {
  const out: Partial<ExportArgs> = {};
  for (let i = 0; i < args.length; i++) {
    const flag = args[i];
    const value = args[++i];
    if (value === undefined || value.startsWith('--')) throw new Error(`${flag} needs a value\n${EXPORT_USAGE}`);
    if (flag === '--checkpoint') out.checkpoint = value;
    else if (flag === '--out') out.out = value;
    else if (flag === '--draft-config') out.draftConfig = value;
    else throw new Error(`unknown option ${flag}\n${EXPORT_USAGE}`);
  }
  if (!out.checkpoint) throw new Error(`--checkpoint is required\n${EXPORT_USAGE}`);
  if (!out.out) throw new Error(`--out is required\n${EXPORT_USAGE}`);
  return out as ExportArgs;
}

export async function exportCommand(platform: Platform, args: readonly string[], log: (line: string) => void): Promise<number> {
  const o = parseExportArgs(args);
  const [parent, name] = splitPath(o.checkpoint, { ignoreTrailingSlash: true });
  let draftConfig: Record<string, unknown> | undefined;
  if (o.draftConfig) {
    const [dir, file] = splitPath(o.draftConfig, { ignoreTrailingSlash: true });
    const text = new TextDecoder().decode(await platform.files(dir).read(file));
    try {
      draftConfig = JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new Error(`${o.draftConfig}: not valid JSON (${(err as Error).message})`, { cause: err });
    }
  }
  const { config, step } = await exportEagle3Checkpoint(platform.files(parent), name, platform.files(o.out), '', draftConfig);
  log(`exported ${o.checkpoint} (step ${step}) to ${o.out}: hidden ${config.hiddenSize}, draft vocab ${config.draftVocabSize} of ${config.vocabSize}, bf16`);
  return 0;
}
