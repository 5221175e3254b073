#!/usr/bin/env bash
# The PyTorch peers of bench/step-peer.ts (Debian 12, as root), both single-threaded there:
#   /usr/bin/python3                   Debian's PyTorch (python3-torch) on OpenBLAS: the kind of build the speed issue named
#   .speclab/peers-venv/bin/python     PyTorch's own CPU wheel (MKL), in the repository (.speclab/ is ignored)
# Benchmarks only: no test and no command of SpecLab needs them. Set PIP_INDEX_URL to use another index.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c 'import torch, ensurepip, venv' 2>/dev/null; then
  apt-get update -qq
  apt-get install -y -qq python3-torch libopenblas0-pthread python3-venv
fi
[ -x .speclab/peers-venv/bin/python ] || /usr/bin/python3 -m venv .speclab/peers-venv
if ! .speclab/peers-venv/bin/python -c 'import torch, numpy' 2>/dev/null; then
  .speclab/peers-venv/bin/pip install -q --index-url "${PIP_INDEX_URL:-https://download.pytorch.org/whl/cpu}" torch numpy
fi
for py in /usr/bin/python3 .speclab/peers-venv/bin/python; do
  "$py" -c 'import sys, torch; print(f"[peers] {sys.argv[1]}: PyTorch {torch.__version__}")' "$py"
done
