/**
 * The gateway under hostile clients, in one process that must stay alive throughout: a crash of the
 * gateway (an unhandled 'error' event) ends this script with a non-zero exit before its summary.
 *
 * Every case speaks raw TCP to a real gateway on 127.0.0.1: refused upgrades followed by a reset,
 * malformed HTTP, a slow client that never finishes its headers, and, after a valid authenticated
 * handshake, frames the WebSocket library rejects (a 2^40 declared length, an oversized frame,
 * invalid UTF-8, an unmasked frame, a reserved opcode, RSV1, close code 999) or a reset. After each
 * case a well-behaved client must still get an answer. The connection cap and the idle timeout are
 * checked too, and so are authorised but hostile requests: partition names with hash-tag braces,
 * globs, ".." or prototype keys, prototype dtypes, batch sizes of 2^53, and rollout or observer
 * tokens used beyond their scope. Node-only; run by scripts/test-all.sh.  `tsx test/dataplane/gateway-fuzz.ts`
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import process from 'node:process';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX } from '../../src/dataplane/gateway-protocol.ts';
import { DataPlaneError } from '../../src/dataplane/types.ts';
import { connectDataPlaneGateway } from '../../src/dataplane/ws-client.ts';
import { newGatewayToken, nodeWebSocket, startDataPlaneGateway } from '../../src/platform/dataplane-gateway-node.ts';
import { sharedView } from './gateway-scopes.test.ts';

const MAX_MESSAGE_BYTES = 4096;
const MAX_CONNECTIONS = 4;
const HANDSHAKE_MS = 400;
const IDLE_MS = 600;
const REPEATS = 15;

const token = newGatewayToken();
const rolloutToken = newGatewayToken();
const observerToken = newGatewayToken();
const logLines: string[] = [];
const store = await createDataPlaneClient({ impl: 'transferQueue', backend: { kind: 'local', columns: 'host' }, claimPollMs: 5 });
const gateway = await startDataPlaneGateway({
  token,
  scopedTokens: { rollout: rolloutToken, observer: observerToken },
  maxMessageBytes: MAX_MESSAGE_BYTES,
  maxConnections: MAX_CONNECTIONS,
  handshakeTimeoutMs: HANDSHAKE_MS,
  idleTimeoutMs: IDLE_MS,
  // One store behind every connection, as a run's Redis is, so scopes are tested on shared partitions.
  openClient: async () => sharedView(store),
  onLog: (line) => logLines.push(line),
});

let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail = ''): void {
  if (ok) passed++;
  else failed++;
  console.log(`[node] ${ok ? 'ok  ' : 'FAIL'} dataplane/gateway-fuzz › ${name}${ok || !detail ? '' : `: ${detail}`}`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A well-behaved client's round trip: an unknown partition must come back as a typed error. */
async function stillServes(): Promise<boolean> {
  const client = await connectDataPlaneGateway({ url: gateway.url, token, WebSocket: nodeWebSocket });
  try {
    await client.partitionStats('never-registered');
    return false;
  } catch (err) {
    return err instanceof DataPlaneError && err.code === 'unknown_partition';
  } finally {
    await client.close();
  }
}

/** True when `call` fails with a DataPlaneError of this code (what a refused request must be). */
async function refusedWith(call: () => Promise<unknown>, code: string): Promise<boolean> {
  try {
    await call();
    return false;
  } catch (err) {
    return err instanceof DataPlaneError && err.code === code;
  }
}

function open(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(gateway.port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

/** Resolves with everything the server sent once it closes the socket (or after `ms`). */
function drain(s: Socket, ms = 2000): Promise<{ data: Buffer; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => resolve({ data: Buffer.concat(chunks), closedByServer: false }), ms);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ data: Buffer.concat(chunks), closedByServer: true });
    });
  });
}

function upgradeRequest(protocols: string[]): string {
  return [
    'GET / HTTP/1.1',
    `Host: 127.0.0.1:${gateway.port}`,
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
    'Sec-WebSocket-Version: 13',
    `Sec-WebSocket-Protocol: ${protocols.join(', ')}`,
    '',
    '',
  ].join('\r\n');
}

