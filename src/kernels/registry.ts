/**
 * Every GPU kernel SpecLab ships, as an explicit list (no discovery). The registry test checks that
 * each embedded shader belongs to exactly one registered kernel, and compiles every kernel on the
 * device of each runtime (Tint in Node and Chromium, naga in Deno).
 */
import type { KernelDef } from '../gpu/kernel-def.ts';
import { ATTENTION_KERNELS, LANES_ONLY_KERNELS } from './attention.ts';
import { DECODE_ATTENTION_KERNEL } from './attention-decode.ts';
import { ATTENTION_PROBS_KERNEL } from './attention-probs.ts';
import { CAST_KERNELS } from './cast.ts';
import { CEILING_KERNELS } from './ceiling.ts';
import { COPY_STRIDED_KERNEL } from './copy-strided.ts';
import { EMBEDDING_KERNELS } from './embedding.ts';
import { MATMUL_PAIR_KERNEL } from './linear-grads.ts';
import { LINEAR_RESIDUAL_KERNEL } from './linear-residual.ts';
import { HARD_CE_KERNELS, SOFT_CE_KERNELS } from './loss.ts';
import { REDUCE_KERNEL } from './loss-reduce.ts';
import { MATMUL_F16W_KERNELS, MATMUL_KERNELS } from './matmul.ts';
import { METRICS_KERNELS } from './metrics.ts';
import { OPTIM_KERNELS } from './optim.ts';
import { RMSNORM_KERNELS } from './rmsnorm.ts';
import { RMSNORM_GATHER_KERNELS } from './rmsnorm-gather.ts';
import { RMSNORM_PAIR_KERNELS } from './rmsnorm-pair.ts';
import { ROPE_QKV_JOIN_KERNEL, ROPE_QKV_SPLIT_KERNEL } from './rope-qkv.ts';
import { ROPE_TABLE_KERNEL } from './rope-table.ts';
import { SWIGLU_KERNELS } from './swiglu.ts';
import { SWIGLU_DOWN_GRADS_KERNEL } from './swiglu-down-grads.ts';
import { LINEAR_SWIGLU_KERNEL } from './linear-swiglu.ts';
import { TARGET_STATS_KERNELS, TEACHER_KERNELS, TEACHER_PRUNED_KERNELS } from './teacher.ts';

export interface KernelFamily {
  readonly family: string;
  readonly kernels: readonly KernelDef[];
}

export const KERNEL_FAMILIES: readonly KernelFamily[] = [
  {
    family: 'matmul',
    kernels: [...Object.values(MATMUL_KERNELS), ...Object.values(MATMUL_F16W_KERNELS), MATMUL_PAIR_KERNEL, LINEAR_RESIDUAL_KERNEL],
  },
  { family: 'embedding', kernels: Object.values(EMBEDDING_KERNELS) },
  {
    family: 'rmsnorm',
    kernels: [...Object.values(RMSNORM_KERNELS), ...Object.values(RMSNORM_GATHER_KERNELS), ...Object.values(RMSNORM_PAIR_KERNELS)],
  },
  { family: 'rope', kernels: [ROPE_TABLE_KERNEL, ROPE_QKV_SPLIT_KERNEL, ROPE_QKV_JOIN_KERNEL] },
  // The SwiGLU activation alone, fused into the gate and up projections' (linear-swiglu.ts), and its
  // backward fused into the down projection's (swiglu-down-grads.ts).
  { family: 'swiglu', kernels: [...Object.values(SWIGLU_KERNELS), LINEAR_SWIGLU_KERNEL, SWIGLU_DOWN_GRADS_KERNEL] },
  {
    family: 'attention',
    kernels: [...Object.values(ATTENTION_KERNELS), ...LANES_ONLY_KERNELS, DECODE_ATTENTION_KERNEL, ATTENTION_PROBS_KERNEL],
  },
  {
    family: 'loss',
    kernels: [
      ...[TEACHER_KERNELS, TEACHER_PRUNED_KERNELS, TARGET_STATS_KERNELS, SOFT_CE_KERNELS, HARD_CE_KERNELS, METRICS_KERNELS].flatMap((k) =>
        Object.values(k),
      ),
      REDUCE_KERNEL,
    ],
  },
  { family: 'optim', kernels: Object.values(OPTIM_KERNELS) },
  { family: 'copy', kernels: [COPY_STRIDED_KERNEL, ...Object.values(CAST_KERNELS)] },
  // The adapter's FMA rate and bandwidth (bench/ceiling.ts), which the other families' figures are fractions of.
  { family: 'ceiling', kernels: Object.values(CEILING_KERNELS) },
];

export function allKernels(): KernelDef[] {
  return KERNEL_FAMILIES.flatMap((f) => f.kernels);
}
