/** Every test suite, in the order runners execute them. Explicit lists: no discovery magic. */
import type { Suite } from './harness/suite.ts';
import gpuCore from './gpu/core.test.ts';
import gpuBufferPool from './gpu/buffer-pool.test.ts';
import gpuTensorViews from './gpu/tensor-views.test.ts';
import dawnWaitPacing from './platform/dawn-wait-pacing.test.ts';
import dawnBindGroupReclaim from './platform/dawn-bind-group-reclaim.test.ts';
import fileLock from './platform/file-lock.test.ts';
import matmul from './kernels/matmul.test.ts';
import matmulF16w from './kernels/matmul-f16w.test.ts';
import ceiling from './kernels/ceiling.test.ts';
import linear from './kernels/linear.test.ts';
import linearGrads from './kernels/linear-grads.test.ts';
import linearResidual from './kernels/linear-residual.test.ts';
import kernelRegistry from './kernels/registry.test.ts';
import wgslInclude from './kernels/wgsl-include.test.ts';
import shaderBundle from './kernels/shader-bundle.test.ts';
import { kernels_elementwiseSuites } from './suites/kernels-elementwise.ts';
import { kernels_attentionSuites } from './suites/kernels-attention.ts';
import { kernels_lossSuites } from './suites/kernels-loss.ts';
import { controlSuites } from './suites/control.ts';
import { dataSuites } from './suites/data.ts';
import { modelSuites } from './suites/model.ts';
import { runtimeSuites } from './suites/runtime.ts';
import { dataplaneSuites } from './suites/dataplane.ts';
import { targetSuites } from './suites/target.ts';
import { eagle3Suites } from './suites/eagle3.ts';
import { corpusSuites } from './suites/corpus.ts';
import { speculativeSuites } from './suites/speculative.ts';
import { checkpointSuites } from './suites/checkpoint.ts';
import { pretrainSuites } from './suites/pretrain.ts';
import { trainSuites } from './suites/train.ts';
import sealedJson from './util/sealed-json.test.ts';
import stableHash from './util/stable-hash.test.ts';
import formatUtil from './util/format.test.ts';
import bytesUtil from './util/bytes.test.ts';
import statisticsUtil from './util/statistics.test.ts';
import portsStorage from './ports/storage.test.ts';
import portsReadBudget from './ports/read-budget.test.ts';
import nonFiniteGuard from './training/loop/nonfinite-guard.test.ts';
import adamwBackend from './optim/adamw-backend.test.ts';
import parameterArena from './optim/parameter-arena.test.ts';
import metricsRecord from './contracts/metrics-record.test.ts';
import labMetrics from './web/lab/metrics.test.ts';
import labRunMetrics from './web/lab/run-metrics.test.ts';
import labSettingsForm from './web/lab/settings-form.test.ts';
import labProgress from './web/lab/progress-view.test.ts';
import labSavedRun from './web/lab/saved-run.test.ts';
import labMemoryPlanView from './web/lab/memory-plan-view.test.ts';

export const suites: readonly Suite[] = [
  gpuCore,
  gpuBufferPool,
  gpuTensorViews,
  dawnWaitPacing,
  dawnBindGroupReclaim,
  fileLock,
  matmul,
  matmulF16w,
  ceiling,
  linear,
  linearGrads,
  linearResidual,
  kernelRegistry,
  wgslInclude,
  shaderBundle,
  ...kernels_elementwiseSuites,
  ...kernels_attentionSuites,
  ...kernels_lossSuites,
  ...controlSuites,
  ...dataSuites,
  ...modelSuites,
  ...runtimeSuites,
  ...dataplaneSuites,
  ...targetSuites,
  ...eagle3Suites,
  ...corpusSuites,
  ...speculativeSuites,
  ...checkpointSuites,
  ...pretrainSuites,
  ...trainSuites,
  sealedJson,
  stableHash,
  formatUtil,
  bytesUtil,
  statisticsUtil,
  portsStorage,
  portsReadBudget,
  nonFiniteGuard,
  adamwBackend,
  parameterArena,
  metricsRecord,
  labMetrics,
  labRunMetrics,
  labSettingsForm,
  labProgress,
  labSavedRun,
  labMemoryPlanView,
];
