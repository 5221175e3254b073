/**
 * What a data-plane gateway token may do. A token carries one or more scopes, and every request is
 * checked against them before it reaches the store:
 *
 *   rollout   register (a new partition only: `createOnly` is forced, `replace` refused), put, and
 *             clear of samples its own connection put (a worker dropping a failed commit's sample)
 *   trainer   register (replace too), claim, ack, release, getData, consumed, get, clear, stats
 *   observer  stats
 *
 * So a rollout tab can add features but never read, clear or redeclare the trainer's partition, and
 * a dashboard can watch a partition without touching it. A gateway started with one plain token
 * grants every scope (the behaviour before scopes existed). Runtime-neutral: the Node server
 * (src/platform/dataplane-gateway-node.ts) matches the token and asks this module per request.
 */
import { GATEWAY_OPS, TOKEN_PATTERN, type GatewayOp } from './gateway-protocol.ts';
import { checkName } from './names.ts';
import { DataPlaneError, listIds } from './types.ts';

export type GatewayScope = 'rollout' | 'trainer' | 'observer';
export const GATEWAY_SCOPES: readonly GatewayScope[] = Object.freeze(['rollout', 'trainer', 'observer'] as GatewayScope[]);

export const SCOPE_OPS: Readonly<Record<GatewayScope, readonly GatewayOp[]>> = Object.freeze({
  rollout: Object.freeze(['register', 'put'] as GatewayOp[]),
  trainer: Object.freeze(['register', 'claim', 'ack', 'release', 'getData', 'consumed', 'get', 'clear', 'stats'] as GatewayOp[]),
  observer: Object.freeze(['stats'] as GatewayOp[]),
});

/** One token the gateway accepts and the scopes it grants. */
export interface GatewayGrant {
  readonly token: string;
  readonly scopes: readonly GatewayScope[];
}

/** Tokens per scope; a gateway may also take one `token` for every scope. */
export type ScopedTokens = Readonly<Partial<Record<GatewayScope, string>>>;

/**
 * The grants of a gateway's configuration: `token` grants every scope, each of `scoped` its own.
 * Refuses, naming the scope, a malformed token, an unknown scope, one token reused for two grants,
 * and a configuration without any token.
 */
export function gatewayGrants(token: string | undefined, scoped: ScopedTokens | undefined): GatewayGrant[] {
  const grants: GatewayGrant[] = [];
  const add = (value: unknown, scopes: readonly GatewayScope[], what: string): void => {
    if (typeof value !== 'string' || !TOKEN_PATTERN.test(value))
      throw new DataPlaneError('invalid_argument', `${what} must be 16..256 characters of [A-Za-z0-9_-] (use newGatewayToken())`);
    const same = grants.find((g) => g.token === value);
    if (same)
      throw new DataPlaneError(
        'invalid_argument',
        `${what} is the same as the ${same.scopes.join('+')} token; give each scope its own token, or one token for all`,
      );
    grants.push({ token: value, scopes });
  };
  if (token !== undefined) add(token, GATEWAY_SCOPES, 'gateway token');
  if (scoped !== undefined) {
    if (scoped === null || typeof scoped !== 'object')
      throw new DataPlaneError('invalid_argument', 'scoped gateway tokens must be an object');
    for (const [scope, value] of Object.entries(scoped)) {
      if (!isGatewayScope(scope))
        throw new DataPlaneError(
          'invalid_argument',
          `unknown gateway scope ${JSON.stringify(scope)}; expected ${GATEWAY_SCOPES.join(', ')}`,
        );
      if (value !== undefined) add(value, [scope], `the ${scope} gateway token`);
    }
  }
  if (grants.length === 0)
    throw new DataPlaneError('invalid_argument', `a gateway needs a token, or one per scope (${GATEWAY_SCOPES.join(', ')})`);
  return grants;
}

export function isGatewayScope(value: unknown): value is GatewayScope {
  return typeof value === 'string' && Object.hasOwn(SCOPE_OPS, value);
}

/**
 * Checks one request against the connection's scopes and returns the arguments to run it with (a
 * rollout-only register comes back with `createOnly: true`). Refuses with `forbidden`, naming the
 * operation, the scopes that allow it and the ones granted; a malformed partition name with
 * `invalid_argument`. Unknown ops and non-object arguments pass through for the router to refuse.
 */
