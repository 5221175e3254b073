/**
 * The cross-checks of a resume (src/training/checkpoints/resume-consistency.ts) on hand-made records:
 * a consistent ledger, checkpoint and plan pass; each way one record can disagree with the others is
 * refused naming both records and both values. The forgeries on a real run folder are
 * ./resume-forgery.test.ts.
 */
import {
  checkpointAgainstContract,
  checkpointAgainstLedger,
  checkpointCounters,
  ledgerAgainstPlan,
  sessionStreamPlan,
  type CheckpointRecord,
  type LedgerRecords,
} from '../../../src/training/checkpoints/resume-consistency.ts';
import { SPECFORGE_OPTIMIZER } from '../../../src/optim/adamw-backend.ts';
import { CHECKPOINT_FORMAT, CHECKPOINT_VERSION, type TrainingState } from '../../../src/training/checkpoints/train-checkpoint.ts';
import { assert, assertEqual } from '../../harness/assert.ts';
import { defineSuite } from '../../harness/suite.ts';

const RUN = 'run';
// Two rounds of five tasks, batch 2: steps of 2, 2, 1 samples in each round (a step never spans two rounds).
const ROUNDS = [0, 1].map((r) => Array.from({ length: 5 }, (_, i) => ({ taskId: `r${r}-${i}` })));
const PLAN = sessionStreamPlan(RUN, ROUNDS, { seed: 7, epochs: 1, roundPrompts: 5, batchSize: 2 }, 10);
const id = (r: number, i: number) => `${RUN}:r${r}-${i}`;
const CONTRACT = { strategy: 'eagle3', tttLength: 3, batchSize: 2, accumulationSteps: 1, draftConfigHash: 'abc', dataHash: 'def' };

function state(fields: Partial<TrainingState> = {}): TrainingState {
  return {
    format: CHECKPOINT_FORMAT,
    version: CHECKPOINT_VERSION,
    runId: RUN,
    globalStep: 4,
    microStep: 4,
    optimizerStep: 4,
    skippedSteps: 0,
    epoch: 0,
    data: { epochBatch: 4, epochSamples: 7, samplesConsumed: 7 },
    rng: {},
    optimizer: SPECFORGE_OPTIMIZER,
    contract: CONTRACT,
    parameters: [],
    buffers: [],
    extra: {},
    ...fields,
  };
}

const checkpoint = (fields: Partial<TrainingState> = {}): CheckpointRecord => ({
  source: 'ckpt/run-step4/state.json',
  state: state(fields),
});

/** Through step 4: all of round 0 and the first two samples of round 1 acked; everything committed. */
function ledger(fields: Partial<LedgerRecords> = {}): LedgerRecords {
  return {
    source: 'meta/journal-00000000.log',
    acked: new Set([0, 1, 2, 3, 4].map((i) => id(0, i)).concat([id(1, 0), id(1, 1)])),
    globalStep: 4,
    committed: new Set(ROUNDS.flatMap((round, r) => round.map((_, i) => id(r, i)))),
    ...fields,
  };
}

const refused = (why: string | undefined, pattern: RegExp, what: string) => {
  assert(why !== undefined && pattern.test(why), `${what}: ${why ?? 'not refused'}`);
};

