/** The lock race's worker on Node: ./file-lock-race-worker.ts with the Node platform. */
import { nodePlatform } from '../../src/platform/node.ts';
import { runRaceWorker } from './file-lock-race-worker.ts';

await runRaceWorker(nodePlatform);
