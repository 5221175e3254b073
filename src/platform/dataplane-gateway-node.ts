/**
 * Node WebSocket gateway in front of a server-side `DataPlaneClient` (typically the Redis backend),
 * so a browser tab can use the data plane through src/dataplane/ws-client.ts. Protocol and framing:
 * src/dataplane/gateway-protocol.ts.
 *
 * Security model: binds 127.0.0.1 unless told otherwise; every upgrade must offer the shared-secret
 * token (compared in constant time) or is refused with HTTP 401 before a WebSocket exists; an
 * optional Origin allow-list; plain HTTP requests get 426. Each connection gets its own server-side
 * client from `openClient` (its own Redis connection), closed when the socket closes. Messages are
 * bounded (`maxMessageBytes`, default 256 MiB, both directions) and so are concurrent requests per
 * connection (`maxInFlight`, default 16); a client that breaks the framing is disconnected with a close reason.
 *
 * Nothing a client sends can end the process: every raw socket and every WebSocket has an 'error'
 * listener (a reset during a refusal, or a frame the `ws` library rejects — oversized, bad opcode,
 * invalid UTF-8, unmasked, RSV bits, bad close code — is logged and that connection dropped), the
 * HTTP server answers malformed requests with 400, headers must arrive within
 * `handshakeTimeoutMs`, a connection silent for `idleTimeoutMs` with no request in flight is closed,
 * and at most `maxConnections` WebSockets are open at once (more are refused with 503).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import type { Gpu } from '../gpu/gpu.ts';
import { isTensor, toHostRow } from '../dataplane/column-store.ts';
import {
  CLOSE_NORMAL,
  CLOSE_PROTOCOL_ERROR,
  CLOSE_SERVER_ERROR,
  DEFAULT_MAX_MESSAGE_BYTES,
  GATEWAY_PROTOCOL,
  GATEWAY_PROTOCOL_VERSION,
  GatewayProtocolError,
  MessageAssembler,
  NAMESPACE_PATTERN,
  TOKEN_PATTERN,
  TOKEN_PROTOCOL_PREFIX,
  checkRequestHeader,
  decodeColumns,
  encodeColumns,
  errorToWire,
  stringifyControl,
  type HelloMessage,
  type Message,
  type RequestHeader,
  type RowRef,
} from '../dataplane/gateway-protocol.ts';
import { KVBatchMeta } from '../dataplane/meta.ts';
import { DataPlaneError, type Columns, type DataPlaneClient, type HostTensor } from '../dataplane/types.ts';
import type { WebSocketConstructor } from '../dataplane/ws-client.ts';

/** The `ws` package's client, for `connectDataPlaneGateway` on Node < 22 (no global WebSocket). */
export const nodeWebSocket = WebSocket as unknown as WebSocketConstructor;

/** A fresh random token (64 hex characters). */
export function newGatewayToken(): string {
  return randomBytes(32).toString('hex');
}

export interface ConnectionInfo {
  /** `?ns=` of the upgrade URL (validated), or null. */
  readonly namespace: string | null;
  readonly remoteAddress: string;
}

/** Another protocol served on the gateway's port after the same checks (src/platform/control-gateway-node.ts). */
export interface GatewayExtension {
  /** The subprotocol a client offers (instead of the data plane's) to reach this handler. */
  readonly protocol: string;
  /** Serves one authenticated connection; resolves when it closed. */
  serve(ws: WebSocket, info: ConnectionInfo): Promise<void>;
}

export interface DataPlaneGatewayOptions {
  /** Shared secret every client must present (16..256 characters of [A-Za-z0-9_-]). */
  readonly token: string;
  /** Opens the server-side client for one connection; closed when that connection ends. */
  readonly openClient: (info: ConnectionInfo) => Promise<DataPlaneClient>;
  /** Default 127.0.0.1. Anything else exposes the store beyond this machine: think twice. */
  readonly host?: string;
  /** Default 0 (a free port). */
  readonly port?: number;
  /** Bound on one message (header + row bytes), both directions. Default 256 MiB. */
  readonly maxMessageBytes?: number;
  /**
   * Concurrent requests per connection (default 16); more are answered with an error. With
   * `maxMessageBytes` this bounds the memory one connection can pin (requests and their replies).
   */
  readonly maxInFlight?: number;
  /** When set, upgrades whose Origin header is not listed are refused (403). */
  readonly allowedOrigins?: readonly string[];
  /** Open WebSocket connections at most (default 64); further upgrades are refused with 503. */
  readonly maxConnections?: number;
  /** A client must finish sending its upgrade request within this (default 10 s). */
  readonly handshakeTimeoutMs?: number;
  /**
   * A connection with no message and no request in flight for this long is closed (default 10 min).
   * A blocking claim counts as in flight, so a waiting consumer is never idle.
   */
  readonly idleTimeoutMs?: number;
  /** Reads back GPU rows the server-side client returns (a local GPU store). */
  readonly gpu?: Gpu;
  /** Connection-level events (refusals, protocol errors), for logs. */
  readonly onLog?: (line: string) => void;
  /** The control-plane RPC for rollout tabs, on the same port, token and Origin checks. */
  readonly control?: GatewayExtension;
}

