/**
 * The one rule for partition, field and task names and the closed set of dtypes
 * (src/dataplane/names.ts), and that the client, the row check and the wire protocol all apply it:
 * a partition name with a Redis hash-tag brace or a prototype key, and a dtype that is merely a
 * property every object inherits (`constructor`, `__proto__`, `toString`), are refused by name
 * before anything is stored, so no later put can fail because of them.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { checkRow } from '../../src/dataplane/column-store.ts';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { decodeColumns, rowRefBytes } from '../../src/dataplane/gateway-protocol.ts';
import { checkDType, checkName, DTYPES, isDType, nameProblem } from '../../src/dataplane/names.ts';
import { DataPlaneError, type DType } from '../../src/dataplane/types.ts';

/** The names hostile clients tried: hash-tag braces, glob characters, path climbing, prototype keys. */
export const HOSTILE_NAMES: readonly string[] = [
  'a}b',
  'a{b',
  'a}:s:r1',
  '{a}',
  'a*',
  'a?',
  '..',
  'a..b',
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
  '',
  '-a',
  '.a',
  'a b',
  'a/b',
  'a:b',
  'a\u0000b',
  'é',
  'x'.repeat(129),
];

/** dtypes that `in BYTES_PER_ELEMENT` used to accept: keys every object inherits. */
export const PROTOTYPE_DTYPES: readonly string[] = ['constructor', '__proto__', 'toString', 'valueOf', 'hasOwnProperty'];

export default defineSuite('dataplane/names', (t) => {
  t.test('names: the strict pattern accepts ordinary names and refuses braces, globs, "..", prototype keys, empty and long', () => {
    for (const good of ['train', 'p', 'run-s', 'r1', 'input_ids', 'hidden_state', 'a.b', 'A9', 'x'.repeat(128)])
      assertEqual(nameProblem(good), null, `${JSON.stringify(good)} is a valid name`);
    for (const bad of HOSTILE_NAMES) {
      const err = assertThrows(() => checkName(bad, 'registerPartition.partition'), /^registerPartition\.partition /, bad);
      assert(err instanceof DataPlaneError && err.code === 'invalid_argument', `${JSON.stringify(bad)}: invalid_argument`);
    }
    assertThrows(() => checkName('a}b', 'p'), /^p "a}b" is not a valid name \(1\.\.128 characters of \[A-Za-z0-9\._-\]/, 'message');
    assertThrows(() => checkName('constructor', 'p'), /^p "constructor" is reserved/, 'prototype key message');
    assertThrows(() => checkName(7, 'p'), /^p must be a string, got number$/, 'not a string');
  });

  t.test('dtypes: a closed set checked as own properties, so constructor, __proto__ and toString are not dtypes', () => {
    assertEqual(DTYPES.join(','), 'f32,f16,i32,u32', 'the set');
    for (const d of DTYPES) assert(isDType(d), `${d} is a dtype`);
    for (const d of [...PROTOTYPE_DTYPES, 'f64', '', 'F32']) {
      assert(!isDType(d), `${JSON.stringify(d)} is not a dtype`);
      assertThrows(() => checkDType(d, 'field "x"'), /^field "x" has dtype .*; expected one of f32, f16, i32, u32$/, d);
    }
    assert(!isDType(undefined) && !isDType(4), 'non-strings are not dtypes');
  });

  t.test('a row or a wire row ref with a prototype dtype is refused by name', () => {
    for (const d of PROTOTYPE_DTYPES) {
      assertThrows(
        () => checkRow({ dtype: d, shape: [1], data: new Float32Array(1) }, 'put field "x"'),
        /^put field "x"\.dtype must be one of f32, f16, i32, u32/,
        `checkRow ${d}`,
      );
      assertThrows(() => rowRefBytes({ dtype: d, shape: [1] }, 'row 0'), /^row 0: unknown dtype/, `rowRefBytes ${d}`);
    }
    const frames = [new Uint8Array(4)];
    const rows = [{ dtype: 'f32' as DType, shape: [1] }];
    assertThrows(
      () => decodeColumns(JSON.parse('{"__proto__": [0]}'), rows, frames, 'putSamples(p)'),
      /^putSamples\(p\) field name "__proto__"/,
      'a column named __proto__',
    );
  });

  t.test('the client refuses hostile partition, field and task names and prototype dtypes before storing anything', async () => {
    const client = await createDataPlaneClient({ impl: 'transferQueue', backend: { kind: 'local', columns: 'host' }, claimPollMs: 5 });
    try {
      for (const bad of HOSTILE_NAMES) {
        await assertRejects(
          () => client.registerPartition({ partition: bad, fields: { x: 'f32' }, consumerTasks: ['t'] }),
          /^registerPartition\.partition /,
          `partition ${JSON.stringify(bad)}`,
        );
        await assertRejects(() => client.partitionStats(bad), /^partitionStats\.partition /, `stats of ${JSON.stringify(bad)}`);
        await assertRejects(() => client.clearSamples(bad, { all: true }), /^clearSamples\.partition /, `clear of ${JSON.stringify(bad)}`);
      }
      // JSON.parse makes "__proto__" an own key, as a request from the wire would.
      const protoField = JSON.parse('{"__proto__": "f32"}') as Record<string, DType>;
      await assertRejects(
        () => client.registerPartition({ partition: 'p', fields: protoField, consumerTasks: ['t'] }),
        /field name "__proto__"/,
        'a field named __proto__',
      );
      await assertRejects(
        () => client.registerPartition({ partition: 'p', fields: { x: 'f32' }, consumerTasks: ['constructor'] }),
        /consumerTasks\[0\] "constructor" is reserved/,
        'a task named constructor',
      );
      for (const d of PROTOTYPE_DTYPES) {
        await assertRejects(
          () => client.registerPartition({ partition: 'p', fields: { x: d as DType }, consumerTasks: ['t'] }),
          /^registerPartition\(p\) field "x" has dtype .*; expected one of f32, f16, i32, u32$/,
          `dtype ${d}`,
        );
      }
      await assertRejects(() => client.partitionStats('p'), /is not registered/, 'nothing was registered by the refused calls');
      // The partition that is registered takes puts as before.
      await client.registerPartition({ partition: 'p', fields: { x: 'f32' }, consumerTasks: ['t'] });
      await client.putSamples({
        partition: 'p',
        sampleIds: ['s'],
        columns: { x: [{ dtype: 'f32', shape: [1], data: Float32Array.of(1) }] },
      });
      assertEqual((await client.partitionStats('p')).samples, 1, 'a valid put lands');
    } finally {
      await client.close();
    }
  });
});