/** An authenticated raw socket past the 101 response (and the gateway's hello frame). */
async function authenticated(): Promise<Socket> {
  const s = await open();
  s.write(upgradeRequest([GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX + token]));
  await new Promise<void>((resolve, reject) => {
    let seen = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      seen = Buffer.concat([seen, c]);
      if (seen.includes('\r\n\r\n')) {
        s.off('data', onData);
        if (seen.toString('latin1').startsWith('HTTP/1.1 101')) resolve();
        else reject(new Error(`upgrade refused: ${seen.toString('latin1').split('\r\n')[0]}`));
      }
    };
    s.on('data', onData);
  });
  return s;
}

/** One client frame: FIN set, the given opcode, masked unless told otherwise. */
function frame(opcode: number, payload: Uint8Array, options: { masked?: boolean; rsv1?: boolean; declaredLength?: bigint } = {}): Buffer {
  const masked = options.masked ?? true;
  const length = options.declaredLength ?? BigInt(payload.length);
  const head: number[] = [0x80 | (options.rsv1 ? 0x40 : 0) | opcode];
  const maskBit = masked ? 0x80 : 0;
  if (length < 126n) head.push(maskBit | Number(length));
  else if (length < 65536n) head.push(maskBit | 126, Number(length >> 8n) & 0xff, Number(length) & 0xff);
  else {
    head.push(maskBit | 127);
    for (let i = 7; i >= 0; i--) head.push(Number((length >> BigInt(8 * i)) & 0xffn));
  }
  const key = masked ? randomBytes(4) : Buffer.alloc(0);
  const body = Buffer.from(payload.map((b, i) => (masked ? b ^ key[i % 4] : b)));
  return Buffer.concat([Buffer.from(head), key, body]);
}

const closePayload = (code: number) => Uint8Array.of(code >> 8, code & 0xff);

// 1. Refused upgrades, each followed by a TCP reset (the crash found before: 15 of 15).
for (const [name, protocols] of [
  ['no token', [GATEWAY_PROTOCOL]],
  ['a wrong token', [GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX + newGatewayToken()]],
  ['no subprotocol', ['chat']],
] as const) {
  for (let i = 0; i < REPEATS; i++) {
    const s = await open();
    s.write(upgradeRequest([...protocols]));
    s.resetAndDestroy();
  }
  await sleep(50);
  check(`${REPEATS} upgrades with ${name}, each reset at once, leave the gateway serving`, await stillServes());
}

// 2. Malformed HTTP and broken requests.
for (const [name, bytes] of [
  ['garbage instead of a request line', randomBytes(512)],
  ['a header without a colon', Buffer.from('GET / HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n')],
  [
    'a request with a bad URL',
    Buffer.from(upgradeRequest([GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX + token]).replace('GET / ', 'GET //[ ')),
  ],
] as const) {
  const s = await open();
  s.write(bytes);
  const { closedByServer } = await drain(s);
  check(`${name} is answered and closed`, closedByServer);
  const r = await open();
  r.write(bytes);
  r.resetAndDestroy();
  await sleep(20);
  check(`${name}, then a reset, leaves the gateway serving`, await stillServes());
}

// 3. A slow client that never finishes its headers is cut off by the handshake timeout.
{
  const s = await open();
  s.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  const started = Date.now();
  const { closedByServer } = await drain(s, HANDSHAKE_MS * 10);
  check(`a client that never finishes its upgrade request is closed (after ${Date.now() - started} ms)`, closedByServer);
  check('the gateway serves after a slow client', await stillServes());
}

