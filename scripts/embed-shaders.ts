/**
 * Embeds every shaders/**\/*.wgsl file into src/kernels/shaders.gen.ts (src/platform/embed-shaders.ts
 * does the work, src/kernels/shader-bundle.ts makes the text). Run by `npm run gen` and
 * `npm run prepare`; every test/bench/build script runs it first.  `tsx scripts/embed-shaders.ts`
 */
import { embedShaders } from '../src/platform/embed-shaders.ts';

console.log(embedShaders());