export interface DataPlaneGateway {
  /** e.g. ws://127.0.0.1:41234/ */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Open WebSocket connections. */
  readonly connections: number;
  /** Stops accepting, closes every connection and its server-side client. Idempotent. */
  close(): Promise<void>;
}

export async function startDataPlaneGateway(options: DataPlaneGatewayOptions): Promise<DataPlaneGateway> {
  if (typeof options.token !== 'string' || !TOKEN_PATTERN.test(options.token)) {
    throw new DataPlaneError('invalid_argument', 'gateway token must be 16..256 characters of [A-Za-z0-9_-] (use newGatewayToken())');
  }
  const host = options.host ?? '127.0.0.1';
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const maxInFlight = options.maxInFlight ?? 16;
  if (!Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < 1024)
    throw new DataPlaneError('invalid_argument', `maxMessageBytes must be an integer >= 1024, got ${maxMessageBytes}`);
  if (!Number.isSafeInteger(maxInFlight) || maxInFlight < 1)
    throw new DataPlaneError('invalid_argument', `maxInFlight must be a positive integer, got ${maxInFlight}`);
  const maxConnections = positiveInteger(options.maxConnections ?? 64, 'maxConnections');
  const handshakeTimeoutMs = positiveInteger(options.handshakeTimeoutMs ?? 10_000, 'handshakeTimeoutMs');
  const idleTimeoutMs = positiveInteger(options.idleTimeoutMs ?? 600_000, 'idleTimeoutMs');
  const log = options.onLog ?? (() => {});
  const tokenDigest = digest(options.token);

  const http = createServer({ headersTimeout: handshakeTimeoutMs, requestTimeout: handshakeTimeoutMs }, (_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain', connection: 'close' }).end('data plane gateway: WebSocket upgrade required\n');
  });
  // A request line or header the HTTP parser rejects, or a reset mid-request: answer if the socket
  // can still take it, and never let the error reach the process.
  http.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    log(`dropped a malformed or broken request: ${err.code ?? err.message}`);
    if (socket.writable && err.code !== 'ECONNRESET')
      socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    else socket.destroy();
  });
  // Sockets waiting for their upgrade request; each is closed if its headers do not arrive in time.
  http.on('connection', (socket: Duplex & { setTimeout(ms: number, cb: () => void): void }) => {
    socket.on('error', (err: NodeJS.ErrnoException) => log(`socket error before the upgrade: ${err.code ?? err.message}`));
    socket.setTimeout(handshakeTimeoutMs, () => {
      log('closed a connection that sent no complete upgrade request in time');
      socket.destroy();
    });
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: maxMessageBytes,
    perMessageDeflate: false,
    // Answer with the protocol name only; the token subprotocol is never echoed back.
    handleProtocols: (offered) =>
      offered.has(GATEWAY_PROTOCOL) ? GATEWAY_PROTOCOL : control && offered.has(control.protocol) ? control.protocol : false,
  });
  const control = options.control;
  const sockets = new Set<WebSocket>();
  const sessions = new Set<Promise<void>>();

  http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // A reset while we answer (e.g. a refused client that sends RST) must stay this socket's problem.
    socket.on('error', (err: NodeJS.ErrnoException) =>
      log(`socket error during the upgrade from ${req.socket.remoteAddress}: ${err.code ?? err.message}`),
    );
    (socket as Duplex & { setTimeout(ms: number): void }).setTimeout(0);
    const refuse = (status: number, text: string, why: string): void => {
      log(`refused upgrade from ${req.socket.remoteAddress}: ${why}`);
      socket.end(
        `HTTP/1.1 ${status} ${text}\r\nconnection: close\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(why) + 1}\r\n\r\n${why}\n`,
      );
    };
    const offered = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((s) => s.trim());
    const toControl = control !== undefined && !offered.includes(GATEWAY_PROTOCOL) && offered.includes(control.protocol);
    if (!offered.includes(GATEWAY_PROTOCOL) && !toControl)
      return refuse(400, 'Bad Request', `offer the ${GATEWAY_PROTOCOL}${control ? ` or ${control.protocol}` : ''} subprotocol`);
    const token = offered.find((p) => p.startsWith(TOKEN_PROTOCOL_PREFIX))?.slice(TOKEN_PROTOCOL_PREFIX.length);
    if (token === undefined || !timingSafeEqual(digest(token), tokenDigest))
      return refuse(401, 'Unauthorized', 'missing or wrong gateway token');
    if (options.allowedOrigins && !options.allowedOrigins.includes(String(req.headers.origin))) {
      return refuse(403, 'Forbidden', `origin ${JSON.stringify(req.headers.origin ?? null)} is not allowed`);
    }
    if (sockets.size >= maxConnections)
      return refuse(503, 'Service Unavailable', `the gateway already holds ${maxConnections} connections`);
    let ns: string | null;
    try {
      ns = new URL(req.url ?? '/', 'ws://gateway').searchParams.get('ns');
    } catch {
      return refuse(400, 'Bad Request', 'malformed request URL');
    }
    if (ns !== null && !NAMESPACE_PATTERN.test(ns))
      return refuse(400, 'Bad Request', 'namespace must be 1..64 characters of [A-Za-z0-9_-]');
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws);
      const info = { namespace: ns, remoteAddress: String(req.socket.remoteAddress) };
      const session = (toControl ? control.serve(ws, info) : serve(ws, info)).finally(() => {
        sockets.delete(ws);
        sessions.delete(session);
      });
      sessions.add(session);
    });
  });

  /** One connection: open its client, say hello, answer requests until the socket closes. */
  async function serve(ws: WebSocket, info: ConnectionInfo): Promise<void> {
    ws.binaryType = 'nodebuffer';
    // `ws` reports a frame it rejects (and a reset) as 'error', then closes: log it, keep serving others.
    ws.on('error', (err: Error & { code?: string }) =>
      log(`connection from ${info.remoteAddress} failed: ${err.code ?? ''} ${err.message}`.trim()),
    );
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
    let idleTimer: ReturnType<typeof setTimeout> | undefined;
    const armIdle = (): void => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => {
        if (inFlight === 0) closeWith(CLOSE_GOING_AWAY, `idle for ${idleTimeoutMs} ms`);
        else armIdle();
      }, idleTimeoutMs);
      idleTimer.unref?.();
    };
    void closed.then(() => clearTimeout(idleTimer));
    const assembler = new MessageAssembler<RequestHeader>(maxMessageBytes, checkRequestHeader);
    let inFlight = 0;
    let client: DataPlaneClient | null = null;
    const queued: Message<RequestHeader>[] = [];

    const send = (header: unknown, frames: readonly Uint8Array[] = []): void => {
      if (ws.readyState !== WebSocket.OPEN) return;
      ws.send(stringifyControl(header, 'gateway response'));
      for (const f of frames) ws.send(f);
    };
    const closeWith = (code: number, why: string): void => {
      log(`closing connection from ${info.remoteAddress}: ${why}`);
      // Close reasons are limited to 123 bytes.
      ws.close(code, Buffer.from(why).subarray(0, 123).toString());
      // A peer that does not answer the close frame loses the socket soon, not after ws's 30 s.
      setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref?.();
    };
    const dispatch = (message: Message<RequestHeader>): void => {
      const { id } = message.header;
      if (inFlight >= maxInFlight) {
        send({
          t: 'res',
          id,
          ok: false,
          error: errorToWire(
            new DataPlaneError(
              'invalid_argument',
              `more than ${maxInFlight} concurrent requests on one gateway connection; wait for answers first`,
            ),
          ),
        });
        return;
      }
      inFlight++;
      handle(client!, message, maxMessageBytes, options.gpu)
        .then(({ value, rows, frames }) => send({ t: 'res', id, ok: true, value, rows }, frames))
        .catch((err: unknown) => send({ t: 'res', id, ok: false, error: errorToWire(err) }))
        .finally(() => inFlight--);
    };

    armIdle();
    ws.on('message', (data: RawData, isBinary: boolean) => {
      armIdle();
      let message: Message<RequestHeader> | null;
      try {
        const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
        message = assembler.push(isBinary ? new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength) : buf.toString('utf8'));
      } catch (err) {
        if (err instanceof GatewayProtocolError) return closeWith(err.closeCode, err.message);
        return closeWith(CLOSE_PROTOCOL_ERROR, String(err));
      }
      if (message === null) return;
      if (client !== null) return dispatch(message);
      // Clients wait for the hello before sending; anything beyond the in-flight bound is abuse.
      if (queued.length >= maxInFlight) return closeWith(CLOSE_PROTOCOL_ERROR, `more than ${maxInFlight} requests before the hello`);
      queued.push(message);
    });

    try {
      client = await options.openClient(info);
    } catch (err) {
      closeWith(CLOSE_SERVER_ERROR, `could not open the server-side data plane client: ${(err as Error).message ?? err}`);
      await closed;
      return;
    }
    try {
      const hello: HelloMessage = { t: 'hello', protocol: GATEWAY_PROTOCOL_VERSION, kind: client.kind, maxMessageBytes };
      send(hello);
      for (const m of queued.splice(0)) dispatch(m);
      await closed;
    } finally {
      // Closing the client also ends its blocking claims (they fail with `closed`).
      await client.close();
    }
  }

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.port ?? 0, host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const port = (http.address() as { port: number }).port;
  let closing: Promise<void> | null = null;
  return {
    url: `ws://${host.includes(':') ? `[${host}]` : host}:${port}/`,
    host,
    port,
    get connections() {
      return sockets.size;
    },
    close() {
      closing ??= (async () => {
        // Stop accepting first; the listener closes once the upgraded sockets below are gone too.
        const stopped = new Promise<void>((resolve) => http.close(() => resolve()));
        for (const ws of sockets) ws.close(CLOSE_NORMAL, 'gateway shutting down');
        await Promise.allSettled([...sessions]);
        wss.close();
        await stopped;
      })();
      return closing;
    },
  };
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1)
    throw new DataPlaneError('invalid_argument', `${name} must be a positive integer, got ${value}`);
  return value;
}

