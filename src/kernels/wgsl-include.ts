/**
 * Build-time `#include` for WGSL, which has no include of its own. A line of the form
 *
 *   #include "include/matmul-common.wgsl"
 *
 * (the path relative to shaders/) is replaced by that file's text, expanded the same way in turn.
 * shader-bundle.ts runs this before embedding, so kernels load already-expanded WGSL and nothing
 * changes at runtime. Pure: files come through the `read` callback, which keeps the logic testable in
 * every runtime while src/platform/embed-shaders.ts reads them from disk.
 *
 * Any other line starting with `#` is refused: WGSL has no such syntax, so it can only be a
 * mistyped include, and failing here names the file and line instead of a later WGSL parse error.
 */

/** The text of a file under shaders/, or undefined when there is no such file. */
export type ReadShaderFile = (path: string) => string | undefined;

export class WgslIncludeError extends Error {
  override name = 'WgslIncludeError';
}

const INCLUDE_LINE = /^#include\s+"([^"]+)"\s*$/;

/**
 * The source of `path` with every include expanded, recursively. Throws a WgslIncludeError naming
 * the including file and line when an included file is missing, a path is malformed, or the
 * includes form a cycle. `included`, when given, collects every path that was included (so the
 * caller can find fragments nobody uses).
 */
export function expandIncludes(path: string, read: ReadShaderFile, included?: Set<string>): string {
  const source = read(path);
  if (source === undefined) throw new WgslIncludeError(`shaders/${path}: no such file`);
  return expand(path, source, read, [path], included);
}

function expand(path: string, source: string, read: ReadShaderFile, stack: string[], included?: Set<string>): string {
  const lines = source.split('\n');
  return lines
    .map((line, i) => {
      const trimmed = line.trim();
      if (!trimmed.startsWith('#')) return line;
      const where = `shaders/${path}:${i + 1}`;
      const match = INCLUDE_LINE.exec(trimmed);
      if (!match) throw new WgslIncludeError(`${where}: expected #include "<path relative to shaders/>", got: ${trimmed}`);
      const target = match[1]!;
      checkPath(target, where);
      if (stack.includes(target)) {
        const cycle = [...stack.slice(stack.indexOf(target)), target].join(' → ');
        throw new WgslIncludeError(`${where}: #include "${target}" forms a cycle: ${cycle}`);
      }
      const text = read(target);
      if (text === undefined) throw new WgslIncludeError(`${where}: #include "${target}": no such file shaders/${target}`);
      included?.add(target);
      // The include line's own newline ends the inserted text, so drop the fragment's last one.
      return expand(target, text.endsWith('\n') ? text.slice(0, -1) : text, read, [...stack, target], included);
    })
    .join('\n');
}

/** Paths are relative to shaders/ and stay inside it, so one fragment has exactly one name. */
function checkPath(target: string, where: string): void {
  const segments = target.split('/');
  if (target.startsWith('/') || target.includes('\\') || segments.some((s) => s === '' || s === '.' || s === '..')) {
    throw new WgslIncludeError(`${where}: #include "${target}": the path must be relative to shaders/, without "." or ".." segments`);
  }
}
