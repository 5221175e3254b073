// Lint: TypeScript rules, the platform boundary, and the layer table.
//  - Only src/platform/ may touch runtime globals (navigator, Deno, process) or Node built-ins;
//    everything else gets a Platform (src/cli/platform.ts) or a port (src/ports/) injected.
//  - A folder of src/ imports only the folders eslint.layers.js lets it (eslint-plugin-boundaries),
//    and no import cycle exists in src/ or web/, between folders or between files (import-x).
// test/lint/boundary.ts plants one offence of each rule and shows lint failing on it.
import js from '@eslint/js';
import boundaries from 'eslint-plugin-boundaries';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';
import { LAYERS, REFERENCE_USERS, SERVER_ONLY_ADAPTERS, TRAINING_LAYERS } from './eslint.layers.js';

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

const ENTRY_IMPORTS = [...LAYERS.map((l) => l.folder).filter((f) => f !== 'reference' && f !== 'platform')];

/** One element type per folder of src/, plus web/; anything else (tests, benches, scripts) is unconstrained. */
const elements = [
  // Training's subfolders first: a file takes the first element that matches.
  ...TRAINING_LAYERS.map((t) => ({ type: `training/${t.folder}`, pattern: `src/training/${t.folder}` })),
  ...LAYERS.map((l) => ({ type: l.folder, pattern: `src/${l.folder}` })),
  { type: 'web', pattern: 'web' },
];
/** A folder allowed to import training may import each of its subfolders. */
const withTrainingParts = (types) =>
  types.includes('training') ? [...types, ...TRAINING_LAYERS.map((t) => `training/${t.folder}`)] : types;
const TRAINING_IMPORTS = LAYERS.find((l) => l.folder === 'training').imports;

const layerPolicies = [
  // Packages (zod, idb, …) and Node built-ins are governed by the platform boundary above, not here.
  { allow: { to: { module: { origin: ['external', 'core'] } } } },
  ...LAYERS.map((l) => ({
    from: { element: { type: l.folder } },
    allow: { to: { element: { types: { anyOf: withTrainingParts([l.folder, ...l.imports]) } } } },
  })),
  ...TRAINING_LAYERS.map((t) => ({
    from: { element: { type: `training/${t.folder}` } },
    allow: { to: { element: { types: { anyOf: [t.folder, ...t.imports].map((f) => `training/${f}`).concat(TRAINING_IMPORTS) } } } },
  })),
  { from: { file: { path: REFERENCE_USERS } }, allow: { to: { element: { type: 'reference' } } } },
  {
    from: { element: { type: 'web' } },
    allow: { to: { element: { types: { anyOf: withTrainingParts(['web', 'platform', ...ENTRY_IMPORTS]) } } } },
  },
];

export const layerRules = {
  'boundaries/dependencies': ['error', { default: 'disallow', policies: layerPolicies }],
  'import-x/no-cycle': ['error', { ignoreExternal: true }],
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
    files: ['src/**/*.ts', 'web/**/*.ts'],
    plugins: { boundaries, 'import-x': importX },
    settings: {
      'boundaries/elements': elements,
      'boundaries/include': ['src/**/*.ts', 'web/**/*.ts'],
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js'] })],
      // Imported files are parsed as TypeScript too; with the default parser a .ts dependency would
      // fail to parse and its imports (and so any cycle through it) would be silently skipped.
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import/resolver': { node: { extensions: ['.ts', '.js'] } },
    },
    rules: {
      ...layerRules,
      // A file longer than this says why on its first line (`/* eslint-disable max-lines -- reason */`).
      'max-lines': ['error', { max: 400 }],
    },
  },
  {
    files: ['web/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: SERVER_ONLY_ADAPTERS.map((name) => ({
            group: [`**/src/platform/${name}.ts`],
            message: 'web/ runs in a browser tab: import src/platform/browser.ts or browser-model-files.ts, not a Node/Deno adapter',
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
