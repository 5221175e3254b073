/** Suites of the kernels-loss area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import lossFixture from '../kernels/loss-fixture.test.ts';
import lossKernels from '../kernels/loss.test.ts';
import lossReduce from '../kernels/loss-reduce.test.ts';
import lossRows from '../kernels/loss-rows.test.ts';
import lossRowsWindows from '../kernels/loss-rows-windows.test.ts';
import lossSteps from '../kernels/loss-steps.test.ts';
import teacherKernels from '../kernels/teacher.test.ts';
import rowVariant from '../kernels/row-variant.test.ts';
import lossReference from '../reference/loss.test.ts';
import vocabMapping from '../model/vocab-mapping.test.ts';

export const kernels_lossSuites: readonly Suite[] = [
  lossReference,
  vocabMapping,
  rowVariant,
  lossKernels,
  lossReduce,
  teacherKernels,
  lossRows,
  lossRowsWindows,
  lossSteps,
  lossFixture,
];
