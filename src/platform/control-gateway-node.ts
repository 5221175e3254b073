/**
 * The server side of the gateway's control-plane RPC (protocol: src/dataplane/gateway-control.ts):
 * the rollout endpoints of one run's `DataFlowController` for browser tabs. It is mounted on the
 * data-plane gateway (src/platform/dataplane-gateway-node.ts, option `control`), so a connection
 * has passed the same token, Origin and connection-count checks before it gets here; upgrades that
 * offer `speclab-control.v1` come to this handler, the others to the data plane.
 *
 * The controller is built by the caller over the run's Redis control stores (`speclab gateway`,
 * src/cli/gateway.ts), exactly as `speclab rollout` builds its own: it stays passive and the
 * stores stay the one truth, so a tab is a rollout worker like any other and a tab that vanishes
 * mid-lease strands nothing (its prompts come back after the run's prompt lease).
 *
 * Every request is validated (envelope, op, arguments) before the controller sees it, and answered:
 * a bad one with an error response naming the field, never a crash. A connection may act only for
 * the workers it registered itself. Bounded: `maxMessageBytes` per message (1 MiB), `maxInFlight`
 * concurrent requests (16), `maxWorkersPerConnection` registrations (8), `idleTimeoutMs` (10 min)
 * without a message or a request in flight. A frame that cannot be answered (binary, not JSON, no
 * request id) closes the connection with a reason.
 */
import type { WebSocket, RawData } from 'ws';
import type { SampleRef } from '../contracts/index.ts';
import type { RolloutControl } from '../control/rollout-control.ts';
import type { RunRecordReader } from '../control/redis/redis-run-record.ts';
import {
  CONTROL_PROTOCOL,
  CONTROL_PROTOCOL_VERSION,
  ControlRequestError,
  ControlRequestSchema,
  DEFAULT_MAX_CONTROL_MESSAGE_BYTES,
  controlErrorToWire,
  describeIssues,
  isControlOp,
  parseControlArgs,
  type ControlHello,
  type ControlOp,
  type ControlValues,
} from '../dataplane/gateway-control.ts';
import { CLOSE_PROTOCOL_ERROR, CLOSE_TOO_BIG } from '../dataplane/gateway-protocol.ts';
import type { GatewayServeOptions, ServedGateway } from '../cli/gateway-options.ts';
import type { ConnectionInfo } from './dataplane-gateway-connection.ts';
import type { GatewayExtension } from './dataplane-gateway-node.ts';

export interface ControlGatewayOptions {
  /** The rollout endpoints of `DataFlowController` this RPC serves. */
  readonly controller: RolloutControl;
  /** The run record a tab reads: the trainer's manifest and whether the run is finished. */
  readonly record: RunRecordReader;
  /** The run's prompt lease (the manifest's promptLeaseMs), told to every tab. */
  readonly promptLeaseMs: number;
  readonly maxMessageBytes?: number;
  readonly maxInFlight?: number;
  readonly maxWorkersPerConnection?: number;
  readonly idleTimeoutMs?: number;
  readonly onLog?: (line: string) => void;
  /** Each request served, for logs: the op, its worker and what it did. */
  readonly onRequest?: (line: string) => void;
}

const CLOSE_GOING_AWAY = 1001;
const CLOSE_GRACE_MS = 1000;

