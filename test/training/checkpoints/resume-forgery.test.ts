/**
 * Forged records on a real run folder (an Eagle3TrainingSession on the llama-tiny fixture, file
 * journal), each with its seal recomputed (journal frame CRCs, the checkpoint's COMPLETE record), so
 * only the cross-checks of a resume can catch them (src/training/checkpoints/resume-consistency.ts,
 * resume-integrity.ts, the finiteness check of loadCheckpoint). Every case first opens the untouched
 * run (it resumes), then forges one record and expects the exact refusal, naming both records:
 *   - the ledger: globalStep 6 → 4, a committed id dropped, one more id acked, an ack record lost;
 *   - a checkpoint: optimizer step 4 → 2, skippedSteps beyond the steps, an Inf in AdamW's v, a NaN
 *     in the weights (refused by the export too), a checkpoint copied from another run (another seed)
 *     and resumed with its settings.
 */
import { FileMetadataStore } from '../../../src/control/file-metadata-store.ts';
import { encodeFrame, scanJournal } from '../../../src/control/journal.ts';
import { SafetensorsFile } from '../../../src/formats/safetensors.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import type { FileStore } from '../../../src/ports/storage.ts';
import { crc32 } from '../../../src/util/crc32.ts';
import { exportEagle3Checkpoint } from '../../../src/training/checkpoints/checkpoint-export.ts';
import { Eagle3TrainingSession } from '../../../src/training/session/eagle3-session.ts';
import { assert, assertEqual, assertRejects } from '../../harness/assert.ts';
import { defineSuite, type TestContext } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { tinySessionTarget, TINY_SESSION_RUN, TINY_SESSION_SETTINGS } from '../session/tiny-session.ts';

// Two epochs of six prompts, rounds of six, batch 2: 6 steps; checkpoints at 3 (round end), 4 and 6.
const SETTINGS = TINY_SESSION_SETTINGS;
const RUN = TINY_SESSION_RUN;
const STEP4 = `${RUN}-step4`;
const SERVER = { only: ['node', 'deno'] as const, timeoutMs: 300_000 };

type JournalRecord =
  { type: 'commit'; refs: { sampleId: string }[] } | { type: 'ack'; ids: string[]; globalStep: number | null; optimizerDurable: boolean };

/** The llama-tiny target, six prompts, and run folders under one scratch store. */
async function runs(ctx: TestContext, label: string) {
  const tmp = tempStore(ctx.platform, label);
  const gpu = new Gpu(ctx.gpu);
  const { target, prompts } = await tinySessionTarget(ctx, tmp.files, gpu);
  const files = (run: string) => ctx.platform.files(`${tmp.files.root}/${run}`);
  /** Opens the session of run folder `run` (its ledger, checkpoints and spill); `seed` as the settings say. */
  const open = async (run: string, seed = SETTINGS.seed) => {
    const metadata = await FileMetadataStore.open(files(run), { dir: 'metadata' });
    const storage = { checkpoints: files(`${run}/checkpoints`), metadata, spill: files(`${run}/spill`) };
    const session = () =>
      Eagle3TrainingSession.open({
        ...{ gpu, target, trainPrompts: prompts, runId: RUN, now: () => performance.now(), storage },
        settings: { ...SETTINGS, seed },
      });
    return { session, close: () => metadata.close() };
  };
  return {
    files,
    /** Trains `steps` steps (all of them when more), then dies without a flush (a kill). */
    async train(run: string, steps: number, seed?: number) {
      const { session: opening, close } = await open(run, seed);
      const session = await opening();
      for (let i = 0; i < steps && (await session.step()); i++);
      session.destroy();
      await close();
    },
    /** Opens the run and gives up at once: the step it resumed at. */
    async resumedStep(run: string, seed?: number) {
      const { session: opening, close } = await open(run, seed);
      try {
        const session = await opening();
        session.destroy();
        return session.resumed?.step;
      } finally {
        await close();
      }
    },
    async refused(run: string, pattern: RegExp, what: string, seed?: number) {
      const { session, close } = await open(run, seed);
      try {
        await assertRejects(session, pattern, what);
      } finally {
        await close();
      }
    },
    async cleanup() {
      target.destroy();
      gpu.destroy();
      await tmp.cleanup();
    },
  };
}

/** Rewrites the run's journal with `edit`'s records, every frame re-encoded with its CRC; returns its path. */
async function forgeJournal(run: FileStore, edit: (records: JournalRecord[]) => JournalRecord[]): Promise<string> {
  const names = await run.list('metadata');
  assert(!names.includes('snapshot.json'), 'the whole ledger is in one journal');
  const path = `metadata/${names
    .filter((n) => n.startsWith('journal-'))
    .sort()
    .at(-1)!}`;
  const scan = scanJournal(await run.read(path), path);
  assertEqual(scan.tornBytes, 0, 'an intact journal');
  const frames = edit(scan.records as JournalRecord[]).map((r) => encodeFrame(r));
  const bytes = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
  frames.reduce((at, f) => (bytes.set(f, at), at + f.length), 0);
  await run.writeAtomic(path, bytes);
  return `${run.root}/${path}`;
}

