/** Suites of the control area (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import contractsRecords from '../contracts/records.test.ts';
import contractsNoTensors from '../contracts/no-tensors.test.ts';
import sampleRefQueue from '../control/sample-ref-queue.test.ts';
import journal from '../control/journal.test.ts';
import metadataStore from '../control/metadata-store.test.ts';
import fileMetadataStore from '../control/file-metadata-store.test.ts';
import indexedDbMetadataStore from '../control/indexeddb-metadata-store.test.ts';
import redisMetadataStore from '../control/redis-metadata-store.test.ts';
import redisControlStores from '../control/redis-control-stores.test.ts';
import flowControl from '../control/flow-control.test.ts';
import controller from '../control/controller.test.ts';
import prompts from '../control/prompts.test.ts';
import faultInjection from '../control/fault-injection.test.ts';
import promptBook from '../control/prompt-book.test.ts';
import redisRunRecord from '../control/redis-run-record.test.ts';

export const controlSuites: readonly Suite[] = [
  contractsRecords,
  contractsNoTensors,
  sampleRefQueue,
  promptBook,
  journal,
  metadataStore,
  fileMetadataStore,
  indexedDbMetadataStore,
  redisMetadataStore,
  redisControlStores,
  redisRunRecord,
  flowControl,
  controller,
  prompts,
  faultInjection,
];
