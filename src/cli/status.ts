/**
 * `speclab status --cluster redis://… --run NAME`: the controller's status of a run whose control
 * plane is in Redis, read by a passive controller of its own over the run's shared stores (it
 * registers nothing and changes nothing), plus whether the server is durable.
 */
import { DataFlowController, type ControllerStatus } from '../control/controller.ts';
import { checkRedisDurability } from '../control/redis/redis-durability.ts';
import { openRedisControlStores } from '../control/redis/redis-control-stores.ts';
import type { StatusArgs } from './cluster-options.ts';
import type { Platform } from './platform.ts';

export interface ClusterStatus extends ControllerStatus {
  cluster: string;
  /** appendonly yes and appendfsync always: an ack is on disk when Redis answers. */
  durable: boolean;
  appendfsync: string;
}

export async function readClusterStatus(platform: Platform, args: StatusArgs): Promise<ClusterStatus> {
  if (!platform.connectRedis) throw new Error(`status: this runtime (${platform.name}) cannot open sockets to Redis; run it with Node`);
  const link = await platform.connectRedis(args.cluster);
  try {
    const durability = await checkRedisDurability(link, { require: false, where: 'status', url: args.cluster });
    // Read-only: the durability check is reported, not enforced.
    const stores = await openRedisControlStores(link, args.run, { requireDurable: false, url: args.cluster });
    const status = await DataFlowController.over(args.run, stores).status();
    return { ...status, cluster: args.cluster, durable: durability.durable, appendfsync: durability.appendfsync };
  } finally {
    await link.close();
  }
}

export function formatClusterStatus(s: ClusterStatus): string[] {
  const step = s.durableGlobalStep === null ? 'none' : String(s.durableGlobalStep);
  return [
    `run ${s.runId} on ${s.cluster} (Redis ${s.durable ? 'durable: appendfsync always' : `NOT durable: appendfsync ${s.appendfsync}`})`,
    `prompts: ${s.promptsPending} pending, ${s.promptsLeased} leased, ${s.promptsCompleted} done, ${s.promptsFailed} failed`,
    `samples: ${s.samplesCommitted} committed, ${s.queueDepth} queued, ${s.queueInFlight} leased by trainers, ${s.durableAcked} durably acked, ${s.queueTerminal} failed`,
    `backlog: ${s.trainBacklog} committed but not acked`,
    `members: ${s.rolloutWorkers} rollout workers, ${s.trainers} trainers`,
    `durable ack: step ${step}${s.optimizerDurable ? ' (optimizer state durable)' : ''}`,
  ];
}

export async function runStatus(platform: Platform, args: StatusArgs, print: (line: string) => void): Promise<number> {
  const status = await readClusterStatus(platform, args);
  if (args.format === 'json') print(JSON.stringify(status));
  else for (const line of formatClusterStatus(status)) print(line);
  return 0;
}