/** Rewrites one file of a checkpoint folder with `edit` and records its new size and CRC-32 in COMPLETE. */
async function forgeCheckpoint(checkpoints: FileStore, dir: string, name: string, edit: (bytes: Uint8Array) => Uint8Array): Promise<void> {
  const bytes = edit(await checkpoints.read(`${dir}/${name}`));
  await checkpoints.writeAtomic(`${dir}/${name}`, bytes);
  const complete = JSON.parse(new TextDecoder().decode(await checkpoints.read(`${dir}/COMPLETE`))) as {
    files: Record<string, { bytes: number; crc32: number }>;
  };
  complete.files[name] = { bytes: bytes.byteLength, crc32: crc32(bytes) };
  await checkpoints.writeAtomic(`${dir}/COMPLETE`, new TextEncoder().encode(`${JSON.stringify(complete, null, 2)}\n`));
}

const editState = (edit: (state: Record<string, unknown>) => void) => (bytes: Uint8Array) => {
  const state = JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
  edit(state);
  return new TextEncoder().encode(`${JSON.stringify(state, null, 2)}\n`);
};

/** Sets element `index` of tensor `name` of a safetensors file image to `value`. */
const setElement = (name: string, index: number, value: number) => (bytes: Uint8Array) => {
  const entry = new SafetensorsFile(bytes, name).entry(name);
  new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).setFloat32(entry.begin + 4 * index, value, true);
  return bytes;
};

const acks = (records: JournalRecord[]) => records.filter((r) => r.type === 'ack');

