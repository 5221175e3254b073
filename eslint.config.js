// Lint: TypeScript rules plus the platform boundary. Only src/platform/ may touch runtime globals
// (navigator, Deno, process) or Node built-ins; everything else gets a Platform injected.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const RUNTIME_GLOBALS = ['navigator', 'Deno', 'process', 'Bun', 'require', '__dirname', '__filename'];
const boundaryMessage = 'only src/platform/ may touch runtime globals; take a Platform (src/platform/platform.ts) instead';

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
        { group: ['fs', 'fs/*', 'path', 'os', 'child_process', 'worker_threads', 'http', 'net', 'url', 'process'], message: boundaryMessage },
        { group: ['webgpu'], message: 'the Dawn binding is reached only through src/platform/node.ts' },
      ],
    },
  ],
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'src/kernels/shaders.gen.ts', '.speclab/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module' },
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
    files: ['**/*.js', 'bin/**'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);
