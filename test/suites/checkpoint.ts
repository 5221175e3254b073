/** Suites of the checkpoint area: training checkpoints and resume, SGLang export/import, the speculators export (listed explicitly). */
import type { Suite } from '../harness/suite.ts';
import trainingCheckpoint from '../training/checkpoints/train-checkpoint.test.ts';
import resumeConsistency from '../training/checkpoints/resume-consistency.test.ts';
import resumeForgery from '../training/checkpoints/resume-forgery.test.ts';
import tensorFiniteness from '../training/checkpoints/tensor-finiteness.test.ts';
import eagle3Export from '../model/eagle3-export.test.ts';
import eagle3ExportSpeculators from '../model/eagle3-export-speculators.test.ts';
import exportCli from '../cli/export.test.ts';

export const checkpointSuites: readonly Suite[] = [
  trainingCheckpoint,
  resumeConsistency,
  tensorFiniteness,
  resumeForgery,
  eagle3Export,
  eagle3ExportSpeculators,
  exportCli,
];
