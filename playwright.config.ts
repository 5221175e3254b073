/**
 * End-to-end tests of the browser lab (web/, built by Vite into dist/web) in headless Chromium with
 * WebGPU on the software Vulkan adapter (SwiftShader).
 *
 *   npm run test:e2e            (= npx playwright test; builds the site first, then serves it)
 *   npx playwright test -g 'reload'
 *
 * The web server builds the site (`npm run build`) and serves the BUILT page with `vite preview` on
 * 127.0.0.1:4173 (the preview port of vite.config.ts; override with SPECLAB_E2E_PORT). It never reuses
 * a server already on that port: a stale preview would test a stale build, so a busy port fails fast.
 *
 * Software WebGPU on a small CI machine is slow (a training step can take about a second, target
 * generation tens of seconds), hence one worker, no retries and long timeouts. Screenshots and
 * downloads of every test land in test-results/e2e/ (git-ignored).
 */
import { defineConfig } from '@playwright/test';
import { CHROMIUM_PATH, CHROMIUM_WEBGPU_FLAGS } from './test/runners/chromium-flags.ts';

const port = Number(process.env.SPECLAB_E2E_PORT ?? 4173);
const baseURL = `http://127.0.0.1:${port}/`;
// A run on another port builds into its own folder, so two runs never serve each other's build.
const webOut = port === 4173 ? undefined : `../dist/web-${port}`;
const buildEnv = webOut ? `SPECLAB_WEB_OUT=${webOut} ` : '';

export default defineConfig({
  testDir: 'test/e2e',
  outputDir: 'test-results/e2e',
  // One chip, two cores: tests share the GPU and the CPU, so they run one at a time.
  workers: 1,
  fullyParallel: false,
  retries: 0,
  forbidOnly: !!process.env.CI,
  // Per test: training on the software adapter plus target generation takes minutes.
  timeout: 6 * 60_000,
  globalTimeout: 25 * 60_000,
  expect: { timeout: 30_000 },
  // `list` for people; count-reporter prints the `N passed, N failed` line scripts/test-all.sh counts.
  reporter: [['list'], ['./test/e2e/count-reporter.ts']],
  use: {
    baseURL,
    headless: true,
    viewport: { width: 1280, height: 900 },
    actionTimeout: 30_000,
    navigationTimeout: 60_000,
    screenshot: 'only-on-failure',
    trace: 'off',
    video: 'off',
    acceptDownloads: true,
  },
  projects: [
    {
      name: 'chromium',
      use: {
        browserName: 'chromium',
        launchOptions: {
          executablePath: CHROMIUM_PATH,
          args: CHROMIUM_WEBGPU_FLAGS,
        },
      },
    },
  ],
  webServer: {
    command: `${buildEnv}npm run build && ${buildEnv}npx vite preview --port ${port} --strictPort`,
    url: baseURL,
    reuseExistingServer: false,
    // The build (shader embedding + Vite) on a loaded 2-core machine.
    timeout: 5 * 60_000,
    stdout: 'ignore',
    stderr: 'pipe',
  },
});
