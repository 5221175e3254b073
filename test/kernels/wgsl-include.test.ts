/** The build-time `#include` expansion of WGSL (src/kernels/wgsl-include.ts), on in-memory files. */
import { expandIncludes, type ReadShaderFile } from '../../src/kernels/wgsl-include.ts';
import { assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

function files(map: Record<string, string>): ReadShaderFile {
  return (path) => map[path];
}

export default defineSuite('kernels/wgsl-include', (t) => {
  t.test('expands nested includes in place, recursively, and records what was included', () => {
    const read = files({
      'k/main.wgsl': '// main\n#include "include/outer.wgsl"\nfn main() {}\n',
      'include/outer.wgsl': '// outer\n#include "include/inner.wgsl"\nconst B: u32 = 2u;\n',
      'include/inner.wgsl': '// inner\nconst A: u32 = 1u;\n',
    });
    const included = new Set<string>();
    const out = expandIncludes('k/main.wgsl', read, included);
    assertEqual(out, '// main\n// outer\n// inner\nconst A: u32 = 1u;\nconst B: u32 = 2u;\nfn main() {}\n', 'expanded source');
    assertDeepEqual([...included].sort(), ['include/inner.wgsl', 'include/outer.wgsl'], 'included paths');
  });

  t.test('the same fragment may be included by several shaders; a file without includes is unchanged', () => {
    const read = files({
      'a.wgsl': '#include "f.wgsl"\n',
      'b.wgsl': 'x\n  #include "f.wgsl"  \ny',
      'f.wgsl': 'F\n',
      'plain.wgsl': '// p\nfn main() {}',
    });
    assertEqual(expandIncludes('a.wgsl', read), 'F\n', 'a');
    assertEqual(expandIncludes('b.wgsl', read), 'x\nF\ny', 'b (indented include line)');
    assertEqual(expandIncludes('plain.wgsl', read), '// p\nfn main() {}', 'plain');
  });

  t.test('a missing file is refused with the including file and line', () => {
    const read = files({ 'k/main.wgsl': '// main\n\n#include "include/gone.wgsl"\n' });
    assertThrows(
      () => expandIncludes('k/main.wgsl', read),
      /^shaders\/k\/main\.wgsl:3: #include "include\/gone\.wgsl": no such file shaders\/include\/gone\.wgsl$/,
      'missing fragment',
    );
    assertThrows(() => expandIncludes('k/absent.wgsl', read), /^shaders\/k\/absent\.wgsl: no such file$/, 'missing shader');
  });

  t.test('a missing file deep in a nested include names the fragment that includes it', () => {
    const read = files({ 'k.wgsl': '#include "a.wgsl"\n', 'a.wgsl': '// a\n#include "b.wgsl"\n' });
    assertThrows(() => expandIncludes('k.wgsl', read), /^shaders\/a\.wgsl:2: #include "b\.wgsl": no such file/, 'nested missing');
  });

  t.test('a cycle is refused with the including file, line and the whole cycle', () => {
    const read = files({
      'k.wgsl': '#include "a.wgsl"\n',
      'a.wgsl': '// a\n#include "b.wgsl"\n',
      'b.wgsl': '// b\n\n#include "a.wgsl"\n',
      'self.wgsl': '#include "self.wgsl"\n',
    });
    assertThrows(
      () => expandIncludes('k.wgsl', read),
      /^shaders\/b\.wgsl:3: #include "a\.wgsl" forms a cycle: a\.wgsl → b\.wgsl → a\.wgsl$/,
      'two-file cycle',
    );
    assertThrows(
      () => expandIncludes('self.wgsl', read),
      /^shaders\/self\.wgsl:1: #include "self\.wgsl" forms a cycle: self\.wgsl → self\.wgsl$/,
      'self include',
    );
  });

  t.test('malformed include lines and paths leaving shaders/ are refused', () => {
    const read = files({
      'bare.wgsl': '#include include/f.wgsl\n',
      'define.wgsl': '// d\n#define X 1\n',
      'up.wgsl': '#include "../secret.wgsl"\n',
      'abs.wgsl': '#include "/etc/f.wgsl"\n',
    });
    assertThrows(
      () => expandIncludes('bare.wgsl', read),
      /^shaders\/bare\.wgsl:1: expected #include "<path relative to shaders\/>", got: #include include\/f\.wgsl$/,
      'unquoted path',
    );
    assertThrows(() => expandIncludes('define.wgsl', read), /^shaders\/define\.wgsl:2: expected #include/, 'other directive');
    assertThrows(
      () => expandIncludes('up.wgsl', read),
      /^shaders\/up\.wgsl:1: #include "\.\.\/secret\.wgsl": the path must be relative to shaders\//,
      'parent path',
    );
    assertThrows(
      () => expandIncludes('abs.wgsl', read),
      /^shaders\/abs\.wgsl:1: #include "\/etc\/f\.wgsl": the path must be relative/,
      'absolute path',
    );
  });
});
