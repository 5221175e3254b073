/**
 * Wire protocol of the control-plane RPC of the gateway (server: src/platform/control-gateway-node.ts,
 * mounted on the data-plane gateway's port; client: ./gateway-control-client.ts). It lets a browser
 * tab be a rollout worker of a cluster run: register, heartbeat, lease prompts, commit sample refs.
 * Runtime-neutral: JSON and zod only.
 *
 * Authentication is the data-plane gateway's (./gateway-protocol.ts): the client offers
 * `speclab-control.v1` and `speclab-token.<token>`; the server answers with the first one only.
 * The version lives in the subprotocol name and in the hello, so a client of another version is
 * refused in the handshake or names both versions.
 *
 * Messages are JSON text frames only (no binary frames: features travel through the data plane):
 *
 *   server → client  {t:'hello', protocol, run, promptLeaseMs, maxMessageBytes}   once
 *   client → server  {t:'req', id, op, args}
 *   server → client  {t:'res', id, ok:true, value} | {t:'res', id, ok:false, error:{name, message}}
 *
 * Records (prompt tasks, sample refs) travel as plain JSON here; the server's controller validates
 * every ref with the contract builders and the client rebuilds every task the same way, so this
 * layer checks only the envelope and the argument shapes (bounded lengths, integer counts).
 */
import { z } from 'zod';

export const CONTROL_PROTOCOL = 'speclab-control.v1';
export const CONTROL_PROTOCOL_VERSION = 1;
/** Default bound on one control message (a commit of many refs is a few hundred KiB at most). */
export const DEFAULT_MAX_CONTROL_MESSAGE_BYTES = 1024 * 1024;
/** Most prompts one lease may ask for, refs one commit may carry, ids one fail may name. */
export const MAX_CONTROL_BATCH = 1024;

export type ControlOp = 'manifest' | 'register' | 'heartbeat' | 'lease' | 'commit' | 'fail' | 'complete';
export const CONTROL_OPS: readonly ControlOp[] = ['manifest', 'register', 'heartbeat', 'lease', 'commit', 'fail', 'complete'];

/** The member id rule of `speclab rollout --worker-id`. */
export const WORKER_ID_PATTERN = /^[\w.:@-]{1,128}$/;

const WorkerId = z.string().regex(WORKER_ID_PATTERN, 'must be 1-128 letters, digits or _ . : @ -');
const TaskIds = z.array(z.string().min(1).max(512)).max(MAX_CONTROL_BATCH);
const JsonObject = z.record(z.string(), z.unknown());

/** The arguments of every op; anything else in `args` is refused (strict objects). */
export const CONTROL_ARGS = {
  manifest: z.strictObject({}),
  register: z.strictObject({ workerId: WorkerId.optional(), strategy: z.string().min(1).max(64).optional() }),
  heartbeat: z.strictObject({ workerId: WorkerId }),
  lease: z.strictObject({ workerId: WorkerId, max: z.number().int().min(1).max(MAX_CONTROL_BATCH) }),
  commit: z.strictObject({ workerId: WorkerId, refs: z.array(JsonObject).min(1).max(MAX_CONTROL_BATCH) }),
  fail: z.strictObject({ workerId: WorkerId, taskIds: TaskIds, reason: z.string().max(4096), retryable: z.boolean() }),
  complete: z.strictObject({ workerId: WorkerId, taskIds: TaskIds }),
} satisfies Record<ControlOp, z.ZodType>;

export type ControlArgs = { [K in ControlOp]: z.output<(typeof CONTROL_ARGS)[K]> };

/** What each op answers with. */
export const CONTROL_VALUES = {
  manifest: z.strictObject({ manifest: JsonObject.nullable(), finished: z.boolean() }),
  register: z.strictObject({ workerId: WorkerId }),
  heartbeat: z.strictObject({ finished: z.boolean() }),
  /** `leaseMs`: the run's prompt lease; prompts not committed within it go back to other workers. */
  lease: z.strictObject({ tasks: z.array(JsonObject), leaseMs: z.number().int().positive() }),
  commit: z.strictObject({ fresh: z.array(JsonObject) }),
  fail: z.strictObject({ requeued: z.array(z.string()), failed: z.array(z.string()), skipped: z.array(z.string()) }),
  complete: z.strictObject({ completed: z.array(z.string()) }),
} satisfies Record<ControlOp, z.ZodType>;

export type ControlValues = { [K in ControlOp]: z.output<(typeof CONTROL_VALUES)[K]> };

export const ControlRequestSchema = z.strictObject({
  t: z.literal('req'),
  id: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  op: z.string(),
  args: z.unknown(),
});
export type ControlRequest = z.output<typeof ControlRequestSchema>;

export const ControlHelloSchema = z.strictObject({
  t: z.literal('hello'),
  protocol: z.number().int(),
  run: z.string(),
  promptLeaseMs: z.number().int().positive(),
  maxMessageBytes: z.number().int().positive(),
});
export type ControlHello = z.output<typeof ControlHelloSchema>;

export const ControlErrorSchema = z.strictObject({ name: z.string(), message: z.string() });

export const ControlResponseSchema = z.discriminatedUnion('ok', [
  z.strictObject({ t: z.literal('res'), id: z.number().int(), ok: z.literal(true), value: z.unknown() }),
  z.strictObject({ t: z.literal('res'), id: z.number().int(), ok: z.literal(false), error: ControlErrorSchema }),
]);
export type ControlResponse = z.output<typeof ControlResponseSchema>;

/** A refused control request (bad arguments, an unknown op, or the controller's own refusal). */
export class ControlRequestError extends Error {
  override name = 'ControlRequestError';
}

/** One line naming the first failing field of a zod error, e.g. `lease.max: too big`. */
export function describeIssues(where: string, error: z.ZodError): string {
  const issue = error.issues[0];
  const path = issue.path.length > 0 ? `.${issue.path.join('.')}` : '';
  const more = error.issues.length > 1 ? ` (and ${error.issues.length - 1} more)` : '';
  return `${where}${path}: ${issue.message}${more}`;
}

/** The validated arguments of `op`, or a ControlRequestError naming the op and the field. */
export function parseControlArgs<K extends ControlOp>(op: K, args: unknown): ControlArgs[K] {
  const parsed = CONTROL_ARGS[op].safeParse(args);
  if (!parsed.success) throw new ControlRequestError(describeIssues(`${op} args`, parsed.error));
  return parsed.data as ControlArgs[K];
}

export function isControlOp(op: string): op is ControlOp {
  return (CONTROL_OPS as readonly string[]).includes(op);
}

/** An error as it crosses the wire: its class name and message only (no stack, no fields). */
export function controlErrorToWire(err: unknown): z.output<typeof ControlErrorSchema> {
  if (err instanceof Error) return { name: err.name, message: err.message };
  return { name: 'Error', message: String(err) };
}
