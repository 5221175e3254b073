/**
 * The `speclab` command line, independent of the runtime: entry points in src/platform/*-main.ts
 * pass their Platform and arguments. Commands are an explicit table.
 */
import type { Platform } from './platform.ts';
import { generateCommand, pretrain } from './pretrain.ts';
import { EVAL_USAGE, evalCommand } from './eval.ts';
import { EXPORT_USAGE, exportCommand } from './export.ts';
import { prepareCommand } from './prepare.ts';
import { selfcheck } from './selfcheck.ts';
import { trainCommand } from './train.ts';

interface Command {
  summary: string;
  run(platform: Platform, args: string[]): Promise<number>;
}

const COMMANDS: Record<string, Command> = {
  selfcheck: {
    summary: 'print the GPU adapter record and verify matmul on the GPU against float64',
    async run(platform) {
      return (await selfcheck(platform, (line) => console.log(line))) ? 0 : 1;
    },
  },
  eval: {
    summary: 'evaluate an EAGLE3 draft by speculative decoding: acceptance length, tokens/s with and without it',
    async run(platform, args) {
      if (args.includes('--help') || args.includes('-h')) {
        console.log(EVAL_USAGE);
        return 0;
      }
      return evalCommand(platform, args, (line) => console.log(line));
    },
  },
  pretrain: {
    summary: 'pretrain the lab target (a small Llama) on the Brown corpus and write it as a Hugging Face directory',
    run(platform, args) {
      return pretrain(platform, args, (line) => console.log(line));
    },
  },
  generate: {
    summary: 'print a continuation of --prompt from a Hugging Face model directory (default the lab target)',
    run(platform, args) {
      return generateCommand(platform, args, (line) => console.log(line));
    },
  },
  train: {
    summary: 'train an EAGLE3 draft online for a target (rollout → feature store → trainer), or --offline from prepared shards; export it, and compare acceptance before/after',
    run(platform, args) {
      return trainCommand(platform, args, (line) => console.log(line));
    },
  },
  prepare: {
    summary: 'run the target over prompts and write its EAGLE3 features as offline shards (for train --offline DIR)',
    run(platform, args) {
      return prepareCommand(platform, args, (line) => console.log(line));
    },
  },
  export: {
    summary: 'export an EAGLE3 training checkpoint (<run>-step<N>) as an SGLang draft directory (bf16)',
    async run(platform, args) {
      if (args.includes('--help') || args.includes('-h')) {
        console.log(EXPORT_USAGE);
        return 0;
      }
      return exportCommand(platform, args, (line) => console.log(line));
    },
  },
};

export function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(12)} ${c.summary}`);
  return `usage: speclab <command> [options]\n\ncommands:\n${lines.join('\n')}\n`;
}

export async function runCli(platform: Platform, argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h') {
    console.log(usage());
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) {
    console.error(`speclab: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  try {
    return await command.run(platform, rest);
  } catch (err) {
    console.error(`speclab ${name}: ${(err as Error).message}`);
    return 1;
  }
}
