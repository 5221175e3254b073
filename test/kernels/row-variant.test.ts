import { LOSS_ROW_GEOMETRY } from '../../src/kernels/loss-rows.ts';
import { RMSNORM_ROW_GEOMETRY } from '../../src/kernels/rmsnorm.ts';
import {
  availableRowVariants,
  checkRowGeometries,
  chooseRowVariant,
  rowVariantUnsupported,
  type RowDeviceFacts,
} from '../../src/kernels/row-variant.ts';
import { assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

export default defineSuite('kernels/row-variant', (t) => {
  t.test('row-layout policy is a pure function of shape, features and device facts', () => {
    const sub = new Set(['subgroups']);
    const none = new Set<string>();
    const cpu8: RowDeviceFacts = { fallbackAdapter: true, subgroupMinSize: 8, subgroupMaxSize: 8 };
    const cpu4: RowDeviceFacts = { fallbackAdapter: true, subgroupMinSize: 4, subgroupMaxSize: 4 };
    const gpu32: RowDeviceFacts = { fallbackAdapter: false, subgroupMinSize: 32, subgroupMaxSize: 32 };
    for (const g of [RMSNORM_ROW_GEOMETRY, LOSS_ROW_GEOMETRY]) {
      for (const shape of [
        { width: 128, rows: 224 },
        { width: 2048, rows: 224 },
        { width: 128256, rows: 1 },
      ]) {
        assertEqual(chooseRowVariant(shape, g, sub, cpu8), 'subgroup', `CPU adapter with 8-lane subgroups, width ${shape.width}`);
        assertEqual(
          chooseRowVariant(shape, g, none, cpu8),
          'rows',
          `CPU adapter without subgroups (Deno, SwiftShader), width ${shape.width}`,
        );
        assertEqual(chooseRowVariant(shape, g, sub, cpu4), 'rows', `CPU adapter with 4-lane subgroups, width ${shape.width}`);
        assertEqual(chooseRowVariant(shape, g, sub, { fallbackAdapter: true }), 'rows', `subgroup size unknown, width ${shape.width}`);
      }
      assertEqual(chooseRowVariant({ width: 2048, rows: 224 }, g, sub, gpu32), 'wide', 'GPU, wide rows');
      assertEqual(chooseRowVariant({ width: 64, rows: 224 }, g, sub, gpu32), 'rows', 'GPU, rows of 64');
      assertEqual(chooseRowVariant({ width: 128, rows: 224 }, g), 'wide', 'no facts: a GPU');
      assertDeepEqual(availableRowVariants('loss', g, sub, cpu8), ['wide', 'rows', 'subgroup'], 'every variant with subgroups');
      assertDeepEqual(availableRowVariants('loss', g, none, cpu8), ['wide', 'rows'], 'no subgroup variant without the feature');
    }
    assertEqual(
      rowVariantUnsupported('rmsnorm', 'subgroup', RMSNORM_ROW_GEOMETRY, none, cpu8),
      'rmsnorm variant subgroup needs the WebGPU feature "subgroups"',
      'no feature',
    );
    assertEqual(
      rowVariantUnsupported('loss', 'subgroup', LOSS_ROW_GEOMETRY, sub, cpu4),
      'loss variant subgroup needs subgroups of at least 8 invocations (device minimum: 4)',
      'narrow subgroups',
    );
    assertEqual(rowVariantUnsupported('loss', 'rows', LOSS_ROW_GEOMETRY, none, {}), undefined, 'rows runs anywhere');
  });

  t.test('geometry records are checked', () => {
    assertThrows(
      () => checkRowGeometries('x', { rows: { LANES: 6, ROWS: 4 }, subgroup: { LANES: 8, ROWS: 1 } }),
      /x row geometry rows: LANES must be a power of two and ROWS ≥ 1, got 6 x 4/,
      'LANES 6',
    );
    assertThrows(
      () => checkRowGeometries('x', { rows: { LANES: 8, ROWS: 4 }, subgroup: { LANES: 8, ROWS: 0 } }),
      /row geometry subgroup/,
      'ROWS 0',
    );
  });
});
