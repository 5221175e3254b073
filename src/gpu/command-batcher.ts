/**
 * Command batching: many dispatches are encoded into one compute pass and submitted rarely.
 *
 * Per-dispatch CPU overhead (tens of microseconds on Vulkan) dominates small models, so the batcher
 * keeps one encoder and one open compute pass, switches to a copy only when asked, and submits when
 * `flush()` is called, when `maxDispatchesPerSubmit` is reached, or when the uniform arena is full.
 * While the device has nothing left to run (the host has seen it finish: `finish()`, or a readback of
 * the last submit), the batch goes as soon as it holds `idleSubmitDispatches`: the device starts on
 * the first kernels of a step while the host encodes the rest, instead of idling until 64 are encoded.
 * Each submit runs inside validation/out-of-memory scopes; their outcome is checked by `settled()`
 * (which readbacks await), so a bad dispatch surfaces as a typed error, never as silent zeros.
 */
import type { GpuContext } from './context.ts';
import { toTypedError, type GpuError } from './errors.ts';
import type { CompiledKernel, PipelineCache } from './pipeline-cache.ts';
import { UniformArena } from './uniform-arena.ts';

/** Dispatches per submit while the device is busy (or idle, without the idle rule). */
export const MAX_DISPATCHES_PER_SUBMIT = 64;

/**
 * Dispatches after which a batch is submitted while the device is idle. A fixture-sized EAGLE3 step
 * encoded its 116 dispatches (108 since) in about 4 ms, so at 64 the device waited for more than half of them; at
 * 16 the step measured a few percent faster at most, within its spread (bench/RESULTS.md, "Starting
 * an idle device sooner; two copies fewer per TTT step").
 */
export const IDLE_SUBMIT_DISPATCHES = 16;

export interface DispatchStats {
  dispatches: number;
  submits: number;
  copies: number;
}

export class CommandBatcher {
  private encoder: GPUCommandEncoder | undefined;
  private pass: GPUComputePassEncoder | undefined;
  private pending = 0;
  private readonly arena: UniformArena;
  private readonly scopeResults: Promise<GpuError | undefined>[] = [];
  private readonly afterSubmit: (() => void)[] = [];
  readonly stats: DispatchStats = { dispatches: 0, submits: 0, copies: 0 };

  /** True while every submitted batch is known to have finished (nothing submitted yet, or seen done). */
  private deviceIdle = true;

  constructor(
    private readonly ctx: GpuContext,
    private readonly pipelines: PipelineCache,
    readonly maxDispatchesPerSubmit = MAX_DISPATCHES_PER_SUBMIT,
    readonly idleSubmitDispatches = Math.min(IDLE_SUBMIT_DISPATCHES, maxDispatchesPerSubmit),
  ) {
    if (!(Number.isInteger(maxDispatchesPerSubmit) && maxDispatchesPerSubmit >= 1))
      throw new Error(`CommandBatcher: maxDispatchesPerSubmit must be a positive integer, got ${maxDispatchesPerSubmit}`);
    if (!(Number.isInteger(idleSubmitDispatches) && idleSubmitDispatches >= 1 && idleSubmitDispatches <= maxDispatchesPerSubmit))
      throw new Error(
        `CommandBatcher: idleSubmitDispatches must be an integer in [1, ${maxDispatchesPerSubmit}], got ${idleSubmitDispatches}`,
      );
    this.arena = new UniformArena(ctx.device);
  }

  /**
   * The host has seen submit number `submit` (a value of stats.submits read after it) finish on the
   * device: if nothing was submitted since, the device is idle and the next batch goes early.
   */
  noteFinished(submit: number): void {
    if (submit === this.stats.submits) this.deviceIdle = true;
  }

  /**
   * Batch up to maxDispatchesPerSubmit from now on, as if the device were busy, until the host next
   * sees it finish. A timed region (GpuTimer) calls this after its own finish(): split at
   * idleSubmitDispatches, the host's encoding of the region's later dispatches would fall between its
   * timestamps.
   */
  fillBatches(): void {
    this.deviceIdle = false;
  }

  /** Bytes of the uniform arena's buffer (created with the batcher, destroyed with it). */
  get uniformBytes(): number {
    return this.arena.buffer.size;
  }

  private ensureEncoder(): GPUCommandEncoder {
    this.encoder ??= this.ctx.device.createCommandEncoder({ label: 'speclab-batch' });
    return this.encoder;
  }

  private ensurePass(): GPUComputePassEncoder {
    if (!this.pass) {
      this.pass = this.ensureEncoder().beginComputePass();
    }
    return this.pass;
  }

  /** End the open compute pass (if any) so copies or timestamped passes can follow. */
  endPass(): void {
    this.pass?.end();
    this.pass = undefined;
  }

