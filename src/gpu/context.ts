/**
 * GpuContext: one adapter + device with its facts (features, limits) and its error plumbing.
 *
 * Platforms create it through `openGpuContext`, passing the object that owns the native instance
 * (`keepAlive`). The context holds that object for as long as the device lives: on Node the Dawn
 * binding crashes (futex error / SIGSEGV in its event pump) when the `create()` result is garbage-
 * collected while a device from it is still in use, and neither the adapter nor the device keeps
 * it reachable. Hold the context, not just the device.
 */
import { GpuDeviceLostError, GpuError, GpuUnavailableError, toTypedError } from './errors.ts';
import type { RuntimeName } from '../ports/runtime.ts';

/** Optional features SpecLab uses when the adapter has them. */
export const OPTIONAL_FEATURES = ['shader-f16', 'subgroups', 'timestamp-query', 'chromium-experimental-subgroup-matrix'] as const;

/** Limits SpecLab asks for at the adapter's own value (defaults are far too small for LLM tensors). */
export const REQUESTED_LIMITS = [
  'maxStorageBufferBindingSize',
  'maxBufferSize',
  'maxStorageBuffersPerShaderStage',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupsPerDimension',
  'maxUniformBufferBindingSize',
  'maxBindGroups',
] as const;

export interface GpuRequest {
  /** Features to refuse even when present (e.g. to test the baseline kernels). */
  disableFeatures?: readonly string[];
  /**
   * Pretend the binding limit is smaller than the device's, so that chunked paths run on small
   * tensors in tests. Only SpecLab's own planning reads it; the device keeps its real limit.
   */
  maxStorageBufferBindingSize?: number;
  powerPreference?: GPUPowerPreference;
  /**
   * Request the device at WebGPU's default limits with no optional feature, as the least capable
   * device (a phone, a compatibility-mode browser) gives (`SPECLAB_DEFAULT_LIMITS=1`, read by each platform).
   */
  defaultLimits?: boolean;
  /**
   * 'compatibility' asks for a compatibility-mode adapter (WebGPU's featureLevel), as browsers on
   * older GPUs (OpenGL ES, D3D11) give (`SPECLAB_FEATURE_LEVEL=compatibility`).
   */
  featureLevel?: FeatureLevel;
}

export type FeatureLevel = 'core' | 'compatibility';

/**
 * The least SpecLab's kernels need: WebGPU's core default limits. A compatibility-mode device starts
 * lower (128 invocations per workgroup, 4 storage buffers per stage), so at default limits SpecLab
 * asks a compatibility adapter for these, and one that cannot give them is refused naming the limit.
 */
export const CORE_DEFAULT_LIMITS: Readonly<Record<string, number>> = {
  maxStorageBufferBindingSize: 128 * 2 ** 20,
  maxBufferSize: 256 * 2 ** 20,
  maxStorageBuffersPerShaderStage: 8,
  maxComputeWorkgroupStorageSize: 16384,
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupSizeX: 256,
  maxComputeWorkgroupSizeY: 256,
  maxComputeWorkgroupSizeZ: 64,
  maxComputeWorkgroupsPerDimension: 65535,
  maxUniformBufferBindingSize: 65536,
  maxBindGroups: 4,
};

export interface AdapterRecord {
  runtime: RuntimeName;
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  isFallbackAdapter: boolean;
  features: string[];
  /** The device's: compatibility unless it has core-features-and-limits. */
  featureLevel: FeatureLevel;
  limits: Record<string, number>;
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
  subgroupMatrixConfigs: unknown[];
}

export type GpuFailure = GpuError;

export class GpuContext {
  readonly features: ReadonlySet<string>;
  /** Effective limits for planning (may be lowered by GpuRequest for tests). */
  readonly limits: Readonly<Record<string, number>>;
  private lostError: GpuDeviceLostError | undefined;
  private readonly uncaptured: GpuError[] = [];
  private destroyed = false;

  constructor(
    readonly runtime: RuntimeName,
    readonly adapter: GPUAdapter,
    readonly device: GPUDevice,
    readonly record: AdapterRecord,
    limits: Record<string, number>,
    /** The native instance (Node: the `create()` result). Held so it outlives the device. */
    private readonly keepAlive: unknown,
    private readonly onDestroy: (ctx: GpuContext) => void,
    /** Told of each bind group created, whose native memory only a garbage collection returns (see bindGroupCreated). */
    private readonly onBindGroupCreated: () => void = () => {},
  ) {
    this.features = new Set(device.features as unknown as Iterable<string>);
    this.limits = Object.freeze({ ...limits });
    device.lost.then((info) => {
      if (info.reason !== 'destroyed' && !this.destroyed) {
        this.lostError = new GpuDeviceLostError(String(info.reason), info.message);
      }
    });
    device.addEventListener('uncapturederror', (event) => {
      const error = (event as GPUUncapturedErrorEvent).error;
      this.uncaptured.push(toTypedError(error, 'uncaptured'));
    });
  }

