/** stableHash (src/util/stable-hash.ts): the hash that run contracts store in checkpoints. */
import { canonicalJson, stableHash } from '../../src/util/stable-hash.ts';
import { assert, assertEqual } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('util/stable-hash', (t) => {
  t.test('key order and undefined members do not change the hash; values and array order do', () => {
    const a = { lr: 0.003, aux: [1, 2, 3], nested: { b: 1, a: 2 } };
    const b = { nested: { a: 2, b: 1 }, aux: [1, 2, 3], lr: 0.003, unset: undefined };
    assertEqual(canonicalJson(a), '{"aux":[1,2,3],"lr":0.003,"nested":{"a":2,"b":1}}', 'canonical JSON');
    assertEqual(stableHash(a), stableHash(b), 'same value, other key order');
    assert(stableHash({ ...a, lr: 0.002 }) !== stableHash(a), 'another value');
    assert(stableHash({ ...a, aux: [3, 2, 1] }) !== stableHash(a), 'another array order');
    assert(/^[0-9a-f]{8}$/.test(stableHash(a)), 'eight hex digits');
  });

  t.test('the hash of a fixed value is pinned: checkpoints written before a change must still resume', () => {
    assertEqual(stableHash({ epochs: 2, seed: 0, sequences: 12 }), PINNED, 'pinned hash');
  });
});

const PINNED = '22c6614e';
