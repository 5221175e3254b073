/**
 * The machinery every `speclab` command's options share, on the maintained parser `commander`:
 * a command is a table of OptionSpecs (flag, placeholder, help, default, bounds, parser); this file
 * turns one into a commander Command (so `--flag value`, `--flag=value`, `--help`, `--version` and
 * suggestions for typos come from commander) and parses argv with it into a plain record keyed by
 * the specs' keys. Nothing here touches the GPU or the shaders, so `--help` and `--version` of every
 * command run without either.
 *
 * commander is loaded when this module is: in Node and Deno. A browser tab (whose test bundle
 * includes the command modules) has no command line and cannot evaluate commander (it extends
 * node:events): there the parsers throw, and nothing else changes.
 *
 * Errors are one line and name the flag. A usage error (unknown option, bad value, missing value or
 * required option) is a UsageError: exit code 2. `--help` / `--version` end in a CliExit with the
 * text to print: exit code 0.
 */
import type { Command, CommanderError } from 'commander';
import pkg from '../../package.json' with { type: 'json' };
import { decimalFloat, decimalInt, decimalNumber, type Bounds } from './flag-values.ts';
import { UsageError } from '../util/usage-error.ts';

export { UsageError };

// Named through a variable so a browser bundler leaves it out (a tab cannot evaluate commander).
const COMMANDER = 'commander';
const commander: typeof import('commander') | undefined = await import(/* @vite-ignore */ COMMANDER).then(
  (m: typeof import('commander')) => m,
  () => undefined,
);

function parser(): typeof import('commander') {
  if (!commander) throw new Error('speclab: the command-line parser (commander) needs Node or Deno');
  return commander;
}

/** The speclab version: package.json's. */
export const VERSION: string = pkg.version;

/** `--help` or `--version`: the text to print and the exit code (0). */
export class CliExit extends Error {
  override name = 'CliExit';
  constructor(
    readonly code: number,
    readonly output: string,
  ) {
    super(`exit ${code}`);
  }
}

/** One option of a command. A spec without `placeholder` is a boolean switch. */
export interface OptionSpec {
  flag: `--${string}`;
  /** Where the value goes in the parsed record. */
  key: string;
  /** Shown as `--flag <placeholder>`; absent for a switch. */
  placeholder?: string;
  help: string;
  /** The type and range as help shows them, e.g. "integer in [1, 64]" (intSpec etc. fill it in). */
  type?: string;
  /** The default as help shows it (applied by the command or its settings schema, never by commander). */
  defaultText?: string;
  /** Text → value; `previous` is the value so far (for a repeatable option). Errors start with the flag. */
  parse?: (flag: string, text: string, previous: unknown) => unknown;
  /** Old names that still work, hidden from help; each use prints a one-line deprecation notice. */
  deprecated?: readonly `--${string}`[];
  required?: boolean;
}

export interface CommandDef {
  /** e.g. "train"; usage lines say "speclab train". */
  name: string;
  summary: string;
  /** Extra help text after the options (rules, examples, exit codes). */
  epilog?: string;
  options: readonly OptionSpec[];
}

export interface ParsedArgs {
  /** Values of the options given, by key (switches: true). */
  values: Record<string, unknown>;
  /** Deprecation notices, one line each, for the caller to print on stderr. */
  notices: string[];
  /** The words parsed (after the command name). */
  args: readonly string[];
}

const fmt = (n: number) =>
  Math.abs(n) >= 1e6 && Number.isInteger(Math.log10(Math.abs(n))) ? n.toExponential().replace('e+', 'e') : String(n);

/** "integer in [1, 64]", "number in (0, 1]". */
export function describeBounds(kind: 'integer' | 'number', b: Bounds): string {
  return `${kind} in ${b.exclusiveMin ? '(' : '['}${fmt(b.min)}, ${fmt(b.max)}${b.exclusiveMax ? ')' : ']'}`;
}