export default defineSuite('training/checkpoints/resume-forgery', (t) => {
  t.test(
    'a ledger edited with its CRCs recomputed is refused naming the journal and the checkpoint: globalStep 6 → 4, a commit dropped, one more ack',
    async (ctx) => {
      const r = await runs(ctx, 'forged-ledger');
      try {
        // globalStep 6 → 4 in the finished run's last ack: the kept checkpoint of step 4 would be resumed as if
        // all twelve samples had been trained by then (the run would end at step 4 of 6).
        await r.train('finished', 99);
        assertEqual(await r.resumedStep('finished'), 6, 'the untouched run reopens at its last step');
        const journal = await forgeJournal(r.files('finished'), (records) => {
          acks(records).at(-1)!.globalStep = 4;
          return records;
        });
        await r.refused(
          'finished',
          new RegExp(
            `^resume ${RUN}: ${journal} acks 12 samples through step 4, but .*/checkpoints/${STEP4}/state\\.json consumed 8 \\(data\\.samplesConsumed\\): the journal acks samples no step trained; refusing`,
          ),
          'globalStep 6 → 4',
        );

        // Killed at step 5: the ledger is at step 4 (8 acked), all twelve samples committed.
        for (const run of ['dropped', 'extra']) {
          await r.train(run, 5);
          assertEqual(await r.resumedStep(run), 4, `${run}: the untouched run resumes at step 4`);
        }
        let dropped = '';
        await forgeJournal(r.files('dropped'), (records) => {
          const acked = new Set(acks(records).flatMap((a) => a.ids));
          const commit = records.find((c) => c.type === 'commit' && c.refs.some((x) => acked.has(x.sampleId)));
          assert(commit?.type === 'commit', 'a commit of an acked sample');
          dropped = commit.refs.find((x) => acked.has(x.sampleId))!.sampleId;
          commit.refs = commit.refs.filter((x) => x.sampleId !== dropped);
          return records;
        });
        await r.refused(
          'dropped',
          new RegExp(`^resume ${RUN}: .*/metadata/journal-00000000\\.log acks sample ${dropped}, but holds no commit of it`),
          'a committed id dropped (its task would be trained again: step 7 of 6)',
        );
        await forgeJournal(r.files('extra'), (records) => {
          const acked = new Set(acks(records).flatMap((a) => a.ids));
          const unacked = records.flatMap((c) => (c.type === 'commit' ? c.refs.map((x) => x.sampleId) : [])).find((id) => !acked.has(id));
          assert(unacked !== undefined, 'a committed sample not yet acked');
          acks(records).at(-1)!.ids.push(unacked);
          return records;
        });
        await r.refused(
          'extra',
          new RegExp(
            `^resume ${RUN}: .*/journal-00000000\\.log acks 9 samples through step 4, but .*/${STEP4}/state\\.json consumed 8 \\(data\\.samplesConsumed\\): the journal acks samples no step trained`,
          ),
          'one more id acked (a sample never trained)',
        );
      } finally {
        await r.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    'a lost ack record (the journal otherwise intact) is refused as a lost journal ack naming the journal, the sample and the checkpoint saved for it',
    async (ctx) => {
      const r = await runs(ctx, 'lost-ack');
      try {
        await r.train('run', 5);
        assertEqual(await r.resumedStep('run'), 4, 'the untouched run resumes at step 4');
        // The ack of step 4 vanishes whole: the ledger says step 3, whose checkpoint is kept, but the spills
        // of step 4's samples were deleted after that ack.
        const journal = await forgeJournal(r.files('run'), (records) => records.filter((x) => x !== acks(records).at(-1)));
        await r.refused(
          'run',
          new RegExp(
            `^resume ${RUN}: the journal ${journal} lost a durable ack: sample ${RUN}:r1-\\d+-s\\d+ \\(and 1 more\\) has no spill file, which is deleted only after its ack is durable, yet the journal does not ack it; checkpoint .*/checkpoints/${STEP4} was saved for it, after the journal's last acked step 3`,
          ),
          'lost ack named as such, not as spill damage',
        );
      } finally {
        await r.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    'a checkpoint edited with its COMPLETE record recomputed is refused naming the file: optimizer step 4 → 2, skippedSteps past the steps, Inf in v, NaN in a weight',
    async (ctx) => {
      const r = await runs(ctx, 'forged-checkpoint');
      try {
        const cases: [string, string, (bytes: Uint8Array) => Uint8Array, RegExp][] = [
          [
            'optimizer-step',
            'state.json',
            editState((s) => (s.optimizerStep = 2)),
            new RegExp(`^resume ${RUN}: .*/${STEP4}/state\\.json has optimizerStep 2 but globalStep 4: .*learning-rate schedule`),
          ],
          [
            'skipped-steps',
            'state.json',
            editState((s) => (s.skippedSteps = 5)),
            new RegExp(`^resume ${RUN}: .*/${STEP4}/state\\.json has skippedSteps 5, outside 0\\.\\.4`),
          ],
          [
            'inf-in-v',
            'optimizer.safetensors',
            setElement('fc.weight.v', 5, Infinity),
            new RegExp(
              `/${STEP4}/optimizer\\.safetensors: tensor "fc\\.weight\\.v" holds Infinity at element 5; AdamW's second moment must be finite and non-negative`,
            ),
          ],
          [
            'nan-weight',
            'weights.safetensors',
            setElement('fc.weight', 0, Number.NaN),
            new RegExp(`/${STEP4}/weights\\.safetensors: tensor "fc\\.weight" holds NaN at element 0; a weight must be finite`),
          ],
        ];
        for (const [run, file, edit, pattern] of cases) {
          await r.train(run, 5);
          assertEqual(await r.resumedStep(run), 4, `${run}: the untouched run resumes at step 4`);
          await forgeCheckpoint(r.files(`${run}/checkpoints`), STEP4, file, edit);
          await r.refused(run, pattern, run);
        }
        // The export reads the checkpoint the same way: the NaN is refused there too, naming the file.
        await assertRejects(
          () => exportEagle3Checkpoint(r.files('nan-weight/checkpoints'), STEP4, r.files('nan-weight'), 'draft'),
          new RegExp(`/nan-weight/checkpoints/${STEP4}/weights\\.safetensors: tensor "fc\\.weight" holds NaN at element 0`),
          'export of the NaN checkpoint',
        );
      } finally {
        await r.cleanup();
      }
    },
    SERVER,
  );

  t.test(
    "a checkpoint copied from another run (another seed), resumed with that run's settings, is refused naming the ledger and the plan",
    async (ctx) => {
      const r = await runs(ctx, 'copied-checkpoint');
      try {
        await r.train('mine', 5);
        await r.train('other', 5, 4);
        assertEqual(await r.resumedStep('mine'), 4, 'the untouched run resumes at step 4');
        // `speclab train --resume` takes its settings from the newest checkpoint: seed 4, so the contract matches it.
        const from = r.files('other/checkpoints');
        const to = r.files('mine/checkpoints');
        for (const name of await from.list(STEP4)) await to.writeAtomic(`${STEP4}/${name}`, await from.read(`${STEP4}/${name}`));
        await r.refused(
          'mine',
          new RegExp(
            `^resume ${RUN}: .*/mine/metadata/journal-00000000\\.log holds committed sample ${RUN}:r\\d+-\\d+-s\\d+, which is not in this run's plan \\(seed 4: 2 epochs of 6 sequences in rounds of 6, batch 2; 12 samples\\): the ledger is another run's`,
          ),
          'a copied checkpoint',
          4,
        );
      } finally {
        await r.cleanup();
      }
    },
    SERVER,
  );
});
