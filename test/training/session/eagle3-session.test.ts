/**
 * Eagle3TrainingSession (src/training/session/eagle3-session.ts) on the llama-tiny fixture target: a run
 * killed between checkpoints and reopened on the same storage continues on the same stream with the
 * same losses as an uninterrupted run, and its ledger acks every sample exactly once.
 * Storage per runtime: the file journal + files in Node/Deno; IndexedDB (ledger and files) in Chromium.
 */
import { FileMetadataStore } from '../../../src/control/file-metadata-store.ts';
import { IndexedDbMetadataStore } from '../../../src/control/indexeddb-metadata-store.ts';
import type { MetadataStore } from '../../../src/control/metadata-store.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import type { FileStore } from '../../../src/ports/storage.ts';
import { listCheckpoints } from '../../../src/training/checkpoints/train-checkpoint.ts';
import { Eagle3TrainingSession, type SessionStep } from '../../../src/training/session/eagle3-session.ts';
import { assert, assertEqual, assertRejects, assertRelClose } from '../../harness/assert.ts';
import { defineSuite, type TestContext } from '../../harness/suite.ts';
import { tempStore } from '../../data/temp-store.ts';
import { tinySessionTarget, TINY_SESSION_RUN, TINY_SESSION_SETTINGS } from './tiny-session.ts';

const SETTINGS = TINY_SESSION_SETTINGS;
const RUN = TINY_SESSION_RUN;

async function openMetadata(ctx: TestContext, files: FileStore, name: string): Promise<MetadataStore> {
  return ctx.platform.name === 'browser'
    ? IndexedDbMetadataStore.open(ctx.platform, name)
    : FileMetadataStore.open(files, { dir: 'metadata' });
}

