/** A scratch FileStore under the git-ignored .speclab/test-tmp folder, removed by `cleanup`. */
import type { FileStore } from '../../src/ports/storage.ts';
import type { Platform } from '../../src/cli/platform.ts';

const TMP = '.speclab/test-tmp';
let counter = 0;

export interface TempStore {
  readonly files: FileStore;
  cleanup(): Promise<void>;
}

export function tempStore(platform: Platform, label: string): TempStore {
  const name = `data-${label}-${Date.now().toString(36)}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  return {
    files: platform.files(`${TMP}/${name}`),
    cleanup: () => platform.files(TMP).remove(name),
  };
}
