/**
 * The lock algorithm (src/platform/file-lock.ts) on an in-memory file table, so each interleaving is
 * set up exactly; the real files and real racing processes are ./file-lock-race.ts (Node and Deno),
 * and the run folder's lock through the platforms is test/training/run/run-plan.test.ts.
 */
import { acquireFileLock, takeoverGuardPath, type LockFiles } from '../../src/platform/file-lock.ts';
import { LockHeldError, parseLockOwner } from '../../src/ports/storage.ts';
import { assert, assertEqual } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

const HOST = 'this-host';
const DEAD = 2147483646;

function memoryFiles(live: Set<number>): LockFiles & { table: Map<string, string> } {
  const table = new Map<string, string>();
  return {
    table,
    writeText: async (path, text) => void table.set(path, text),
    async link(existing, path) {
      if (table.has(path)) return false;
      table.set(path, table.get(existing)!);
      return true;
    },
    readText: async (path) => table.get(path) ?? null,
    remove: async (path) => void table.delete(path),
    ownerGone: async (owner) => owner.host === HOST && !live.has(owner.pid),
  };
}

async function refusal(run: () => Promise<unknown>): Promise<LockHeldError> {
  try {
    await run();
  } catch (err) {
    if (err instanceof LockHeldError) return err;
    throw err;
  }
  throw new Error('expected a LockHeldError');
}

const stale = JSON.stringify({ pid: DEAD, host: HOST, since: '2026-01-01T00:00:00.000Z' });

export default defineSuite('platform/file-lock', (t) => {
  t.test('a free lock is taken; a live owner is refused; release removes only our own record', async () => {
    const files = memoryFiles(new Set([1, 2]));
    const lock = await acquireFileLock(files, 'LOCK', { pid: 1, host: HOST });
    assertEqual(parseLockOwner(files.table.get('LOCK')!)?.pid, 1, 'owner 1');
    const held = await refusal(() => acquireFileLock(files, 'LOCK', { pid: 2, host: HOST }));
    assertEqual(held.owner?.pid, 1, 'refused, naming owner 1');
    files.table.set('LOCK', JSON.stringify({ pid: 2, host: HOST, since: 'x', nonce: 'n' }));
    await lock.release();
    assertEqual(parseLockOwner(files.table.get('LOCK')!)?.pid, 2, "release left another process's lock alone");
    assertEqual([...files.table.keys()].join(), 'LOCK', 'no temp files left');
  });

  t.test("a stale lock is taken over; a slow racer that saw the same stale record cannot remove the winner's lock", async () => {
    const files = memoryFiles(new Set([1, 2]));
    files.table.set('LOCK', stale);
    // Racer 2 reads the stale record; racer 1 then takes the lock over completely before racer 2 goes on.
    let winner: Promise<unknown> | undefined;
    const slow: LockFiles = {
      ...files,
      async readText(path) {
        const text = await files.readText(path);
        if (path === 'LOCK' && text === stale && !winner) await (winner = acquireFileLock(files, 'LOCK', { pid: 1, host: HOST }));
        return text;
      },
    };
    const outcome = await refusal(() => acquireFileLock(slow, 'LOCK', { pid: 2, host: HOST }));
    assertEqual(outcome.owner?.pid, 1, 'the slow racer is refused, naming the winner');
    assertEqual(parseLockOwner(files.table.get('LOCK')!)?.pid, 1, 'the winner still holds the lock');
    assertEqual([...files.table.keys()].join(), 'LOCK', 'guard and temp files removed');
  });

  t.test('a guard left by a process that died mid-takeover: refused naming the guard, never stolen', async () => {
    const files = memoryFiles(new Set([2]));
    files.table.set('LOCK', stale);
    const guard = takeoverGuardPath('LOCK', stale);
    files.table.set(guard, JSON.stringify({ pid: 3, host: HOST, since: 'y', nonce: 'g' }));
    const outcome = await refusal(() => acquireFileLock(files, 'LOCK', { pid: 2, host: HOST }));
    assert(outcome.message.includes(`delete ${guard} and the lock file`), outcome.message);
    assertEqual(files.table.get('LOCK'), stale, 'the stale lock is untouched');
  });
});
