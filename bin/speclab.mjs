#!/usr/bin/env node
// `speclab` on Node: runs the TypeScript entry point through tsx (no build step), in this process,
// so a signal sent to this pid (Ctrl-C, `kill`) reaches the command itself; a launcher child would
// leave the command running when only the launcher is killed.
// A fresh clone needs only `npm ci`: `--help` and `--version` load no GPU code and no shaders, and
// the entry point generates src/kernels/shaders.gen.ts (from shaders/) before a command needs it.
let register;
try {
  ({ register } = await import('tsx/esm/api'));
} catch {
  console.error(
    `speclab: the dependencies are not installed (tsx not found); run \`npm ci\` in ${new URL('..', import.meta.url).pathname}`,
  );
  process.exit(1);
}
register();
await import(new URL('../src/platform/node-main.ts', import.meta.url).href);
