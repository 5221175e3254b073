/**
 * The no-tensor boundary (docs/contracts.md §10). Control-plane records carry metadata only; tensors
 * travel through the data plane. Every control-plane entry point runs `assertNoTensors` on what
 * it accepts, so a tensor smuggled into metadata fails at the boundary with the path to it instead
 * of being copied, journaled or held by the coordinator.
 *
 * Forbidden: GPUBuffers (real or duck-typed), ArrayBuffers, SharedArrayBuffers and every view on
 * them (typed arrays, DataView), objects shaped like framework tensors (`dtype`+`shape`+`device`)
 * and SpecLab `Tensor`s (`dtype`+`shape`+`parts`, see src/gpu/tensor.ts).
 */

/** Throws a TypeError naming the breadcrumb path (e.g. `<root>.metadata.smuggled`) of the first tensor-like value. */
export function assertNoTensors(value: unknown, root = '<root>'): void {
  walk(value, root, new WeakSet<object>());
}

/** Why `value` counts as a tensor, or undefined when it does not. */
export function tensorKind(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  if (typeof GPUBuffer !== 'undefined' && value instanceof GPUBuffer) return 'GPUBuffer';
  if (ArrayBuffer.isView(value)) return `${typeName(value)} (ArrayBuffer view)`;
  if (value instanceof ArrayBuffer) return 'ArrayBuffer';
  if (typeof SharedArrayBuffer !== 'undefined' && value instanceof SharedArrayBuffer) return 'SharedArrayBuffer';
  if ('mapAsync' in value && 'getMappedRange' in value && 'size' in value && 'usage' in value) {
    return `${typeName(value)} (GPUBuffer-like: mapAsync, getMappedRange, size, usage)`;
  }
  if ('dtype' in value && 'shape' in value) {
    if ('device' in value) return `${typeName(value)} (tensor-like: dtype, shape, device)`;
    if ('parts' in value) return `${typeName(value)} (SpecLab Tensor: dtype, shape, parts)`;
  }
  return undefined;
}

function walk(value: unknown, path: string, visited: WeakSet<object>): void {
  if (value === null || typeof value !== 'object') return;
  const kind = tensorKind(value);
  if (kind !== undefined) {
    throw new TypeError(
      `${path} is a tensor-like value (${kind}); control-plane records carry metadata only (tensors go through the FeatureStore)`,
    );
  }
  // Shared sub-objects are checked once; cycles end here instead of recursing forever.
  if (visited.has(value)) return;
  visited.add(value);

  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item !== null && typeof item === 'object') walk(item, `${path}[${i}]`, visited);
    }
    return;
  }
  if (value instanceof Map) {
    let i = 0;
    for (const [key, item] of value) {
      if (key !== null && typeof key === 'object') walk(key, `${path}.<key ${i}>`, visited);
      if (item !== null && typeof item === 'object') walk(item, `${path}.get(${describeKey(key)})`, visited);
      i++;
    }
    return;
  }
  if (value instanceof Set) {
    let i = 0;
    for (const item of value) {
      if (item !== null && typeof item === 'object') walk(item, `${path}.<element ${i}>`, visited);
      i++;
    }
    return;
  }
  for (const key of Object.keys(value)) {
    const item: unknown = (value as Record<string, unknown>)[key];
    if (item !== null && typeof item === 'object') walk(item, `${path}${propertyPath(key)}`, visited);
  }
}

function propertyPath(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

function describeKey(key: unknown): string {
  if (typeof key === 'string') return JSON.stringify(key);
  if (typeof key === 'number' || typeof key === 'boolean' || typeof key === 'bigint') return String(key);
  return typeName(key);
}

function typeName(value: unknown): string {
  const ctor = (value as { constructor?: { name?: string } }).constructor;
  return ctor?.name || 'object';
}
