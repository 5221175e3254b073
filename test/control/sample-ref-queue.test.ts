/**
 * The in-memory SampleRefQueue against the RefQueue conformance contract (docs/control-plane.md §4,
 * as SpecForge's test_sample_ref_queue, plus lease expiry, bounded attempts, partitions and waiting
 * get), in every runtime: the same checks the Redis queue passes in redis-control-stores.test.ts, so
 * the single-process and multi-process control planes cannot drift apart.
 */
import { defineSuite } from '../harness/suite.ts';
import { SampleRefQueue } from '../../src/control/sample-ref-queue.ts';
import { refQueueConformance } from './ref-queue-conformance.ts';

export default defineSuite('control/sample-ref-queue', (t) => {
  // One process, one store: each open is a fresh, empty queue (no check opens two).
  refQueueConformance(t, 'memory queue', async () => ({ open: (options = {}) => new SampleRefQueue(options), cleanup: async () => {} }));
});
