/**
 * Looks up embedded WGSL by its path under shaders/ (without `.wgsl`), failing loudly if absent,
 * and specialises it with the launch geometry its TypeScript module owns.
 *
 * Geometry (workgroup sizes, workgroup tiles, per-invocation register blocks) is declared once, in
 * the kernel module whose dispatch math depends on it, and handed to the shader as WGSL `const`
 * declarations. Not pipeline `override`s: WGSL only allows override-sized arrays in workgroup
 * memory, and these values also size per-invocation register arrays and feed `const_assert`s that
 * reject geometry a shader's unrolled code cannot follow. The values are fixed per kernel, so
 * every KernelDef still has exactly one source and one cache entry per specialisation.
 */
import { SHADERS } from './shaders.gen.ts';

/** u32 constants a shader takes from its kernel module, by WGSL name. */
export type ShaderConstants = Readonly<Record<string, number>>;

const NAME = /^[A-Z][A-Z0-9_]*$/;

/**
 * The embedded source of `name`, with one `const NAME: u32 = value;` line per entry of `constants`
 * appended. Module-scope WGSL declarations may come in any order, so appending keeps every line
 * number of the shader file as it is (compiler messages point at the file) and stays after any
 * `enable` directive.
 */
export function shaderSource(name: string, constants: ShaderConstants = {}): string {
  const source = SHADERS[name];
  if (source === undefined) {
    throw new Error(`no shader "${name}" embedded; is shaders/${name}.wgsl missing, or was \`npm run gen\` not run?`);
  }
  const entries = Object.entries(constants);
  if (entries.length === 0) return source;
  const lines = entries.map(([key, value]) => {
    if (!NAME.test(key)) throw new Error(`shader ${name}: constant name "${key}" must be an upper-case WGSL identifier`);
    if (!Number.isInteger(value) || value < 0 || value > 0xffffffff)
      throw new Error(`shader ${name}: constant ${key} = ${value} is not a u32`);
    if (new RegExp(`\\b(?:const|override|var|let|alias|fn|struct)\\s+${key}\\b`).test(source)) {
      throw new Error(`shader ${name} declares ${key} itself; its value comes from the kernel module, so the shader must only use it`);
    }
    return `const ${key}: u32 = ${value}u;`;
  });
  return `${source.endsWith('\n') ? source : `${source}\n`}\n// Launch geometry of ${name}, from its kernel module.\n${lines.join('\n')}\n`;
}
