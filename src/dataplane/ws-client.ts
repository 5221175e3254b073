/**
 * A `DataPlaneClient` that talks to a data-plane gateway (src/platform/dataplane-gateway-node.ts)
 * over one WebSocket, so a browser tab (or Deno, or Node) can use a store it cannot reach directly,
 * e.g. the Redis backend. Wire format: ./gateway-protocol.ts.
 *
 * Only the standard WebSocket API is used, and the constructor is injected by the platform
 * (`standardWebSocket()` from src/platform/websocket.ts in browsers, Deno and Node 22+, or
 * `nodeWebSocket` from src/platform/dataplane-gateway-node.ts on older Node).
 *
 * The server re-validates every argument with the same `StoreClient` rules as any other backend, so
 * errors keep their codes and messages. This client only checks what it must to encode a call:
 * rows (a GPU Tensor row is read back to the host here, which needs `gpu`), tags (JSON would turn
 * NaN into null), and the gateway's message size bound (announced in its hello).
 */
import type { Gpu } from '../gpu/gpu.ts';
import { checkRow, isTensor, toHostRow } from './column-store.ts';
import {
  CLOSE_NORMAL,
  DEFAULT_MAX_MESSAGE_BYTES,
  GATEWAY_PROTOCOL,
  GATEWAY_PROTOCOL_VERSION,
  GatewayProtocolError,
  MessageAssembler,
  NAMESPACE_PATTERN,
  TOKEN_PATTERN,
  TOKEN_PROTOCOL_PREFIX,
  checkServerHeader,
  decodeColumns,
  encodeColumns,
  errorFromWire,
  stringifyControl,
  type GatewayOp,
  type HelloMessage,
  type Message,
  type ResponseHeader,
  type RowRef,
} from './gateway-protocol.ts';
import { KVBatchMeta, validateTagRecord, type KVBatchMetaRecord } from './meta.ts';
import {
  DataPlaneError,
  type ClaimOptions,
  type ClearTarget,
  type Columns,
  type DataPlaneClient,
  type GetOptions,
  type HostTensor,
  type PartitionStats,
  type PutOptions,
  type RegisterPartitionOptions,
  type SettleResult,
  type AckOptions,
} from './types.ts';

