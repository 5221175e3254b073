#!/usr/bin/env node
// `speclab` on Node: runs the TypeScript entry point through tsx (no build step), in this process,
// so a signal sent to this pid (Ctrl-C, `kill`) reaches the command itself; a launcher child would
// leave the command running when only the launcher is killed.
import { register } from 'tsx/esm/api';

register();
await import(new URL('../src/platform/node-main.ts', import.meta.url).href);
