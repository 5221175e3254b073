/** Journal framing: checksum, torn-tail detection and refusal to drop data in the middle. */
import { defineSuite } from '../harness/suite.ts';
import { assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { crc32 } from '../../src/util/crc32.ts';
import { encodeFrame, scanJournal } from '../../src/control/journal.ts';

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

const frames = [
  { type: 'a', n: 1 },
  { type: 'b', list: [1, 2, 3] },
  { type: 'c', s: 'ünïcode' },
].map(encodeFrame);
const whole = concat(frames);
const lastStart = frames[0].length + frames[1].length;

export default defineSuite('control/journal', (t) => {
  t.test('CRC-32 matches the standard check value', () => {
    assertEqual(crc32(new TextEncoder().encode('123456789')), 0xcbf43926, 'crc32("123456789")');
    assertEqual(crc32(new Uint8Array(0)), 0, 'crc32 of nothing');
  });

  t.test('intact frames decode in order', () => {
    const scan = scanJournal(whole, 'j');
    assertDeepEqual(
      scan.records,
      [
        { type: 'a', n: 1 },
        { type: 'b', list: [1, 2, 3] },
        { type: 'c', s: 'ünïcode' },
      ],
      'records',
    );
    assertEqual(scan.tornBytes, 0, 'no torn tail');
    assertEqual(scan.validBytes, whole.length, 'all bytes valid');
  });

  t.test('every truncation point drops only the torn last record', () => {
    for (let cut = lastStart; cut < whole.length; cut++) {
      const scan = scanJournal(whole.subarray(0, cut), 'j');
      assertEqual(scan.records.length, 2, `records kept when cut at ${cut}`);
      assertEqual(scan.tornBytes, cut - lastStart, `torn bytes when cut at ${cut}`);
    }
  });

  t.test('a bad checksum in the last record is a torn tail; in the middle it is refused', () => {
    const lastBad = whole.slice();
    lastBad[whole.length - 2] ^= 0xff;
    assertEqual(scanJournal(lastBad, 'j').records.length, 2, 'last record dropped');
    const middleBad = whole.slice();
    middleBad[frames[0].length + 14] ^= 0xff;
    assertThrows(
      () => scanJournal(middleBad, 'journal-x'),
      /journal-x: damaged record at byte \d+ \(checksum mismatch\) is followed by more data/,
      'middle corruption',
    );
  });

  t.test('a zero-filled tail is dropped', () => {
    const padded = concat([whole, new Uint8Array(64)]);
    const scan = scanJournal(padded, 'j');
    assertEqual(scan.records.length, 3, 'records kept');
    assertEqual(scan.tornBytes, 64, 'zeros dropped');
  });
});