export function authorizeRequest(
  scopes: readonly GatewayScope[],
  op: string,
  args: unknown,
  /** Whether this connection put (partition, id) itself: a rollout may clear those, and only those. */
  putHere: (partition: string, id: string) => boolean = () => false,
): unknown {
  if (!(GATEWAY_OPS as readonly string[]).includes(op)) return args;
  const gatewayOp = op as GatewayOp;
  const granted = scopes.filter((s) => SCOPE_OPS[s].includes(gatewayOp));
  if (granted.length === 0 && op === 'clear' && scopes.includes('rollout')) return ownClear(scopes, args, putHere);
  if (granted.length === 0) {
    const needed = GATEWAY_SCOPES.filter((s) => SCOPE_OPS[s].includes(gatewayOp));
    throw new DataPlaneError(
      'forbidden',
      `gateway op "${op}" needs the ${needed.join(' or ')} scope; this connection's token grants ${scopes.join(', ') || 'none'}`,
    );
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return args;
  const a = args as Record<string, unknown>;
  const meta = a.meta as { partition?: unknown } | null | undefined;
  if ('partition' in a) checkName(a.partition, `gateway ${op} partition`);
  else if (meta !== null && typeof meta === 'object') checkName(meta.partition, `gateway ${op} meta.partition`);
  if (op === 'register' && !granted.includes('trainer')) {
    if (a.replace === true)
      throw new DataPlaneError(
        'forbidden',
        `gateway op "register" with replace wipes partition ${JSON.stringify(a.partition)}: that needs the trainer scope; this connection's token grants ${scopes.join(', ')}`,
      );
    // A producer may declare a partition of its own, never redeclare one that exists (even empty).
    return { ...a, createOnly: true };
  }
  return args;
}

/**
 * A rollout's clear: allowed for an explicit id list that this connection put itself (a worker
 * dropping the sample of a failed commit), never for `{ all: true }` or anyone else's sample.
 */
function ownClear(scopes: readonly GatewayScope[], args: unknown, putHere: (partition: string, id: string) => boolean): unknown {
  const a = (args ?? {}) as { partition?: unknown; target?: unknown };
  const partition = checkName(a.partition, 'gateway clear partition');
  const ids = Array.isArray(a.target) ? (a.target as unknown[]) : null;
  const foreign = ids === null ? null : ids.filter((id) => typeof id !== 'string' || !putHere(partition, id));
  if (foreign === null || foreign.length > 0) {
    const what = foreign === null ? 'every sample' : `${foreign.length} sample(s) it did not put (${listIds(foreign.map(String))})`;
    throw new DataPlaneError(
      'forbidden',
      `gateway op "clear" of ${what} in partition ${JSON.stringify(partition)} needs the trainer scope; a rollout token clears only samples its own connection put (this connection's token grants ${scopes.join(', ')})`,
    );
  }
  return args;
}

/**
 * The samples one gateway connection put, so its rollout token may clear them again. Bounded: the
 * oldest are forgotten first (a worker clears the sample of a failed commit right after its put).
 */
export class SamplesPutHere {
  private readonly keys = new Set<string>();
  constructor(private readonly limit = 65_536) {}

  has(partition: string, id: string): boolean {
    return this.keys.has(key(partition, id));
  }

  /** Called after a request succeeded: a put adds its ids, a clear forgets them. */
  record(op: string, args: unknown): void {
    if (op !== 'put' && op !== 'clear') return;
    const a = args as { partition?: unknown; sampleIds?: unknown; target?: unknown };
    const ids = op === 'put' ? a.sampleIds : a.target;
    if (typeof a.partition !== 'string' || !Array.isArray(ids)) return;
    for (const id of ids) {
      if (typeof id !== 'string') continue;
      const k = key(a.partition, id);
      if (op === 'clear') this.keys.delete(k);
      else {
        this.keys.add(k);
        if (this.keys.size > this.limit) this.keys.delete(this.keys.values().next().value as string);
      }
    }
  }
}

function key(partition: string, id: string): string {
  return `${partition}\u0000${id}`;
}
