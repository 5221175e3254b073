// Vite builds the browser lab from web/ (npm run build / dev / preview): the lab page (index.html,
// its Web Worker in web/lab/worker.ts), the GPU self-check page and the rollout-worker page
// (rollout.html, web/rollout/: a tab as a rollout worker of a cluster run, through speclab gateway). The same src/ modules run there
// through src/platform/browser.ts. assets/ is the public folder, so the lab target is served at
// ./lab-target/ and fetched like any Hugging Face directory. The test page (test/browser) is built
// by test/runners/browser.ts.
import { resolve } from 'node:path';
import { defineConfig } from 'vite';

export default defineConfig({
  root: 'web',
  // Multi-page: a missing file is a 404, never index.html (the model loader probes optional files).
  appType: 'mpa',
  base: './',
  publicDir: resolve(import.meta.dirname, 'assets'),
  build: {
    // SPECLAB_WEB_OUT lets two builds (two e2e runs on different ports) not overwrite each other.
    outDir: process.env.SPECLAB_WEB_OUT ?? '../dist/web',
    emptyOutDir: true,
    target: 'es2022',
    rollupOptions: {
      input: {
        lab: resolve(import.meta.dirname, 'web/index.html'),
        selfcheck: resolve(import.meta.dirname, 'web/selfcheck.html'),
        rollout: resolve(import.meta.dirname, 'web/rollout.html'),
      },
    },
  },
  worker: { format: 'es' },
  server: { host: '127.0.0.1', port: 5173 },
  preview: { host: '127.0.0.1', port: 4173 },
});
