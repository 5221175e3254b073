/**
 * `speclab export`: turn an EAGLE3 training checkpoint into the directory SGLang loads.
 *
 *   speclab export --checkpoint <run dir | checkpoints dir | <run id>-step<N> dir> --out <dir> [--draft-config <config.json>]
 *
 * A run folder or a checkpoints folder exports its latest complete step; a step folder that step
 * (exportRunCheckpoint: only complete checkpoints, with a valid COMPLETE marker, are accepted); the
 * draft config and t2d/d2t are read from it unless
 * --draft-config overrides the config. Writes <out>/model.safetensors (bf16, d2t int64, t2d bool,
 * no embedding) and <out>/config.json (docs/export.md §5).
 */
import { exportRunCheckpoint } from '../training/checkpoints/checkpoint-export.ts';
import type { Platform } from './platform.ts';
import { splitPath } from '../util/paths.ts';
import { EXPORT_DEF, type ExportArgs } from './command-options.ts';
import { settingsOrExit } from './options.ts';

export { parseExportArgs, type ExportArgs } from './command-options.ts';

/** `speclab export` from argv (help included). */
export async function exportCommand(platform: Platform, args: readonly string[], log: (line: string) => void): Promise<number> {
  const p = settingsOrExit(EXPORT_DEF, args, (parsed) => parsed.values as unknown as ExportArgs, log);
  return 'exit' in p ? p.exit : runExport(platform, p.settings, log);
}

/** `speclab export` with parsed options (options: command-options.ts, `speclab export --help`). */
export async function runExport(platform: Platform, o: ExportArgs, log: (line: string) => void): Promise<number> {
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
  const { config, step, checkpoint, serving } = await exportRunCheckpoint(
    platform.files(parent),
    name,
    platform.files(o.out),
    '',
    draftConfig,
  );
  log(
    `exported ${checkpoint} (step ${step}) to ${o.out}: hidden ${config.hiddenSize}, draft vocab ${config.draftVocabSize} of ${config.vocabSize}, bf16`,
  );
  if (serving.warning) log(`warning: the export is not servable as trained: ${serving.warning}`);
  return 0;
}
