/**
 * The RefQueue and PromptLedger conformance contracts against the in-memory stores (SampleRefQueue,
 * PromptBook), in every runtime: the same checks the Redis stores pass in
 * test/control/redis-control-stores.test.ts, so the single-process and multi-process control planes
 * cannot drift apart.
 */
import { defineSuite } from '../harness/suite.ts';
import { SampleRefQueue } from '../../src/control/sample-ref-queue.ts';
import { PromptBook } from '../../src/control/prompt-book.ts';
import { refQueueConformance } from './ref-queue-conformance.ts';
import { promptLedgerConformance } from './prompt-ledger-conformance.ts';

export default defineSuite('control/memory-control-stores', (t) => {
  // One process, one store: each open is a fresh, empty store (no check opens two).
  refQueueConformance(t, 'memory queue', async () => ({ open: (options = {}) => new SampleRefQueue(options), cleanup: async () => {} }));
  promptLedgerConformance(t, 'memory ledger', async () => ({
    open: (options) => new PromptBook({ ...options, clock: options.clock ?? (() => performance.now()) }),
    cleanup: async () => {},
  }));
});
