/**
 * The in-memory PromptBook against the PromptLedger conformance contract, in every runtime: the same
 * checks the Redis prompt ledger passes in redis-control-stores.test.ts. (The controller's prompt
 * endpoints over it: prompts.test.ts.)
 */
import { defineSuite } from '../harness/suite.ts';
import { PromptBook } from '../../src/control/prompt-book.ts';
import { promptLedgerConformance } from './prompt-ledger-conformance.ts';

export default defineSuite('control/prompt-book', (t) => {
  promptLedgerConformance(t, 'memory ledger', async () => ({
    open: (options) => new PromptBook({ ...options, clock: options.clock ?? (() => performance.now()) }),
    cleanup: async () => {},
  }));
});