  /**
   * Encode one dispatch. `uniforms` goes to the arena; `resources` are the storage bindings after
   * the uniform binding (kernel bindings[0] must be 'uniform' when uniforms are given).
   */
  dispatch(
    kernel: CompiledKernel,
    uniforms: ArrayBufferView | undefined,
    resources: readonly GPUBufferBinding[],
    workgroups: readonly [number, number?, number?],
  ): void {
    this.ctx.throwIfFailed();
    const limit = this.deviceIdle ? this.idleSubmitDispatches : this.maxDispatchesPerSubmit;
    if (this.arena.isFull || this.pending >= limit) this.flush();
    const [x, y = 1, z = 1] = workgroups;
    const maxPerDim = this.ctx.limits.maxComputeWorkgroupsPerDimension ?? 65535;
    if (x > maxPerDim || y > maxPerDim || z > maxPerDim) {
      throw new Error(`${kernel.def.name}: dispatch [${x}, ${y}, ${z}] exceeds ${maxPerDim} workgroups per dimension`);
    }
    if (x === 0 || y === 0 || z === 0) return;
    const bindings: GPUBufferBinding[] = [];
    const dynamicOffsets: number[] = [];
    if (uniforms) {
      dynamicOffsets.push(this.arena.push(uniforms));
      bindings.push({ buffer: this.arena.buffer, offset: 0, size: 256 });
    }
    bindings.push(...resources);
    const group = this.pipelines.bindGroup(kernel, bindings);
    const pass = this.ensurePass();
    pass.setPipeline(kernel.pipeline);
    pass.setBindGroup(0, group, dynamicOffsets);
    pass.dispatchWorkgroups(x, y, z);
    this.pending++;
    this.stats.dispatches++;
  }

  copyBuffer(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    this.endPass();
    this.ensureEncoder().copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
    this.stats.copies++;
  }

  clearBuffer(buffer: GPUBuffer, offset = 0, size?: number): void {
    this.endPass();
    this.ensureEncoder().clearBuffer(buffer, offset, size);
  }

  /** Direct access to the encoder for commands the batcher does not wrap (query resolves). */
  rawEncoder(): GPUCommandEncoder {
    this.endPass();
    return this.ensureEncoder();
  }

  private flushScheduled = false;

  /**
   * Submit at the next idle turn of the event loop unless something submits sooner. Readbacks call
   * this so a pending read always resolves, while a loop that keeps encoding (awaiting only
   * microtasks) still batches everything it encodes in the meantime.
   */
  flushSoon(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setTimeout(() => {
      this.flushScheduled = false;
      if (!this.destroyed && !this.ctx.isDestroyed) this.flush();
    }, 0);
  }

  /** Run `fn` once the current batch has been submitted (used by readbacks to map after submit). */
  onSubmit(fn: () => void): void {
    this.afterSubmit.push(fn);
  }

  get hasPendingWork(): boolean {
    return this.encoder !== undefined;
  }

  /** Submit everything encoded so far. Cheap when nothing is pending. */
  flush(): void {
    if (this.destroyed) throw new Error('CommandBatcher used after Gpu.destroy()');
    if (!this.encoder) {
      this.runAfterSubmit();
      return;
    }
    this.endPass();
    const device = this.ctx.device;
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');
    this.arena.upload(device.queue);
    device.queue.submit([this.encoder.finish()]);
    const validation = device.popErrorScope();
    const oom = device.popErrorScope();
    this.scopeResults.push(
      // Resolve (never reject) so an error nobody awaits yet is not an unhandled rejection;
      // settled() turns it into a throw for the caller that reads results.
      Promise.all([validation, oom]).then(([v, o]) => {
        const error = v ?? o;
        return error ? toTypedError(error, 'submitted batch') : undefined;
      }),
    );
    this.encoder = undefined;
    this.pending = 0;
    this.stats.submits++;
    this.deviceIdle = false;
    this.runAfterSubmit();
  }

  private runAfterSubmit(): void {
    const callbacks = this.afterSubmit.splice(0);
    for (const fn of callbacks) fn();
  }

  /** Resolves when every submitted batch's error scopes are known; rejects with the first error. */
  async settled(): Promise<void> {
    const results = await Promise.all(this.scopeResults.splice(0));
    const first = results.find((e) => e !== undefined);
    if (first) throw first;
    this.ctx.throwIfFailed();
  }

  /** Flush and wait until the GPU has finished all submitted work. */
  async finish(): Promise<void> {
    this.flush();
    const submit = this.stats.submits;
    await this.ctx.device.queue.onSubmittedWorkDone();
    this.noteFinished(submit);
    await this.settled();
  }

  private destroyed = false;

  /** Submit what is pending, then free the arena; later flushes are no-ops. */
  destroy(): void {
    if (this.destroyed) return;
    if (!this.ctx.isDestroyed) this.flush();
    this.destroyed = true;
    this.arena.destroy();
  }
}
