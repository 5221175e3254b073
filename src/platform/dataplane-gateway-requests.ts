/**
 * What one data-plane gateway request does (protocol: src/dataplane/gateway-protocol.ts): the op it
 * names, run on the connection's server-side `DataPlaneClient`, and the reply it gets, with column
 * rows read back to host bytes and encoded as frames. Every argument is re-validated by that client,
 * so this file only routes; a result over the message limit is refused here, naming what to lower.
 *
 * Its own file because it is the gateway's one point of contact with the data plane: the HTTP and
 * upgrade checks (dataplane-gateway-node.ts) and the connection's framing and bounds
 * (dataplane-gateway-connection.ts) never look inside a request.
 */
import type { Gpu } from '../gpu/gpu.ts';
import { isTensor, toHostRow } from '../dataplane/column-store.ts';
import { decodeColumns, encodeColumns, type Message, type RequestHeader, type RowRef } from '../dataplane/gateway-protocol.ts';
import { KVBatchMeta } from '../dataplane/meta.ts';
import { DataPlaneError, type Columns, type DataPlaneClient, type HostTensor } from '../dataplane/types.ts';

export interface Reply {
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
export async function answerRequest(
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
