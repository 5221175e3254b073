// The layer table: which folder of src/ may import which. The README's architecture table is this
// list (test/lint/boundary.ts checks that they agree), and eslint.config.js enforces it with
// eslint-plugin-boundaries. Order is bottom-up: a folder imports only folders listed before it, so
// the table itself cannot describe a cycle. `src/platform/` holds the entry points; the folders
// outside src/ (OUTSIDE_SRC) sit above all of it, so nothing in src/ imports them.

// Kept a table, one layer a line, as the README shows it.
// prettier-ignore
/** @type {readonly { folder: string, imports: readonly string[] }[]} */
export const LAYERS = [
  { folder: 'contracts', imports: [] },
  { folder: 'util', imports: [] },
  { folder: 'ports', imports: [] },
  { folder: 'config', imports: [] },
  { folder: 'reference', imports: [] },
  { folder: 'gpu', imports: ['ports', 'util'] },
  { folder: 'kernels', imports: ['gpu', 'config', 'ports', 'util'] },
  { folder: 'dataplane', imports: ['gpu', 'ports', 'util'] },
  { folder: 'formats', imports: ['config', 'ports', 'util'] },
  { folder: 'corpus', imports: ['formats', 'util'] },
  { folder: 'control', imports: ['contracts', 'ports', 'util'] },
  { folder: 'optim', imports: ['kernels', 'gpu', 'util'] },
  { folder: 'model', imports: ['optim', 'kernels', 'formats', 'gpu', 'config', 'contracts', 'ports', 'util'] },
  { folder: 'data', imports: ['model', 'control', 'dataplane', 'formats', 'gpu', 'config', 'contracts', 'ports', 'util'] },
  { folder: 'inference', imports: ['data', 'control', 'model', 'kernels', 'formats', 'corpus', 'gpu', 'config', 'contracts', 'ports', 'util'] },
  { folder: 'training', imports: ['inference', 'data', 'control', 'model', 'optim', 'kernels', 'dataplane', 'formats', 'corpus', 'gpu', 'config', 'contracts', 'ports', 'util'] },
  { folder: 'cli', imports: ['training', 'inference', 'data', 'control', 'model', 'optim', 'kernels', 'dataplane', 'formats', 'corpus', 'gpu', 'config', 'contracts', 'ports', 'util'] },
  { folder: 'platform', imports: ['cli', 'training', 'inference', 'data', 'control', 'model', 'optim', 'kernels', 'dataplane', 'formats', 'corpus', 'gpu', 'config', 'contracts', 'ports', 'util'] },
];

const SRC_FOLDERS = LAYERS.map((l) => l.folder);
const PRODUCTION_FOLDERS = SRC_FOLDERS.filter((f) => f !== 'reference');

/**
 * The folders outside src/ that hold code, bottom-up like LAYERS, with what each may import (the
 * names of src/ folders, or of these folders). The README's "Outside src/" table is this list.
 *  - web/ (the browser lab) and scripts/ (build commands) are production code: every folder of src/
 *    but the float64 references; web/ gets only the browser adapters of src/platform/.
 *  - test/ may import everything but bench/; bench/ may import everything (it reuses test/'s Redis
 *    and CLI fixtures). Neither is imported by anything else, so a suite or a benchmark never
 *    becomes a dependency of the code it measures.
 * @type {readonly { folder: string, imports: readonly string[] }[]}
 */
export const OUTSIDE_SRC = [
  { folder: 'web', imports: PRODUCTION_FOLDERS },
  { folder: 'scripts', imports: PRODUCTION_FOLDERS },
  { folder: 'test', imports: [...SRC_FOLDERS, 'web', 'scripts'] },
  { folder: 'bench', imports: [...SRC_FOLDERS, 'web', 'scripts', 'test'] },
];

/**
 * The subfolders of src/training/, layers of their own inside training (bottom-up, as LAYERS): each
 * may import only the subfolders it lists, so the training loop never reaches for the run that
 * drives it. Every one may import what training may (LAYERS); eslint.config.js makes each an element.
 */
/** @type {readonly { folder: string, imports: readonly string[] }[]} */
export const TRAINING_LAYERS = [
  { folder: 'loop', imports: [] },
  { folder: 'checkpoints', imports: [] },
  { folder: 'sequences', imports: [] },
  { folder: 'pretraining', imports: [] },
  { folder: 'strategies', imports: ['loop'] },
  { folder: 'evaluation', imports: ['strategies', 'sequences', 'loop'] },
  { folder: 'session', imports: ['evaluation', 'strategies', 'sequences', 'checkpoints', 'loop'] },
  { folder: 'offline', imports: ['strategies', 'sequences', 'checkpoints', 'loop'] },
  { folder: 'cluster', imports: ['session'] },
  { folder: 'run', imports: ['session', 'offline', 'evaluation', 'sequences', 'checkpoints', 'loop'] },
];

/**
 * The one file outside tests and benches that may import the float64 references: `speclab
 * selfcheck`, whose job is to check the GPU against them.
 */
export const REFERENCE_USERS = ['src/cli/selfcheck.ts'];

/** Node- and Deno-only adapters that the browser code in web/ must never pull in. */
export const SERVER_ONLY_ADAPTERS = [
  'node',
  'node-main',
  'deno',
  'deno-main',
  'redis-node',
  'dataplane-gateway-node',
  'dataplane-gateway-connection',
  'control-gateway-node',
  'embed-shaders',
];
