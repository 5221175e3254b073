/**
 * Compute pipelines cached by (kernel, specialization constants), with one explicit bind-group
 * layout per kernel (never `layout: 'auto'`, whose layouts cannot be shared), and a bind-group
 * cache keyed by the bound buffer ranges.
 */
import type { GpuContext } from './context.ts';
import type { KernelDef } from './kernel-def.ts';
import { GpuError } from './errors.ts';

export type Constants = Readonly<Record<string, number | boolean>>;

export interface CompiledKernel {
  readonly def: KernelDef;
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
}

let nextBufferId = 1;
const bufferIds = new WeakMap<GPUBuffer, number>();
function bufferId(buffer: GPUBuffer): number {
  let id = bufferIds.get(buffer);
  if (id === undefined) bufferIds.set(buffer, (id = nextBufferId++));
  return id;
}

/** Storage buffers a kernel binds in its one stage (every binding but the uniform). */
export function storageBindings(def: KernelDef): number {
  return def.bindings.filter((kind) => kind !== 'uniform').length;
}

/**
 * Why `def` cannot be bound on a device with these limits (more storage buffers than one stage may
 * bind), or undefined where it can. PipelineCache refuses such a kernel with this reason; a caller
 * choosing between a kernel and a fallback asks it first.
 */
export function storageLimitUnfit(def: KernelDef, limits: { maxStorageBuffersPerShaderStage?: number }): string | undefined {
  const storage = storageBindings(def);
  const allowed = limits.maxStorageBuffersPerShaderStage ?? 8;
  return storage > allowed
    ? `kernel ${def.name} binds ${storage} storage buffers, and this device allows ${allowed} per shader stage`
    : undefined;
}

export class PipelineCache {
  private readonly pipelines = new Map<string, Promise<CompiledKernel>>();
  private readonly layouts = new Map<string, GPUBindGroupLayout>();
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private static readonly MAX_BIND_GROUPS = 8192;

  /** Pipelines compiled so far. */
  compiled = 0;
  /** Called after each compilation with the count so far (a run shows the first step's compiling as progress). */
  onCompiled: ((count: number, name: string) => void) | undefined;

  constructor(private readonly ctx: GpuContext) {}

  get size(): number {
    return this.pipelines.size;
  }

  /** Bind groups the cache holds now. */
  get bindGroupCount(): number {
    return this.bindGroups.size;
  }

  private layoutFor(def: KernelDef): GPUBindGroupLayout {
    let layout = this.layouts.get(def.name);
    if (!layout) {
      layout = this.ctx.device.createBindGroupLayout({
        label: def.name,
        entries: def.bindings.map((kind, binding) => ({
          binding,
          visibility: 0x4 /* GPUShaderStage.COMPUTE */,
          buffer:
            kind === 'uniform'
              ? { type: 'uniform' as const, hasDynamicOffset: true }
              : { type: kind === 'read' ? ('read-only-storage' as const) : ('storage' as const) },
        })),
      });
      this.layouts.set(def.name, layout);
    }
    return layout;
  }

  /** Compile (once) and return the pipeline for `def` specialised by `constants`. */
  get(def: KernelDef, constants: Constants = {}): Promise<CompiledKernel> {
    const key = `${def.name}|${JSON.stringify(constants)}`;
    let entry = this.pipelines.get(key);
    if (!entry) {
      for (const feature of def.requires ?? []) {
        if (!this.ctx.hasFeature(feature)) {
          return Promise.reject(new GpuError(`kernel ${def.name} needs the WebGPU feature "${feature}", which this device lacks`));
        }
      }
      const unbindable = storageLimitUnfit(def, this.ctx.limits);
      if (unbindable) return Promise.reject(new GpuError(unbindable));
      entry = this.compile(def, constants, key);
      this.pipelines.set(key, entry);
      entry.catch(() => this.pipelines.delete(key));
    }
    return entry;
  }

  private async compile(def: KernelDef, constants: Constants, key: string): Promise<CompiledKernel> {
    const layout = this.layoutFor(def);
    const pipeline = await this.ctx.guard(`pipeline ${key}`, () => {
      const module = this.ctx.device.createShaderModule({ label: def.name, code: def.source });
      const numeric: Record<string, number> = {};
      for (const [k, v] of Object.entries(constants)) numeric[k] = typeof v === 'boolean' ? Number(v) : v;
      return this.ctx.device.createComputePipelineAsync({
        label: key,
        layout: this.ctx.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module, entryPoint: def.entryPoint ?? 'main', constants: numeric },
      });
    });
    this.compiled++;
    this.onCompiled?.(this.compiled, def.name);
    return { def, pipeline, layout };
  }

  /** A bind group for these buffer ranges, reused while the same ranges are bound again. */
  bindGroup(kernel: CompiledKernel, resources: readonly GPUBufferBinding[]): GPUBindGroup {
    if (resources.length !== kernel.def.bindings.length) {
      throw new Error(`kernel ${kernel.def.name} has ${kernel.def.bindings.length} bindings, got ${resources.length} resources`);
    }
    let key = kernel.def.name;
    for (const r of resources) key += `|${bufferId(r.buffer)}:${r.offset ?? 0}:${r.size ?? -1}`;
    let group = this.bindGroups.get(key);
    if (!group) {
      if (this.bindGroups.size >= PipelineCache.MAX_BIND_GROUPS) this.bindGroups.clear();
      group = this.ctx.device.createBindGroup({
        label: kernel.def.name,
        layout: kernel.layout,
        entries: resources.map((resource, binding) => ({ binding, resource })),
      });
      this.ctx.bindGroupCreated();
      this.bindGroups.set(key, group);
    }
    return group;
  }

  /** Forget cached bind groups (call after destroying buffers they may reference). */
  clearBindGroups(): void {
    this.bindGroups.clear();
  }
}
