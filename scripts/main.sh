#!/usr/bin/env bash
# SpecLab's main job on the embedded default: set up, check the GPU end to end, then train an EAGLE3
# draft online for the bundled lab target (assets/lab-target, pretrained by SpecLab on the Brown
# corpus), and report its acceptance length by speculative decoding before and after training.
# The lab target has 2 decoder layers, so the aux layers are given explicitly (the default rule
# [1, N/2 - 1, N - 4] needs at least 4). 256 corpus prompts × 6 epochs (384 steps) take a few minutes
# on a 2-core CPU adapter and lift the acceptance length well clear of the untrained draft's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npm run --silent selfcheck
node bin/speclab.mjs train --out runs/lab-train --fresh --aux-layers 0,1,1 --train-prompts 256 --eval-prompts 8 "$@"
