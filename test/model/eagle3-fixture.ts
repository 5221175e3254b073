/**
 * Test helper: the SpecForge EAGLE3 fixture (fixtures/eagle3) as reference inputs, parameters and
 * expected outputs for one variant (`main` = no key prefix, `strong` = `strong.`). Inputs that the
 * variants share (ids, masks, aux hidden states, vocab mapping) have no prefix in the file.
 */
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { isDraftTarget, type Eagle3Inputs } from '../../src/model/eagle3/inputs.ts';
import type { Tensor } from '../../src/gpu/tensor.ts';
import type { OptimizerConfig } from '../../src/optim/adamw-backend.ts';
import { EMBED_NAME, eagle3ParameterShapes, parseEagle3Config, type Eagle3Config } from '../../src/config/eagle3-config.ts';
import type { Eagle3RefInputs } from '../../src/reference/eagle3.ts';

export const VARIANTS = [
  { name: 'main', prefix: '' },
  { name: 'strong', prefix: 'strong.' },
] as const;

export interface Eagle3Fixture {
  file: SafetensorsFile;
  config: Eagle3Config;
  inputs: Eagle3RefInputs;
  /** Parameter values by SpecForge name, embedding included. */
  params: Record<string, Float32Array>;
  /** Trainable parameter names, in config order. */
  trainable: string[];
  /** `prefix + key` accessor for the variant's expected tensors. */
  expected(key: string): Float32Array;
}

export async function loadEagle3Fixture(fixture: (path: string) => Promise<Uint8Array>, prefix: string): Promise<Eagle3Fixture> {
  const file = new SafetensorsFile(await fixture('eagle3/eagle3_reference.safetensors'), 'eagle3_reference');
  const config = parseEagle3Config(new TextDecoder().decode(await fixture('eagle3/draft_config.json')), 'eagle3/draft_config.json');
  const [batch, seqLen] = file.shape('input_ids') as [number, number];
  const tttLength = Number(file.header.metadata.ttt_length ?? file.shape(`${prefix}plosses`)[0]);
  const trainable = eagle3ParameterShapes(config).map(([name]) => name);
  const params: Record<string, Float32Array> = {};
  for (const name of [EMBED_NAME, ...trainable]) params[name] = file.f32(`${prefix}param.${name}`);
  return {
    file,
    config,
    params,
    trainable,
    inputs: {
      batch,
      seqLen,
      tttLength,
      inputIds: file.i32('input_ids'),
      attentionMask: file.i32('attention_mask'),
      lossMask: file.i32('loss_mask'),
      hiddenStates: file.f32('hidden_states'),
      target: file.f32(`${prefix}target`),
      t2d: file.i32('t2d'),
      d2t: file.i32('d2t'),
    },
    expected: (key: string) => file.f32(`${prefix}${key}`),
  };
}

/** The optimizer the fixture's after_step.* was produced with (torch AdamW + clip_grad_norm_ 0.5). */
export const FIXTURE_OPTIMIZER: OptimizerConfig = {
  lr: 1e-3,
  beta1: 0.9,
  beta2: 0.95,
  eps: 1e-8,
  weightDecay: 0.01,
  maxGradNorm: 0.5,
  schedule: { kind: 'constant', totalSteps: 1, warmupRatio: 0 },
};

/** Upload the fixture's micro-batch (ids and masks as i32, loss mask as [B, S, 1] like SpecForge). */
/** Inputs whose teacher source is full-vocab logits (what the fixtures hold). */
export type LogitInputs = Eagle3Inputs & { target: Tensor };

export function uploadFixtureInputs(gpu: Gpu, fx: Eagle3Fixture): LogitInputs {
  const { batch: B, seqLen: S } = fx.inputs;
  const c = fx.config;
  return {
    inputIds: gpu.upload([B, S], 'i32', fx.inputs.inputIds, 'input_ids'),
    attentionMask: gpu.upload([B, S], 'i32', fx.inputs.attentionMask, 'attention_mask'),
    lossMask: gpu.upload([B, S, 1], 'i32', fx.inputs.lossMask, 'loss_mask'),
    hiddenStates: gpu.upload([B, S, 3 * c.targetHiddenSize], 'f32', fx.inputs.hiddenStates, 'hidden_state'),
    target: gpu.upload([B, S, c.vocabSize], 'f32', fx.inputs.target, 'target'),
  };
}

export function releaseInputs(gpu: Gpu, x: Eagle3Inputs): void {
  const target = isDraftTarget(x.target) ? [x.target.hidden, x.target.head, x.target.lse, x.target.tok] : [x.target];
  gpu.release(x.inputIds, x.attentionMask, x.lossMask, x.hiddenStates, ...target);
}
