// The layer table: which folder of src/ may import which. The README's architecture table is this
// list (test/lint/boundary.ts checks that they agree), and eslint.config.js enforces it with
// eslint-plugin-boundaries. Order is bottom-up: a folder imports only folders listed before it, so
// the table itself cannot describe a cycle. `web/` and `src/platform/` are entry points and may
// import anything but the float64 references; tests, benches and scripts may import everything.

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
  {
    folder: 'inference',
    imports: ['data', 'control', 'model', 'kernels', 'formats', 'corpus', 'gpu', 'config', 'contracts', 'ports', 'util'],
  },
  {
    folder: 'training',
    imports: [
      'inference',
      'data',
      'control',
      'model',
      'optim',
      'kernels',
      'dataplane',
      'formats',
      'corpus',
      'gpu',
      'config',
      'contracts',
      'ports',
      'util',
    ],
  },
  {
    folder: 'cli',
    imports: [
      'training',
      'inference',
      'data',
      'control',
      'model',
      'optim',
      'kernels',
      'dataplane',
      'formats',
      'corpus',
      'gpu',
      'config',
      'contracts',
      'ports',
      'util',
    ],
  },
  {
    folder: 'platform',
    imports: [
      'cli',
      'training',
      'inference',
      'data',
      'control',
      'model',
      'optim',
      'kernels',
      'dataplane',
      'formats',
      'corpus',
      'gpu',
      'config',
      'contracts',
      'ports',
      'util',
    ],
  },
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
  'control-gateway-node',
];
