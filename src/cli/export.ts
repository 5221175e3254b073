/**
 * `speclab export`: turn an EAGLE3 training checkpoint into the directory SGLang loads, or into the
 * speculators format vLLM serves from the draft folder alone.
 *
 *   speclab export --checkpoint <run dir | checkpoints dir | <run id>-step<N> dir> --out <dir>
 *                  [--draft-config <config.json>] [--format sglang|speculators] [--verifier DIR|ORG/NAME]
 *
 * A run folder or a checkpoints folder exports its latest complete step; a step folder that step
 * (exportRunCheckpoint: only complete checkpoints, with a valid COMPLETE marker, are accepted); the
 * draft config and t2d/d2t are read from it unless
 * --draft-config overrides the config. Writes <out>/model.safetensors (bf16, d2t int64, t2d bool,
 * no embedding) and <out>/config.json (docs/export.md §5; the speculators format §7). The
 * speculators format names its verifier: --verifier, else the target the run recorded; its
 * config.json is read (a Hugging Face id from the cache, or that file alone downloaded, as
 * `speclab plan` does) for its architectures and to check it is the target the draft trained on.
 */
import { parseHfConfig } from '../config/hf-config.ts';
import { exportRunCheckpoint, type ExportAs, type ExportVerifier } from '../training/checkpoints/checkpoint-export.ts';
import { progressFor } from '../training/run/platform.ts';
import { readJson, resolveTargetConfigDir } from '../training/run/run-plan.ts';
import type { Platform } from './platform.ts';
import { splitPath } from '../util/paths.ts';
import { EXPORT_DEF, exportArgs, type ExportArgs } from './command-options.ts';
import { settingsOrExit, UsageError } from './options.ts';
import { READ_BUDGETS } from '../ports/read-budget.ts';

export { parseExportArgs, type ExportArgs } from './command-options.ts';

/** `speclab export` from argv (help included). */
export async function exportCommand(platform: Platform, args: readonly string[], log: (line: string) => void): Promise<number> {
  const p = settingsOrExit(EXPORT_DEF, args, exportArgs, log);
  return 'exit' in p ? p.exit : runExport(platform, p.settings, log);
}

/**
 * The verifier of a speculators export: `--verifier`, else the run's `--target`; refused in one line
 * naming --verifier when neither is known or its config.json cannot be read.
 */
function verifierOf(platform: Platform, given: string | undefined, log: (line: string) => void): ExportAs['verifier'] {
  return async (recorded) => {
    const nameOrPath = given ?? recorded;
    if (nameOrPath === undefined)
      throw new UsageError(
        '--verifier: the checkpoint records no --target (a run on the lab target, or an older checkpoint); name the target the draft serves with, a folder or a Hugging Face id ORG/NAME',
      );
    if (given === undefined) log(`verifier ${nameOrPath}: the run's --target (--verifier names another)`);
    const dir = await resolveTargetConfigDir(platform, nameOrPath, progressFor(platform, log), '--verifier');
    const path = `${dir.replace(/\/+$/, '')}/config.json`;
    let raw: unknown;
    try {
      raw = await readJson(platform, path);
    } catch (err) {
      throw new Error(`--verifier ${nameOrPath}: cannot read its config.json (${(err as Error).message})`, { cause: err });
    }
    const config = parseHfConfig(raw, path);
    const verifier: ExportVerifier = {
      nameOrPath,
      architectures: (raw as { architectures: string[] }).architectures,
      hiddenSize: config.hiddenSize,
      vocabSize: config.vocabSize,
      numLayers: config.numLayers,
    };
    return verifier;
  };
}

/** `speclab export` with parsed options (options: command-options.ts, `speclab export --help`). */
export async function runExport(platform: Platform, o: ExportArgs, log: (line: string) => void): Promise<number> {
  const [parent, name] = splitPath(o.checkpoint, { ignoreTrailingSlash: true });
  let draftConfig: Record<string, unknown> | undefined;
  if (o.draftConfig) {
    const [dir, file] = splitPath(o.draftConfig, { ignoreTrailingSlash: true });
    const text = new TextDecoder().decode(await platform.files(dir).read(file, READ_BUDGETS.config));
    try {
      draftConfig = JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new Error(`${o.draftConfig}: not valid JSON (${(err as Error).message})`, { cause: err });
    }
  }
  const as: ExportAs =
    o.format === 'speculators' ? { format: 'speculators', verifier: verifierOf(platform, o.verifier, log) } : { format: 'sglang' };
  const { config, step, checkpoint, serving, verifier } = await exportRunCheckpoint(
    platform.files(parent),
    name,
    platform.files(o.out),
    '',
    draftConfig,
    as,
  );
  const format = verifier ? `speculators format, verifier ${verifier.nameOrPath}` : 'SGLang format';
  log(
    `exported ${checkpoint} (step ${step}) to ${o.out}: ${format}, hidden ${config.hiddenSize}, draft vocab ${config.draftVocabSize} of ${config.vocabSize}, bf16`,
  );
  if (serving.warning) log(`warning: the export is not servable as trained: ${serving.warning}`);
  return 0;
}
