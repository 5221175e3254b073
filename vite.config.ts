// Vite builds the browser lab from web/ (npm run build / dev / preview). The same src/ modules run
// here through src/platform/browser.ts; the test page (test/browser) is built by test/runners/browser.ts.
import { defineConfig } from 'vite';

export default defineConfig({
  root: 'web',
  base: './',
  build: { outDir: '../dist/web', emptyOutDir: true, target: 'es2022' },
  server: { host: '127.0.0.1', port: 5173 },
  preview: { host: '127.0.0.1', port: 4173 },
});
