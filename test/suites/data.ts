/** Suites of the data plane (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import featurePrecision from '../data/feature-precision.test.ts';
import featureStore from '../data/feature-store.test.ts';
import loader from '../data/loader.test.ts';

export const dataSuites: readonly Suite[] = [featureStore, loader, featurePrecision];
