/**
 * Wire protocol of the data-plane WebSocket gateway (server: src/platform/dataplane-gateway-node.ts,
 * client: ./ws-client.ts). Runtime-neutral: only standard APIs (JSON, typed arrays).
 *
 * Authentication happens in the WebSocket handshake: the client offers two subprotocols,
 * `speclab-dataplane.v1` and `speclab-token.<token>`; the server answers with the first one only
 * (the token is never echoed) and refuses the upgrade (HTTP 401) when the token is missing or wrong.
 * Browsers cannot set headers on a WebSocket, so the subprotocol list is the one header they can.
 *
 * One message = one JSON text frame (the header) followed by exactly `rows.length` binary frames,
 * the raw little-endian bytes of each tensor row in order. A sender writes a whole message with
 * consecutive `send` calls in one synchronous step, so messages never interleave on a socket.
 *
 *   server → client  {t:'hello', protocol, kind, maxMessageBytes}           once, after the upgrade
 *   client → server  {t:'req', id, op, args, rows}                           rows = RowRef[]
 *   server → client  {t:'res', id, ok:true, value, rows} | {t:'res', id, ok:false, error}
 *
 * Tensor rows inside `args` / `value` are row indices (numbers) into the message's `rows` list.
 */
import { BYTES_PER_ELEMENT, type DType } from '../gpu/tensor.ts';
import { hostArray } from './column-store.ts';
import { checkName, isDType } from './names.ts';
import { ClaimTimeoutError, DataPlaneError, LeaseLostError, type DataPlaneErrorCode, type HostTensor } from './types.ts';

export const GATEWAY_PROTOCOL = 'speclab-dataplane.v1';
export const GATEWAY_PROTOCOL_VERSION = 1;
/** The second offered subprotocol carries the shared secret: `speclab-token.<token>`. */
export const TOKEN_PROTOCOL_PREFIX = 'speclab-token.';
/** Tokens must be valid subprotocol tokens; we require 16..256 characters of [A-Za-z0-9_-]. */
export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{16,256}$/;
/** Optional per-connection namespace (query `?ns=`), e.g. a key prefix on the server's store. */
export const NAMESPACE_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** Default bound on one message (header JSON + all its row bytes), both directions. */
export const DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/** WebSocket close codes used by the gateway (RFC 6455 §7.4.1). */
export const CLOSE_NORMAL = 1000;
export const CLOSE_PROTOCOL_ERROR = 1002;
export const CLOSE_TOO_BIG = 1009;
export const CLOSE_SERVER_ERROR = 1011;

export type GatewayOp = 'register' | 'claim' | 'ack' | 'release' | 'getData' | 'consumed' | 'put' | 'get' | 'clear' | 'stats';
export const GATEWAY_OPS: readonly GatewayOp[] = [
  'register',
  'claim',
  'ack',
  'release',
  'getData',
  'consumed',
  'put',
  'get',
  'clear',
  'stats',
];

/** Describes one binary frame: the row's dtype and shape (its byte length follows from them). */
export interface RowRef {
  readonly dtype: DType;
  readonly shape: readonly number[];
}

export interface HelloMessage {
  readonly t: 'hello';
  readonly protocol: number;
  /** Kind of the server-side client, e.g. `transferQueue/redis`. */
  readonly kind: string;
  readonly maxMessageBytes: number;
}

export interface RequestHeader {
  readonly t: 'req';
  readonly id: number;
  readonly op: GatewayOp;
  readonly args: unknown;
  readonly rows: readonly RowRef[];
}

/** A DataPlaneError (or another error) as it crosses the wire. */
export interface WireError {
  readonly name: string;
  /** Absent for failures that are not DataPlaneErrors (e.g. the store is unreachable). */
  readonly code?: DataPlaneErrorCode;
  readonly message: string;
  readonly ready?: number;
  readonly lagging?: Readonly<Record<string, number>>;
  readonly settled?: readonly string[];
  readonly lost?: readonly string[];
}

export type ResponseHeader =
  | { readonly t: 'res'; readonly id: number; readonly ok: true; readonly value: unknown; readonly rows: readonly RowRef[] }
  | { readonly t: 'res'; readonly id: number; readonly ok: false; readonly error: WireError };

/** A complete message: its header and one byte view per row. */
export interface Message<H> {
  readonly header: H;
  readonly frames: readonly Uint8Array[];
}

/** Broken framing or an oversized message: the connection cannot continue. */
export class GatewayProtocolError extends Error {
  override name = 'GatewayProtocolError';
  constructor(
    message: string,
    /** WebSocket close code to use (1002 protocol error, 1009 too big). */
    readonly closeCode: number,
  ) {
    super(message);
  }
}

