/**
 * The client of the gateway's control-plane RPC (./gateway-control.ts): one WebSocket to the same
 * gateway as the data plane, speaking `speclab-control.v1`. A browser tab uses it to be a rollout
 * worker of the run the gateway serves (src/training/cluster/tab-rollout.ts wraps it into the endpoints
 * RolloutWorker calls). Only the standard WebSocket API is used; the constructor is injected.
 *
 * Every answer is checked against the op's value schema, so a gateway of another version (or a
 * damaged answer) fails with a message naming the op instead of being used half-understood.
 */
import {
  CONTROL_PROTOCOL,
  CONTROL_PROTOCOL_VERSION,
  CONTROL_VALUES,
  ControlHelloSchema,
  ControlRequestError,
  ControlResponseSchema,
  describeIssues,
  type ControlArgs,
  type ControlHello,
  type ControlOp,
  type ControlValues,
} from './gateway-control.ts';
import { CLOSE_NORMAL, TOKEN_PATTERN, TOKEN_PROTOCOL_PREFIX } from './gateway-protocol.ts';
import type { WebSocketConstructor, WebSocketLike } from './ws-client.ts';

export interface ControlClientOptions {
  /** The gateway, e.g. `ws://127.0.0.1:8765/` (the data plane's URL: one port serves both). */
  readonly url: string;
  readonly token: string;
  readonly WebSocket: WebSocketConstructor;
  /** The run this client means to join; a gateway serving another run is refused, naming both. */
  readonly run: string;
  readonly connectTimeoutMs?: number;
}

interface Pending {
  readonly op: ControlOp;
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/** Connects, authenticates and resolves once the gateway said hello for `options.run`. */
export async function connectControlGateway(options: ControlClientOptions): Promise<ControlGatewayClient> {
  if (typeof options.token !== 'string' || !TOKEN_PATTERN.test(options.token))
    throw new ControlRequestError('gateway token must be 16..256 characters of [A-Za-z0-9_-]');
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    throw new ControlRequestError(`gateway url ${JSON.stringify(options.url)} is not a URL`);
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:')
    throw new ControlRequestError(`gateway url must be ws:// or wss://, got ${JSON.stringify(options.url)}`);
  const socket = new options.WebSocket(url.toString(), [CONTROL_PROTOCOL, TOKEN_PROTOCOL_PREFIX + options.token]);
  const client = new ControlGatewayClient(socket, `${url.protocol}//${url.host}${url.pathname}`);
  const hello = await client.opened(options.connectTimeoutMs ?? 10_000);
  if (hello.run !== options.run) {
    await client.close();
    throw new ControlRequestError(`gateway ${url.host} serves run ${JSON.stringify(hello.run)}, not ${JSON.stringify(options.run)}`);
  }
  return client;
}

export class ControlGatewayClient {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private lostReason: string | null = null;
  private helloInfo: ControlHello | null = null;
  private waitingHello: { resolve(h: ControlHello): void; reject(err: Error): void } | null = null;
  private readonly socketClosed: Promise<void>;

  constructor(
    private readonly socket: WebSocketLike,
    private readonly where: string,
  ) {
    let markClosed!: () => void;
    this.socketClosed = new Promise((resolve) => (markClosed = resolve));
    socket.onmessage = (event) => this.onFrame(event.data);
    socket.onclose = (event) => {
      // 1006 after the hello is a connection lost (the gateway died, the network dropped), not a refusal.
      const abnormal = this.helloInfo
        ? ': connection lost (the gateway stopped or the network dropped)'
        : ': refused, unreachable, or the token was rejected';
      this.lose(
        `gateway ${where} closed the control connection (code ${event.code}${event.reason ? `: ${event.reason}` : event.code === 1006 ? abnormal : ''})`,
      );
      markClosed();
    };
    socket.onerror = () => {};
  }

  /** The gateway's hello: its run and the run's prompt lease. */
  get hello(): ControlHello {
    if (!this.helloInfo) throw new ControlRequestError('control client: not connected yet');
    return this.helloInfo;
  }