// 4. Authenticated, then frames the WebSocket library rejects (the other crash: 12 of 12).
const BAD_FRAMES: [string, Buffer][] = [
  ['a declared length of 2^40', frame(0x2, new Uint8Array(8), { declaredLength: 1n << 40n })],
  ['a frame over maxMessageBytes', frame(0x2, new Uint8Array(MAX_MESSAGE_BYTES + 1))],
  ['invalid UTF-8 in a text frame', frame(0x1, Uint8Array.of(0xff, 0xfe, 0xfd))],
  ['an unmasked client frame', frame(0x2, Uint8Array.of(1, 2, 3), { masked: false })],
  ['a reserved opcode', frame(0x3, Uint8Array.of(1))],
  ['RSV1 without an extension', frame(0x2, Uint8Array.of(1), { rsv1: true })],
  ['close code 999', frame(0x8, closePayload(999))],
  ['a fragmented control frame', Buffer.from(frame(0x9, Uint8Array.of(1)).map((b, i) => (i === 0 ? b & 0x7f : b)))],
];
for (const [name, bytes] of BAD_FRAMES) {
  const s = await authenticated();
  s.write(bytes);
  const { closedByServer } = await drain(s);
  check(`${name} closes that connection`, closedByServer);
  check(`the gateway serves after ${name}`, await stillServes());
}
{
  const s = await authenticated();
  s.resetAndDestroy();
  await sleep(50);
  check('a reset right after an authenticated upgrade leaves the gateway serving', await stillServes());
}

// 5. The connection cap: at most MAX_CONNECTIONS WebSockets; the next upgrade gets 503.
{
  const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => authenticated()));
  const extra = await open();
  extra.write(upgradeRequest([GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX + token]));
  const { data } = await drain(extra);
  check(
    `upgrade number ${MAX_CONNECTIONS + 1} is refused with 503`,
    data.toString('latin1').startsWith('HTTP/1.1 503'),
    data.toString('latin1').split('\r\n')[0],
  );
  for (const s of held) s.destroy();
  await sleep(100);
  check('after the held connections go, the gateway serves again', await stillServes());
}

// 6. An idle authenticated connection is closed by the server.
{
  const s = await authenticated();
  const started = Date.now();
  const { closedByServer } = await drain(s, IDLE_MS * 10);
  check(`an idle connection is closed (after ${Date.now() - started} ms, limit ${IDLE_MS} ms)`, closedByServer);
}

