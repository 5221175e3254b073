/** The experience data plane: contract, meta value type, sharding, adapters and metrics. */
export * from './types.ts';
export { KVBatchMeta, SEQ_LEN_TAG, validateTagValue, validateTagRecord, lengthsFromTags } from './meta.ts';
export type { TagValue, JsonValue, KVBatchMetaInit, KVBatchMetaRecord } from './meta.ts';
export { shardContiguous, shardLengthBalanced, shardBinPacked, shardTokenTotals } from './sharding.ts';
export type { ShardPlan, BinPackOptions } from './sharding.ts';
export { DataPlaneConfigSchema, parseDataPlaneConfig } from './config.ts';
export type { DataPlaneConfig } from './config.ts';
export { createDataPlaneClient } from './factory.ts';
export type { DataPlaneDeps } from './factory.ts';
export { StoreClient } from './client.ts';
export type { Backend } from './client.ts';
export { LocalBackend } from './local-backend.ts';
export { HostColumnStore, GpuColumnStore, PassthroughColumnStore, isTensor, rowBytes, checkRow, toHostRow } from './column-store.ts';
export type { ColumnStore } from './column-store.ts';
export { RedisBackend } from './redis-backend.ts';
export type { RedisLink, RedisArg, RedisReply } from './redis-backend.ts';
export { MetricsDataPlaneClient, columnBytes } from './observability.ts';
export type { DataPlaneEvent, DataPlaneTotals, Backpressure, DataPlaneOp } from './observability.ts';
