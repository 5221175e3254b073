/**
 * What a kernel declares about itself: its WGSL source, its bindings in order, the optional
 * features it needs. The TypeScript module of each kernel family owns its KernelDefs; the
 * registry (src/kernels/registry.ts) lists them explicitly.
 *
 * Binding convention (group 0): binding i has kind bindings[i]. A 'uniform' binding uses a dynamic
 * offset into the per-submit uniform arena, so bind groups do not depend on the arena slot and can
 * be cached.
 */

export type BindingKind = 'uniform' | 'read' | 'write';

export interface KernelDef {
  /** Unique id, usually the shader path without extension: `matmul/tiled`. */
  readonly name: string;
  readonly source: string;
  readonly bindings: readonly BindingKind[];
  readonly entryPoint?: string;
  /** Optional features the shader needs (`shader-f16`, `subgroups`, ...). */
  readonly requires?: readonly string[];
}
