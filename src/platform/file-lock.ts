/**
 * A lock file that two processes cannot both hold, with stale-lock takeover that two racing processes
 * cannot both win. Node and Deno run the same algorithm through `LockFiles` (their own file calls).
 *
 * Taking the lock is one hard link of a fully written temp file onto the lock's name: the link
 * either creates the lock or fails because it exists, so there is never a half-written lock and
 * never two owners of a fresh one.
 *
 * Taking over a lock whose owner is gone is the dangerous part: "read it, see it is stale, remove it,
 * link mine" lets a slow racer remove the lock a faster racer has just taken (two owners). So the
 * takeover is serialised by a guard, itself taken by a hard link, whose name is derived from the stale
 * record's exact text (`LOCK.takeover-<hash>`): everyone taking over the same dead owner races on the
 * same guard and exactly one wins it. The winner reads the lock again under the guard and removes it
 * only if it is still that same record; a late winner of the guard (after the first winner let it go)
 * finds a different record and backs off. Lock records carry a random nonce, so no two are alike.
 * A process that dies holding a guard leaves it behind: the lock is then refused, naming the guard to
 * delete, never stolen.
 */
import { LockHeldError, parseLockOwner, type FileLock, type LockOwner } from '../ports/storage.ts';

/** The file calls the algorithm needs; each runtime provides them. */
export interface LockFiles {
  writeText(path: string, text: string): Promise<void>;
  /** Hard-link `existing` as `path`: false when `path` exists (EEXIST), other errors thrown. */
  link(existing: string, path: string): Promise<boolean>;
  /** The file's text, or null when it does not exist or cannot be read. */
  readText(path: string): Promise<string | null>;
  /** Remove a file; a missing one is not an error. */
  remove(path: string): Promise<void>;
  /** Whether the process that wrote `owner` is known to have ended (same host, no such process). */
  ownerGone(owner: LockOwner): Promise<boolean>;
}

export interface LockIdentity {
  readonly pid: number;
  readonly host: string;
}

/** 32-bit FNV-1a of a string, as 8 hex digits: names a takeover guard after the stale record it replaces. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** The guard that serialises the takeover of the stale lock record `staleText` at `target`. */
export function takeoverGuardPath(target: string, staleText: string): string {
  return `${target}.takeover-${fnv1a(staleText)}`;
}

function randomNonce(): string {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Link a temp file holding `text` as `path`; the temp file is always removed. */
async function linkWhole(files: LockFiles, path: string, text: string, nonce: string): Promise<boolean> {
  const temp = `${path}.tmp-${nonce}`;
  await files.writeText(temp, text);
  try {
    return await files.link(temp, path);
  } finally {
    await files.remove(temp);
  }
}

function heldBy(target: string, text: string | null, note?: string): LockHeldError {
  const error = new LockHeldError(target, text === null ? null : parseLockOwner(text));
  if (note) error.message += ` (${note})`;
  return error;
}

/** Take the lock at `target` for `me`, taking over a stale one; a live owner's lock is refused (LockHeldError). */
export async function acquireFileLock(files: LockFiles, target: string, me: LockIdentity): Promise<FileLock> {
  const nonce = randomNonce();
  const mine = JSON.stringify({ pid: me.pid, host: me.host, since: new Date().toISOString(), nonce });
  const release = async () => {
    // Remove only our own record: a lock taken over after we were (wrongly) judged gone is not ours.
    if ((await files.readText(target)) === mine) await files.remove(target);
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await linkWhole(files, target, mine, nonce)) return { path: target, release };
    const seen = await files.readText(target);
    if (seen === null) continue; // released meanwhile: try again
    const owner = parseLockOwner(seen);
    if (owner === null || !(await files.ownerGone(owner))) throw heldBy(target, seen);
    const guard = takeoverGuardPath(target, seen);
    if (!(await linkWhole(files, guard, mine, `${nonce}-guard`))) {
      const now = await files.readText(target);
      if (now === seen)
        throw heldBy(target, seen, `another process is taking this stale lock over; if none is, delete ${guard} and the lock file`);
      if (now === null) continue;
      throw heldBy(target, now);
    }
    try {
      // Under the guard only a release, or a link onto a missing lock, can change the lock file.
      const now = await files.readText(target);
      if (now !== seen) {
        if (now === null) continue;
        throw heldBy(target, now);
      }
      await files.remove(target);
      if (await linkWhole(files, target, mine, nonce)) return { path: target, release };
      throw heldBy(target, await files.readText(target));
    } finally {
      await files.remove(guard);
    }
  }
  throw heldBy(target, await files.readText(target));
}
