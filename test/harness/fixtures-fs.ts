/** Fixture bytes from the file system, for the Node and Deno runners (through the platform's FileStore). */
import type { Platform } from '../../src/cli/platform.ts';

export function fileFixtures(platform: Platform): (path: string) => Promise<Uint8Array> {
  const root = platform.env('SPECLAB_FIXTURES') ?? '../shared/fixtures';
  const store = platform.files(root);
  return async (path) => {
    try {
      return await store.read(path);
    } catch (err) {
      throw new Error(
        `fixture ${path} not readable under ${store.root} (set SPECLAB_FIXTURES to the fixtures folder): ${(err as Error).message}`,
        { cause: err },
      );
    }
  };
}
