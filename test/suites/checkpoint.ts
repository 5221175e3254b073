/** Suites of the checkpoint area: training checkpoints and resume, SGLang export/import, the speculators export (listed explicitly). */
import type { Suite } from '../harness/suite.ts';
import trainingCheckpoint from '../training/checkpoints/train-checkpoint.test.ts';
import eagle3Export from '../model/eagle3-export.test.ts';
import eagle3ExportSpeculators from '../model/eagle3-export-speculators.test.ts';
import exportCli from '../cli/export.test.ts';

export const checkpointSuites: readonly Suite[] = [trainingCheckpoint, eagle3Export, eagle3ExportSpeculators, exportCli];
