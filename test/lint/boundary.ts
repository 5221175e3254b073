/**
 * Proves each lint rule of the architecture bites, by planting one offence of each kind:
 *  - the platform boundary: code outside src/platform/ that touches a runtime global or a Node
 *    built-in fails lint, and the same code inside src/platform/ passes;
 *  - the layer table (eslint.layers.js): an import against it fails, value or type-only, and so
 *    does a production import of the float64 references or a Node adapter imported from web/;
 *    src/ importing scripts/ or test/ fails, and so does scripts/ importing test/ (up the table);
 *  - import cycles: two files importing each other fail, by value imports or by type imports alone;
 *  - a source file over 400 lines fails unless its first line gives the reason;
 *  - the README's architecture tables (src/ and "Outside src/") list exactly what lint enforces.
 * Node-only (it drives ESLint's API); run by scripts/test-all.sh.  `tsx test/lint/boundary.ts`
 */
import { ESLint } from 'eslint';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import process from 'node:process';
import { LAYERS, OUTSIDE_SRC } from '../../eslint.layers.js';

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
  console.log(`[node] ${ok ? 'ok  ' : 'FAIL'} lint/architecture › ${name}${ok ? '' : `: ${detail}`}`);
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

/** Lints `code` as if it were the file `filePath`; returns the messages of rules matching `rule`. */
async function ruleHits(code: string, filePath: string, rule: RegExp): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return result.messages.filter((m) => rule.test(m.ruleId ?? '')).map((m) => `${m.ruleId}: ${m.message}`);
}

const LAYER_CASES: { name: string; file: string; code: string; fails: boolean; rule: RegExp }[] = [
  {
    name: 'gpu importing training (against the table)',
    file: 'src/gpu/offender.ts',
    code: "import { Eagle3TrainingSession } from '../training/session/eagle3-session.ts';\nexport const x = Eagle3TrainingSession;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'the training loop importing the run that drives it (up the training subfolders)',
    file: 'src/training/loop/offender.ts',
    code: "import type { TrainConfig } from '../run/run-config.ts';\nexport type X = TrainConfig;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'a type-only import against the table',
    file: 'src/kernels/offender.ts',
    code: "import type { DataFlowController } from '../control/controller.ts';\nexport type X = DataFlowController;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'model importing cli (upwards)',
    file: 'src/model/offender.ts',
    code: "import { main } from '../cli/main.ts';\nexport const x = main;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'production code importing the float64 references',
    file: 'src/model/offender.ts',
    code: "import { matmulRef } from '../reference/matmul.ts';\nexport const x = matmulRef;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'a reference importing SpecLab code',
    file: 'src/reference/offender.ts',
    code: "import { Rng } from '../util/random.ts';\nexport const x = Rng;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'web/ importing a Node adapter',
    file: 'web/lab/offender.ts',
    code: "import { nodePlatform } from '../../src/platform/node.ts';\nexport const x = nodePlatform;\n",
    fails: true,
    rule: /no-restricted-imports/,
  },
  {
    name: 'src/ importing scripts/ (the entry points included)',
    file: 'src/platform/offender.ts',
    code: "import { embedShaders } from '../../scripts/embed-shaders.ts';\nexport const x = embedShaders;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'src/ importing scripts/ through import()',
    file: 'src/platform/offender.ts',
    code: "export const load = (): Promise<unknown> => import('../../scripts/embed-shaders.ts');\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'src/ importing test/',
    file: 'src/util/offender.ts',
    code: "import { assertEqual } from '../../test/harness/assert.ts';\nexport const x = assertEqual;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'scripts/ importing test/ (up the table)',
    file: 'scripts/offender.ts',
    code: "import { startRedisServer } from '../test/dataplane/redis-fixture.ts';\nexport const x = startRedisServer;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'scripts/ importing the float64 references',
    file: 'scripts/offender.ts',
    code: "import { matmulRef } from '../src/reference/matmul.ts';\nexport const x = matmulRef;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'test/ importing bench/ (up the table)',
    file: 'test/util/offender.ts',
    code: "import { medianSeconds } from '../../bench/record.ts';\nexport const x = medianSeconds;\n",
    fails: true,
    rule: /boundaries/,
  },
  {
    name: 'scripts/ importing src/platform/ (down the table)',
    file: 'scripts/fine.ts',
    code: "import { embedShaders } from '../src/platform/embed-shaders.ts';\nexport const x = embedShaders;\n",
    fails: false,
    rule: /boundaries|speclab/,
  },
  {
    name: 'bench/ importing test/ fixtures (down the table)',
    file: 'bench/fine.ts',
    code: "import { startRedisServer } from '../test/dataplane/redis-fixture.ts';\nexport const x = startRedisServer;\n",
    fails: false,
    rule: /boundaries|speclab/,
  },
  {
    name: 'model importing kernels (down the table)',
    file: 'src/model/fine.ts',
    code: "import { matmul } from '../kernels/matmul.ts';\nexport const x = matmul;\n",
    fails: false,
    rule: /boundaries|speclab/,
  },
  {
    name: 'speclab selfcheck importing the references',
    file: 'src/cli/selfcheck.ts',
    code: "import { matmulRef } from '../reference/matmul.ts';\nexport const x = matmulRef;\n",
    fails: false,
    rule: /boundaries/,
  },
];
for (const c of LAYER_CASES) {
  const hits = await ruleHits(c.code, c.file, c.rule);
  check(`${c.name} ${c.fails ? 'fails' : 'passes'} lint`, c.fails ? hits.length > 0 : hits.length === 0, JSON.stringify(hits));
}

