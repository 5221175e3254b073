#!/usr/bin/env node
// `speclab` on Node: runs the TypeScript entry point through tsx (no build step).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('../src/platform/node-main.ts', import.meta.url));
const result = spawnSync(process.execPath, ['--import', 'tsx', entry, ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(result.status ?? 1);
