/**
 * `npx tsx bench/row-variants.ts [--shapes lab,fixture,mid] [--rounds 7]`: the row layouts of
 * RMSNorm and the loss family (src/kernels/row-variant.ts), every variant this device runs timed
 * interleaved at the lab shapes ([224, 128] norms; soft CE / teacher / metrics over [224, 2048]),
 * the fixture shapes and the mid config's; one JSON line per record, `vsWide` = wide ms / this ms.
 */
import { Gpu } from '../src/gpu/gpu.ts';
import { nodePlatform } from '../src/platform/node.ts';
import { benchLoss, type LossBenchShape } from './kernels/loss.ts';
import { benchRmsnorm } from './kernels/rmsnorm.ts';

const SHAPES: Readonly<Record<string, { norm: [number, number]; loss: LossBenchShape }>> = {
  lab: { norm: [224, 128], loss: { rows: 224, vocab: 2048, draftVocab: 2048 } },
  // The SpecForge parity fixture's dims (fixtures/eagle3: B 2, S 40, H 64, V 384, D 96).
  fixture: { norm: [80, 64], loss: { rows: 80, vocab: 384, draftVocab: 96 } },
  // bench/train.ts's mid config at its default batch 1 x seq 128 (H 1024, V 32000, D 8000).
  mid: { norm: [128, 1024], loss: { rows: 128, vocab: 32000, draftVocab: 8000 } },
};

const args = nodePlatform.args();
const opt = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const names = opt('--shapes', 'lab,fixture,mid').split(',');
const rounds = Number(opt('--rounds', '7'));
for (const n of names) if (!(n in SHAPES)) throw new Error(`--shapes: unknown shape set "${n}" (known: ${Object.keys(SHAPES).join(', ')})`);

const ctx = await nodePlatform.acquireGpu();
const gpu = new Gpu(ctx);
console.log(
  JSON.stringify({ adapter: ctx.record.description, features: ctx.record.features, subgroupMinSize: ctx.record.subgroupMinSize }),
);
for (const n of names) {
  for (const r of await benchRmsnorm(gpu, [SHAPES[n].norm], rounds)) console.log(JSON.stringify({ set: n, ...r }));
  for (const r of await benchLoss(gpu, SHAPES[n].loss, rounds)) console.log(JSON.stringify({ set: n, ...r }));
}
gpu.destroy();
await nodePlatform.exit(0);