/** Bytes of a row of this dtype and shape; throws naming `where` on a malformed ref. */
export function rowRefBytes(ref: unknown, where: string): number {
  if (ref === null || typeof ref !== 'object')
    throw new GatewayProtocolError(`${where}: row ref must be {dtype, shape}`, CLOSE_PROTOCOL_ERROR);
  const { dtype, shape } = ref as Partial<RowRef>;
  if (!isDType(dtype)) throw new GatewayProtocolError(`${where}: unknown dtype ${JSON.stringify(dtype)}`, CLOSE_PROTOCOL_ERROR);
  if (!Array.isArray(shape) || shape.length > 16)
    throw new GatewayProtocolError(`${where}: shape must be an array of at most 16 dimensions`, CLOSE_PROTOCOL_ERROR);
  let n = BYTES_PER_ELEMENT[dtype];
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0)
      throw new GatewayProtocolError(`${where}: invalid dimension ${JSON.stringify(d)}`, CLOSE_PROTOCOL_ERROR);
    n *= d;
  }
  if (!Number.isSafeInteger(n))
    throw new GatewayProtocolError(`${where}: row of shape [${shape.join(', ')}] is too large`, CLOSE_PROTOCOL_ERROR);
  return n;
}

/** The raw bytes of a host row (a view, no copy). */
export function rowBytesView(row: HostTensor): Uint8Array {
  return new Uint8Array(row.data.buffer, row.data.byteOffset, row.data.byteLength);
}

/** A host row over a received frame (copied only when the frame is not aligned for its dtype). */
export function rowFromFrame(ref: RowRef, frame: Uint8Array): HostTensor {
  const width = BYTES_PER_ELEMENT[ref.dtype];
  const aligned = frame.byteOffset % width === 0 ? frame : frame.slice();
  return {
    dtype: ref.dtype,
    shape: [...ref.shape],
    data: hostArray(ref.dtype, aligned.buffer as ArrayBuffer, aligned.byteOffset, aligned.byteLength / width),
  };
}

/**
 * JSON for control messages. Refuses values JSON would silently change (NaN/Infinity become null,
 * functions and bigints vanish or throw), so a request never means something other than what was sent.
 */
export function stringifyControl(value: unknown, what: string): string {
  return JSON.stringify(value, (key, v: unknown) => {
    if (typeof v === 'number' && !Number.isFinite(v)) {
      throw new DataPlaneError('invalid_argument', `${what}: ${key === '' ? 'value' : `"${key}"`} is ${v}, which JSON cannot carry`);
    }
    if (typeof v === 'bigint' || typeof v === 'function' || typeof v === 'symbol') {
      throw new DataPlaneError(
        'invalid_argument',
        `${what}: ${key === '' ? 'value' : `"${key}"`} is a ${typeof v}, which JSON cannot carry`,
      );
    }
    return v;
  });
}

export function errorToWire(err: unknown): WireError {
  if (err instanceof ClaimTimeoutError)
    return { name: err.name, code: err.code, message: err.message, ready: err.ready, lagging: err.lagging };
  if (err instanceof LeaseLostError) return { name: err.name, code: err.code, message: err.message, settled: err.settled, lost: err.lost };
  if (err instanceof DataPlaneError) return { name: err.name, code: err.code, message: err.message };
  if (err instanceof Error) return { name: err.name, message: err.message };
  return { name: 'Error', message: String(err) };
}

/** Rebuilds the error the server-side client threw, same class, code and message. */
export function errorFromWire(w: WireError): Error {
  if (w.code === 'timeout' && w.ready !== undefined) return new ClaimTimeoutError(w.message, w.ready, w.lagging ?? {});
  if (w.code === 'lease_lost' && w.settled !== undefined) return new LeaseLostError(w.message, w.settled, w.lost ?? []);
  if (w.code !== undefined) return new DataPlaneError(w.code, w.message);
  return new Error(`data plane gateway: server-side ${w.name}: ${w.message}`);
}

/**
 * Reassembles messages from frames, enforcing the framing rules and the size bound. Throws
 * `GatewayProtocolError` on a violation; the caller closes the connection with its close code.
 */
export class MessageAssembler<H> {
  private header: H | null = null;
  private expected: number[] = [];
  private frames: Uint8Array[] = [];

  constructor(
    private readonly maxMessageBytes: number,
    /** Checks a parsed header's shape (message type etc.); throws GatewayProtocolError. */
    private readonly checkHeader: (value: unknown) => H,
  ) {}