  get isDestroyed(): boolean {
    return this.destroyed;
  }

  hasFeature(name: string): boolean {
    return this.features.has(name);
  }

  /** Throws the first pending failure (device lost, or an error no scope caught). */
  throwIfFailed(): void {
    if (this.destroyed) throw new GpuError('GPU context used after destroy()');
    if (this.lostError) throw this.lostError;
    const first = this.uncaptured.shift();
    if (first) {
      this.uncaptured.length = 0;
      throw first;
    }
  }

  /**
   * Run `fn` inside validation, out-of-memory and internal error scopes and throw a typed error
   * naming `label` if any fired. Scopes are popped asynchronously: use around setup (pipelines,
   * large allocations, tests), not per dispatch in a hot loop.
   */
  async guard<T>(label: string, fn: () => T | Promise<T>): Promise<T> {
    this.throwIfFailed();
    const device = this.device;
    device.pushErrorScope('internal');
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');
    let result: T | undefined;
    let thrown: unknown;
    try {
      result = await fn();
    } catch (err) {
      thrown = err;
    }
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    const internal = await device.popErrorScope();
    const error = validation ?? oom ?? internal;
    if (error) throw toTypedError(error, label);
    if (thrown !== undefined) throw thrown;
    return result as T;
  }

  /**
   * Called once per bind group created on this device. WebGPU has no way to free a bind group: its
   * native memory goes back when its wrapper is garbage-collected (or the device is destroyed), and a
   * collector paced by the JS heap does not see that memory. The runtime counts and reclaims (Node:
   * src/platform/node.ts, `reclaimBindGroups`).
   */
  bindGroupCreated(): void {
    this.onBindGroupCreated();
  }

  /** Release the device; the native instance is dropped only after this. Idempotent. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.device.destroy();
    this.onDestroy(this);
  }

  /** For diagnostics only: whether the native instance is still held. */
  get holdsInstance(): boolean {
    return this.keepAlive !== undefined && this.keepAlive !== null;
  }
}

function readInfo(adapter: GPUAdapter): GPUAdapterInfo | Record<string, unknown> {
  return (adapter as unknown as { info?: GPUAdapterInfo }).info ?? {};
}

/** `SPECLAB_DEFAULT_LIMITS`: 1 requests the device at WebGPU's default limits (GpuRequest.defaultLimits); unset or 0 does not. */
export function defaultLimitsRequested(value: string | undefined): boolean {
  if (value === undefined || value === '' || value === '0') return false;
  if (value === '1') return true;
  throw new Error(`SPECLAB_DEFAULT_LIMITS must be 1 or 0, got ${JSON.stringify(value)}`);
}

/** `SPECLAB_FEATURE_LEVEL`: compatibility requests a compatibility-mode adapter; unset or core does not. */
export function featureLevelRequested(value: string | undefined): FeatureLevel {
  if (value === undefined || value === '' || value === 'core') return 'core';
  if (value === 'compatibility') return value;
  throw new Error(`SPECLAB_FEATURE_LEVEL must be core or compatibility, got ${JSON.stringify(value)}`);
}

/** The device request a runtime's environment asks for (`SPECLAB_DEFAULT_LIMITS`, `SPECLAB_FEATURE_LEVEL`), under `request`'s own choices. */
export function environmentGpuRequest(request: GpuRequest, env: (name: string) => string | undefined): GpuRequest {
  return {
    ...request,
    defaultLimits: request.defaultLimits ?? defaultLimitsRequested(env('SPECLAB_DEFAULT_LIMITS')),
    featureLevel: request.featureLevel ?? featureLevelRequested(env('SPECLAB_FEATURE_LEVEL')),
  };
}

/** The limits to require: the adapter's own, or at default limits none (core) or the core defaults (compatibility). */
function requiredLimitsFor(adapter: GPUAdapter, request: GpuRequest, runtime: RuntimeName): Record<string, number> {
  const have = adapter.limits as unknown as Record<string, number>;
  const required: Record<string, number> = {};
  if (request.defaultLimits) {
    if (request.featureLevel !== 'compatibility') return required;
    for (const [name, value] of Object.entries(CORE_DEFAULT_LIMITS)) {
      if (typeof have[name] === 'number' && have[name] < value)
        throw new GpuUnavailableError(
          `The ${runtime} compatibility-mode adapter offers ${name} = ${have[name]}; SpecLab needs WebGPU's core default ${value}`,
        );
      required[name] = value;
    }
    return required;
  }
  for (const name of REQUESTED_LIMITS) if (typeof have[name] === 'number') required[name] = have[name];
  return required;
}