  opened(timeoutMs: number): Promise<ControlHello> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.lose(`no hello from gateway ${this.where} within ${timeoutMs} ms`);
        this.socket.close(CLOSE_NORMAL, 'connect timeout');
      }, timeoutMs);
      this.waitingHello = {
        resolve: (h) => {
          clearTimeout(timer);
          if (h.protocol !== CONTROL_PROTOCOL_VERSION) {
            const why = `gateway ${this.where} speaks control protocol ${h.protocol}, this client ${CONTROL_PROTOCOL_VERSION}`;
            this.lose(why);
            this.socket.close(CLOSE_NORMAL, 'protocol version mismatch');
            reject(new ControlRequestError(why));
            return;
          }
          this.helloInfo = h;
          resolve(h);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
    });
  }

  manifest(): Promise<ControlValues['manifest']> {
    return this.call('manifest', {});
  }

  register(args: ControlArgs['register']): Promise<ControlValues['register']> {
    return this.call('register', args);
  }

  heartbeat(workerId: string): Promise<ControlValues['heartbeat']> {
    return this.call('heartbeat', { workerId });
  }

  lease(workerId: string, max: number): Promise<ControlValues['lease']> {
    return this.call('lease', { workerId, max });
  }

  commit(workerId: string, refs: readonly Readonly<Record<string, unknown>>[]): Promise<ControlValues['commit']> {
    return this.call('commit', { workerId, refs: [...refs] });
  }

  fail(workerId: string, taskIds: readonly string[], reason: string, retryable: boolean): Promise<ControlValues['fail']> {
    return this.call('fail', { workerId, taskIds: [...taskIds], reason, retryable });
  }

  complete(workerId: string, taskIds: readonly string[]): Promise<ControlValues['complete']> {
    return this.call('complete', { workerId, taskIds: [...taskIds] });
  }

  async close(): Promise<void> {
    if (this.lostReason === null) {
      this.lose('control client is closed');
      this.socket.close(CLOSE_NORMAL, 'client closed');
    }
    await this.socketClosed;
  }

  private call<K extends ControlOp>(op: K, args: ControlArgs[K]): Promise<ControlValues[K]> {
    if (this.lostReason !== null) return Promise.reject(new ControlRequestError(`${op}: ${this.lostReason}`));
    const id = this.nextId++;
    const text = JSON.stringify({ t: 'req', id, op, args });
    const limit = this.helloInfo?.maxMessageBytes ?? Infinity;
    if (text.length > limit)
      return Promise.reject(
        new ControlRequestError(
          `${op}: request of ${text.length} bytes exceeds the gateway's control message limit of ${limit} bytes; send fewer refs per call`,
        ),
      );
    return new Promise((resolve, reject) => {
      this.pending.set(id, {
        op,
        resolve: (value) => {
          const parsed = CONTROL_VALUES[op].safeParse(value);
          if (parsed.success) resolve(parsed.data as ControlValues[K]);
          else reject(new ControlRequestError(describeIssues(`gateway answer to ${op}`, parsed.error)));
        },
        reject,
      });
      this.socket.send(text);
    });
  }

  private onFrame(data: unknown): void {
    if (typeof data !== 'string') return this.protocolError('binary frame on the control connection');
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      return this.protocolError('text frame is not JSON');
    }
    if (this.waitingHello) {
      const hello = ControlHelloSchema.safeParse(parsed);
      if (!hello.success) return this.protocolError(describeIssues('hello', hello.error));
      const waiting = this.waitingHello;
      this.waitingHello = null;
      return waiting.resolve(hello.data);
    }
    const res = ControlResponseSchema.safeParse(parsed);
    if (!res.success) return this.protocolError(describeIssues('response', res.error));
    const waiter = this.pending.get(res.data.id);
    if (!waiter) return this.protocolError(`response to unknown request ${res.data.id}`);
    this.pending.delete(res.data.id);
    if (res.data.ok) waiter.resolve(res.data.value);
    else waiter.reject(new ControlRequestError(`${waiter.op}: gateway refused: ${res.data.error.name}: ${res.data.error.message}`));
  }

  private protocolError(why: string): void {
    this.lose(`protocol error from gateway ${this.where}: ${why}`);
    this.socket.close(CLOSE_NORMAL, 'protocol error');
  }

  private lose(why: string): void {
    if (this.lostReason !== null) return;
    this.lostReason = why;
    if (this.waitingHello) {
      this.waitingHello.reject(new ControlRequestError(`connect: ${why}`));
      this.waitingHello = null;
    }
    for (const p of this.pending.values()) p.reject(new ControlRequestError(`${p.op}: ${why}`));
    this.pending.clear();
  }
}
