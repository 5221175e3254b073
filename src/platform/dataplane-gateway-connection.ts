/**
 * One data-plane connection of the gateway, from the moment its upgrade was accepted
 * (dataplane-gateway-node.ts has checked the token, Origin, namespace and connection count) until
 * its socket closes: open the connection's own server-side client, say hello, reassemble messages
 * (src/dataplane/gateway-protocol.ts), check each request against the token's scopes
 * (src/dataplane/gateway-scopes.ts), answer it (dataplane-gateway-requests.ts) within
 * `maxInFlight`, and close a connection that breaks the framing, sends too much before the hello, or
 * stays idle with nothing in flight. The client is closed with the socket, which also ends its
 * blocking claims.
 *
 * Its own file because these are the rules one client's behaviour meets, apart from what the HTTP
 * server does for every socket before the upgrade.
 */
import { WebSocket, type RawData } from 'ws';
import type { Gpu } from '../gpu/gpu.ts';
import {
  CLOSE_PROTOCOL_ERROR,
  CLOSE_SERVER_ERROR,
  GATEWAY_PROTOCOL_VERSION,
  GatewayProtocolError,
  MessageAssembler,
  checkRequestHeader,
  errorToWire,
  stringifyControl,
  type HelloMessage,
  type Message,
  type RequestHeader,
} from '../dataplane/gateway-protocol.ts';
import { authorizeRequest, SamplesPutHere, type GatewayScope } from '../dataplane/gateway-scopes.ts';
import { DataPlaneError, type DataPlaneClient } from '../dataplane/types.ts';
import { answerRequest } from './dataplane-gateway-requests.ts';

/** What the gateway knows of one accepted connection (given to `openClient` and to an extension's `serve`). */
export interface ConnectionInfo {
  /** `?ns=` of the upgrade URL (validated), or null. */
  readonly namespace: string | null;
  readonly remoteAddress: string;
  /** What the connection's token grants; every request is checked against it. */
  readonly scopes: readonly GatewayScope[];
}

/** The gateway's settings that bound one connection (validated by startDataPlaneGateway). */
export interface ConnectionSettings {
  readonly maxMessageBytes: number;
  readonly maxInFlight: number;
  readonly idleTimeoutMs: number;
  /** Opens the server-side client for this connection; closed when the connection ends. */
  readonly openClient: (info: ConnectionInfo) => Promise<DataPlaneClient>;
  /** Reads back GPU rows the server-side client returns (a local GPU store). */
  readonly gpu: Gpu | undefined;
  readonly log: (line: string) => void;
}

/** How long a closed connection's peer has to answer the close frame before the socket is dropped. */
const CLOSE_GRACE_MS = 1000;

/** 1001: the endpoint is going away (here: an idle connection is closed). */
const CLOSE_GOING_AWAY = 1001;

/** One connection: open its client, say hello, answer requests until the socket closes. */
export async function serveDataPlaneConnection(ws: WebSocket, info: ConnectionInfo, settings: ConnectionSettings): Promise<void> {
  const { maxMessageBytes, maxInFlight, idleTimeoutMs, gpu, log } = settings;
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
  const putHere = new SamplesPutHere();

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
    // A refused request is answered like any failed one; the connection stays open.
    const { op } = message.header;
    let args: unknown;
    Promise.resolve()
      .then(() => (args = authorizeRequest(info.scopes, op, message.header.args, (p, sample) => putHere.has(p, sample))))
      .then(() => answerRequest(client!, { ...message, header: { ...message.header, args } }, maxMessageBytes, gpu))
      .then((reply) => (putHere.record(op, args), reply))
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
    client = await settings.openClient(info);
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
