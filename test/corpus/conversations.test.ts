/**
 * Reading chat datasets (src/corpus/conversations.ts): the committed sample file in both dialects,
 * its JSON and Parquet twins (snappy and zstd, a list-of-structs column as Hugging Face writes it)
 * reading to the same conversations, and every refusal with its exact one-line message.
 */
import { parquetWriteBuffer } from 'hyparquet-writer';
import { readConversations, type Conversation } from '../../src/corpus/conversations.ts';
import type { FileStore } from '../../src/ports/storage.ts';
import { urlStore } from '../../src/platform/browser-model-url.ts';
import { assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite, type TestContext } from '../harness/suite.ts';

/** The repository's assets/ folder: on disk in Node and Deno, over HTTP (/repo-assets/) in the browser. */
export function repoAssets(ctx: TestContext): FileStore {
  return ctx.platform.name === 'browser' ? urlStore('/repo-assets') : ctx.platform.files('assets');
}

export const SAMPLE_FILE = 'conversations/sample.jsonl';

const bytesOf = (text: string): Uint8Array => new TextEncoder().encode(text);
const jsonl = (...rows: unknown[]): Uint8Array => bytesOf(rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n'));
const ok = {
  conversations: [
    { role: 'user', content: 'Hi.' },
    { role: 'assistant', content: 'Hello.' },
  ],
};

async function refused(bytes: Uint8Array, file: string, expected: string | RegExp): Promise<void> {
  const err = await assertRejects(() => readConversations(bytes, file), /./, expected.toString());
  if (typeof expected === 'string') assertEqual(err.message, expected, 'refusal message');
  else if (!expected.test(err.message)) throw new Error(`refusal "${err.message}" does not match ${expected}`);
}

/** A zstd frame of raw (stored) blocks: what any zstd decoder reads, written without a zstd compressor. */
function zstdStored(data: Uint8Array): Uint8Array {
  const BLOCK = 1 << 17;
  const blocks = Math.max(1, Math.ceil(data.length / BLOCK));
  const out = new Uint8Array(9 + blocks * 3 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, 0xfd2fb528, true); // magic
  out[4] = 0xa0; // frame header: 4-byte content size, single segment (no window descriptor), no checksum
  view.setUint32(5, data.length, true);
  let at = 9;
  for (let b = 0; b < blocks; b++) {
    const chunk = data.subarray(b * BLOCK, (b + 1) * BLOCK);
    const header = (chunk.length << 3) | (b === blocks - 1 ? 1 : 0); // block type 0 = raw
    out.set([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff], at);
    out.set(chunk, at + 3);
    at += 3 + chunk.length;
  }
  return out;
}

/**
 * `rows` (objects of the JSONL dialects, `messages` renamed to `conversations`) as a Parquet file
 * with Hugging Face's layout: `conversations` a LIST of STRUCT{role, content, from, value} (the
 * union of both dialects, the other two fields null), `id` and `system` optional strings.
 */
function parquetTwin(rows: readonly Record<string, unknown>[], codec: 'SNAPPY' | 'ZSTD'): Uint8Array {
  const str = { type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' } as const;
  const fields = ['role', 'content', 'from', 'value'];
  const turns = rows.map((r) =>
    ((r.conversations ?? r.messages) as Record<string, unknown>[]).map((t) => Object.fromEntries(fields.map((f) => [f, t[f] ?? null]))),
  );
  const buffer = parquetWriteBuffer({
    codec,
    compressors: { ZSTD: zstdStored },
    columnData: [
      { name: 'id', data: rows.map((r) => (r.id === undefined ? null : String(r.id))) },
      { name: 'conversations', data: turns },
      { name: 'system', data: rows.map((r) => (r.system as string | undefined) ?? null) },
    ],
    schema: [
      { name: 'root', num_children: 3 },
      { name: 'id', ...str },
      { name: 'conversations', repetition_type: 'OPTIONAL', num_children: 1, converted_type: 'LIST' },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', repetition_type: 'OPTIONAL', num_children: fields.length },
      ...fields.map((name) => ({ name, ...str })),
      { name: 'system', ...str },
    ],
  });
  return new Uint8Array(buffer);
}

/** Conversations without `id`/`line`: twins number rows differently (blank JSONL lines). */
const bodies = (rows: readonly Conversation[]) => rows.map((r) => r.messages);

export default defineSuite('corpus/conversations', (t) => {
  t.test('the committed sample: both dialects, system field and turn, ids, skipped rows by line', async (ctx) => {
    const file = await readConversations(await repoAssets(ctx).read(SAMPLE_FILE), 'sample.jsonl');
    assertDeepEqual(
      file.rows.map((r) => `${r.line} ${r.id} ${r.messages.map((m) => m.role[0]).join('')}`),
      [
        '1 greeting ua',
        '2 sharegpt-system sua',
        '3 messages-system-field suaua',
        '4 three-replies uauaua',
        '6 sample.jsonl:6 ua', // line 5 is blank; no id → file:line
        '8 long-reply ua',
        '9 long-question ua',
        '10 trailing-user uau',
        '11 system-turn sua',
        '12 42 ua', // a numeric id
        '13 four-replies uauauaua', // "system": "" adds no turn
      ],
      'rows: line, id, roles',
    );
    assertDeepEqual(
      file.skipped,
      [
        { line: 7, reason: 'no assistant turn' },
        {
          line: 14,
          reason:
            'conversations[1] is a user turn where the assistant turn belongs (turns alternate user/assistant after an optional first system turn)',
        },
      ],
      'skipped rows',
    );
    assertDeepEqual(
      file.rows[1].messages,
      [
        { role: 'system', content: 'You answer in one sentence.' },
        { role: 'user', content: 'What did the jury say?' },
        { role: 'assistant', content: 'The jury said the election was well conducted.' },
      ],
      'ShareGPT from/value → role/content',
    );
    assertDeepEqual(
      file.rows[2].messages[0],
      { role: 'system', content: 'You are a patient teacher.' },
      'the system field is a leading system turn',
    );
  });

  t.test('JSON array and Parquet twins (snappy, zstd) read to the same conversations as the JSONL', async (ctx) => {
    const bytes = await repoAssets(ctx).read(SAMPLE_FILE);
    const jsonlFile = await readConversations(bytes, 'sample.jsonl');
    const objects = new TextDecoder()
      .decode(bytes)
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const json = await readConversations(bytesOf(JSON.stringify(objects, null, 2)), 'sample.json');
    assertDeepEqual(bodies(json.rows), bodies(jsonlFile.rows), 'JSON messages');
    assertDeepEqual(
      json.skipped.map((s) => s.reason),
      jsonlFile.skipped.map((s) => s.reason),
      'JSON skips',
    );
    assertDeepEqual(
      json.rows.map((r) => r.line),
      [1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12],
      'JSON rows are numbered by array index + 1',
    );

    const named = objects.map(({ messages, ...rest }) => (messages ? { ...rest, conversations: messages } : rest));
    for (const codec of ['SNAPPY', 'ZSTD'] as const) {
      const parquet = await readConversations(parquetTwin(named, codec), 'sample.parquet');
      assertDeepEqual(bodies(parquet.rows), bodies(jsonlFile.rows), `${codec} Parquet messages`);
      assertDeepEqual(
        parquet.rows.map((r) => r.id),
        json.rows.map((r) => r.id.replace('sample.json:', 'sample.parquet:')),
        `${codec} Parquet ids`,
      );
      assertDeepEqual(parquet.skipped, json.skipped, `${codec} Parquet skips, by row index + 1`);
    }
  });

  t.test('a null field is an absent one (JSON exported from a Parquet dataset keeps them)', async () => {
    const row = {
      id: null,
      system: null,
      conversations: [
        { role: 'user', content: 'Hi.', from: null, value: null },
        { role: null, content: null, from: 'gpt', value: 'Hello.' },
      ],
    };
    const file = await readConversations(jsonl(row), 'nulls.jsonl');
    assertDeepEqual(
      file.rows,
      [
        {
          id: 'nulls.jsonl:1',
          line: 1,
          messages: [
            { role: 'user', content: 'Hi.' },
            { role: 'assistant', content: 'Hello.' },
          ],
        },
      ],
      'nulls dropped',
    );
  });

  t.test('refusals name the file, the row and the field', async () => {
    const six = Array.from({ length: 5 }, () => ok);
    await refused(
      jsonl(...six, '', {
        conversations: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
          { role: 'narrator', content: 'c' },
        ],
      }),
      'data.jsonl',
      'data.jsonl:7: conversations[2].role "narrator" is not user, assistant or system',
    );
    await refused(jsonl(ok, '{"conversations": [}'), 'data.jsonl', /^data\.jsonl:2: not valid JSON \(.+\)$/);
    await refused(
      jsonl({ conversations: [{ from: 'bing', value: 'x' }] }),
      'data.jsonl',
      'data.jsonl:1: conversations[0].from "bing" is not human, gpt, system, user or assistant',
    );
    await refused(
      jsonl({
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: [{ type: 'text', text: 'y' }] },
        ],
      }),
      'data.jsonl',
      'data.jsonl:1: messages[1].content is an array, expected a string',
    );
    await refused(
      jsonl({ conversations: [{ from: 'human', value: 7 }] }),
      'data.jsonl',
      'data.jsonl:1: conversations[0].value is a number, expected a string',
    );
    await refused(
      jsonl(ok, { id: 'x', turns: [] }),
      'data.jsonl',
      'data.jsonl:2: has neither "conversations" nor "messages" (a list of {role, content} or {from, value} turns)',
    );
    await refused(
      jsonl({ messages: [{ role: 'user', value: 'x' }] }),
      'data.jsonl',
      'data.jsonl:1: messages[0] mixes role/content with from/value; a turn is {role, content} or {from, value}',
    );
    await refused(
      jsonl({ messages: [{ role: 'user', from: 'human', content: 'x' }] }),
      'data.jsonl',
      'data.jsonl:1: messages[0] mixes role/content with from/value; a turn is {role, content} or {from, value}',
    );
    await refused(jsonl({ messages: [{ content: 'x' }] }), 'data.jsonl', 'data.jsonl:1: messages[0] has content but no role');
    await refused(
      jsonl({
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: null },
        ],
      }),
      'data.jsonl',
      'data.jsonl:1: messages[1].content is null, expected a string',
    );
    await refused(jsonl({ messages: 'hello' }), 'data.jsonl', 'data.jsonl:1: messages is a string, expected a list of turns');
    await refused(jsonl({ ...ok, messages: [] }), 'data.jsonl', 'data.jsonl:1: has both "conversations" and "messages"; keep one');
    await refused(
      jsonl({ ...ok, system: 'a', conversations: [{ role: 'system', content: 'b' }, ...ok.conversations] }),
      'data.jsonl',
      'data.jsonl:1: has both a "system" field and a leading system turn; keep one',
    );
    await refused(jsonl({ ...ok, system: 3 }), 'data.jsonl', 'data.jsonl:1: system is a number, expected a string');
    await refused(jsonl({ ...ok, id: { a: 1 } }), 'data.jsonl', 'data.jsonl:1: id is an object, expected a string or a number');
    await refused(jsonl({ ...ok, id: 'a' }, ok, { ...ok, id: 'a' }), 'data.jsonl', 'data.jsonl:3: id "a" repeats the id of row 1');
    await refused(jsonl(ok, [ok]), 'data.jsonl', 'data.jsonl:2: expected a JSON object, got an array');

    // Not UTF-8: a Latin-1 "é" (0xe9) on the third line.
    const latin1 = new Uint8Array([
      ...jsonl(ok, ok),
      0x0a,
      ...bytesOf('{"conversations": [{"role": "user", "content": "caf'),
      0xe9,
      ...bytesOf('"}]}'),
    ]);
    const third = jsonl(ok, ok).length + 1;
    await refused(
      latin1,
      'data.jsonl',
      `data.jsonl:3: not valid UTF-8 (a bad byte sequence in bytes ${third}–${latin1.length} of the file)`,
    );

    await refused(bytesOf('{"conversations": []}'), 'data.json', 'data.json: expected a JSON array of rows, got an object');
    await refused(bytesOf('[1, 2'), 'data.json', /^data\.json: not valid JSON \(.+\)$/);
    await refused(
      bytesOf(JSON.stringify([ok, { conversations: [ok.conversations[0], null] }])),
      'data.json',
      'data.json:2: conversations[1] is null, expected a {role, content} or {from, value} object',
    );
    await refused(
      jsonl(ok),
      'data.csv',
      'data.csv: unknown conversation file type ".csv"; expected .jsonl (one row per line), .json (an array of rows) or .parquet',
    );
    await refused(
      jsonl(ok),
      'conversations',
      'conversations: unknown conversation file type (no extension); expected .jsonl (one row per line), .json (an array of rows) or .parquet',
    );
    await refused(jsonl(ok), 'data.parquet', /^data\.parquet: not a readable Parquet file \(.+\)$/);
    const noColumn = new Uint8Array(parquetWriteBuffer({ columnData: [{ name: 'text', data: ['a'], type: 'STRING' }] }));
    await refused(
      noColumn,
      'data.parquet',
      'data.parquet: expected one "conversations" or "messages" column, found neither (columns: text)',
    );
    await refused(
      parquetTwin(
        [
          {
            conversations: [
              { role: 'user', content: 'a' },
              { role: 'critic', content: 'b' },
            ],
          },
        ],
        'SNAPPY',
      ),
      'data.parquet',
      'data.parquet:1: conversations[1].role "critic" is not user, assistant or system',
    );
  });
});
