/** Deno soak: `deno task soak [seconds]` — the same mixed-size matmul soak as Node's, on Deno's WebGPU. */
import { denoPlatform } from '../../src/platform/deno.ts';
import { soak } from './soak.ts';

const seconds = Number(denoPlatform.args()[0] ?? 60);
const ctx = await denoPlatform.acquireGpu();
try {
  const result = await soak(ctx, seconds);
  console.log(`[deno] ok   stress › ${seconds} s soak of mixed matmul sizes up to 2048 ${JSON.stringify(result)}`);
  console.log('[deno] 1 passed, 0 failed');
  await denoPlatform.exit(0);
} catch (err) {
  console.log(`[deno] FAIL stress › soak: ${(err as Error).stack ?? err}`);
  console.log('[deno] 0 passed, 1 failed');
  await denoPlatform.exit(1);
}