function positive(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

/** The handler to pass as the data-plane gateway's `control` option. */
export function controlGateway(options: ControlGatewayOptions): GatewayExtension {
  const maxMessageBytes = positive(options.maxMessageBytes ?? DEFAULT_MAX_CONTROL_MESSAGE_BYTES, 'maxMessageBytes');
  const maxInFlight = positive(options.maxInFlight ?? 16, 'maxInFlight');
  const maxWorkers = positive(options.maxWorkersPerConnection ?? 8, 'maxWorkersPerConnection');
  const idleTimeoutMs = positive(options.idleTimeoutMs ?? 600_000, 'idleTimeoutMs');
  positive(options.promptLeaseMs, 'promptLeaseMs');
  const log = options.onLog ?? (() => {});
  const { controller, record } = options;

  return {
    protocol: CONTROL_PROTOCOL,
    serve(ws: WebSocket, info: ConnectionInfo): Promise<void> {
      const workers = new Set<string>();
      let inFlight = 0;
      let idleTimer: ReturnType<typeof setTimeout> | undefined;
      const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
      ws.on('error', (err: Error & { code?: string }) =>
        log(`control connection from ${info.remoteAddress} failed: ${err.code ?? ''} ${err.message}`.trim()),
      );
      const closeWith = (code: number, why: string): void => {
        log(`closing control connection from ${info.remoteAddress}: ${why}`);
        ws.close(code, Buffer.from(why).subarray(0, 123).toString());
        setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref?.();
      };
      const armIdle = (): void => {
        clearTimeout(idleTimer);
        idleTimer = setTimeout(
          () => (inFlight === 0 ? closeWith(CLOSE_GOING_AWAY, `idle for ${idleTimeoutMs} ms`) : armIdle()),
          idleTimeoutMs,
        );
        idleTimer.unref?.();
      };
      void closed.then(() => clearTimeout(idleTimer));
      const send = (message: unknown): void => {
        if (ws.readyState !== ws.OPEN) return;
        ws.send(JSON.stringify(message));
      };
      const own = (workerId: string, op: ControlOp): string => {
        if (!workers.has(workerId))
          throw new ControlRequestError(`${op}: worker ${JSON.stringify(workerId)} was not registered on this connection; register first`);
        return workerId;
      };

      const handle = async (op: ControlOp, args: unknown): Promise<ControlValues[ControlOp]> => {
        switch (op) {
          case 'manifest': {
            parseControlArgs('manifest', args);
            return { manifest: ((await record.read()) ?? null) as Record<string, unknown> | null, finished: await record.finished() };
          }
          case 'register': {
            const a = parseControlArgs('register', args);
            if (a.workerId !== undefined && workers.has(a.workerId)) return { workerId: a.workerId };
            if (workers.size >= maxWorkers)
              throw new ControlRequestError(`register: this connection already registered ${maxWorkers} workers`);
            const workerId = await controller.registerRolloutWorker({
              ...(a.workerId === undefined ? {} : { workerId: a.workerId }),
              strategy: a.strategy ?? 'eagle3',
              role: 'rollout',
              via: 'gateway',
            });
            workers.add(workerId);
            options.onRequest?.(`register ${workerId} (from ${info.remoteAddress})`);
            return { workerId };
          }
          case 'heartbeat': {
            own(parseControlArgs('heartbeat', args).workerId, op);
            return { finished: await record.finished() };
          }
          case 'lease': {
            const a = parseControlArgs('lease', args);
            const tasks = await controller.leasePromptTasks(own(a.workerId, op), a.max);
            if (tasks.length > 0)
              options.onRequest?.(`lease ${a.workerId}: ${tasks.length} prompt(s) ${tasks.map((t) => t.taskId).join(' ')}`);
            return { tasks: tasks as unknown as Record<string, unknown>[], leaseMs: options.promptLeaseMs };
          }
          case 'commit': {
            const a = parseControlArgs('commit', args);
            const fresh = await controller.commitSamples(own(a.workerId, op), a.refs as unknown as SampleRef[]);
            options.onRequest?.(`commit ${a.workerId}: ${a.refs.length} ref(s), ${fresh.length} fresh`);
            return { fresh: fresh as unknown as Record<string, unknown>[] };
          }
          case 'fail': {
            const a = parseControlArgs('fail', args);
            const outcome = await controller.failPromptTasks(own(a.workerId, op), a.taskIds, a.reason, a.retryable);
            return { requeued: [...outcome.requeued], failed: [...outcome.failed], skipped: [...outcome.skipped] };
          }
          case 'complete': {
            const a = parseControlArgs('complete', args);
            return { completed: await controller.completePromptTasks(own(a.workerId, op), a.taskIds) };
          }
        }
      };

      const onMessage = (data: RawData, isBinary: boolean): void => {
        armIdle();
        const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
        if (buf.byteLength > maxMessageBytes)
          return closeWith(CLOSE_TOO_BIG, `control message of ${buf.byteLength} bytes exceeds the limit of ${maxMessageBytes} bytes`);
        if (isBinary) return closeWith(CLOSE_PROTOCOL_ERROR, 'binary frame on the control connection (features go through the data plane)');
        let parsed: unknown;
        try {
          parsed = JSON.parse(buf.toString('utf8'));
        } catch {
          return closeWith(CLOSE_PROTOCOL_ERROR, 'control frame is not JSON');
        }
        const request = ControlRequestSchema.safeParse(parsed);
        if (!request.success) {
          // A request whose id is readable is answered; one without an id cannot be.
          const id = (parsed as { id?: unknown } | null)?.id;
          if (typeof id === 'number' && Number.isSafeInteger(id))
            return send({
              t: 'res',
              id,
              ok: false,
              error: controlErrorToWire(new ControlRequestError(describeIssues('request', request.error))),
            });
          return closeWith(CLOSE_PROTOCOL_ERROR, describeIssues('request', request.error));
        }
        const { id, op, args } = request.data;
        if (!isControlOp(op))
          return send({
            t: 'res',
            id,
            ok: false,
            error: controlErrorToWire(new ControlRequestError(`unknown control op ${JSON.stringify(op.slice(0, 64))}`)),
          });
        if (inFlight >= maxInFlight)
          return send({
            t: 'res',
            id,
            ok: false,
            error: controlErrorToWire(
              new ControlRequestError(`more than ${maxInFlight} concurrent requests on one control connection; wait for answers first`),
            ),
          });
        inFlight++;
        handle(op, args)
          .then((value) => send({ t: 'res', id, ok: true, value }))
          .catch((err: unknown) => send({ t: 'res', id, ok: false, error: controlErrorToWire(err) }))
          .finally(() => inFlight--);
      };

      ws.on('message', (data: RawData, isBinary: boolean) => {
        try {
          onMessage(data, isBinary);
        } catch (err) {
          // Nothing a client sends may end the process (a send on a dying socket, say).
          log(`control connection from ${info.remoteAddress}: ${(err as Error).message}`);
        }
      });
      armIdle();
      const hello: ControlHello = {
        t: 'hello',
        protocol: CONTROL_PROTOCOL_VERSION,
        run: controller.runId,
        promptLeaseMs: options.promptLeaseMs,
        maxMessageBytes,
      };
      send(hello);
      return closed;
    },
  };
}

/** `speclab gateway`'s server: the data-plane gateway with the control RPC mounted on it. */
export async function startRunGateway(options: GatewayServeOptions): Promise<ServedGateway> {
  const { startDataPlaneGateway } = await import('./dataplane-gateway-node.ts');
  return startDataPlaneGateway({
    token: options.token,
    scopedTokens: options.scopedTokens,
    host: options.host,
    port: options.port,
    allowedOrigins: options.allowedOrigins,
    onLog: options.onLog,
    // Tabs share the run's one feature partition and key prefix; a namespace would hide their features from the trainer.
    openClient: async (info) => {
      if (info.namespace !== null) throw new ControlRequestError('this gateway serves one run: connect without ?ns=');
      return options.openClient();
    },
    control: controlGateway({
      controller: options.controller,
      record: options.record,
      promptLeaseMs: options.promptLeaseMs,
      onLog: options.onLog,
      onRequest: options.onLog,
    }),
  });
}
