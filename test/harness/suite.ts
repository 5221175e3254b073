/**
 * A deliberately tiny test harness that runs the same test files in Node (Dawn), Deno and Chromium.
 *
 * Why not a framework: no single runner covers all three runtimes, and every GPU test needs the same
 * shared device. A suite is a plain value (registered in test/suites.ts, an explicit list); a runner
 * per runtime acquires the GPU once, runs the suites and prints one line per test plus
 * `N passed, N failed`. A test that needs the GPU fails when no adapter could be had: there is no skip.
 */
import type { GpuContext } from '../../src/gpu/context.ts';
import type { Platform } from '../../src/cli/platform.ts';

export interface TestContext {
  /** The shared GPU context; reading it throws the acquisition error when no adapter was found. */
  readonly gpu: GpuContext;
  readonly platform: Platform;
  /**
   * Bytes of a reference fixture, by path under the fixtures folder (../shared/fixtures, or
   * $SPECLAB_FIXTURES), e.g. `eagle3/eagle3_reference.safetensors`. Served over HTTP in the browser.
   */
  fixture(path: string): Promise<Uint8Array>;
  /** Attach a number to the report (e.g. the worst relative error seen). */
  note(key: string, value: number | string): void;
}

export type TestFn = (ctx: TestContext) => void | Promise<void>;

export interface TestCase {
  readonly name: string;
  readonly fn: TestFn;
  /** Runtimes the test is meaningful in; default all. Use only for runtime-specific behaviour. */
  readonly only?: readonly Platform['name'][];
  readonly timeoutMs: number;
}

export interface Suite {
  readonly name: string;
  readonly tests: readonly TestCase[];
}

export interface SuiteBuilder {
  test(name: string, fn: TestFn, options?: { timeoutMs?: number; only?: readonly Platform['name'][] }): void;
}

/** Build a suite: `export default defineSuite('kernels/matmul', (t) => { t.test('...', async ({ gpu }) => {...}) })`. */
export function defineSuite(name: string, body: (t: SuiteBuilder) => void): Suite {
  const tests: TestCase[] = [];
  body({
    test(testName, fn, options = {}) {
      tests.push({ name: testName, fn, only: options.only, timeoutMs: options.timeoutMs ?? 120_000 });
    },
  });
  return { name, tests };
}