/** How long a closed connection's peer has to answer the close frame before the socket is dropped. */
const CLOSE_GRACE_MS = 1000;

/** 1001: the endpoint is going away (here: an idle connection is closed). */
const CLOSE_GOING_AWAY = 1001;

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

interface Reply {
  readonly value: unknown;
  readonly rows: readonly RowRef[];
  readonly frames: readonly Uint8Array[];
}

function plain(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new DataPlaneError('invalid_argument', `${what} arguments must be an object`);
  return value as Record<string, unknown>;
}

/** Runs one request on the server-side client; every argument is re-validated by that client. */
async function handle(
  client: DataPlaneClient,
  message: Message<RequestHeader>,
  maxMessageBytes: number,
  gpu: Gpu | undefined,
): Promise<Reply> {
  const { op, args, rows } = message.header;
  const a = plain(args, op);
  const done = (value: unknown): Reply => ({ value: value ?? null, rows: [], frames: [] });
  switch (op) {
    case 'register':
      return done(await client.registerPartition(a as never));
    case 'claim':
      return done((await client.claimMeta(a as never)).toJSON());
    case 'ack':
      return done(await client.ackClaim(KVBatchMeta.fromJSON(a.meta), a.clear === undefined ? {} : { clear: a.clear as boolean }));
    case 'release':
      return done(await client.releaseClaim(KVBatchMeta.fromJSON(a.meta)));
    case 'getData':
      return columnsReply(await client.getData(KVBatchMeta.fromJSON(a.meta), a.fields as string[]), 'getData', maxMessageBytes, gpu);
    case 'consumed':
      return done(await client.checkConsumptionStatus(a.partition as string, a.tasks as string[]));
    case 'put': {
      const columns = decodeColumns(a.columns, rows, message.frames, `putSamples(${String(a.partition)})`);
      const receipt = await client.putSamples({
        partition: a.partition as string,
        sampleIds: a.sampleIds as string[],
        columns,
        tags: a.tags as never,
      });
      return done(receipt.toJSON());
    }
    case 'get':
      return columnsReply(await client.getSamples(a as never), 'getSamples', maxMessageBytes, gpu);
    case 'clear':
      return done(await client.clearSamples(a.partition as string, a.target as never));
    case 'stats':
      return done(await client.partitionStats(a.partition as string));
    default:
      throw new DataPlaneError('invalid_argument', `unknown gateway op ${JSON.stringify(op)}`);
  }
}

async function columnsReply(columns: Columns, what: string, maxMessageBytes: number, gpu: Gpu | undefined): Promise<Reply> {
  const host: Record<string, HostTensor[]> = {};
  let total = 0;
  for (const [field, column] of Object.entries(columns)) {
    host[field] = [];
    for (const row of column) {
      // Host rows are sent as they are (the store already handed out its own copy).
      const h = isTensor(row) ? await toHostRow(row, gpu, `${what} field ${JSON.stringify(field)}`) : row;
      total += h.data.byteLength;
      host[field].push(h);
    }
  }
  if (total > maxMessageBytes) {
    throw new DataPlaneError(
      'invalid_argument',
      `${what} result holds ${total} bytes, over the gateway's message limit of ${maxMessageBytes} bytes; read fewer ids or fields per call`,
    );
  }
  const rows: RowRef[] = [];
  const frames: Uint8Array[] = [];
  const value = encodeColumns(host, rows, frames);
  return { value, rows, frames };
}
