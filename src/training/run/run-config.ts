/**
 * The settings of an EAGLE3 training run (`speclab train`, online or `--offline`): one zod schema over
 * the session's own settings (sessionSettingsSchema), and its validation. JSON keys are camelCase
 * (snake_case and SpecForge names are mapped by src/cli/train-options.ts, which also lists the
 * ranges help shows; test/cli/cli.test.ts checks they agree and that every setting has a flag).
 */
import { z } from 'zod';
import { UsageError } from '../../util/usage-error.ts';
import { sessionSettingsSchema } from '../session/eagle3-session.ts';
import { gpuMemoryBudgetSchema } from './train-memory.ts';
import { DEFAULT_TRAIN_PROMPTS } from './run-plan.ts';

const posInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();

/** Every setting of a run; JSON keys as named here, `--kebab-case` flags of the same names. */
export const trainConfigSchema = sessionSettingsSchema
  .extend({
    target: z.string().min(1).optional(),
    promptsFile: z.string().min(1).optional(),
    data: z
      .union([
        z
          .string()
          .min(1)
          .transform((file) => [file]),
        z.array(z.string().min(1)).min(1),
      ])
      .optional(),
    evalData: z.string().min(1).optional(),
    chatTemplate: z.string().min(1).optional(),
    maxLength: posInt.max(1_048_576).default(2048),
    regenerate: z.boolean().default(false),
    evalEvery: nonNegInt.max(1_000_000).default(50),
    temperature: z.number().min(0).max(100).default(0),
    offline: z.string().min(1).optional(),
    out: z.string().min(1).default('runs/train'),
    resume: z.boolean().default(false),
    fresh: z.boolean().default(false),
    // No default here: with --data an absent value means every usable conversation (withTrainPromptsDefault).
    trainPrompts: posInt.max(10_000_000).optional(),
    // 0: no held-out rows, so no acceptance measurement and no --eval-every (a cluster trainer then needs no target).
    evalPrompts: nonNegInt.max(100_000).default(4),
    promptLength: posInt.max(1_048_576).default(8),
    numDraftTokens: posInt.max(64).default(3),
    maxNewTokens: posInt.max(1_048_576).default(32),
    evalTrainPrompts: nonNegInt.max(100_000).default(4),
    logEvery: posInt.max(1_000_000).default(10),
    maxNonfiniteSteps: nonNegInt.max(1_000_000).default(3),
    gpuMemoryBudget: gpuMemoryBudgetSchema,
    // Storage of the frozen target's matrices; shapes the captured features, so a resume keeps it.
    targetPrecision: z.enum(['f32', 'f16']).default('f32'),
    cluster: z.string().min(1).optional(), // the trainer of a cluster run (src/cli/cluster-options.ts, ./cluster-run.ts)
    run: z.string().min(1).optional(),
    promptLeaseMs: z.number().int().min(100).max(86_400_000).optional(),
  })
  .strict();

export type TrainConfig = z.infer<typeof trainConfigSchema>;

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
// Every setting has a flag of its own name (test/cli/cli.test.ts checks it against the flag table).
const SETTINGS: ReadonlySet<string> = new Set(Object.keys(trainConfigSchema.shape));

/** Validate settings (config file first, flags over it); errors name the field and its flag. */
export function validateTrainConfig(input: Record<string, unknown>, source = 'train config'): TrainConfig {
  // Without held-out rows there is nothing to evaluate: --eval-every's default follows; a given one is refused below.
  const heldOutNone = input.evalPrompts === 0 && input.evalEvery === undefined;
  const parsed = trainConfigSchema.safeParse(heldOutNone ? { ...input, evalEvery: 0 } : input);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => {
      const field = issue.path.length > 0 ? String(issue.path[0]) : '';
      const keys = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : field;
      const flag = field && SETTINGS.has(field) ? ` (--${kebab(field)})` : '';
      return `${keys || '(root)'}${flag}: ${issue.message}`;
    });
    throw new UsageError(`${source}: ${issues.join('; ')}`);
  }
  if (parsed.data.evalPrompts === 0 && parsed.data.evalEvery > 0)
    throw new UsageError(
      `${source}: evalEvery (--eval-every) ${parsed.data.evalEvery} evaluates held-out rows, and evalPrompts (--eval-prompts) 0 holds none`,
    );
  return withTrainPromptsDefault(parsed.data);
}

/**
 * --train-prompts's default where it has one. Without --data the target continues
 * DEFAULT_TRAIN_PROMPTS prompts, and the settings say so (they are stored as before). With --data a
 * value not given stays absent, which means every usable conversation trains; the run stores it
 * absent too, so a `--resume` of the run trains every usable conversation again, while a run that
 * stored a number (given, or the default of a version before this one) keeps it.
 */
export function withTrainPromptsDefault<C extends { data?: readonly string[]; trainPrompts?: number }>(config: C): C {
  return config.data === undefined && config.trainPrompts === undefined ? { ...config, trainPrompts: DEFAULT_TRAIN_PROMPTS } : config;
}