// 7. Authorised but hostile: names that would collide as Redis keys or reach Object.prototype,
// prototype dtypes, absurd batch sizes, and tokens used beyond their scope. Each is refused by name
// with a typed error on a connection that keeps serving.
{
  const admin = await connectDataPlaneGateway({ url: gateway.url, token, WebSocket: nodeWebSocket });
  for (const name of ['a{b', 'a}b', 'a}:s:r1', '{x}', 'a*', 'a?', '..', 'a..b', '__proto__', 'constructor', 'toString']) {
    check(
      `register of partition ${JSON.stringify(name)} is refused as invalid_argument`,
      await refusedWith(() => admin.registerPartition({ partition: name, fields: { x: 'f32' }, consumerTasks: ['t'] }), 'invalid_argument'),
    );
    check(
      `clear of partition ${JSON.stringify(name)} is refused`,
      await refusedWith(() => admin.clearSamples(name, { all: true }), 'invalid_argument'),
    );
  }
  for (const dtype of ['constructor', '__proto__', 'toString', 'valueOf']) {
    check(
      `register with dtype ${JSON.stringify(dtype)} is refused as invalid_argument`,
      await refusedWith(
        () => admin.registerPartition({ partition: 'proto', fields: { x: dtype as 'f32' }, consumerTasks: ['t'] }),
        'invalid_argument',
      ),
    );
  }
  check('no refused register left a partition behind', await refusedWith(() => admin.partitionStats('proto'), 'unknown_partition'));
  await admin.registerPartition({ partition: 'fuzz', fields: { x: 'f32' }, consumerTasks: ['trainer'], replace: true });
  await admin.putSamples({
    partition: 'fuzz',
    sampleIds: ['s1'],
    columns: { x: [{ dtype: 'f32', shape: [1], data: Float32Array.of(1) }] },
  });
  for (const n of [2 ** 53, 2 ** 53 + 2, 2 ** 64, 1e308, (1 << 20) + 1, -1, 0, 1.5]) {
    const started = Date.now();
    const refused = await refusedWith(
      () => admin.claimMeta({ partition: 'fuzz', task: 'trainer', requiredFields: ['x'], batchSize: n }),
      'invalid_argument',
    );
    check(`a claim of batchSize ${n} is refused at once (${Date.now() - started} ms)`, refused && Date.now() - started < 2000);
  }
  check(
    'a claim with minBatch 2^53 is refused',
    await refusedWith(
      () => admin.claimMeta({ partition: 'fuzz', task: 'trainer', requiredFields: ['x'], batchSize: 1, minBatch: 2 ** 53 }),
      'invalid_argument',
    ),
  );
  check(
    'a claim with leaseMs 2^53 is refused',
    await refusedWith(
      () => admin.claimMeta({ partition: 'fuzz', task: 'trainer', requiredFields: ['x'], batchSize: 1, leaseMs: 2 ** 53 }),
      'invalid_argument',
    ),
  );

  const rollout = await connectDataPlaneGateway({ url: gateway.url, token: rolloutToken, WebSocket: nodeWebSocket });
  check(
    'a rollout token calling clear is refused as forbidden',
    await refusedWith(() => rollout.clearSamples('fuzz', { all: true }), 'forbidden'),
  );
  check(
    'a rollout token clearing a sample it did not put is refused as forbidden',
    await refusedWith(() => rollout.clearSamples('fuzz', ['s1']), 'forbidden'),
  );
  check(
    'a rollout token reading the partition is refused as forbidden',
    await refusedWith(() => rollout.getSamples({ partition: 'fuzz', sampleIds: ['s1'], fields: ['x'] }), 'forbidden'),
  );
  check(
    'a rollout token registering with replace is refused as forbidden',
    await refusedWith(
      () => rollout.registerPartition({ partition: 'fuzz', fields: { x: 'f32' }, consumerTasks: ['t'], replace: true }),
      'forbidden',
    ),
  );
  check(
    'a rollout token redeclaring an existing partition is refused as conflict',
    await refusedWith(() => rollout.registerPartition({ partition: 'fuzz', fields: { y: 'i32' }, consumerTasks: ['t'] }), 'conflict'),
  );
  await rollout.putSamples({
    partition: 'fuzz',
    sampleIds: ['s2'],
    columns: { x: [{ dtype: 'f32', shape: [1], data: Float32Array.of(2) }] },
  });
  check('after its refusals the rollout connection still puts', (await admin.partitionStats('fuzz')).samples === 2);
  const observer = await connectDataPlaneGateway({ url: gateway.url, token: observerToken, WebSocket: nodeWebSocket });
  check(
    'an observer calling put is refused as forbidden',
    await refusedWith(
      () =>
        observer.putSamples({
          partition: 'fuzz',
          sampleIds: ['o'],
          columns: { x: [{ dtype: 'f32', shape: [1], data: Float32Array.of(0) }] },
        }),
      'forbidden',
    ),
  );
  check('an observer calling clear is refused as forbidden', await refusedWith(() => observer.clearSamples('fuzz', ['s1']), 'forbidden'));
  check('an observer reads stats, and nothing was cleared', (await observer.partitionStats('fuzz')).samples === 2);
  for (const c of [admin, rollout, observer]) await c.close();

  // A row ref whose dtype is a prototype key breaks the framing: that connection is closed.
  for (const dtype of ['constructor', '__proto__', 'toString']) {
    const s = await authenticated();
    const header = JSON.stringify({ t: 'req', id: 1, op: 'put', args: {}, rows: [{ dtype, shape: [1] }] });
    s.write(frame(0x1, new TextEncoder().encode(header)));
    const { closedByServer } = await drain(s);
    check(`a row ref of dtype ${JSON.stringify(dtype)} closes that connection`, closedByServer);
  }
  check('the gateway serves after the authorised hostile cases', await stillServes());
}

await sleep(50);
check('no connection is left open', gateway.connections === 0, `${gateway.connections} open`);
check('every refusal and failure was logged', logLines.length > REPEATS * 3, `${logLines.length} log lines`);
await gateway.close();
await store.close();
console.log(`[node] ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
