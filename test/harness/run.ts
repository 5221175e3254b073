/**
 * Runs suites on one platform with one shared GPU context, printing a line per test prefixed with
 * the runtime (`[node] ok kernels/matmul › NN 37x53x29`) and a closing `N passed, N failed` line.
 * If no GPU context can be had, every test that touches `ctx.gpu` fails with that error.
 */
import type { GpuContext } from '../../src/gpu/context.ts';
import type { Platform } from '../../src/cli/platform.ts';
import type { Suite, TestContext } from './suite.ts';

export interface TestResult {
  name: string;
  ok: boolean;
  ms: number;
  error?: string;
  notes: Record<string, number | string>;
}

export interface RunSummary {
  passed: number;
  failed: number;
  results: TestResult[];
}

export async function runSuites(
  platform: Platform,
  suites: readonly Suite[],
  options: { filter?: string; log?: (line: string) => void; gpu?: GpuContext; fixture: (path: string) => Promise<Uint8Array> },
): Promise<RunSummary> {
  const log = options.log ?? ((line: string) => console.log(line));
  const tag = `[${platform.name}]`;
  let gpu: GpuContext | undefined = options.gpu;
  let gpuError: unknown;
  if (!gpu) {
    try {
      gpu = await platform.acquireGpu();
    } catch (err) {
      gpuError = err;
    }
  }
  if (gpu) {
    const r = gpu.record;
    log(`${tag} adapter: ${r.description || r.vendor || 'unknown'} (fallback: ${r.isFallbackAdapter}) features: ${r.features.join(', ')}`);
  } else {
    log(`${tag} NO GPU ADAPTER: ${(gpuError as Error)?.message ?? gpuError}`);
  }
  const results: TestResult[] = [];
  for (const suite of suites) {
    for (const test of suite.tests) {
      const name = `${suite.name} › ${test.name}`;
      if (options.filter && !name.includes(options.filter)) continue;
      if (test.only && !test.only.includes(platform.name)) continue;
      const notes: Record<string, number | string> = {};
      const ctx: TestContext = {
        get gpu(): GpuContext {
          if (!gpu) throw new Error(`no GPU adapter: ${(gpuError as Error)?.message ?? gpuError}`);
          return gpu;
        },
        platform,
        fixture: options.fixture,
        note: (key, value) => {
          notes[key] = value;
        },
      };
      const start = performance.now();
      let error: string | undefined;
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        await Promise.race([
          Promise.resolve().then(() => test.fn(ctx)),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`timed out after ${test.timeoutMs} ms`)), test.timeoutMs);
          }),
        ]);
      } catch (err) {
        error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      } finally {
        clearTimeout(timer);
      }
      const ms = performance.now() - start;
      const noteText = Object.keys(notes).length ? ` ${JSON.stringify(notes)}` : '';
      if (error === undefined) log(`${tag} ok   ${name} (${ms.toFixed(0)} ms)${noteText}`);
      else log(`${tag} FAIL ${name} (${ms.toFixed(0)} ms): ${error}`);
      results.push({ name, ok: error === undefined, ms, error, notes });
    }
  }
  const passed = results.filter((r) => r.ok).length;
  const failed = results.length - passed;
  if (results.length === 0) log(`${tag} no test matched${options.filter ? ` "${options.filter}"` : ''}`);
  for (const r of results.filter((x) => !x.ok)) log(`${tag} failed: ${r.name}: ${r.error}`);
  log(`${tag} ${passed} passed, ${failed} failed`);
  if (!options.gpu) gpu?.destroy();
  return { passed, failed, results };
}
