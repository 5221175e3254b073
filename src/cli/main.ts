/**
 * The `speclab` command line, independent of the runtime: entry points in src/platform/*-main.ts
 * pass their Platform and arguments. Commands are an explicit table; their options are defined in
 * options.ts, train-options.ts, plan-options.ts and command-options.ts (on `commander`), which import no GPU code:
 * a command's module (and with it the GPU code and the embedded shaders) is imported only once its
 * arguments parsed, so `--help` and `--version` work without a GPU and without src/kernels/shaders.gen.ts.
 *
 *   speclab --help | --version | help <command>
 *   speclab <command> --help | --version | [options]     options as `--name value` or `--name=value`
 *
 * Exit codes:
 *   0    success (and --help, --version)
 *   1    the run failed (an error while running, a failed selfcheck, a lossy speculative decode)
 *   2    usage error: unknown command or option, a bad or missing value, a missing required option,
 *        an invalid settings file; one line on stderr naming the flag (or file and key); `plan`: a
 *        role's memory plan does not fit
 *   130  `train` interrupted (SIGINT/SIGTERM) after writing a checkpoint; `rollout` interrupted after its capture
 */
import type { Platform } from './platform.ts';
import { CliExit, parseCommand, parseRoot, UsageError, type CommandDef, type ParsedArgs } from './options.ts';
import {
  EVAL_DEF,
  evalArgs,
  EXPORT_DEF,
  exportArgs,
  GENERATE_DEF,
  generateArgs,
  PRETRAIN_DEF,
  pretrainArgs,
  SELFCHECK_DEF,
} from './command-options.ts';
import { PREPARE_DEF, TRAIN_DEF, trainArgs } from './train-options.ts';
import { ROLLOUT_DEF, rolloutArgs, STATUS_DEF, statusArgs } from './cluster-options.ts';
import { GATEWAY_DEF, gatewayArgs } from './gateway-options.ts';
import { speclabCommand } from '../util/cli-command.ts';
import { PLAN_DEF, planArgs } from './plan-options.ts';

type Print = (line: string) => void;

interface Command<T> {
  def: CommandDef;
  /** The command's settings from its parsed arguments (cheap: no GPU code); usage errors throw here. */
  options(parsed: ParsedArgs): T;
  /** Runs the command; imports its module (and the GPU code) only now. */
  run(platform: Platform, options: T, print: Print): Promise<number>;
}

const command = <T>(c: Command<T>): Command<unknown> => c as Command<unknown>;

const COMMANDS: Record<string, Command<unknown>> = {
  selfcheck: command({
    def: SELFCHECK_DEF,
    options: () => undefined,
    async run(platform, _options, print) {
      const { selfcheck } = await import('./selfcheck.ts');
      return (await selfcheck(platform, print)) ? 0 : 1;
    },
  }),
  eval: command({
    def: EVAL_DEF,
    options: evalArgs,
    async run(platform, options, print) {
      return (await import('./eval.ts')).runEval(platform, options, print);
    },
  }),
  pretrain: command({
    def: PRETRAIN_DEF,
    options: (parsed) => ({ options: pretrainArgs(parsed), args: parsed.args }),
    async run(platform, { options, args }, print) {
      return (await import('./pretrain.ts')).runPretrain(platform, options, args, print);
    },
  }),
  generate: command({
    def: GENERATE_DEF,
    options: generateArgs,
    async run(platform, options, print) {
      return (await import('./pretrain.ts')).runGenerate(platform, options, print);
    },
  }),
  train: command({
    def: TRAIN_DEF,
    options: trainArgs,
    async run(platform, options, print) {
      return (await import('./train.ts')).runTrainCli(platform, options, print);
    },
  }),
  plan: command({
    def: PLAN_DEF,
    options: planArgs,
    async run(platform, options, print) {
      return (await import('./plan.ts')).runPlan(platform, options, print);
    },
  }),
  prepare: command({
    def: PREPARE_DEF,
    options: (parsed) => parsed.values,
    async run(platform, values, print) {
      return (await import('./prepare.ts')).runPrepareCli(platform, values, print);
    },
  }),
  export: command({
    def: EXPORT_DEF,
    options: exportArgs,
    async run(platform, options, print) {
      return (await import('./export.ts')).runExport(platform, options, print);
    },
  }),
  rollout: command({
    def: ROLLOUT_DEF,
    options: rolloutArgs,
    async run(platform, options, print) {
      return (await import('./rollout.ts')).runRollout(platform, options, print);
    },
  }),
  status: command({
    def: STATUS_DEF,
    options: statusArgs,
    async run(platform, options, print) {
      return (await import('./status.ts')).runStatus(platform, options, print);
    },
  }),
  gateway: command({
    def: GATEWAY_DEF,
    options: gatewayArgs,
    async run(platform, options, print) {
      return (await import('./gateway.ts')).runGateway(platform, options, print);
    },
  }),
};

/** Every command's option definitions (help, tests). */
export function commandDefs(): CommandDef[] {
  return Object.values(COMMANDS).map((c) => c.def);
}

const ROOT_EPILOG = [
  `Run \`${speclabCommand('<command> --help')}\` for the options of a command (each with its type, range and default).`,
  'Exit codes: 0 success, 1 the run failed, 2 usage error (unknown option, bad value, missing option), 130 train or rollout interrupted.',
].join('\n');

export function usage(): string {
  try {
    parseRoot(
      Object.values(COMMANDS).map((c) => c.def),
      ['--help'],
      ROOT_EPILOG,
    );
  } catch (err) {
    if (err instanceof CliExit) return err.output;
    throw err;
  }
  return '';
}

/** Hooks of an entry point: `beforeRun` runs once the arguments parsed, before the command's module loads. */
export interface CliHooks {
  beforeRun?(): Promise<void>;
}

/** The module that cannot load when `npm run gen` has not run. */
const MISSING_SHADERS = /shaders\.gen\.ts/;

export async function runCli(platform: Platform, argv: readonly string[], hooks: CliHooks = {}): Promise<number> {
  // On a terminal, lines go above the progress bars (platform.progressDisplay) so neither breaks the other.
  const display = platform.progressDisplay?.();
  const print: Print = display ? (line) => display.log(line) : (line) => console.log(line);
  let [name, ...rest] = argv;
  if (name === 'help' && rest.length > 0) [name, rest] = [rest[0], ['--help', ...rest.slice(1)]];
  const chosen = name !== undefined && Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  const who = chosen ? `speclab ${name}` : 'speclab';
  try {
    if (!chosen)
      parseRoot(
        Object.values(COMMANDS).map((c) => c.def),
        name === 'help' ? ['--help'] : argv,
        ROOT_EPILOG,
      );
    const parsed = parseCommand(chosen.def, rest);
    for (const notice of parsed.notices) console.error(notice);
    const options = chosen.options(parsed);
    await hooks.beforeRun?.();
    return await chosen.run(platform, options, print);
  } catch (err) {
    if (err instanceof CliExit) {
      (err.code === 0 ? console.log : console.error)(err.output.replace(/\n$/, ''));
      return err.code;
    }
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof UsageError) {
      console.error(`${who}: ${message}; see ${speclabCommand(chosen ? `${name} --help` : '--help')}`);
      return 2;
    }
    if (
      MISSING_SHADERS.test(message) &&
      /Cannot find|not found|ERR_MODULE_NOT_FOUND/i.test(`${message} ${(err as { code?: string }).code ?? ''}`)
    ) {
      console.error(`${who}: src/kernels/shaders.gen.ts is missing; generate it with \`npm run gen\``);
      return 1;
    }
    console.error(`${who}: ${message}`);
    return 1;
  }
}
