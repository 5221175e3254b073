/**
 * Reclaiming the native memory of dropped bind groups (Node, Dawn).
 *
 * Why: WebGPU has no way to free a bind group. Its native memory goes back when its JS wrapper is
 * garbage-collected, or when its device is destroyed; V8 schedules collections by the JS heap, which
 * does not see that memory. On a CPU adapter (lavapipe) every live descriptor set is its own memory
 * mapping (a 4 KiB memfd page), and a process may hold vm.max_map_count of them (65,530 by default):
 * past that, the driver's next mapping fails and it writes through a null pointer (SIGSEGV in
 * vkCreateDescriptorPool under createBindGroup). The Node test suite, which binds thousands of
 * buffers in hundreds of tests on one device, reached 65,532 mappings in a run where the GPU waits
 * slept instead of spinning: a spinning wait makes a new native function per event-loop turn, and
 * that garbage is what had been driving collections often enough.
 *
 * What: `BindGroupReclaimer` counts the bind groups the process creates and, every `every` of them,
 * runs a full collection, so at most that many dropped bind groups wait for one.
 */

/** Bind groups between two collections: a bound on the mappings dropped groups hold, and rare in a training run (which reuses its groups). */
export const RECLAIM_EVERY_BIND_GROUPS = 2048;

export class BindGroupReclaimer {
  private sinceCollection = 0;
  /** Collections run so far (for tests and diagnostics). */
  collections = 0;

  constructor(
    private readonly collect: () => void,
    private readonly every = RECLAIM_EVERY_BIND_GROUPS,
  ) {
    if (!Number.isInteger(every) || every < 1) throw new Error(`BindGroupReclaimer: every must be a positive integer, got ${every}`);
  }

  /** One bind group was created; collect when `every` have been since the last collection. */
  created(): void {
    if (++this.sinceCollection < this.every) return;
    this.sinceCollection = 0;
    this.collections++;
    this.collect();
  }
}
