#!/usr/bin/env bash
# SpecLab's main job on the embedded default: set up, check the GPU end to end, then train an EAGLE3
# draft online for the bundled lab target (assets/lab-target, pretrained by SpecLab on the Brown
# corpus) from a chat dataset (assets/lab-target/lab-chats.jsonl, made from the corpus by
# scripts/build-lab-chats.ts), and report its acceptance length by speculative decoding before and
# after training on held-out conversations (the file's last rows). --regenerate has the target write
# each reply itself, as SpecForge's regenerated datasets do: the draft learns the target's outputs.
# The aux layers follow the one default rule ([0, 1, 1] for the 2-layer target).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npm run --silent selfcheck
node bin/speclab.mjs train --out runs/lab-train --fresh --data assets/lab-target/lab-chats.jsonl --regenerate --train-prompts 128 --eval-prompts 8 --eval-every 64 "$@"
