/**
 * Node WebSocket gateway in front of a server-side `DataPlaneClient` (typically the Redis backend),
 * so a browser tab can use the data plane through src/dataplane/ws-client.ts. Protocol and framing:
 * src/dataplane/gateway-protocol.ts.
 *
 * Security model: binds 127.0.0.1 unless told otherwise; every upgrade must offer a token the
 * gateway knows (compared in constant time) or is refused with HTTP 401 before a WebSocket exists;
 * the token's scopes (src/dataplane/gateway-scopes.ts) decide which requests it may make; an
 * optional Origin allow-list; plain HTTP requests get 426. Each connection gets its own server-side
 * client from `openClient` (its own Redis connection), closed when the socket closes. Messages are
 * bounded (`maxMessageBytes`, default 256 MiB, both directions) and so are concurrent requests per
 * connection (`maxInFlight`, default 16); a client that breaks the framing is disconnected with a
 * close reason.
 *
 * Nothing a client sends can end the process: every raw socket and every WebSocket has an 'error'
 * listener (a reset during a refusal, or a frame the `ws` library rejects — oversized, bad opcode,
 * invalid UTF-8, unmasked, RSV bits, bad close code — is logged and that connection dropped), the
 * HTTP server answers malformed requests with 400, headers must arrive within
 * `handshakeTimeoutMs`, a connection silent for `idleTimeoutMs` with no request in flight is closed,
 * and at most `maxConnections` WebSockets are open at once (more are refused with 503).
 *
 * This file is the HTTP side: the server, the checks every upgrade passes, and the lifecycle
 * (listen, close). A data-plane connection, once upgraded, is dataplane-gateway-connection.ts; what
 * each of its requests does is dataplane-gateway-requests.ts.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { Gpu } from '../gpu/gpu.ts';
import {
  CLOSE_NORMAL,
  DEFAULT_MAX_MESSAGE_BYTES,
  GATEWAY_PROTOCOL,
  NAMESPACE_PATTERN,
  TOKEN_PROTOCOL_PREFIX,
} from '../dataplane/gateway-protocol.ts';
import { gatewayGrants, type GatewayScope, type ScopedTokens } from '../dataplane/gateway-scopes.ts';
import { DataPlaneError, type DataPlaneClient } from '../dataplane/types.ts';
import type { WebSocketConstructor } from '../dataplane/ws-client.ts';
import { serveDataPlaneConnection, type ConnectionInfo, type ConnectionSettings } from './dataplane-gateway-connection.ts';

/** The `ws` package's client, for `connectDataPlaneGateway` on Node < 22 (no global WebSocket). */
export const nodeWebSocket = WebSocket as unknown as WebSocketConstructor;

/** A fresh random token (64 hex characters). */
export function newGatewayToken(): string {
  return randomBytes(32).toString('hex');
}

/** Another protocol served on the gateway's port after the same checks (src/platform/control-gateway-node.ts). */
export interface GatewayExtension {
  /** The subprotocol a client offers (instead of the data plane's) to reach this handler. */
  readonly protocol: string;
  /** Serves one authenticated connection; resolves when it closed. */
  serve(ws: WebSocket, info: ConnectionInfo): Promise<void>;
}

export interface DataPlaneGatewayOptions {
  /** A secret that grants every scope (16..256 characters of [A-Za-z0-9_-]). */
  readonly token?: string;
  /**
   * Secrets that grant one scope each (src/dataplane/gateway-scopes.ts): rollout (register a new
   * partition, put), trainer (everything but put), observer (stats). With `token`, or instead of it.
   */
  readonly scopedTokens?: ScopedTokens;
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
  const grants = gatewayGrants(options.token, options.scopedTokens).map((g) => ({ digest: digest(g.token), scopes: g.scopes }));
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
  const connection: ConnectionSettings = {
    maxMessageBytes,
    maxInFlight,
    idleTimeoutMs,
    openClient: (info) => options.openClient(info),
    gpu: options.gpu,
    log,
  };

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
    const scopes = token === undefined ? null : grantedScopes(grants, digest(token));
    if (scopes === null) return refuse(401, 'Unauthorized', 'missing or wrong gateway token');
    // The control endpoints are a rollout worker's (register, lease prompts, commit refs).
    if (toControl && !scopes.includes('rollout'))
      return refuse(
        403,
        'Forbidden',
        `the ${control.protocol} endpoints need a token with the rollout scope; this one grants ${scopes.join(', ')}`,
      );
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
      const info = { namespace: ns, remoteAddress: String(req.socket.remoteAddress), scopes };
      const session = (toControl ? control.serve(ws, info) : serveDataPlaneConnection(ws, info, connection)).finally(() => {
        sockets.delete(ws);
        sessions.delete(session);
      });
      sessions.add(session);
    });
  });

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

/** The scopes of the grant whose digest matches; every grant is compared, in constant time each. */
function grantedScopes(
  grants: readonly { digest: Buffer; scopes: readonly GatewayScope[] }[],
  offered: Buffer,
): readonly GatewayScope[] | null {
  let found: readonly GatewayScope[] | null = null;
  for (const g of grants) if (timingSafeEqual(offered, g.digest)) found = g.scopes;
  return found;
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