/** The part of the standard WebSocket API this client uses. */
export interface WebSocketLike {
  binaryType: string;
  readonly protocol: string;
  send(data: string | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { readonly data: unknown }) => void) | null;
  onclose: ((event: { readonly code: number; readonly reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** `new WebSocket(url, protocols)`, supplied by the platform. */
export type WebSocketConstructor = new (url: string, protocols: string[]) => WebSocketLike;

export interface GatewayClientOptions {
  /** e.g. `ws://127.0.0.1:8765/`. */
  readonly url: string;
  /** The gateway's shared secret (16..256 characters of [A-Za-z0-9_-]). */
  readonly token: string;
  readonly WebSocket: WebSocketConstructor;
  /** Optional namespace for this connection (the gateway may map it to a separate key prefix). */
  readonly namespace?: string;
  /** Lets `putSamples` accept GPU Tensor rows (read back to the host before sending). */
  readonly gpu?: Gpu;
  /** Give up if the gateway has not said hello after this long (default 10 s). */
  readonly connectTimeoutMs?: number;
}

interface Pending {
  readonly op: GatewayOp;
  resolve(message: Message<ResponseHeader>): void;
  reject(err: Error): void;
}

/** Opens a connection to the gateway and resolves once it has authenticated and said hello. */
export async function connectDataPlaneGateway(options: GatewayClientOptions): Promise<DataPlaneClient> {
  if (typeof options.token !== 'string' || !TOKEN_PATTERN.test(options.token)) {
    throw new DataPlaneError('invalid_argument', 'gateway token must be 16..256 characters of [A-Za-z0-9_-]');
  }
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    throw new DataPlaneError('invalid_argument', `gateway url ${JSON.stringify(options.url)} is not a URL`);
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:')
    throw new DataPlaneError('invalid_argument', `gateway url must be ws:// or wss://, got ${JSON.stringify(options.url)}`);
  if (options.namespace !== undefined) {
    if (!NAMESPACE_PATTERN.test(options.namespace))
      throw new DataPlaneError(
        'invalid_argument',
        `gateway namespace ${JSON.stringify(options.namespace)} must be 1..64 characters of [A-Za-z0-9_-]`,
      );
    url.searchParams.set('ns', options.namespace);
  }
  const socket = new options.WebSocket(url.toString(), [GATEWAY_PROTOCOL, TOKEN_PROTOCOL_PREFIX + options.token]);
  socket.binaryType = 'arraybuffer';
  const client = new GatewayDataPlaneClient(socket, `${url.protocol}//${url.host}${url.pathname}`, options.gpu);
  await client.opened(options.connectTimeoutMs ?? 10_000);
  return client;
}

class GatewayDataPlaneClient implements DataPlaneClient {
  kind = 'gateway';
  private readonly pending = new Map<number, Pending>();
  private readonly assembler = new MessageAssembler(Number.MAX_SAFE_INTEGER, checkServerHeader);
  private nextId = 1;
  private maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES;
  /** Why the connection is gone (null while open). */
  private lostReason: string | null = null;
  private userClosed = false;
  private hello: { resolve(h: HelloMessage): void; reject(err: Error): void } | null = null;
  private readonly socketClosed: Promise<void>;

  constructor(
    private readonly socket: WebSocketLike,
    private readonly where: string,
    private readonly gpu: Gpu | undefined,
  ) {
    let markClosed!: () => void;
    this.socketClosed = new Promise((resolve) => (markClosed = resolve));
    socket.onmessage = (event) => this.onFrame(event.data);
    socket.onclose = (event) => {
      const why = `gateway ${this.where} closed the connection (code ${event.code}${event.reason ? `: ${event.reason}` : event.code === 1006 ? ': refused, unreachable, or the token was rejected' : ''})`;
      this.fail(why);
      markClosed();
    };
    // An error event is always followed by a close event, which carries the details.
    socket.onerror = () => {};
  }

  /** Resolves on the gateway's hello; rejects on refusal, a protocol mismatch or the timeout. */
  opened(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.fail(`no hello from gateway ${this.where} within ${timeoutMs} ms`);
        this.socket.close(CLOSE_NORMAL, 'connect timeout');
      }, timeoutMs);
      this.hello = {
        resolve: (h) => {
          clearTimeout(timer);
          if (h.protocol !== GATEWAY_PROTOCOL_VERSION) {
            const why = `gateway ${this.where} speaks protocol ${h.protocol}, this client ${GATEWAY_PROTOCOL_VERSION}`;
            this.fail(why);
            this.socket.close(CLOSE_NORMAL, 'protocol version mismatch');
            reject(new DataPlaneError('invalid_argument', why));
            return;
          }
          this.kind = `gateway/${h.kind}`;
          this.maxMessageBytes = h.maxMessageBytes;
          resolve();
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
    });
  }

  async registerPartition(options: RegisterPartitionOptions): Promise<void> {
    await this.call('register', options);
  }

  async claimMeta(options: ClaimOptions): Promise<KVBatchMeta> {
    const res = await this.call('claim', options);
    return KVBatchMeta.fromJSON(value(res));
  }

  async ackClaim(meta: KVBatchMeta, options: AckOptions = {}): Promise<SettleResult> {
    return value(
      await this.call('ack', { meta: metaRecord(meta, 'ackClaim'), ...(options.clear === undefined ? {} : { clear: options.clear }) }),
    ) as SettleResult;
  }

  async releaseClaim(meta: KVBatchMeta): Promise<SettleResult> {
    return value(await this.call('release', { meta: metaRecord(meta, 'releaseClaim') })) as SettleResult;
  }

  async getData(meta: KVBatchMeta, fields: readonly string[]): Promise<Columns> {
    return columnsOf(await this.call('getData', { meta: metaRecord(meta, 'getData'), fields }), 'getData');
  }

  async checkConsumptionStatus(partition: string, tasks: readonly string[]): Promise<boolean> {
    return value(await this.call('consumed', { partition, tasks })) as boolean;
  }

  async putSamples(options: PutOptions): Promise<KVBatchMeta> {
    this.live();
    const partition = String(options?.partition);
    const ids: readonly unknown[] = Array.isArray(options?.sampleIds) ? options.sampleIds : [];
    if (options?.columns === null || typeof options?.columns !== 'object') {
      throw new DataPlaneError('invalid_argument', `putSamples(${partition}).columns must be an object of field → rows`);
    }
    const host: Record<string, HostTensor[]> = {};
    for (const [field, column] of Object.entries(options.columns)) {
      if (!Array.isArray(column))
        throw new DataPlaneError(
          'invalid_argument',
          `putSamples(${partition}) column ${JSON.stringify(field)} has no rows for ${ids.length} sample ids`,
        );
      host[field] = [];
      for (const [i, row] of column.entries()) {
        const where = `putSamples(${partition}) field ${JSON.stringify(field)} of sample ${JSON.stringify(ids[i])}`;
        const checked = checkRow(row, where);
        host[field].push(isTensor(checked) ? await toHostRow(checked, this.gpu, where) : checked);
      }
    }
    // JSON would silently turn a NaN tag into null: validate tags here with the server's rules.
    if (Array.isArray(options.tags) && options.tags.length === ids.length) {
      options.tags.forEach((t, i) => validateTagRecord(t, `putSamples(${partition}) tags of sample ${JSON.stringify(ids[i])}`));
    }
    const rows: RowRef[] = [];
    const frames: Uint8Array[] = [];
    const columns = encodeColumns(host, rows, frames);
    const res = await this.call(
      'put',
      { partition: options.partition, sampleIds: options.sampleIds, columns, tags: options.tags },
      rows,
      frames,
    );
    return KVBatchMeta.fromJSON(value(res));
  }

  async getSamples(options: GetOptions): Promise<Columns> {
    return columnsOf(await this.call('get', options), 'getSamples');
  }

  async clearSamples(partition: string, target: ClearTarget): Promise<number> {
    return value(await this.call('clear', { partition, target: target ?? null })) as number;
  }

  async partitionStats(partition: string): Promise<PartitionStats> {
    return value(await this.call('stats', { partition })) as PartitionStats;
  }

  async close(): Promise<void> {
    if (this.userClosed) return;
    this.userClosed = true;
    if (this.lostReason === null) {
      this.fail(`data plane client (${this.kind}) is closed`);
      this.socket.close(CLOSE_NORMAL, 'client closed');
    }
    await this.socketClosed;
  }

  private live(): void {
    if (this.userClosed) throw new DataPlaneError('closed', `data plane client (${this.kind}) is closed`);
    if (this.lostReason !== null) throw new DataPlaneError('closed', `data plane client (${this.kind}) is closed: ${this.lostReason}`);
  }

  private call(
    op: GatewayOp,
    args: unknown,
    rows: readonly RowRef[] = [],
    frames: readonly Uint8Array[] = [],
  ): Promise<Message<ResponseHeader>> {
    this.live();
    const id = this.nextId++;
    const header = stringifyControl({ t: 'req', id, op, args, rows }, op);
    let total = header.length;
    for (const f of frames) total += f.byteLength;
    if (total > this.maxMessageBytes) {
      return Promise.reject(
        new DataPlaneError(
          'invalid_argument',
          `${op}: request of ${total} bytes exceeds the gateway's message limit of ${this.maxMessageBytes} bytes; split it into smaller calls`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      this.pending.set(id, { op, resolve, reject });
      // One synchronous burst: no other message can interleave with this one's frames.
      this.socket.send(header);
      for (const f of frames) this.socket.send(f);
    });
  }

  private onFrame(data: unknown): void {
    let frame: string | Uint8Array;
    if (typeof data === 'string') frame = data;
    else if (data instanceof ArrayBuffer) frame = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) frame = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else return this.protocolError(`unexpected frame type ${Object.prototype.toString.call(data)} (binaryType must be arraybuffer)`);
    let message: Message<HelloMessage | ResponseHeader> | null;
    try {
      message = this.assembler.push(frame);
    } catch (err) {
      return this.protocolError(err instanceof GatewayProtocolError ? err.message : String(err));
    }
    if (message === null) return;
    const header = message.header;
    if (header.t === 'hello') {
      const hello = this.hello;
      this.hello = null;
      if (hello) hello.resolve(header);
      else this.protocolError('second hello from the gateway');
      return;
    }
    const waiter = this.pending.get(header.id);
    if (!waiter) return this.protocolError(`response to unknown request ${header.id}`);
    this.pending.delete(header.id);
    if (header.ok) waiter.resolve(message as Message<ResponseHeader>);
    else waiter.reject(errorFromWire(header.error));
  }

  private protocolError(why: string): void {
    this.fail(`protocol error from gateway ${this.where}: ${why}`);
    this.socket.close(CLOSE_NORMAL, 'protocol error');
  }

  /** Marks the connection gone and fails every call still waiting, naming why. */
  private fail(why: string): void {
    if (this.lostReason !== null) return;
    this.lostReason = why;
    const err = (op: string) => new DataPlaneError('closed', `${op}: ${why}`);
    if (this.hello) {
      this.hello.reject(err('connect'));
      this.hello = null;
    }
    for (const p of this.pending.values()) p.reject(err(p.op));
    this.pending.clear();
  }
}

function value(message: Message<ResponseHeader>): unknown {
  return message.header.ok ? message.header.value : undefined;
}

function columnsOf(message: Message<ResponseHeader>, what: string): Columns {
  const header = message.header;
  if (!header.ok) throw new DataPlaneError('invalid_argument', `${what}: no columns in an error response`);
  return decodeColumns(header.value, header.rows, message.frames, `${what} response`);
}

function metaRecord(meta: KVBatchMeta, what: string): KVBatchMetaRecord {
  if (!(meta instanceof KVBatchMeta)) throw new DataPlaneError('invalid_argument', `${what} needs a KVBatchMeta`);
  return meta.toJSON();
}
