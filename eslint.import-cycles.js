// The import-cycle rule of SpecLab's lint (`speclab/no-cycle`), counting every kind of import.
// eslint-plugin-import-x's no-cycle skips `import type` (and imports whose every name is a type), so
// two files tied only by types passed lint; but such a pair is still one unit to read and to move,
// and a type-only edge against the layer order hides a real dependency. This rule follows the import
// graph as TypeScript scans it: static imports, `import type`, `export … from`, `import()`, `import('…')`
// types and `require`, all alike. Bare specifiers (packages, `node:*`) are not followed.
//
// The linted file's imports come from its ESLint AST (its text may not be on disk yet); every other
// file's come from TypeScript's import scanner (ts.preProcessFile), cached by mtime and size.
import { readFileSync, statSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';

const FOLLOWED = /\.(ts|mts|cts|tsx|js|mjs|cjs)$/;
/** ts.preProcessFile does not report `export * as ns from '…'`; a file with one is parsed in full. */
const NAMESPACE_REEXPORT = /\bexport\s+(type\s+)?\*\s+as\b/;

/** @type {Map<string, { mtimeMs: number, size: number, imports: string[] }>} */
const importCache = new Map();

/** The file a relative or absolute specifier names, or undefined (a package, a missing file, not code). */
function resolveSpecifier(fromFile, specifier) {
  if (!specifier.startsWith('.') && !specifier.startsWith('/')) return undefined;
  const base = resolve(dirname(fromFile), specifier.replace(/[?#].*$/, ''));
  for (const candidate of [base, base.replace(/\.js$/, '.ts'), `${base}.ts`, `${base}/index.ts`]) {
    if (!FOLLOWED.test(candidate) || candidate.includes('/node_modules/')) continue;
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not this candidate
    }
  }
  return undefined;
}

/** Every specifier a TypeScript or JavaScript source imports, in source order. */
function scanSpecifiers(fileName, text) {
  if (!NAMESPACE_REEXPORT.test(text)) return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
  const specifiers = [];
  const visit = (node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier))
      specifiers.push(node.moduleSpecifier.text);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const expression = node.moduleReference.expression;
      if (ts.isStringLiteral(expression)) specifiers.push(expression.text);
    } else if (ts.isCallExpression(node) && node.arguments.length > 0 && ts.isStringLiteral(node.arguments[0])) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require'))
        specifiers.push(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal))
      specifiers.push(node.argument.literal.text);
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false));
  return specifiers;
}

/** The files `file` imports (on disk), or undefined when it is gone. */
function importsOf(file) {
  let stat;
  try {
    stat = statSync(file);
  } catch {
    return undefined;
  }
  const cached = importCache.get(file);
  if (cached && cached.mtimeMs === stat.mtimeMs && cached.size === stat.size) return cached.imports;
  const specifiers = scanSpecifiers(file, readFileSync(file, 'utf8'));
  const imports = [...new Set(specifiers.map((s) => resolveSpecifier(file, s)).filter((f) => f !== undefined))];
  importCache.set(file, { mtimeMs: stat.mtimeMs, size: stat.size, imports });
  return imports;
}

/**
 * The shortest import path from `start` back to `target` ([start, …, target]), or undefined. Files in
 * `deadEnds` are known not to reach `target`; every file of a search that fails joins them.
 */
function pathBack(start, target, deadEnds) {
  const parent = new Map([[start, undefined]]);
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const file = queue[i];
    for (const next of importsOf(file) ?? []) {
      if (next === target) {
        const path = [target];
        for (let at = file; at !== undefined; at = parent.get(at)) path.unshift(at);
        return path;
      }
      if (parent.has(next) || deadEnds.has(next)) continue;
      parent.set(next, file);
      queue.push(next);
    }
  }
  for (const file of queue) deadEnds.add(file);
  return undefined;
}

const noCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'Forbid an import through which the importing file is reached again, type-only imports included.' },
    schema: [],
    messages: { cycle: 'Dependency cycle (type-only imports count): {{route}}' },
  },
  create(context) {
    const file = context.physicalFilename;
    if (!FOLLOWED.test(file)) return {};
    const cwd = context.cwd;
    /** @type {{ node: any, specifier: string }[]} */
    const found = [];
    const add = (node) => {
      if (node && node.type === 'Literal' && typeof node.value === 'string') found.push({ node, specifier: node.value });
    };
    return {
      ImportDeclaration: (node) => add(node.source),
      ExportNamedDeclaration: (node) => add(node.source),
      ExportAllDeclaration: (node) => add(node.source),
      ImportExpression: (node) => add(node.source),
      TSImportType: (node) => add(node.argument?.type === 'TSLiteralType' ? node.argument.literal : node.source),
      TSExternalModuleReference: (node) => add(node.expression),
      'CallExpression[callee.name="require"]': (node) => add(node.arguments[0]),
      'Program:exit'() {
        const deadEnds = new Set();
        const seen = new Set();
        for (const { node, specifier } of found) {
          const imported = resolveSpecifier(file, specifier);
          if (imported === undefined || imported === file || seen.has(imported)) continue;
          seen.add(imported);
          const path = pathBack(imported, file, deadEnds);
          if (path === undefined) continue;
          const route = [file, ...path].map((f) => relative(cwd, f)).join(' → ');
          context.report({ node, messageId: 'cycle', data: { route } });
        }
      },
    };
  },
};

/** The local plugin: `plugins: { speclab: importCycles }`, rule `speclab/no-cycle`. */
export default { meta: { name: 'speclab-import-cycles' }, rules: { 'no-cycle': noCycle } };
