/** Looks up embedded WGSL by its path under shaders/ (without `.wgsl`), failing loudly if absent. */
import { SHADERS } from './shaders.gen.ts';

export function shaderSource(name: string): string {
  const source = SHADERS[name];
  if (source === undefined) {
    throw new Error(`no shader "${name}" embedded; is shaders/${name}.wgsl missing, or was \`npm run gen\` not run?`);
  }
  return source;
}
