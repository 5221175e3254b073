/**
 * Proves the platform-boundary lint rule bites: code outside src/platform/ that touches a runtime
 * global or a Node built-in fails lint, and the same code inside src/platform/ passes.
 * Node-only (it drives ESLint's API); run by scripts/test-all.sh.  `tsx test/lint/boundary.ts`
 */
import { ESLint } from 'eslint';
import process from 'node:process';

const eslint = new ESLint({ cwd: new URL('../..', import.meta.url).pathname });

const OFFENDERS: Record<string, string> = {
  'navigator global': 'export const gpu = navigator.gpu;\n',
  'Deno global': 'export const args = Deno.args;\n',
  'process global': 'export const env = process.env.HOME;\n',
  'globalThis.process': 'export const env = globalThis.process;\n',
  'node: import': "import { readFileSync } from 'node:fs';\nexport const f = readFileSync;\n",
  'bare fs import': "import { readFileSync } from 'fs';\nexport const f = readFileSync;\n",
  'Dawn binding import': "import { create } from 'webgpu';\nexport const c = create;\n",
};

let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail: string): void {
  if (ok) passed++;
  else failed++;
  console.log(`[node] ${ok ? 'ok  ' : 'FAIL'} lint/platform-boundary › ${name}${ok ? '' : `: ${detail}`}`);
}

for (const [name, code] of Object.entries(OFFENDERS)) {
  const [outside] = await eslint.lintText(code, { filePath: 'src/gpu/offender.ts' });
  const boundary = outside.messages.filter((m) => /no-restricted-(globals|imports|properties)/.test(m.ruleId ?? ''));
  check(`${name} outside src/platform fails lint`, boundary.length > 0, `no boundary error: ${JSON.stringify(outside.messages)}`);
  const [inside] = await eslint.lintText(code, { filePath: 'src/platform/offender.ts' });
  const insideBoundary = inside.messages.filter((m) => /no-restricted/.test(m.ruleId ?? ''));
  check(`${name} inside src/platform passes the boundary rule`, insideBoundary.length === 0, JSON.stringify(insideBoundary));
}

const [clean] = await eslint.lintText('export const x = 1;\n', { filePath: 'src/gpu/clean.ts' });
check('clean code outside src/platform passes', clean.errorCount === 0, JSON.stringify(clean.messages));

console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
