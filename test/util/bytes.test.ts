import { formatBytes, parseByteSize } from '../../src/util/bytes.ts';
import { assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('util/bytes', (t) => {
  t.test('byte sizes: decimal and binary units in, binary units out, bad text refused naming the flag', () => {
    assertEqual(parseByteSize('8GB', '--b'), 8e9, 'GB is 10^9');
    assertEqual(parseByteSize('8 GiB', '--b'), 8 * 2 ** 30, 'GiB is 2^30');
    assertEqual(parseByteSize('512mib', '--b'), 512 * 2 ** 20, 'case-insensitive');
    assertEqual(parseByteSize('4096', '--b'), 4096, 'plain bytes');
    assertEqual(parseByteSize('1e9', '--b'), 1e9, 'exponent');
    assertEqual(parseByteSize('1.5KiB', '--b'), 1536, 'fraction');
    assertThrows(() => parseByteSize('8 gigs', '--gpu-memory-budget'), /^--gpu-memory-budget: "8 gigs" is not a byte size/, 'unknown unit');
    assertThrows(() => parseByteSize('-1GB', '--b'), /is not a byte size/, 'negative');
    assertThrows(() => parseByteSize('0', '--b'), /must be between 1 byte/, 'zero');
    assertEqual(formatBytes(512), '512 B', 'bytes');
    assertEqual(formatBytes(1536), '1.50 KiB', 'KiB');
    assertEqual(formatBytes(8 * 2 ** 30), '8.00 GiB', 'GiB');
    assertEqual(formatBytes(300 * 2 ** 20), '300 MiB', 'three digits, no decimals');
  });
});
