/** Suites of the EAGLE3 draft area: float64 reference, GPU model, training strategy, held-out evaluation and SpecForge's metric keys (listed explicitly). */
import type { Suite } from '../harness/suite.ts';
import referenceEagle3 from '../reference/eagle3.test.ts';
import modelEagle3 from '../model/eagle3.test.ts';
import modelEagle3Split from '../model/eagle3-split.test.ts';
import modelEagle3StepBody from '../model/eagle3-step-body.test.ts';
import modelEagle3RowChunks from '../model/eagle3-row-chunks.test.ts';
import modelEagle3HeadsBatched from '../model/eagle3-heads-batched.test.ts';
import modelEagle3ServingLayers from '../model/eagle3-serving-layers.test.ts';
import eagle3Strategy from '../training/strategies/eagle3-strategy.test.ts';
import featurePrecision from '../training/loop/feature-precision.test.ts';
import heldOutEval from '../training/evaluation/held-out-eval.test.ts';
import metricKeys from '../training/evaluation/metric-keys.test.ts';

export const eagle3Suites: readonly Suite[] = [
  referenceEagle3,
  modelEagle3,
  modelEagle3Split,
  modelEagle3StepBody,
  modelEagle3RowChunks,
  modelEagle3HeadsBatched,
  modelEagle3ServingLayers,
  eagle3Strategy,
  featurePrecision,
  heldOutEval,
  metricKeys,
];