/** Parsers over flag-values.ts: decimal text only, bounded; the errors start with the flag. */
export const parsers = {
  int: (bounds: Bounds) => (flag: string, text: string) => decimalInt(flag, text, bounds),
  float: (bounds: Bounds) => (flag: string, text: string) => decimalFloat(flag, text, bounds),
  /** Decimal only; the range is checked later (by a settings schema). */
  decimal: (flag: string, text: string) => decimalNumber(flag, text),
  /** Comma/blank separated decimals; ranges checked later. */
  decimalList: (flag: string, text: string) =>
    text
      .split(/[\s,]+/)
      .filter((s) => s.length > 0)
      .map((s) => decimalNumber(flag, s)),
  text: (_flag: string, text: string) => text,
  /** A non-empty string of one of `choices`. */
  choice: (choices: readonly string[]) => (flag: string, text: string) => {
    if (!choices.includes(text)) throw new UsageError(`${flag}: must be ${choices.join(' or ')}, got ${JSON.stringify(text)}`);
    return text;
  },
};

/** A bounded integer option. */
export function intSpec(
  flag: `--${string}`,
  key: string,
  bounds: Bounds,
  help: string,
  defaultValue?: number | string,
  placeholder = 'n',
): OptionSpec {
  return {
    flag,
    key,
    placeholder,
    help,
    type: describeBounds('integer', bounds),
    defaultText: defaultValue === undefined ? undefined : String(defaultValue),
    parse: parsers.int(bounds),
  };
}

/** A bounded number option. */
export function floatSpec(
  flag: `--${string}`,
  key: string,
  bounds: Bounds,
  help: string,
  defaultValue?: number | string,
  placeholder = 'x',
): OptionSpec {
  return {
    flag,
    key,
    placeholder,
    help,
    type: describeBounds('number', bounds),
    defaultText: defaultValue === undefined ? undefined : String(defaultValue),
    parse: parsers.float(bounds),
  };
}

/** A text option (a path, a prompt). */
export function textSpec(
  flag: `--${string}`,
  key: string,
  placeholder: string,
  help: string,
  defaultValue?: string,
  required = false,
): OptionSpec {
  return { flag, key, placeholder, help, defaultText: defaultValue, parse: parsers.text, required };
}

function describe(spec: OptionSpec): string {
  const extra = [
    spec.type,
    spec.required ? 'required' : undefined,
    spec.defaultText === undefined ? undefined : `default: ${spec.defaultText}`,
  ].filter(Boolean);
  return extra.length > 0 ? `${spec.help} [${extra.join('; ')}]` : spec.help;
}

/** The commander Command of `def`, writing into `values` (help and errors are captured, never printed, never exit). */
function buildCommand(def: CommandDef, values: Record<string, unknown>, notices: string[], out: { text: string }): Command {
  const { Command, Option } = parser();
  const cmd = new Command(`speclab ${def.name}`)
    .description(def.summary)
    .helpOption('-h, --help', 'print this help')
    .exitOverride()
    .allowExcessArguments(false)
    .configureOutput({
      writeOut: (s) => (out.text += s),
      writeErr: () => undefined,
      outputError: () => undefined,
      getOutHelpWidth: () => 100,
      getErrHelpWidth: () => 100,
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    });
  for (const spec of def.options) {
    for (const name of [spec.flag, ...(spec.deprecated ?? [])]) {
      const isAlias = name !== spec.flag;
      const option = new Option(spec.placeholder ? `${name} <${spec.placeholder}>` : name, describe(spec));
      if (isAlias) option.hideHelp();
      if (spec.placeholder) {
        option.argParser((text: string) => {
          if (isAlias) notices.push(`speclab ${def.name}: ${name} is deprecated; use ${spec.flag}`);
          values[spec.key] = (spec.parse ?? parsers.text)(name, text, values[spec.key]);
          return values[spec.key];
        });
      } else {
        cmd.on(`option:${option.name()}`, () => {
          if (isAlias) notices.push(`speclab ${def.name}: ${name} is deprecated; use ${spec.flag}`);
          values[spec.key] = true;
        });
      }
      cmd.addOption(option);
    }
  }
  cmd.version(VERSION, '-V, --version', 'print the speclab version');
  if (def.epilog) cmd.addHelpText('after', `\n${def.epilog}`);
  return cmd;
}

/** The help text of `def`, as `speclab <name> --help` prints it. */
export function commandHelp(def: CommandDef): string {
  const out = { text: '' };
  buildCommand(def, {}, [], out).outputHelp();
  return out.text;
}

const quoted = (message: string) => [...message.matchAll(/'([^']*)'/g)].map((m) => m[1]);

