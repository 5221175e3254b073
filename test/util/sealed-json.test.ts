/** Sealed JSON files (src/util/sealed-json.ts): a round trip, and every kind of damage refused by name. */
import { openSealedJson, sealJson } from '../../src/util/sealed-json.ts';
import { assertDeepEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('util/sealed-json', (t) => {
  const value = { key: 'k', sequences: [{ ids: [1, 2, 3], lossMask: [0, 1, 1] }], text: 'é ✓' };

  t.test('a sealed file opens to the value it was sealed from', () => {
    assertDeepEqual(openSealedJson(sealJson(value), 'run/sequences.json', 'the sequences'), value, 'round trip');
  });

  t.test('truncation, a flipped bit, an edit, a missing header and plain JSON are refused naming the file', () => {
    const good = sealJson(value);
    const text = new TextDecoder().decode(good);
    const where = /^run\/sequences\.json: the sequences is damaged \(/;
    const cases: [string, Uint8Array, RegExp][] = [
      ['cut short', good.slice(0, good.length - 5), /\d+ bytes after the header, which recorded \d+/],
      [
        'a flipped loss-mask bit',
        new TextEncoder().encode(text.replace('"lossMask": [\n    0', '"lossMask": [\n    1')),
        /CRC-32 [0-9a-f]+, the header recorded [0-9a-f]+/,
      ],
      ['no header line', new TextEncoder().encode('{"a":1}'), /no header line/],
      ['plain JSON', new TextEncoder().encode('{"a":1}\n{"b":2}'), /the header names format undefined/],
      ['a header that is not JSON', new TextEncoder().encode('speclab\n{}'), /the header line is not JSON/],
    ];
    for (const [label, bytes, pattern] of cases) {
      assertThrows(() => openSealedJson(bytes, 'run/sequences.json', 'the sequences'), new RegExp(where.source + pattern.source), label);
    }
  });
});
