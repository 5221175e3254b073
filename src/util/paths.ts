/** Path helpers for commands that turn a user-given path into a FileStore root plus a name in it. */

/**
 * Splits a path into (directory for a FileStore root, file name): "a/b/c" → ["a/b", "c"],
 * "c" → [".", "c"], "/c" → ["/", "c"]. With `ignoreTrailingSlash` a directory typed as "a/b/"
 * names "b" in "a" (shell completion appends the slash); file paths keep it, so "x.json/" still fails.
 */
export function splitPath(path: string, options: { ignoreTrailingSlash?: boolean } = {}): [string, string] {
  const p = options.ignoreTrailingSlash && path.length > 1 ? path.replace(/\/+$/, '') : path;
  const i = p.lastIndexOf('/');
  return i < 0 ? ['.', p] : [p.slice(0, i) || '/', p.slice(i + 1)];
}
