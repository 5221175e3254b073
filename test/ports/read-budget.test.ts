/**
 * Read budgets (src/ports/read-budget.ts) and the file stores that honour them (Node and Deno): an
 * endless stream (/dev/zero) is refused by name within its budget, in bounded memory, instead of
 * being read until memory runs out; a regular file over its budget is refused from its size; a file
 * within its budget reads whole and unchanged, also across the stores' read chunks. The browser's
 * stores, which hold a file whole, check the same budgets (picked files, in every runtime).
 */
import { ReadBudgetError, ReadBudgetMeter, READ_BUDGETS, type ReadBudget } from '../../src/ports/read-budget.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { pickedFilesStore } from '../../src/platform/browser-model-files.ts';

const KiB = 1024;
const encode = (text: string) => new TextEncoder().encode(text);

export default defineSuite('ports/read-budget', (t) => {
  t.test('the meter refuses the byte past the budget and a line over the line budget, naming the line', () => {
    const budget: ReadBudget = { what: 'a test file', maxBytes: 64, maxLineBytes: 8 };
    const meter = new ReadBudgetMeter('/data/x.jsonl', budget);
    meter.take(encode('1234567\nabc'));
    meter.take(encode('defg\n'));
    meter.take(encode('12345678\n'));
    const err = assertThrows(
      () => meter.take(encode('line4\n123456789')),
      /^\/data\/x\.jsonl: more than 8 bytes in one line \(line 5\), the limit for a test file$/,
      'line 5 has 9 bytes',
    );
    assert(err instanceof ReadBudgetError, 'a ReadBudgetError');
    assertEqual((err as ReadBudgetError).code, 'EFBIG', 'its code');
    const whole = new ReadBudgetMeter('/data/y.json', { what: 'a test file', maxBytes: 10 });
    whole.take(new Uint8Array(10));
    assertThrows(() => whole.take(new Uint8Array(1)), /^\/data\/y\.json: larger than the 10 bytes limit for a test file/, 'byte 11');
    const split = new ReadBudgetMeter('/data/z.jsonl', { what: 'a test file', maxBytes: 100, maxLineBytes: 4 });
    split.take(encode('ab'));
    split.take(encode('cd\nef'));
    assertThrows(
      () => split.take(encode('g\n\nhijkl')),
      /more than 4 bytes in one line \(line 4\)/,
      'a line split across chunks counts whole',
    );
  });

  t.test('the budgets of outside input: a 64 MiB JSONL line, tokenizers and configs well above real ones', () => {
    assertEqual(READ_BUDGETS.jsonlData.maxLineBytes, 64 * 2 ** 20, 'JSONL line');
    assert(READ_BUDGETS.tokenizer.maxBytes >= 64 * 2 ** 20, 'a real tokenizer.json is about 11 MiB');
    assert(READ_BUDGETS.jsonData.maxBytes < 2 ** 29, 'a JSON data file is one string: under V8’s string limit');
  });

  t.test('a store of picked files (the lab) refuses a file over its budget from its size, and a long line', async () => {
    const store = pickedFilesStore(
      [
        { file: new File([new Uint8Array(2048)], 'big.json'), path: 'big.json' },
        { file: new File(['{"a":1}\n', 'x'.repeat(300)], 'rows.jsonl'), path: 'rows.jsonl' },
      ],
      { label: 'dropped' },
    );
    await assertRejects(
      () => store.read('big.json', { what: 'a configuration file', maxBytes: 1024 }),
      /^dropped\/big\.json: larger than the 1024 bytes limit for a configuration file/,
      'over the byte budget',
    );
    await assertRejects(
      () => store.read('rows.jsonl', { what: 'a JSONL data file', maxBytes: 1024, maxLineBytes: 256 }),
      /^dropped\/rows\.jsonl: more than 256 bytes in one line \(line 2\)/,
      'over the line budget',
    );
    assertEqual((await store.read('big.json', READ_BUDGETS.config)).length, 2048, 'within its budget');
  });

  t.test(
    'a store refuses an endless stream by name within its budget, and a regular file over it from its size',
    async ({ platform }) => {
      const dev = platform.files('/dev');
      const t0 = performance.now();
      await assertRejects(
        () => dev.read('zero', { what: 'a test stream', maxBytes: 8 * 2 ** 20 }),
        /^\/dev\/zero: larger than the 8 MiB limit for a test stream/,
        'an endless stream, whole-file budget',
      );
      await assertRejects(
        () => dev.read('zero', { what: 'a JSONL data file', maxBytes: 2 ** 40, maxLineBytes: 64 * KiB }),
        /^\/dev\/zero: more than 65536 bytes in one line \(line 1\), the limit for a JSONL data file$/,
        'an endless line',
      );
      assert(performance.now() - t0 < 5000, `refused in ${(performance.now() - t0).toFixed(0)} ms`);
      const tmp = tempStore(platform, 'read-budget');
      try {
        const bytes = new Uint8Array(9 * 2 ** 20 + 123).map((_, i) => (i * 7) & 0xff);
        await tmp.files.writeAtomic('big.bin', bytes);
        const back = await tmp.files.read('big.bin', { what: 'a test file', maxBytes: bytes.length });
        assertEqual(back.length, bytes.length, 'read whole across chunks');
        assert(
          back.every((b, i) => b === bytes[i]),
          'unchanged',
        );
        await assertRejects(
          () => tmp.files.read('big.bin', { what: 'a test file', maxBytes: bytes.length - 1 }),
          new RegExp(`^${tmp.files.root}/big\\.bin: larger than the ${bytes.length - 1} bytes limit for a test file`),
          'one byte over',
        );
        await tmp.files.writeAtomic('rows.jsonl', encode('{"a":1}\n{"b":2}\n'));
        assertDeepEqual(
          new TextDecoder().decode(await tmp.files.read('rows.jsonl', READ_BUDGETS.jsonlData)),
          '{"a":1}\n{"b":2}\n',
          'short lines within the line budget',
        );
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );
});
