/** Suites of `speclab train`: online EAGLE3 draft training end to end on the fixtures, and resume; exports of its checkpoints; offline training from prepared shards; the numeric flags of every command. */
import type { Suite } from '../harness/suite.ts';
import trainCli from '../cli/train.test.ts';
import trainMemory from '../cli/train-memory.test.ts';
import cli from '../cli/cli.test.ts';
import trainData from '../cli/train-data.test.ts';
import runSettings from '../cli/run-settings.test.ts';
import trainLog from '../cli/train-log.test.ts';
import flagValues from '../cli/flag-values.test.ts';
import clusterStatus from '../cli/status.test.ts';
import clusterRoles from '../cli/cluster-roles.test.ts';
import gatewayCli from '../cli/gateway.test.ts';
import session from '../training/eagle3-session.test.ts';
import draftInsight from '../training/draft-insight.test.ts';
import clusterSession from '../training/cluster-session.test.ts';
import clusterRound from '../training/cluster-round.test.ts';
import tabRollout from '../training/tab-rollout.test.ts';
import streamOrderLease from '../training/stream-order-lease.test.ts';
import offline from '../training/offline-training.test.ts';
import runExport from '../training/run-export.test.ts';
import runPlan from '../training/run-plan.test.ts';
import regenerate from '../training/regenerate.test.ts';
import memoryPlan from '../training/memory-plan.test.ts';

export const trainSuites: readonly Suite[] = [
  memoryPlan,
  runPlan,
  regenerate,
  session,
  draftInsight,
  clusterRound,
  streamOrderLease,
  clusterSession,
  tabRollout,
  runExport,
  trainCli,
  trainMemory,
  trainData,
  runSettings,
  trainLog,
  cli,
  flagValues,
  clusterStatus,
  clusterRoles,
  gatewayCli,
  offline,
];
