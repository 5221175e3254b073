/**
 * A trainer that holds no target model reads the target's tables (src/model/target/target-tables.ts):
 * the embedding streamed at the target's precision and the lm_head rows of the draft vocabulary read
 * from the files (DraftHead.read). Both must be the bits the whole target gives (TargetModel.load,
 * DraftHead.gather), at f32 and f16, for a bf16 checkpoint with its own lm_head and for tied
 * embeddings, with the rows read a few at a time; bad draft ids are refused by name.
 */
import { HfCheckpointSource } from '../../src/formats/hf-checkpoint-source.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { DraftHead } from '../../src/model/target/draft-head.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { TargetTables } from '../../src/model/target/target-tables.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { qwen3Config, writeRandomCheckpoint } from './synthetic-checkpoint.ts';

const bits = (a: ArrayLike<number>) => Array.from(a);

export default defineSuite('model/target-tables', (t) => {
  for (const tied of [false, true]) {
    t.test(
      `${tied ? 'tied embeddings' : 'a bf16 checkpoint with its own lm_head'}: the embedding and the draft head are the whole target's bits, f32 and f16`,
      async (ctx) => {
        const tmp = tempStore(ctx.platform, 'target-tables');
        const gpu = new Gpu(ctx.gpu);
        try {
          await writeRandomCheckpoint(tmp.files, 'm', qwen3Config({ tie_word_embeddings: tied, vocab_size: 97 }), 5, tied ? 'F32' : 'BF16');
          const source = await HfCheckpointSource.open(tmp.files, 'm');
          // Ascending target ids with gaps and runs, past one slice of rows.
          const used = [0, 1, 2, 7, 8, 30, 31, 32, 33, 60, 95, 96];
          for (const precision of ['f32', 'f16'] as const) {
            const model = await TargetModel.load(gpu, source, { weightPrecision: precision });
            const tables = await TargetTables.load(gpu, source, precision);
            try {
              assertEqual(tables.embedTokens.dtype, model.embedTokens.dtype, `${precision}: embedding dtype`);
              assertDeepEqual(
                bits(await gpu.read(tables.embedTokens)),
                bits(await gpu.read(model.embedTokens)),
                `${precision}: embedding bits`,
              );
              const gathered = await model.draftHead(used);
              const read = await tables.draftHead(used);
              // Rows read a few at a time (one row of 32 f32 values is 128 bytes): slices cut runs of ids.
              const sliced = tied ? undefined : await DraftHead.read(gpu, source, 'lm_head.weight', used, precision, 3 * 128);
              try {
                const want = bits(await gpu.read(gathered.table));
                assertDeepEqual(bits(await gpu.read(read.table)), want, `${precision}: draft head bits`);
                if (sliced) assertDeepEqual(bits(await gpu.read(sliced.table)), want, `${precision}: draft head read 3 rows at a time`);
              } finally {
                gathered.destroy();
                read.destroy();
                sliced?.destroy();
              }
            } finally {
              tables.destroy();
              model.destroy();
            }
          }
          if (!tied) {
            for (const bad of [[3, 3], [5, 2], [0, 97], [-1]])
              await assertRejects(
                () => DraftHead.read(gpu, source, 'lm_head.weight', bad, 'f32'),
                /DraftHead: draft token \d+ maps to target id -?\d+: ids must ascend within the vocabulary \[0, 97\)/,
                `ids ${bad} refused`,
              );
            await assertRejects(
              () => DraftHead.read(gpu, source, 'lm_head.bias', [0], 'f32'),
              /the checkpoint has no matrix "lm_head.bias"/,
              'no such matrix',
            );
          }
          assert(gpu.memoryStats().liveBytes > 0, 'the Gpu is live');
        } finally {
          gpu.destroy();
          await tmp.cleanup();
        }
      },
    );
  }
});
