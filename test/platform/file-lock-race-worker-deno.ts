/** The lock race's worker on Deno: ./file-lock-race-worker.ts with the Deno platform. */
import { denoPlatform } from '../../src/platform/deno.ts';
import { runRaceWorker } from './file-lock-race-worker.ts';

await runRaceWorker(denoPlatform);
