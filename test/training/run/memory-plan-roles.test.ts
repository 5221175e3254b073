/**
 * The memory plan of each role (src/training/run/memory-plan-roles.ts): the colocated plan is
 * planTrainingMemory's item for item; the trainer holds the draft's step and one sample being
 * batched, never the capture; the rollout holds the target, its capture, one lease's samples and one
 * sample's read-back, never the draft; `speclab train --cluster` is planned as the trainer.
 * Suggestions name flags, never internal names, and never go below a value that runs.
 */
import { planTrainingMemory, type MemoryPlan, type MemoryPlanInput } from '../../../src/training/run/memory-plan.ts';
import { planRoleMemory, planWithRecompute } from '../../../src/training/run/memory-plan-roles.ts';
import { trainMemoryPlan } from '../../../src/training/run/train-memory.ts';
import { assert, assertDeepEqual, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';
import { BIG, tinyInput as planInput, tinyTarget } from './memory-plan-fixture.ts';

/** The roles' plans include the target's generation (regeneration and evaluation), so this plans a batch of 4. */
const tinyInput = (overrides: Partial<MemoryPlanInput> = {}): MemoryPlanInput => planInput({ generationBatch: 4, ...overrides });

const bytesOf = (plan: MemoryPlan, key: string) => plan.items.find((i) => i.key === key)?.bytes;
/** The largest phase: every item but those of the other two phases (memory-plan-phases.ts). */
const largestPhase = (plan: MemoryPlan) => Math.max(...plan.phases.map((p) => p.bytes));

export default defineSuite('training/run/memory-plan-roles', (t) => {
  t.test('colocated is planTrainingMemory; trainer and rollout hold their part; each total is its largest phase', () => {
    const x = tinyInput();
    const colocated = planRoleMemory('colocated', x, { limits: BIG });
    const reference = planTrainingMemory(x, { limits: BIG });
    assertDeepEqual(colocated.items, reference.items, 'colocated: the same items');
    assertEqual(colocated.totalBytes, reference.totalBytes, 'colocated: the same total');

    const trainer = planRoleMemory('trainer', x, { limits: BIG });
    const one = bytesOf(planTrainingMemory({ ...x, featureStoreSamples: 1 }, { limits: BIG }), 'featureStore')!;
    assertEqual(bytesOf(trainer, 'targetCapture'), undefined, 'the trainer runs no capture');
    assertEqual(bytesOf(trainer, 'featureStore'), undefined, 'no feature store');
    assertEqual(bytesOf(trainer, 'sampleBeingBatched'), one, 'one sample being batched');
    for (const key of ['targetWeights', 'targetKv', 'batch', 'draftWeights', 'gradients', 'moments', 'activations', 'scratch'])
      assertEqual(bytesOf(trainer, key), bytesOf(colocated, key), `trainer: ${key} as colocated`);

    const rollout = planRoleMemory('rollout', x, { limits: BIG, rolloutBatch: 2 });
    assertDeepEqual(
      rollout.items.map((i) => i.key),
      ['targetWeights', 'targetCapture', 'featureStore', 'sampleReadback', 'staging'],
      'rollout items',
    );
    assertEqual(bytesOf(rollout, 'featureStore'), 2 * one, 'the samples of one lease');
    assertEqual(bytesOf(rollout, 'sampleReadback'), one, 'the read-back of one sample');
    assertEqual(bytesOf(rollout, 'targetWeights'), bytesOf(colocated, 'targetWeights'), 'the same target');
    for (const plan of [colocated, trainer, rollout]) {
      assertEqual(plan.totalBytes, largestPhase(plan), 'total = the largest phase');
      assert(plan.fits && plan.suggestions.length === 0, 'fits, nothing to suggest');
    }
  });

  t.test('refused: suggestions name the flags of the role, never below a value that runs', () => {
    const x = tinyInput({ batchSize: 4, featureStoreSamples: 16 });
    for (const role of ['colocated', 'trainer', 'rollout'] as const) {
      const free = planRoleMemory(role, x, { limits: BIG });
      const plan = planRoleMemory(role, x, { limits: BIG, budgetBytes: Math.floor(free.totalBytes * 0.9) });
      assert(!plan.fits && /over the budget/.test(plan.problems[0]), `${role}: over the budget`);
      assert(plan.suggestions.length > 0, `${role}: suggestions`);
      for (const s of plan.suggestions) assert(/^(--[a-z-]+ |all of these|even all)/.test(s), `${role}: a flag first: ${s}`);
      assert(!plan.suggestions.some((s) => /feature-store|batch size|TTT length/.test(s)), `${role}: no internal names`);
      assertEqual(plan.totalBytes, largestPhase(plan), `${role}: total = the largest phase`);
    }
    const colocated = planRoleMemory('colocated', x, { limits: BIG, budgetBytes: 1024 });
    const round = colocated.suggestions.find((s) => s.startsWith('--round-prompts'));
    // A round is never cut below one batch (4): the halving stops there.
    assert(round !== undefined && /^--round-prompts 16 → 4: /.test(round), `round floor: ${colocated.suggestions.join(' | ')}`);
    assert(/^even all of them at their lowest need/.test(colocated.suggestions.at(-1)!), 'nothing fits 1 KiB: says so');
    const trainer = planRoleMemory('trainer', x, { limits: BIG, budgetBytes: 1024 });
    assert(!trainer.suggestions.some((s) => s.startsWith('--round-prompts')), 'the trainer holds no round');
    const rollout = planRoleMemory('rollout', x, { limits: BIG, budgetBytes: 1024, rolloutBatch: 8 });
    assert(
      rollout.suggestions.some((s) => s.startsWith('--rollout-batch 8 → 1 (speclab rollout --batch 1)')),
      `rollout batch: ${rollout.suggestions.join(' | ')}`,
    );
    assert(!rollout.suggestions.some((s) => /^--(batch-size|ttt-length)/.test(s)), 'the rollout has no draft step to shrink');
  });

  t.test('speclab train --cluster is planned as the trainer; without it, as before', () => {
    const tc = tinyTarget();
    const data = {
      trainSequences: Array.from({ length: 8 }, () => ({
        inputIds: new Array<number>(64).fill(1),
        lossMask: new Array<number>(64).fill(1),
      })),
      evalTrainPrompts: [],
      heldPrompts: [[1, 2]],
      lines: [],
    };
    const settings = { batchSize: 2, tttLength: 3, roundPrompts: 4, responseLength: 8, evalEvery: 0 };
    const single = trainMemoryPlan(settings, tc, 64, data, BIG);
    const cluster = trainMemoryPlan({ ...settings, cluster: 'redis://127.0.0.1:6379/0' }, tc, 64, data, BIG);
    assert(
      single.items.some((i) => i.key === 'targetCapture'),
      'single process: its own capture',
    );
    assertDeepEqual(cluster.items, planRoleMemory('trainer', single.input, { limits: BIG }).items, 'cluster: the trainer plan');
    assert(cluster.totalBytes < single.totalBytes, 'the trainer holds less');
  });

  t.test('activation recompute: each TTT step keeps h_out, one body at a time; auto turns it on only when that makes the plan fit', () => {
    const x = tinyInput();
    const kept = planRoleMemory('colocated', x, { limits: BIG });
    const recomputing = planRoleMemory('colocated', { ...x, recompute: true }, { limits: BIG });
    // tinyInput: R = 128 rows, H = 64, I = 128, L = 3 (memory-plan.test.ts counts a kept step at 419.5 KiB by hand).
    // A step keeps h_out [R, 64]: 32 KiB; the rest of it, its body, is 387.5 KiB.
    // Recompute keeps no body: the one being recomputed is the step scratch's (its moments, memory-plan-moments.ts).
    const R = 128;
    const body = 419.5 * 1024 - R * 64 * 4;
    assertEqual(bytesOf(recomputing, 'activations'), bytesOf(kept, 'activations')! - 3 * body, 'activations by hand');
    assert(bytesOf(recomputing, 'scratch')! > bytesOf(kept, 'scratch')!, 'the recomputed body is scratch');
    assert(
      bytesOf(recomputing, 'activations')! + bytesOf(recomputing, 'scratch')! < bytesOf(kept, 'activations')! + bytesOf(kept, 'scratch')!,
      'recompute holds less',
    );
    for (const item of kept.items)
      if (item.key !== 'activations' && item.key !== 'scratch')
        assertEqual(bytesOf(recomputing, item.key), item.bytes, `${item.key}: unchanged`);

    const between = Math.floor((kept.totalBytes + recomputing.totalBytes) / 2);
    const options = { limits: BIG, budgetBytes: between };
    const auto = planWithRecompute('colocated', x, options, 'auto');
    assert(auto.fits && auto.input.recompute === true, 'auto, a budget only the recomputing plan fits: recompute on');
    assertEqual(auto.totalBytes, recomputing.totalBytes, 'auto: the recomputing total');
    const roomy = planWithRecompute('colocated', x, { limits: BIG, budgetBytes: kept.totalBytes }, 'auto');
    assert(roomy.fits && roomy.input.recompute === false, 'auto, room for every activation: recompute off');
    const off = planWithRecompute('colocated', x, options, 'off');
    assert(!off.fits && off.input.recompute === false, '--recompute off under that budget: refused');
    const tight = planWithRecompute('colocated', x, { limits: BIG, budgetBytes: recomputing.totalBytes - 1 }, 'auto');
    assert(!tight.fits && tight.input.recompute === false, 'auto, nothing fits: the plan as asked, refused');
    assert(planWithRecompute('trainer', x, { limits: BIG }, 'on').input.recompute === true, '--recompute on: the trainer too');
  });
});
