/** A scratch key-value database (IndexedDB in the browser) with a unique name, deleted by `cleanup`. */
import type { Platform } from '../../src/cli/platform.ts';

let counter = 0;

export interface TempDatabase {
  readonly name: string;
  /** Deletes the database; close every store on it first (an open connection delays the delete). */
  cleanup(): Promise<void>;
}

export function tempDatabase(platform: Platform, label: string): TempDatabase {
  const name = `speclab-test:control-${label}-${Date.now().toString(36)}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  return { name, cleanup: () => platform.deleteKeyValueDatabase(name) };
}
