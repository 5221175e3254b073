/**
 * One racer of ./file-lock-race.ts (started through ./file-lock-race-worker-node.ts or -deno.ts, with
 * its runtime's platform): on `go N` it takes `tN/LOCK` in the folder it was given through the
 * platform's FileStore (the code `speclab train` locks its run folder with) and answers `acquired N`,
 * `refused N` (LockHeldError) or `error N <message>`; on `release N` it lets go and answers
 * `released N`.
 */
import type { Platform } from '../../src/cli/platform.ts';
import { LockHeldError, type FileLock } from '../../src/ports/storage.ts';
import { raceRuntime } from './file-lock-race-runtime.ts';

export async function runRaceWorker(platform: Platform): Promise<void> {
  const rt = await raceRuntime();
  const files = platform.files(rt.args[0]);
  const held = new Map<string, FileLock>();
  for await (const line of rt.stdinLines()) {
    const [verb, trial] = line.split(' ');
    if (verb === 'ping') rt.print('pong');
    else if (verb === 'go') {
      try {
        held.set(trial, await files.lockExclusive!(`t${trial}/LOCK`));
        rt.print(`acquired ${trial}`);
      } catch (err) {
        rt.print(err instanceof LockHeldError ? `refused ${trial}` : `error ${trial} ${(err as Error).message}`);
      }
    } else if (verb === 'release') {
      await held.get(trial)?.release();
      held.delete(trial);
      rt.print(`released ${trial}`);
    }
  }
  rt.exit(0);
}
