/**
 * Safetensors hardening: round trips (in memory and streamed through a FileStore), one test per
 * class of hostile header, and fast-check properties over mutated, truncated and shuffled files:
 * parsing either succeeds with entries that are consistent and inside the file, or throws an Error
 * whose message names the file — never another kind of crash.
 */
import fc from 'fast-check';
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import {
  SAFETENSORS_DTYPE_BYTES,
  SafetensorsFile,
  SafetensorsReader,
  f32ToBf16,
  parseSafetensorsHeader,
  type SafetensorsDType,
  type SafetensorsHeader,
} from '../../src/formats/safetensors.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/formats/safetensors-writer.ts';
import { tempStore } from '../data/temp-store.ts';

const SOURCE = 'fuzz.safetensors';
const DTYPES = Object.keys(SAFETENSORS_DTYPE_BYTES) as SafetensorsDType[];

/** A file with bytes written by hand: 8-byte length prefix, header text, then `dataBytes` zeros. */
function rawFile(header: unknown, dataBytes: number, headerText = JSON.stringify(header)): Uint8Array {
  const json = new TextEncoder().encode(headerText);
  const out = new Uint8Array(8 + json.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  return out;
}

function headerOf(bytes: Uint8Array): { n: number; json: Record<string, unknown> } {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  return { n, json: JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) };
}

function withHeader(bytes: Uint8Array, json: unknown): Uint8Array {
  const { n } = headerOf(bytes);
  return concat(rawFile(null, 0, JSON.stringify(json)), bytes.subarray(8 + n));
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** Everything a successful parse promises about its entries. */
function checkConsistent(header: SafetensorsHeader, fileSize: number): void {
  const ranges: [number, number][] = [];
  for (const e of header.entries.values()) {
    assert(DTYPES.includes(e.dtype), `${e.name}: dtype ${e.dtype} is supported`);
    assert(
      e.shape.every((d) => Number.isSafeInteger(d) && d >= 0),
      `${e.name}: shape [${e.shape}] is non-negative integers`,
    );
    assert(
      e.begin >= header.dataStart && e.end <= fileSize && e.begin <= e.end,
      `${e.name}: [${e.begin}, ${e.end}) inside the data section`,
    );
    assertEqual(
      e.end - e.begin,
      e.shape.reduce((a, d) => a * d, SAFETENSORS_DTYPE_BYTES[e.dtype]),
      `${e.name}: byte count`,
    );
    ranges.push([e.begin, e.end]);
  }
  ranges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  for (let i = 1; i < ranges.length; i++) assert(ranges[i][0] >= ranges[i - 1][1], 'ranges do not overlap');
}

/** Parse, and on success decode every tensor; a thrown error must be an Error naming the file. */
function parseOrCleanError(bytes: Uint8Array): 'ok' | 'error' {
  try {
    const file = new SafetensorsFile(bytes, SOURCE);
    checkConsistent(file.header, bytes.length);
    for (const e of file.header.entries.values()) {
      const isFloat = e.dtype === 'F32' || e.dtype === 'F64' || e.dtype === 'F16' || e.dtype === 'BF16';
      const n = isFloat ? file.f32(e.name).length : file.i32(e.name).length;
      assertEqual(
        n,
        e.shape.reduce((a, d) => a * d, 1),
        `${e.name}: decoded length`,
      );
    }
    return 'ok';
  } catch (err) {
    if (!(err instanceof Error) || err.name === 'AssertionError') throw err;
    if (err.constructor !== Error || !err.message.startsWith(`${SOURCE}:`)) {
      throw new Error(`unclear failure (${err.constructor.name}): ${err.message}`, { cause: err });
    }
    return 'error';
  }
}

const arbTensor: fc.Arbitrary<[string, TensorToWrite]> = fc
  .record({
    name: fc.string({ minLength: 1, maxLength: 12 }).filter((s) => s !== '__metadata__'),
    dtype: fc.constantFrom(...DTYPES),
    shape: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
  })
  .map(({ name, dtype, shape }) => {
    const bytes = shape.reduce((a, d) => a * d, SAFETENSORS_DTYPE_BYTES[dtype]);
    const data = new Uint8Array(bytes).map((_, i) => (i * 37) & 0x7f);
    return [name, { dtype, shape, data }];
  });

const arbFile = fc
  .uniqueArray(arbTensor, { minLength: 1, maxLength: 5, selector: ([name]) => name })
  .map((list) => writeSafetensors(Object.fromEntries(list), { format: 'pt' }));

/** Random JSON values to put anywhere in a header, including the awkward ones. */
const arbWeird = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(-1, 1.5, 2 ** 53, 1e300, Number.MAX_SAFE_INTEGER, 'F32', 'F8_E4M3', [0], [5, 1], [0, -8], [[1]]),
);