/** A one-line message for a commander usage error, naming the flag. */
function usageMessage(err: CommanderError, cmd: Command): string {
  const lines = err.message.replace(/^error: /, '').split('\n');
  const suggestion = lines
    .slice(1)
    .join(' ')
    .trim()
    .replace(/^\((.*)\)$/, '$1')
    .replace(/^Did you mean/, 'did you mean');
  const more = suggestion ? ` (${suggestion})` : '';
  const [first] = quoted(lines[0]);
  switch (err.code) {
    case 'commander.unknownOption':
      return `unknown option ${first.split('=')[0]}${more}`;
    case 'commander.unknownCommand':
      return `unknown command ${JSON.stringify(first)}${more}`;
    case 'commander.optionMissingArgument':
      return `${first.split(/[ <]/)[0]}: missing value`;
    case 'commander.excessArguments':
      return `unexpected argument${cmd.args.length > 1 ? 's' : ''} ${cmd.args.map((a) => JSON.stringify(a)).join(' ')} (options are --name value or --name=value)`;
    default:
      return lines.join(' ');
  }
}

/** Runs commander over `args` (the words after the command name). */
export function parseCommand(def: CommandDef, args: readonly string[]): ParsedArgs {
  const values: Record<string, unknown> = {};
  const notices: string[] = [];
  const out = { text: '' };
  const cmd = buildCommand(def, values, notices, out);
  // Help and version win over anything else on the line (a bad value before --help still shows help).
  const words = args.slice(0, args.includes('--') ? args.indexOf('--') : args.length);
  if (words.includes('--help') || words.includes('-h')) {
    cmd.outputHelp();
    throw new CliExit(0, out.text);
  }
  if (words.includes('--version') || words.includes('-V')) throw new CliExit(0, `${VERSION}\n`);
  try {
    cmd.parse([...args], { from: 'user' });
  } catch (err) {
    if (!(err instanceof parser().CommanderError))
      throw err instanceof UsageError || !(err instanceof Error) ? err : new UsageError(err.message);
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') throw new CliExit(0, out.text);
    throw new UsageError(usageMessage(err, cmd));
  }
  for (const spec of def.options) {
    if (spec.required && values[spec.key] === undefined) throw new UsageError(`${spec.flag} is required`);
  }
  return { values, notices, args: [...args] };
}

/**
 * For a command called with argv (tests, tools): its settings (deprecation notices printed on
 * stderr), or, after `--help` / `--version` printed through `print`, the exit code. Usage errors throw.
 */
export function settingsOrExit<T>(
  def: CommandDef,
  args: readonly string[],
  convert: (parsed: ParsedArgs) => T,
  print: (line: string) => void,
): { settings: T } | { exit: number } {
  try {
    const parsed = parseCommand(def, args);
    for (const notice of parsed.notices) console.error(notice);
    return { settings: convert(parsed) };
  } catch (err) {
    if (!(err instanceof CliExit)) throw err;
    print(err.output.replace(/\n$/, ''));
    return { exit: err.code };
  }
}

/** The top-level `speclab` program: its help lists the commands; it parses only when no command is named. */
export function parseRoot(commands: readonly { name: string; summary: string }[], args: readonly string[], epilog: string): never {
  const out = { text: '' };
  const program = new (parser().Command)('speclab')
    .usage('<command> [options]')
    .description('SpecLab: train EAGLE3 speculative-decoding draft models on WebGPU (Node + Dawn, Deno).')
    .version(VERSION, '-V, --version', 'print the speclab version')
    .helpOption('-h, --help', 'print this help')
    .helpCommand(false)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => (out.text += s),
      writeErr: () => undefined,
      outputError: () => undefined,
      getOutHelpWidth: () => 100,
      getErrHelpWidth: () => 100,
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    })
    .addHelpText('after', `\n${epilog}`);
  for (const c of commands) program.command(c.name).description(c.summary).helpOption(false).allowUnknownOption().allowExcessArguments();
  if (args.length === 0) {
    program.outputHelp();
    throw new CliExit(2, out.text);
  }
  try {
    program.parse([...args], { from: 'user' });
  } catch (err) {
    if (!(err instanceof parser().CommanderError)) throw err;
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') throw new CliExit(0, out.text);
    throw new UsageError(usageMessage(err, program));
  }
  throw new UsageError(`unknown command ${JSON.stringify(args[0])}`);
}
