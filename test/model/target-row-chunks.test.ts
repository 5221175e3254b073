/**
 * The target's MLP over row chunks (src/model/target/layers.ts, gpu/row-chunks.ts): when [rows, I]
 * f32 is over a binding, each decoder layer's gate, up and act are made a chunk of rows at a time.
 * On hf/llama-tiny (intermediate 176) with a binding lowered to 64 KiB, a 200-token forward runs its
 * MLP in chunks of 93 rows and gives the hidden states and logits of the unchunked forward
 * (each row is computed by the same kernels; within 1e-6 relative), and against float64 as the
 * unchunked one does.
 */
import { loadHfCheckpoint } from '../../src/formats/hf-checkpoint.ts';
import { Gpu } from '../../src/gpu/gpu.ts';
import { rowChunkRows } from '../../src/gpu/row-chunks.ts';
import { TargetModel } from '../../src/model/target/model.ts';
import { forwardReference } from '../../src/reference/llama.ts';
import { Rng } from '../../src/util/random.ts';
import { assert, assertRelClose } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { copyFixtureCheckpoint } from './synthetic-checkpoint.ts';

const LIMIT = 64 * 1024;
const SEQ = 200;

export default defineSuite('model/target-row-chunks', (t) => {
  t.test('the MLP over row chunks gives the unchunked forward: every hidden state and the logits', async (ctx) => {
    const tmp = tempStore(ctx.platform, 'target-row-chunks');
    await copyFixtureCheckpoint(ctx.fixture, 'llama-tiny', tmp.files, 'm');
    const checkpoint = await loadHfCheckpoint(tmp.files, 'm');
    await tmp.cleanup();
    const c = checkpoint.config;
    const chunk = rowChunkRows(SEQ, c.intermediateSize * 4, LIMIT);
    assert(chunk < SEQ, `a ${SEQ}-row MLP runs in chunks at a ${LIMIT}-byte binding (chunk ${chunk} rows)`);
    ctx.note('MLP chunk rows', chunk);
    const rng = new Rng(9);
    const ids = Array.from({ length: SEQ }, () => rng.int(0, c.vocabSize));
    const input = { inputIds: ids, batch: 1, seqLen: SEQ };
    const options = { hiddenStates: 'all' as const };
    const run = async (limit: number | undefined) => {
      const gpu = new Gpu(ctx.gpu);
      if (limit) Object.defineProperty(gpu, 'maxBindingBytes', { value: limit });
      const model = TargetModel.create(gpu, checkpoint);
      try {
        const out = await model.forward(input, options);
        const hidden = await Promise.all([...out.hiddenStates.entries()].sort(([a], [b]) => a - b).map(([, h]) => gpu.read(h)));
        const logits = await gpu.read(out.logits!);
        gpu.release(...out.hiddenStates.values(), out.logits!);
        return { hidden, logits };
      } finally {
        model.destroy();
        gpu.destroy();
      }
    };
    const whole = await run(undefined);
    const chunked = await run(LIMIT);
    chunked.hidden.forEach((h, i) => assertRelClose(h, whole.hidden[i], 1e-6, `hidden_states.${i}`));
    assertRelClose(chunked.logits, whole.logits, 1e-6, 'logits');
    const ref = forwardReference(checkpoint, input);
    ctx.note('worst logits rel err vs float64', assertRelClose(chunked.logits, ref.logits, 1e-4, 'logits vs float64').toExponential(2));
  });
});