export default defineSuite('formats/safetensors', (t) => {
  t.test('round trip of every dtype, in memory and streamed through a FileStore', async ({ platform }) => {
    const f32 = new Float32Array([1.5, -2, 3.25, 0]);
    const bf16 = new Uint16Array([...f32].map(f32ToBf16));
    const f16 = new Uint16Array([0x3c00, 0xc000, 0x3800, 0]); // 1, -2, 0.5, 0
    const i64 = new BigInt64Array([5n, -7n]);
    const bytes = writeSafetensors(
      {
        'a.f32': { dtype: 'F32', shape: [2, 2], data: new Uint8Array(f32.buffer) },
        'b.bf16': { dtype: 'BF16', shape: [4], data: new Uint8Array(bf16.buffer) },
        'c.f16': { dtype: 'F16', shape: [4], data: new Uint8Array(f16.buffer) },
        'd.i64': { dtype: 'I64', shape: [2], data: new Uint8Array(i64.buffer) },
        'é.empty': { dtype: 'F32', shape: [0, 3], data: new Uint8Array(0) },
      },
      { note: 'x' },
    );
    const mem = new SafetensorsFile(bytes, 'mem');
    assertEqual(mem.header.dataStart % 8, 0, 'data section 8-byte aligned');
    const tmp = tempStore(platform, 'st-roundtrip');
    try {
      await tmp.files.writeAtomic('m.safetensors', bytes);
      // Record what the reader asks of the store: it must never read the whole file at once.
      const reads: number[] = [];
      const store = {
        ...tmp.files,
        root: tmp.files.root,
        size: (p: string) => tmp.files.size(p),
        exists: (p: string) => tmp.files.exists(p),
        read: () => Promise.reject(new Error('whole-file read')),
        readRange: (p: string, offset: number, length: number) => (reads.push(length), tmp.files.readRange(p, offset, length)),
      };
      const streamed = await SafetensorsReader.open(store, 'm.safetensors');
      assertDeepEqual(reads, [8, streamed.header.dataStart - 8], 'open reads the prefix, then the header only');
      for (const r of [mem, streamed]) {
        assertDeepEqual([...(await r.f32('a.f32'))], [1.5, -2, 3.25, 0], 'f32');
        assertDeepEqual([...(await r.f32('b.bf16'))], [1.5, -2, 3.25, 0], 'bf16 widened');
        assertDeepEqual([...(await r.f32('c.f16'))], [1, -2, 0.5, 0], 'f16 widened');
        assertDeepEqual([...(await r.i32('d.i64'))], [5, -7], 'i64 narrowed');
        assertEqual((await r.f32('é.empty')).length, 0, 'empty tensor');
        assertDeepEqual(r.header.metadata, { note: 'x' }, 'metadata');
      }
      assertEqual(
        reads.slice(2).reduce((a, n) => a + n, 0),
        bytes.length - streamed.header.dataStart,
        'then one range per tensor',
      );
      await assertRejects(() => streamed.f32('d.i64'), /m\.safetensors: tensor "d\.i64" is I64, not a float tensor/, 'wrong accessor');
      await assertRejects(() => streamed.f32('nope'), /m\.safetensors: no tensor named "nope"/, 'missing tensor');
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('streaming reader refuses a truncated file before reading tensors', async ({ platform }) => {
    const good = writeSafetensors({ w: { dtype: 'F32', shape: [64], data: new Uint8Array(256) } });
    const tmp = tempStore(platform, 'st-trunc');
    try {
      await tmp.files.writeAtomic('cut.safetensors', good.subarray(0, good.length - 4));
      await assertRejects(
        () => SafetensorsReader.open(tmp.files, 'cut.safetensors'),
        /cut\.safetensors: tensor "w": data_offsets \[0, 256\] run past/,
        'truncated data',
      );
      await tmp.files.writeAtomic('tiny.safetensors', good.subarray(0, 5));
      await assertRejects(
        () => SafetensorsReader.open(tmp.files, 'tiny.safetensors'),
        /tiny\.safetensors: file is 5 bytes, too short/,
        'shorter than prefix',
      );
      await tmp.files.writeAtomic('head.safetensors', good.subarray(0, 20));
      await assertRejects(
        () => SafetensorsReader.open(tmp.files, 'head.safetensors'),
        /head\.safetensors: header length \d+ runs past the end/,
        'header cut',
      );
    } finally {
      await tmp.cleanup();
    }
  });

  t.test('each class of hostile header gets a clear error naming file and tensor', () => {
    const ok = { dtype: 'F32', shape: [2], data_offsets: [0, 8] };
    const cases: [string, Uint8Array, RegExp][] = [
      [
        'huge header length',
        (() => {
          const b = rawFile({}, 0);
          new DataView(b.buffer).setBigUint64(0, 2n ** 40n, true);
          return b;
        })(),
        /header length 1099511627776 exceeds/,
      ],
      ['not JSON', rawFile(null, 0, '{"a": '), /header is not valid JSON/],
      ['not UTF-8', rawFile(null, 0, '{}').map((v, i) => (i === 9 ? 0xff : v)), /header is not valid UTF-8/],
      ['array header', rawFile([1, 2], 0), /header must be a JSON object, got an array/],
      ['null header', rawFile(null, 0), /header must be a JSON object, got null/],
      ['entry not object', rawFile({ w: 3 }, 0), /tensor "w": entry must be an object/],
      ['unsupported dtype', rawFile({ w: { ...ok, dtype: 'F8_E5M2' } }, 8), /tensor "w": unsupported dtype "F8_E5M2"/],
      [
        'negative dim',
        rawFile({ w: { ...ok, shape: [-2] } }, 8),
        /tensor "w": shape must be an array of non-negative integers, got \[-2\]/,
      ],
      ['fractional dim', rawFile({ w: { ...ok, shape: [1.5] } }, 8), /tensor "w": shape must be/],
      ['offsets not pair', rawFile({ w: { ...ok, data_offsets: [0] } }, 8), /tensor "w": data_offsets must be two/],
      ['reversed offsets', rawFile({ w: { ...ok, data_offsets: [8, 0] } }, 8), /tensor "w": data_offsets \[8, 0\] are reversed/],
      [
        'past data section',
        rawFile({ w: { ...ok, data_offsets: [4, 12] } }, 8),
        /tensor "w": data_offsets \[4, 12\] run past the 8-byte data section/,
      ],
      ['byte count mismatch', rawFile({ w: { ...ok, shape: [3] } }, 8), /tensor "w": F32\[3\] needs 12 bytes, data_offsets give 8/],
      ['overflowing numel', rawFile({ w: { ...ok, shape: [2 ** 30, 2 ** 30, 2 ** 30] } }, 8), /tensor "w": F32\[.*\] needs .* bytes/],
      ['overlap', rawFile({ a: ok, b: { ...ok, data_offsets: [4, 12] } }, 12), /tensor "b" overlaps the tensor before it/],
      ['hole', rawFile({ a: ok, b: { ...ok, data_offsets: [12, 20] } }, 20), /tensor "b" leaves a hole/],
      ['trailing bytes', rawFile({ a: ok }, 12), /4 bytes after the last tensor/],
      ['bad metadata', rawFile({ __metadata__: { k: 1 } }, 0), /__metadata__\.k must be a string/],
    ];
    for (const [what, bytes, pattern] of cases) {
      const err = assertThrows(() => parseSafetensorsHeader(bytes, 'bad.safetensors'), pattern, what);
      assert(err.message.startsWith('bad.safetensors: '), `${what}: message names the file`);
    }
    // Out-of-order keys are fine: real files list keys alphabetically but lay data out by dtype.
    const reordered = rawFile({ z: ok, a: { ...ok, data_offsets: [8, 16] } }, 16);
    assertDeepEqual(new SafetensorsFile(reordered).names, ['z', 'a'], 'header order independent of data order');
  });

  t.test('property: random JSON mutations parse consistently or fail clearly', () => {
    let errors = 0;
    let oks = 0;
    fc.assert(
      fc.property(
        arbFile,
        fc.array(fc.tuple(fc.nat(), fc.nat(), fc.constantFrom('set', 'delete', 'add')), { minLength: 1, maxLength: 3 }),
        arbWeird,
        (bytes, edits, weird) => {
          const { json } = headerOf(bytes);
          for (const [pickEntry, pickField, op] of edits) {
            const weirdCopy = structuredClone(weird); // one object placed twice would make the header cyclic
            const names = Object.keys(json);
            const name = names[pickEntry % names.length];
            const entry = json[name];
            if (op === 'add') json[`extra${pickField}`] = weirdCopy;
            else if (!entry || typeof entry !== 'object' || Array.isArray(entry)) json[name] = weirdCopy;
            else {
              const fields = Object.keys(entry);
              const field = fields[pickField % Math.max(fields.length, 1)] ?? 'dtype';
              if (op === 'delete') delete (entry as Record<string, unknown>)[field];
              else (entry as Record<string, unknown>)[field] = weirdCopy;
            }
          }
          if (parseOrCleanError(withHeader(bytes, json)) === 'ok') oks++;
          else errors++;
        },
      ),
      { numRuns: 400, seed: 20261129 },
    );
    assert(errors > 0, 'some mutations were rejected');
    assert(oks > 0, 'some mutations (e.g. metadata-only or zero-size tensors) still parse');
  });

  t.test('property: truncations, header byte flips and offset shuffles', () => {
    fc.assert(
      fc.property(arbFile, fc.nat(), fc.nat(), fc.integer({ min: 0, max: 255 }), (bytes, cut, at, value) => {
        const outcomes = [
          parseOrCleanError(bytes.subarray(0, cut % (bytes.length + 1))),
          parseOrCleanError(bytes.map((v, i) => (i === at % bytes.length ? value : v))),
        ];
        assert(cut % (bytes.length + 1) === bytes.length || outcomes[0] === 'error', 'a truncated file is refused');
        const { json } = headerOf(bytes);
        const names = Object.keys(json).filter((k) => k !== '__metadata__');
        const offsets = names.map((k) => (json[k] as { data_offsets: number[] }).data_offsets);
        // Rotate the offsets by a random amount: entries now point at other tensors' bytes.
        const shift = at % names.length;
        names.forEach((k, i) => ((json[k] as { data_offsets: number[] }).data_offsets = offsets[(i + shift) % names.length]));
        parseOrCleanError(withHeader(bytes, json));
      }),
      { numRuns: 400, seed: 7 },
    );
  });

  t.test('property: the streaming reader agrees with the in-memory parser', async ({ platform }) => {
    const tmp = tempStore(platform, 'st-stream');
    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(arbFile, fc.nat(), async (bytes, cut) => {
          const file = `f${run++}.safetensors`;
          const data = cut % 3 === 0 ? bytes.subarray(0, cut % bytes.length) : bytes;
          await tmp.files.writeAtomic(file, data);
          let memory: string;
          try {
            memory = JSON.stringify([...parseSafetensorsHeader(data, 'x').entries.values()]);
          } catch (err) {
            memory = `error ${(err as Error).message.replace(/^x: /, '')}`;
          }
          let streamed: string;
          try {
            const reader = await SafetensorsReader.open(tmp.files, file);
            streamed = JSON.stringify([...reader.header.entries.values()]);
            for (const name of reader.names)
              assertDeepEqual(
                [...(await reader.raw(name))],
                [...data.subarray(reader.entry(name).begin, reader.entry(name).end)],
                `${name} bytes`,
              );
          } catch (err) {
            streamed = `error ${(err as Error).message.replace(`${tmp.files.root}/${file}: `, '')}`;
          }
          assertEqual(streamed, memory, 'streamed and in-memory outcomes');
        }),
        { numRuns: 30, seed: 99 },
      );
    } finally {
      await tmp.cleanup();
    }
  });
});
