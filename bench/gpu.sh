#!/usr/bin/env bash
# The end-to-end benchmarks at their full sizes, for a machine with a real GPU (any WebGPU adapter
# Dawn accepts; the same commands run on the software adapter, only slower). Prints one JSON object
# per benchmark; copy the numbers, with these commands, into bench/RESULTS.md.
#
#   bash bench/gpu.sh            # after `npm ci` (or bash scripts/setup.sh)
#
# 1. Target model: Llama-3.2-1B shape, random weights; prefill of 1 x 512 tokens, 64 decode steps.
# 2. EAGLE3 draft training, the two reference configs of SpecForge's H200 numbers
#    (../shared/fixtures/README.md): mid at batch 4 x 1024 and Llama-3.1-8B dims at 1 x 2048, TTT 7.
#    bench/train.ts first checks that every draft weight fits one storage binding and stops with the
#    offending tensors if not (the 8B draft's fc, MLP and lm_head weights are 192-500 MiB each in f32).
set -uo pipefail
cd "$(dirname "$0")/.."
npx tsx scripts/embed-shaders.ts
npx tsx bench/target.ts --shape llama-3.2-1b --batch 1 --seq 512 --new 64 --reps 3
npx tsx bench/train.ts --config mid --batch 4 --seq 1024 --ttt 7 --steps 5
npx tsx bench/train.ts --config llama-3.1-8b --batch 1 --seq 2048 --ttt 7 --steps 5
