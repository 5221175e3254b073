/** Suites of `speclab train` and `speclab plan`: online EAGLE3 draft training end to end on the fixtures (also from a Hugging Face id), and resume; exports of its checkpoints; offline training from prepared shards; the numeric flags of every command. */
import type { Suite } from '../harness/suite.ts';
import trainCli from '../cli/train.test.ts';
import trainMemory from '../training/run/train-memory.test.ts';
import cli from '../cli/cli.test.ts';
import trainData from '../training/run/train-data.test.ts';
import conversationData from '../training/run/conversation-data.test.ts';
import runSettings from '../training/run/run-settings.test.ts';
import trainLog from '../training/run/train-log.test.ts';
import runLoop from '../training/run/run-loop.test.ts';
import flagValues from '../cli/flag-values.test.ts';
import clusterStatus from '../cli/status.test.ts';
import clusterRoles from '../cli/cluster-roles.test.ts';
import clusterTables from '../cli/cluster-tables.test.ts';
import gatewayCli from '../cli/gateway.test.ts';
import session from '../training/session/eagle3-session.test.ts';
import draftInsight from '../training/evaluation/draft-insight.test.ts';
import clusterSession from '../training/session/cluster-session.test.ts';
import clusterRound from '../training/session/cluster-round.test.ts';
import tabRollout from '../training/cluster/tab-rollout.test.ts';
import streamOrderLease from '../training/session/stream-order-lease.test.ts';
import offline from '../training/offline/offline-training.test.ts';
import runExport from '../training/checkpoints/run-export.test.ts';
import runPlan from '../training/run/run-plan.test.ts';
import regenerate from '../training/sequences/regenerate.test.ts';
import memoryPlan from '../training/run/memory-plan.test.ts';
import memoryPlanRoles from '../training/run/memory-plan-roles.test.ts';
import memoryPlanMoments from '../training/run/memory-plan-moments.test.ts';
import runFootprint from '../training/run/run-footprint.test.ts';
import planCli from '../cli/plan.test.ts';
import trainRun from '../training/run/train-run.test.ts';
import progressLines from '../training/run/progress-lines.test.ts';
import terminalProgress from '../platform/terminal-progress.test.ts';
import hubModel from '../platform/hf-hub-node.test.ts';

export const trainSuites: readonly Suite[] = [
  memoryPlan,
  memoryPlanRoles,
  memoryPlanMoments,
  runFootprint,
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
  trainRun,
  progressLines,
  terminalProgress,
  hubModel,
  trainMemory,
  planCli,
  trainData,
  conversationData,
  runSettings,
  trainLog,
  runLoop,
  cli,
  flagValues,
  clusterStatus,
  clusterRoles,
  clusterTables,
  gatewayCli,
  offline,
];
