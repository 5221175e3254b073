/**
 * File stores on disk (Node and Deno): a failed operation names the full path and what was tried.
 * The runtimes' own messages do not: reading a directory gave a bare "EISDIR: illegal operation on
 * a directory, read", and a full disk "ENOSPC: no space left on device, write".
 */
import { namingPath, parseLockOwner } from '../../src/ports/storage.ts';
import { assert, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';

export default defineSuite('ports/storage', (t) => {
  t.test(
    'a directory read as a file, a missing file and a short range are refused naming the path',
    async ({ platform }) => {
      const tmp = tempStore(platform, 'ports');
      try {
        await tmp.files.writeAtomic('model/config.json', new TextEncoder().encode('{}'));
        await assertRejects(
          () => tmp.files.read('model'),
          new RegExp(`${tmp.files.root}/model: read failed: is a directory, not a file`),
          'a directory as a file',
        );
        await assertRejects(
          () => tmp.files.read('model/absent.json'),
          new RegExp(`${tmp.files.root}/model/absent\\.json: read failed: .*(ENOENT|No such file|not found)`, 'i'),
          'a missing file',
        );
        await assertRejects(
          () => tmp.files.readRange('model/config.json', 0, 10),
          /model\/config\.json: wanted 10 bytes at offset 0/,
          'a short range',
        );
        const err = await assertRejects(() => tmp.files.size('nothing-here'), /nothing-here: stat failed/, 'stat of a missing file');
        assert((err as Error & { code?: string }).code === 'ENOENT' || platform.name === 'deno', 'the error code is kept (Node)');
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );

  t.test(
    'writeAtomicChunks: the chunks in order, written as they come; a failed stream leaves the target and no temp file',
    async ({ platform }) => {
      const tmp = tempStore(platform, 'ports-chunks');
      try {
        async function* chunks(fail: boolean) {
          for (let i = 0; i < 5; i++) {
            if (fail && i === 3) throw new Error('the readback failed');
            yield Uint8Array.from({ length: 1000 + i }, (_, j) => (i * 7 + j) & 0xff);
          }
        }
        const want = new Uint8Array(5010);
        for (let i = 0, at = 0; i < 5; at += 1000 + i, i++)
          want.set(
            Uint8Array.from({ length: 1000 + i }, (_, j) => (i * 7 + j) & 0xff),
            at,
          );
        assertEqual(await tmp.files.writeAtomicChunks('d/f.bin', chunks(false)), 5010, 'bytes written');
        assert(
          (await tmp.files.read('d/f.bin')).every((b, i) => b === want[i]),
          'the file is the chunks in order',
        );
        await assertRejects(() => tmp.files.writeAtomicChunks('d/f.bin', chunks(true)), /the readback failed/, 'a failing stream');
        assertEqual((await tmp.files.read('d/f.bin')).byteLength, 5010, 'the earlier file is untouched');
        assertEqual((await tmp.files.list('d')).join(), 'f.bin', 'no temp file left');
      } finally {
        await tmp.cleanup();
      }
    },
  );

  t.test('namingPath keeps the code and names a full disk in words', async () => {
    const full = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const err = await assertRejects(
      () => namingPath('/runs/a/spill/x.safetensors', 'atomic write of 64 bytes', () => Promise.reject(full)),
      /^\/runs\/a\/spill\/x\.safetensors: atomic write of 64 bytes failed: no space left on the device$/,
      'ENOSPC',
    );
    assertEqual((err as Error & { code?: string }).code, 'ENOSPC', 'code kept');
  });

  t.test('a lock file is read as its owner only when whole; anything else is null (treated as held)', () => {
    const owner = { pid: 4242, host: 'trainer-1', since: '2026-12-01T00:00:00.000Z' };
    assertEqual(JSON.stringify(parseLockOwner(JSON.stringify(owner))), JSON.stringify(owner), 'a whole lock');
    for (const text of [
      '',
      '{"pid":42',
      'null',
      '[]',
      '{"pid":"42","host":"h","since":"s"}',
      '{"pid":1.5,"host":"h","since":"s"}',
      '{"pid":42,"since":"s"}',
      '{"pid":42,"host":"h"}',
    ]) {
      assertEqual(parseLockOwner(text), null, `not a lock owner: ${JSON.stringify(text)}`);
    }
  });
});
