/** Suites of the kernels-elementwise area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import cast from '../kernels/cast.test.ts';
import embedding from '../kernels/embedding.test.ts';
import optim from '../kernels/optim.test.ts';
import rmsnorm from '../kernels/rmsnorm.test.ts';
import rmsnormGather from '../kernels/rmsnorm-gather.test.ts';
import rmsnormPair from '../kernels/rmsnorm-pair.test.ts';
import ropeQkv from '../kernels/rope-qkv.test.ts';
import swiglu from '../kernels/swiglu.test.ts';
import swigluDownGrads from '../kernels/swiglu-down-grads.test.ts';
import linearSwiglu from '../kernels/linear-swiglu.test.ts';
import embeddingRef from '../reference/embedding.test.ts';
import optimRef from '../reference/optim.test.ts';
import rmsnormRef from '../reference/rmsnorm.test.ts';
import ropeRef from '../reference/rope.test.ts';
import swigluRef from '../reference/swiglu.test.ts';
import swigluDownRef from '../reference/swiglu-down.test.ts';

export const kernels_elementwiseSuites: readonly Suite[] = [
  embeddingRef,
  rmsnormRef,
  ropeRef,
  swigluRef,
  swigluDownRef,
  optimRef,
  embedding,
  rmsnorm,
  rmsnormGather,
  rmsnormPair,
  ropeQkv,
  swiglu,
  swigluDownGrads,
  linearSwiglu,
  optim,
  cast,
];