export default defineSuite('training/checkpoints/resume-consistency', (t) => {
  t.test('consistent records pass every check', () => {
    assertEqual(ledgerAgainstPlan(ledger(), PLAN), undefined, 'ledger against plan');
    assertEqual(checkpointCounters(checkpoint()), undefined, 'counters');
    assertEqual(checkpointAgainstLedger(checkpoint(), ledger(), PLAN), undefined, 'checkpoint against ledger and plan');
    assertEqual(checkpointAgainstContract(checkpoint(), RUN, CONTRACT, 'resumed'), undefined, 'contract');
    const last = checkpoint({
      globalStep: 6,
      optimizerStep: 6,
      microStep: 6,
      data: { epochBatch: 6, epochSamples: 10, samplesConsumed: 10 },
    });
    const done = ledger({ globalStep: 6, acked: new Set(ROUNDS.flatMap((round, r) => round.map((_, i) => id(r, i)))) });
    assertEqual(checkpointAgainstLedger(last, done, PLAN), undefined, 'a finished run');
    assert(PLAN.source.includes('seed 7') && PLAN.source.includes('10 samples'), `the plan names its settings: ${PLAN.source}`);
  });

  t.test('the ledger against the plan: foreign commits, acks without a commit, a step past the plan', () => {
    refused(
      ledgerAgainstPlan(ledger({ committed: new Set([...ledger().committed, 'other:r0-0']) }), PLAN),
      /^meta\/journal-00000000\.log holds committed sample other:r0-0, which is not in this run's plan \(seed 7: .*\): the ledger is another run's/,
      'a commit of another run',
    );
    const committed = new Set(ledger().committed);
    committed.delete(id(0, 3));
    refused(
      ledgerAgainstPlan(ledger({ committed }), PLAN),
      /^meta\/journal-00000000\.log acks sample run:r0-3, but holds no commit of it/,
      'an acked sample whose commit was dropped',
    );
    refused(ledgerAgainstPlan(ledger({ globalStep: 9 }), PLAN), /is at step 9, but this run's plan .* has 6 steps/, 'step 9 of 6');
  });

  t.test("the checkpoint's own counters: optimizer step, skipped steps, micro-batches", () => {
    refused(
      checkpointCounters(checkpoint({ optimizerStep: 2 })),
      /^ckpt\/run-step4\/state\.json has optimizerStep 2 but globalStep 4: .*learning-rate schedule/,
      'optimizer step edited',
    );
    refused(checkpointCounters(checkpoint({ skippedSteps: 5 })), /has skippedSteps 5, outside 0\.\.4/, 'more skips than steps');
    refused(checkpointCounters(checkpoint({ skippedSteps: -1 })), /has skippedSteps -1, outside 0\.\.4/, 'negative skips');
    refused(checkpointCounters(checkpoint({ skippedSteps: 1.5 })), /has skippedSteps 1\.5/, 'fractional skips');
    refused(checkpointCounters(checkpoint({ microStep: 3 })), /has microStep 3 but globalStep 4 × accumulationSteps 1 = 4/, 'micro step');
  });

  t.test('the checkpoint against the ledger and the plan: step, acked count, samples and rounds', () => {
    refused(
      checkpointAgainstLedger(checkpoint(), ledger({ globalStep: 3 }), PLAN),
      /^meta\/journal-00000000\.log is at step 3, but ckpt\/run-step4\/state\.json is step 4$/,
      'steps differ',
    );
    refused(
      checkpointAgainstLedger(checkpoint(), ledger({ acked: new Set([...ledger().acked, id(1, 2)]) }), PLAN),
      /acks 8 samples through step 4, but ckpt\/run-step4\/state\.json consumed 7 \(data\.samplesConsumed\): the journal acks samples no step trained/,
      'one more id acked',
    );
    const fewer = new Set(ledger().acked);
    fewer.delete(id(1, 1));
    refused(
      checkpointAgainstLedger(checkpoint(), ledger({ acked: fewer }), PLAN),
      /acks 6 samples through step 4, but .* consumed 7 .*: the journal lost an ack/,
      'an ack lost',
    );
    const eight = new Set([...ledger().acked, id(1, 2)]);
    refused(
      checkpointAgainstLedger(checkpoint({ data: { epochBatch: 4, epochSamples: 8, samplesConsumed: 8 } }), ledger({ acked: eight }), PLAN),
      /consumed 8 samples \(data\.samplesConsumed\) at step 4, but this run's plan .* trains 7 through that step/,
      'ledger and checkpoint agree with each other, not with the plan',
    );
    const swapped = new Set(ledger().acked);
    swapped.delete(id(0, 2));
    swapped.add(id(1, 2));
    refused(
      checkpointAgainstLedger(checkpoint(), ledger({ acked: swapped }), PLAN),
      /does not ack sample run:r0-2 of round 0, but this run's plan .* trains it before step 4 of ckpt/,
      'a sample of an earlier round left unacked',
    );
    refused(
      checkpointAgainstLedger(checkpoint({ globalStep: 7 }), ledger({ globalStep: 7 }), PLAN),
      /is step 7, but this run's plan .* has 6 steps/,
      'a checkpoint past the plan',
    );
  });

  t.test('every kept checkpoint is of this run: run id and contract', () => {
    refused(
      checkpointAgainstContract(checkpoint({ runId: 'other' }), RUN, CONTRACT, 'resumed/state.json'),
      /^ckpt\/run-step4\/state\.json is of run other, resumed\/state\.json of run run$/,
      'another run id',
    );
    refused(
      checkpointAgainstContract(checkpoint({ contract: { ...CONTRACT, draftConfigHash: 'xyz' } }), RUN, CONTRACT, 'resumed/state.json'),
      /^ckpt\/run-step4\/state\.json and resumed\/state\.json are checkpoints of different runs \(draftConfigHash "xyz" against "abc"\)/,
      'another draft config hash (another seed)',
    );
  });
});