const long = Array.from({ length: 401 }, (_, i) => `export const x${i} = ${i};`).join('\n') + '\n';
check(
  'a source file over 400 lines fails lint',
  (await ruleHits(long, 'src/util/long.ts', /max-lines/)).length > 0,
  'max-lines not reported',
);
const reasoned = `/* eslint-disable max-lines -- longer than 400 lines: a planted example. */\n${long}`;
check(
  'a source file over 400 lines with its reason on the first line passes',
  (await ruleHits(reasoned, 'src/util/long.ts', /max-lines/)).length === 0,
  'max-lines reported',
);

// A cycle needs both files on disk, since the rule follows imports through the files they name.
const PLANTED_CYCLES: { name: string; a: string; b: string }[] = [
  {
    name: 'two files importing each other fail lint (no-cycle)',
    a: "import { b } from './b.ts';\nexport const a = (): number => b() + 1;\n",
    b: "import { a } from './a.ts';\nexport const b = (): number => a() - 1;\n",
  },
  {
    name: 'two files importing each other by type imports alone fail lint (no-cycle)',
    a: "import type { B } from './b.ts';\nexport interface A {\n  b?: B;\n}\n",
    b: "import { type A } from './a.ts';\nexport interface B {\n  a?: A;\n}\n",
  },
  {
    name: 'a type-only cycle through an import type and a re-export fails lint (no-cycle)',
    a: "export type { B } from './b.ts';\nexport type A = { n: number };\n",
    b: "export type B = import('./a.ts').A[];\n",
  },
];
for (const [i, planted] of PLANTED_CYCLES.entries()) {
  const cycleDir = new URL(`../../src/util/lint-proof-${process.pid}-${i}/`, import.meta.url).pathname;
  mkdirSync(cycleDir, { recursive: true });
  try {
    writeFileSync(`${cycleDir}a.ts`, planted.a);
    writeFileSync(`${cycleDir}b.ts`, planted.b);
    const hits = await ruleHits(planted.a, `${cycleDir}a.ts`, /speclab\/no-cycle/);
    check(planted.name, hits.length > 0 && hits.every((h) => /a\.ts → .*b\.ts → .*a\.ts/.test(h)), JSON.stringify(hits));
  } finally {
    rmSync(cycleDir, { recursive: true, force: true });
  }
}

// The README's table is the plan people read: its "may import" column must be the enforced one.
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const documented = new Map<string, string[]>();
for (const line of readme.split('\n')) {
  const m = /^\| (\d+) \| `src\/([a-z]+)\/` \|.*\| ([^|]*) \|$/.exec(line);
  if (m) documented.set(m[2], m[3] === 'nothing of SpecLab' ? [] : [...m[3].matchAll(/`([a-z]+)`/g)].map((x) => x[1]).sort());
}
for (const layer of LAYERS) {
  const row = documented.get(layer.folder);
  const want = [...layer.imports].sort();
  check(
    `README table: src/${layer.folder}/ may import ${want.join(', ') || 'nothing'}`,
    row !== undefined && row.join() === want.join(),
    row ? `README says ${row.join(', ')}` : 'no README row',
  );
}
check(
  'README table has no folder that lint does not know',
  [...documented.keys()].every((f) => LAYERS.some((l) => l.folder === f)),
  [...documented.keys()].join(', '),
);

/**
 * What a row of the "Outside src/" table says the folder may import: "every folder of `src/`"
 * (less those named after "but"), plus each `folder/` named; what follows a ';' only narrows it.
 */
function outsideImports(cell: string): string[] {
  const claim = cell.split(';')[0]!;
  const but = new Set([...(/\bbut ((?:`[a-z]+`(?:, | and )?)+)/.exec(claim)?.[1]?.matchAll(/`([a-z]+)`/g) ?? [])].map((x) => x[1]));
  const src = claim.startsWith('every folder of `src/`') ? LAYERS.map((l) => l.folder).filter((f) => !but.has(f)) : [];
  const others = [...claim.matchAll(/`([a-z]+)\/`/g)].map((x) => x[1]!).filter((f) => f !== 'src');
  return [...src, ...others].sort();
}
const outside = new Map<string, string[]>();
for (const line of readme.split('\n')) {
  const m = /^\| `([a-z]+)\/` \|.*\| ([^|]*) \|$/.exec(line);
  if (m && m[2] !== '—') outside.set(m[1]!, outsideImports(m[2]!));
}
for (const folder of OUTSIDE_SRC) {
  const row = outside.get(folder.folder);
  const want = [...folder.imports].sort();
  check(
    `README "Outside src/" table: ${folder.folder}/ may import ${want.join(', ')}`,
    row !== undefined && row.join() === want.join(),
    row ? `README says ${row.join(', ')}` : 'no README row',
  );
}
check(
  'README "Outside src/" table has no code folder that lint does not know',
  [...outside.keys()].every((f) => OUTSIDE_SRC.some((o) => o.folder === f)),
  [...outside.keys()].join(', '),
);

console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