  /** Feed one frame; returns the completed message, or null while rows are still due. */
  push(frame: string | Uint8Array): Message<H> | null {
    if (typeof frame === 'string') {
      if (this.header !== null) {
        throw new GatewayProtocolError(
          `text frame while ${this.expected.length - this.frames.length} binary row frame(s) were still due`,
          CLOSE_PROTOCOL_ERROR,
        );
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(frame);
      } catch {
        throw new GatewayProtocolError('text frame is not JSON', CLOSE_PROTOCOL_ERROR);
      }
      const header = this.checkHeader(parsed);
      const refs: unknown = (header as { rows?: unknown }).rows ?? [];
      if (!Array.isArray(refs))
        throw new GatewayProtocolError('message header rows must be a list of {dtype, shape}', CLOSE_PROTOCOL_ERROR);
      const sizes = refs.map((r, i) => rowRefBytes(r, `row ${i}`));
      const total = frame.length + sizes.reduce((a, b) => a + b, 0);
      if (total > this.maxMessageBytes) {
        throw new GatewayProtocolError(
          `message of ${total} bytes exceeds the gateway limit of ${this.maxMessageBytes} bytes`,
          CLOSE_TOO_BIG,
        );
      }
      if (sizes.length === 0) return { header, frames: [] };
      this.header = header;
      this.expected = sizes;
      this.frames = [];
      return null;
    }
    if (this.header === null) throw new GatewayProtocolError('binary frame without a message header', CLOSE_PROTOCOL_ERROR);
    const k = this.frames.length;
    if (frame.byteLength !== this.expected[k]) {
      throw new GatewayProtocolError(
        `row frame ${k} has ${frame.byteLength} bytes, its header declared ${this.expected[k]}`,
        CLOSE_PROTOCOL_ERROR,
      );
    }
    this.frames.push(frame);
    if (this.frames.length < this.expected.length) return null;
    const done = { header: this.header, frames: this.frames };
    this.header = null;
    this.expected = [];
    this.frames = [];
    return done;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function checkRequestHeader(v: unknown): RequestHeader {
  if (!isObject(v) || v.t !== 'req') throw new GatewayProtocolError('expected a request header {t:"req", ...}', CLOSE_PROTOCOL_ERROR);
  if (!Number.isSafeInteger(v.id)) throw new GatewayProtocolError('request id must be an integer', CLOSE_PROTOCOL_ERROR);
  if (typeof v.op !== 'string') throw new GatewayProtocolError('request op must be a string', CLOSE_PROTOCOL_ERROR);
  return v as unknown as RequestHeader;
}

/** Server → client: hello or a response (hello carries no rows). */
export function checkServerHeader(v: unknown): HelloMessage | ResponseHeader {
  if (isObject(v) && v.t === 'hello') return v as unknown as HelloMessage;
  if (!isObject(v) || v.t !== 'res' || !Number.isSafeInteger(v.id))
    throw new GatewayProtocolError('expected a hello or response header from the gateway', CLOSE_PROTOCOL_ERROR);
  return v as unknown as ResponseHeader;
}

/** Columns → {field: row indices}, appending rows and their bytes to the message. */
export function encodeColumns(
  columns: Readonly<Record<string, readonly HostTensor[]>>,
  rows: RowRef[],
  frames: Uint8Array[],
): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const [field, column] of Object.entries(columns)) {
    out[field] = column.map((row) => {
      rows.push({ dtype: row.dtype, shape: [...row.shape] });
      frames.push(rowBytesView(row));
      return rows.length - 1;
    });
  }
  return out;
}

/** {field: row indices} → columns of host rows over the received frames. */
export function decodeColumns(
  encoded: unknown,
  rows: readonly RowRef[],
  frames: readonly Uint8Array[],
  where: string,
): Record<string, HostTensor[]> {
  if (!isObject(encoded)) throw new DataPlaneError('invalid_argument', `${where}: columns must be an object of field → row indices`);
  const out: Record<string, HostTensor[]> = {};
  for (const [field, column] of Object.entries(encoded)) {
    checkName(field, `${where} field name`);
    if (!Array.isArray(column))
      throw new DataPlaneError('invalid_argument', `${where}: column ${JSON.stringify(field)} must be an array of row indices`);
    out[field] = column.map((k: unknown) => {
      if (typeof k !== 'number' || !Number.isInteger(k) || k < 0 || k >= rows.length) {
        throw new DataPlaneError(
          'invalid_argument',
          `${where}: column ${JSON.stringify(field)} names row ${JSON.stringify(k)}, but the message has ${rows.length} rows`,
        );
      }
      return rowFromFrame(rows[k], frames[k]);
    });
  }
  return out;
}
