/**
 * The one capability SpecLab's Redis backends need from a Redis client: run a Lua script
 * atomically. The data plane (src/dataplane/redis-backend.ts) and the control plane
 * (src/control/redis/) are written against it; the socket client lives behind the platform
 * boundary (src/platform/redis-node.ts) and is injected.
 */
export type RedisArg = string | number | Uint8Array;
/** Bulk strings arrive as bytes; Lua numbers as integers; Lua tables as arrays. */
export type RedisReply = null | number | Uint8Array | RedisReply[];

export interface RedisLink {
  /** Run `script` atomically (EVALSHA, falling back to EVAL when the server lacks it). */
  evalScript(script: string, keys: readonly string[], args: readonly RedisArg[]): Promise<RedisReply>;
  /**
   * Run one plain command, e.g. call('CONFIG', ['GET', 'appendfsync']). Only for what scripts may
   * not do (Redis refuses CONFIG inside EVAL); state changes belong in scripts. Optional: a link
   * without it cannot have its server's durability checked.
   */
  call?(command: string, args: readonly RedisArg[]): Promise<RedisReply>;
  close(): Promise<void>;
}