/** Shared device acquisition: request the adapter's real limits and every optional feature present. */
export async function openGpuContext(options: {
  runtime: RuntimeName;
  gpu: GPU | undefined;
  keepAlive: unknown;
  request?: GpuRequest;
  onDestroy?: (ctx: GpuContext) => void;
  /** Told of every bind group created (GpuContext.bindGroupCreated). */
  onBindGroupCreated?: () => void;
}): Promise<GpuContext> {
  const { runtime, gpu, request = {} } = options;
  if (!gpu) {
    throw new GpuUnavailableError(`WebGPU is not available in ${runtime}. ${hintFor(runtime)}`);
  }
  const featureLevel = request.featureLevel ?? 'core';
  const adapter = await gpu.requestAdapter({ powerPreference: request.powerPreference ?? 'high-performance', featureLevel });
  if (!adapter) {
    throw new GpuUnavailableError(
      `No WebGPU adapter found in ${runtime}${featureLevel === 'core' ? '' : ` at featureLevel ${featureLevel}`}. ${hintFor(runtime)}`,
    );
  }
  const disabled = new Set(request.disableFeatures ?? []);
  const requiredFeatures = request.defaultLimits ? [] : OPTIONAL_FEATURES.filter((f) => adapter.features.has(f) && !disabled.has(f));
  const requiredLimits = requiredLimitsFor(adapter, request, runtime);
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({
      requiredFeatures: requiredFeatures as unknown as GPUFeatureName[],
      requiredLimits,
    });
  } catch (err) {
    throw new GpuUnavailableError(`The ${runtime} adapter refused a device: ${(err as Error).message}`);
  }
  const info = readInfo(adapter) as Record<string, unknown>;
  const limits: Record<string, number> = {};
  for (const name of REQUESTED_LIMITS) {
    const value = (device.limits as unknown as Record<string, number>)[name];
    if (typeof value === 'number') limits[name] = value;
  }
  limits.minStorageBufferOffsetAlignment = device.limits.minStorageBufferOffsetAlignment;
  limits.minUniformBufferOffsetAlignment = device.limits.minUniformBufferOffsetAlignment;
  if (request.maxStorageBufferBindingSize !== undefined) {
    limits.maxStorageBufferBindingSize = Math.min(limits.maxStorageBufferBindingSize, request.maxStorageBufferBindingSize);
  }
  const record: AdapterRecord = {
    runtime,
    vendor: String(info.vendor ?? ''),
    architecture: String(info.architecture ?? ''),
    device: String(info.device ?? ''),
    description: String(info.description ?? ''),
    isFallbackAdapter: Boolean(
      info.isFallbackAdapter ?? (adapter as unknown as { isFallbackAdapter?: boolean }).isFallbackAdapter ?? false,
    ),
    features: [...(device.features as unknown as Iterable<string>)].sort(),
    // A core request gives a core device; a compatibility-mode device lacks core-features-and-limits
    // (a core-capable adapter grants it only when asked, and SpecLab does not ask).
    featureLevel: featureLevel === 'core' || device.features.has('core-features-and-limits') ? 'core' : 'compatibility',
    limits,
    subgroupMinSize: typeof info.subgroupMinSize === 'number' ? info.subgroupMinSize : undefined,
    subgroupMaxSize: typeof info.subgroupMaxSize === 'number' ? info.subgroupMaxSize : undefined,
    subgroupMatrixConfigs: Array.isArray(info.subgroupMatrixConfigs)
      ? (info.subgroupMatrixConfigs as Record<string, unknown>[]).map((c) => ({
          componentType: c.componentType,
          resultComponentType: c.resultComponentType,
          M: c.M,
          N: c.N,
          K: c.K,
        }))
      : [],
  };
  return new GpuContext(
    runtime,
    adapter,
    device,
    record,
    limits,
    options.keepAlive,
    options.onDestroy ?? (() => {}),
    options.onBindGroupCreated,
  );
}

function hintFor(runtime: RuntimeName): string {
  switch (runtime) {
    case 'node':
      return 'Node uses Dawn through the npm package `webgpu` and needs a Vulkan driver: run scripts/setup.sh (Mesa >= 25 lavapipe on a machine without a GPU).';
    case 'deno':
      return 'Deno needs a Vulkan driver (run scripts/setup.sh) and a version with WebGPU enabled.';
    case 'browser':
      return 'Use a browser with WebGPU enabled (Chrome 113+, or Chromium with --enable-unsafe-webgpu on Linux).';
  }
}
