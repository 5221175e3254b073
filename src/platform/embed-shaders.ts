/**
 * Writes src/kernels/shaders.gen.ts from shaders/ (src/kernels/shader-bundle.ts makes its text).
 * Runs in Node and in Deno (through node:fs): `npm run gen` calls it through scripts/embed-shaders.ts,
 * and the CLI entry points (node-main.ts, deno-main.ts) call it when a fresh clone has no generated
 * file yet. The file is rewritten only when its text changes, so a rerun does not touch its mtime.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleShaders } from '../kernels/shader-bundle.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The generated module, src/kernels/shaders.gen.ts. */
export const SHADERS_GEN_FILE = join(ROOT, 'src/kernels/shaders.gen.ts');

function walk(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? walk(path) : path.endsWith('.wgsl') ? [path] : [];
    });
}

/** Embeds every shader; returns the one-line report (`embedded N shaders into src/kernels/shaders.gen.ts`). */
export function embedShaders(): string {
  const shaderDir = join(ROOT, 'shaders');
  /** Paths relative to shaders/, with forward slashes (the form `#include` uses). */
  const files = walk(shaderDir).map((path) => relative(shaderDir, path).replace(/\\/g, '/'));
  const read = (path: string): string | undefined => {
    const full = join(shaderDir, path);
    return existsSync(full) && statSync(full).isFile() ? readFileSync(full, 'utf8') : undefined;
  };
  const { text, shaders } = bundleShaders(files, read);
  if (!existsSync(SHADERS_GEN_FILE) || readFileSync(SHADERS_GEN_FILE, 'utf8') !== text) writeFileSync(SHADERS_GEN_FILE, text);
  return `embedded ${shaders} shaders into ${relative(ROOT, SHADERS_GEN_FILE)}`;
}
