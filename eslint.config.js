// Lint: TypeScript rules, the platform boundary, the layer table, import cycles, size and format.
//  - Only src/platform/ may touch runtime globals (navigator, Deno, process) or Node built-ins;
//    everything else gets a Platform (src/cli/platform.ts) or a port (src/ports/) injected.
//  - A folder of src/ imports only the folders eslint.layers.js lets it (eslint-plugin-boundaries);
//    web/, scripts/, test/ and bench/ sit above src/ in that table (OUTSIDE_SRC), so nothing in src/
//    imports them.
//  - No import cycle exists anywhere, between folders or between files, type-only imports included
//    (speclab/no-cycle, eslint.import-cycles.js).
//  - A file of src/ or web/ has at most 400 lines (max-lines); `npm run lint` then runs
//    `prettier --check .`, which holds every line to 140 columns.
// test/lint/boundary.ts plants one offence of each rule and shows lint failing on it.
import js from '@eslint/js';
import boundaries from 'eslint-plugin-boundaries';
import tseslint from 'typescript-eslint';
import importCycles from './eslint.import-cycles.js';
import { LAYERS, OUTSIDE_SRC, REFERENCE_USERS, SERVER_ONLY_ADAPTERS, TRAINING_LAYERS } from './eslint.layers.js';

const RUNTIME_GLOBALS = ['navigator', 'Deno', 'process', 'Bun', 'require', '__dirname', '__filename'];
const boundaryMessage =
  'only src/platform/ may touch runtime globals; take a Platform (src/cli/platform.ts) or a port (src/ports/) instead';

export const platformBoundaryRules = {
  'no-restricted-globals': ['error', ...RUNTIME_GLOBALS.map((name) => ({ name, message: boundaryMessage }))],
  'no-restricted-properties': [
    'error',
    ...RUNTIME_GLOBALS.flatMap((property) => [
      { object: 'globalThis', property, message: boundaryMessage },
      { object: 'window', property, message: boundaryMessage },
      { object: 'self', property, message: boundaryMessage },
    ]),
  ],
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        { group: ['node:*'], message: boundaryMessage },
        {
          group: ['fs', 'fs/*', 'path', 'os', 'child_process', 'worker_threads', 'http', 'net', 'url', 'process'],
          message: boundaryMessage,
        },
        { group: ['webgpu'], message: 'the Dawn binding is reached only through src/platform/node.ts' },
      ],
    },
  ],
};

/** Code lint sees: src/, web/ and the folders of commands, suites and benchmarks around them. */
const CODE = ['src/**/*.ts', ...OUTSIDE_SRC.map((o) => `${o.folder}/**/*.ts`)];

/**
 * One element type per folder of src/, then one per folder outside it. Training's subfolders come
 * first: a file takes the first element that matches. The folders outside src/ match from the root
 * only (partialMatch: false), so test/web/ is test, not web.
 */
const elements = [
  ...TRAINING_LAYERS.map((t) => ({ type: `training/${t.folder}`, pattern: `src/training/${t.folder}` })),
  ...LAYERS.map((l) => ({ type: l.folder, pattern: `src/${l.folder}` })),
  ...OUTSIDE_SRC.map((o) => ({ type: o.folder, pattern: o.folder, partialMatch: false })),
];
/** A folder allowed to import training may import each of its subfolders. */
const withTrainingParts = (types) =>
  types.includes('training') ? [...types, ...TRAINING_LAYERS.map((t) => `training/${t.folder}`)] : types;
const TRAINING_IMPORTS = LAYERS.find((l) => l.folder === 'training').imports;

const layerPolicies = [
  // Packages (zod, idb, …) and Node built-ins are governed by the platform boundary above, not here.
  { allow: { to: { module: { origin: ['external', 'core'] } } } },
  ...[...LAYERS, ...OUTSIDE_SRC].map((l) => ({
    from: { element: { type: l.folder } },
    allow: { to: { element: { types: { anyOf: withTrainingParts([l.folder, ...l.imports]) } } } },
  })),
  ...TRAINING_LAYERS.map((t) => ({
    from: { element: { type: `training/${t.folder}` } },
    allow: { to: { element: { types: { anyOf: [t.folder, ...t.imports].map((f) => `training/${f}`).concat(TRAINING_IMPORTS) } } } },
  })),
  { from: { file: { path: REFERENCE_USERS } }, allow: { to: { element: { type: 'reference' } } } },
];

export const layerRules = {
  'boundaries/dependencies': ['error', { default: 'disallow', policies: layerPolicies }],
  'speclab/no-cycle': 'error',
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'src/kernels/shaders.gen.ts', '.speclab/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module' },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/platform/**'],
    rules: platformBoundaryRules,
  },
  {
    files: CODE,
    plugins: { boundaries, speclab: importCycles },
    settings: {
      'boundaries/elements': elements,
      'boundaries/include': CODE,
      'import/resolver': { node: { extensions: ['.ts', '.js'] } },
    },
    rules: layerRules,
  },
  {
    files: ['src/**/*.ts', 'web/**/*.ts'],
    // A file longer than this says why on its first line (`/* eslint-disable max-lines -- reason */`).
    rules: { 'max-lines': ['error', { max: 400 }] },
  },
  {
    files: ['web/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: SERVER_ONLY_ADAPTERS.map((name) => ({
            group: [`**/src/platform/${name}.ts`],
            message:
              'web/ runs in a browser tab: import src/platform/browser.ts (or its model stores, browser-model-files.ts and browser-model-url.ts), not a Node/Deno adapter',
          })),
        },
      ],
    },
  },
  {
    files: ['**/*.js', 'bin/**'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);