export default defineSuite('training/session/eagle3-session', (t) => {
  t.test(
    'killed between checkpoints and reopened: same losses as an uninterrupted run, every sample acked once',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'session');
      const dbNames: string[] = [];
      const gpu = new Gpu(ctx.gpu);
      let loaded: Awaited<ReturnType<typeof tinySessionTarget>>;
      try {
        loaded = await tinySessionTarget(ctx, tmp.files, gpu);
      } catch (err) {
        await tmp.cleanup();
        throw err;
      }
      const { target, prompts } = loaded;
      // What the ledger said when each step was reported: the report must come before its ack.
      const reports: { label: string; step: number; ackedAtReport: number; checkpointed: boolean }[] = [];
      const open = async (label: string) => {
        const root = `${tmp.files.root}/${label}`;
        const db = `${root.replaceAll('/', '_')}-ledger`;
        dbNames.push(db);
        const metadata = await openMetadata(ctx, ctx.platform.files(root), db);
        const session = await Eagle3TrainingSession.open({
          gpu,
          target,
          trainPrompts: prompts,
          settings: SETTINGS,
          runId: RUN,
          now: () => performance.now(),
          storage: { checkpoints: ctx.platform.files(`${root}/checkpoints`), metadata, spill: ctx.platform.files(`${root}/spill`) },
          onStep: async (st) => {
            reports.push({
              label,
              step: st.globalStep,
              ackedAtReport: (await metadata.durableMarker()).globalStep ?? 0,
              checkpointed: st.checkpointed,
            });
          },
        });
        return { session, metadata, checkpoints: ctx.platform.files(`${root}/checkpoints`) };
      };
      const runAll = async (s: Eagle3TrainingSession, limit = Infinity) => {
        const steps: SessionStep[] = [];
        while (steps.length < limit) {
          const st = await s.step();
          if (!st) break;
          steps.push(st);
        }
        return steps;
      };
      try {
        const whole = await open('whole');
        assertEqual(whole.session.totalSteps, 6, 'two epochs of six sequences, batch 2');
        const wholeSteps = await runAll(whole.session);
        assertEqual(wholeSteps.length, 6, 'every step ran');
        assertEqual((await whole.session.status()).controller.durableAcked, 12, 'every sample acked');
        const wholeReports = reports.filter((r) => r.label === 'whole');
        assertEqual(wholeReports.map((r) => r.step).join(), '1,2,3,4,5,6', 'every step reported once');
        assert(
          wholeReports.every((r) => r.ackedAtReport < r.step),
          `each step is reported before its durable ack: ${JSON.stringify(wholeReports)}`,
        );
        assert(
          wholeReports.some((r) => r.checkpointed),
          'checkpointed steps among them',
        );
        whole.session.destroy();
        await whole.metadata.close();

        // Step 5 trains past the checkpoint of step 4, the end of round 0 is step 3: "kill" after 5.
        const first = await open('killed');
        const firstSteps = await runAll(first.session, 5);
        assertEqual((await first.metadata.durableMarker()).globalStep, 4, 'ledger at the last checkpoint (step 4) when killed at step 5');
        first.session.destroy(); // no flush: the process dies here
        await first.metadata.close();

        const second = await open('killed');
        assertEqual(second.session.resumed?.step, 4, 'resumed from step 4');
        assertEqual(second.session.resumed?.released, 8, 'samples of steps 1-4 are never trained again');
        assertEqual(second.session.resumed?.requeued, 4, 'the rest of round 1 comes back from the spill');
        const secondSteps = await runAll(second.session);
        assertEqual(secondSteps.map((s) => s.globalStep).join(), '5,6', 'the remaining steps');
        const losses = [...firstSteps.slice(0, 4), ...secondSteps].map((s) => s.loss);
        let worst = 0;
        for (const [i, l] of losses.entries())
          worst = Math.max(worst, assertRelClose([l], [wholeSteps[i].loss], 1e-6, `loss of step ${i + 1}`));
        ctx.note('lossRelErr', worst.toExponential(2));
        const marker = await second.metadata.durableMarker();
        assertEqual(marker.acked.size, 12, 'every sample acked exactly once');
        assertEqual(marker.globalStep, 6, 'ledger at the final step');
        assert((await listCheckpoints(second.checkpoints, RUN)).length <= 2, 'at most two checkpoints kept');
        const wFinal = await second.session.currentWeights();
        const fresh = await open('whole');
        assertEqual(fresh.session.globalStep, 6, 'a finished run reopens at its last step');
        const wWhole = await fresh.session.currentWeights();
        for (const [name, w] of Object.entries(wWhole)) assertRelClose(wFinal[name], w, 1e-5, `weight ${name}`);
        assertEqual(await fresh.session.step(), undefined, 'nothing left to train');
        fresh.session.destroy();
        await fresh.metadata.close();
        second.session.destroy();
        await second.metadata.close();
      } finally {
        target.destroy();
        gpu.destroy();
        await tmp.cleanup();
        if (ctx.platform.name === 'browser') for (const db of dbNames) await ctx.platform.deleteKeyValueDatabase(db);
      }
    },
    { timeoutMs: 300_000 },
  );

  t.test(
    'an acknowledged ack cut from the journal is refused at resume naming the damaged journal, not the spill',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'session-torn');
      const gpu = new Gpu(ctx.gpu);
      const { target, prompts } = await tinySessionTarget(ctx, tmp.files, gpu);
      const root = `${tmp.files.root}/run`;
      const open = async () => {
        const metadata = await FileMetadataStore.open(ctx.platform.files(root), { dir: 'metadata' });
        const session = await Eagle3TrainingSession.open({
          gpu,
          target,
          trainPrompts: prompts,
          settings: SETTINGS,
          runId: RUN,
          now: () => performance.now(),
          storage: { checkpoints: ctx.platform.files(`${root}/checkpoints`), metadata, spill: ctx.platform.files(`${root}/spill`) },
        });
        return { session, metadata };
      };
      try {
        const first = await open();
        for (let i = 0; i < 4; i++) await first.session.step(); // step 4 checkpoints and acks; its spills are deleted
        assertEqual((await first.metadata.durableMarker()).globalStep, 4, 'step 4 durably acked');
        first.session.destroy();
        await first.metadata.close();
        // Disk damage after the fsync: the last journal record (that ack) loses its last bytes.
        const metaFiles = ctx.platform.files(`${root}/metadata`);
        const journal = (await metaFiles.list(''))
          .filter((n) => n.startsWith('journal-'))
          .sort()
          .at(-1)!;
        const bytes = await metaFiles.read(journal);
        await metaFiles.writeAtomic(journal, bytes.slice(0, bytes.length - 3));
        const metadata = await FileMetadataStore.open(ctx.platform.files(root), { dir: 'metadata' });
        try {
          await assertRejects(
            () =>
              Eagle3TrainingSession.open({
                gpu,
                target,
                trainPrompts: prompts,
                settings: SETTINGS,
                runId: RUN,
                now: () => performance.now(),
                storage: { checkpoints: ctx.platform.files(`${root}/checkpoints`), metadata, spill: ctx.platform.files(`${root}/spill`) },
              }),
            /resume session-test: \d+ committed but unacked sample\(s\) .* have no spill file, which is deleted only after a durable ack: the ledger lost an acknowledged record \(opening .*metadata dropped a torn tail of \d+ bytes/,
            'refused naming the journal',
          );
        } finally {
          await metadata.close();
        }
      } finally {
        target.destroy();
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { timeoutMs: 300_000, only: ['node', 'deno'] },
  );

  t.test(
    'compact features (the target hidden state, logsumexp and argmax) train as the full logits do: every loss and weight within 1e-5',
    async (ctx) => {
      const tmp = tempStore(ctx.platform, 'session-compact');
      const gpu = new Gpu(ctx.gpu);
      try {
        const { target, prompts } = await tinySessionTarget(ctx, tmp.files, gpu, 12);
        const run = async (targetRepr: 'logits' | 'hidden_state') => {
          const root = `${tmp.files.root}/${targetRepr}`;
          const db = `${root.replaceAll('/', '_')}-ledger`;
          const metadata = await openMetadata(ctx, ctx.platform.files(root), db);
          const session = await Eagle3TrainingSession.open({
            gpu,
            target,
            trainPrompts: prompts,
            settings: { ...SETTINGS, targetRepr },
            runId: RUN,
            now: () => performance.now(),
            storage: { checkpoints: ctx.platform.files(`${root}/checkpoints`), metadata, spill: ctx.platform.files(`${root}/spill`) },
          });
          const losses: number[] = [];
          for (let st = await session.step(); st; st = await session.step()) losses.push(st.loss, ...st.plosses);
          const spilled = (await session.status()).featureStore.spill?.bytesWritten ?? 0;
          const weights = await session.currentWeights();
          session.destroy();
          await metadata.close();
          if (ctx.platform.name === 'browser') await ctx.platform.deleteKeyValueDatabase(db);
          return { losses, weights, spilled };
        };
        const full = await run('logits');
        const compact = await run('hidden_state');
        ctx.note('lossRelErr', assertRelClose(compact.losses, full.losses, 1e-5, 'losses and per-TTT-step losses'));
        let worst = 0;
        for (const [name, w] of Object.entries(full.weights))
          worst = Math.max(worst, assertRelClose(compact.weights[name], w, 1e-5, `weight ${name}`));
        ctx.note('weightRelErr', worst);
        // The spill wrote every sample once: the compact ones hold [S, H] + 2 [S] where the others hold [S, V].
        const { hiddenSize: H, vocabSize: V } = target.config;
        assertEqual(
          compact.spilled / full.spilled < 1,
          V > H + 2,
          `compact samples are smaller (${compact.spilled} against ${full.spilled} bytes)`,
        );
        target.destroy();
      } finally {
        gpu.destroy();
        await tmp.cleanup();
      }
    },
    { timeoutMs: 300_000 },
  );
});
