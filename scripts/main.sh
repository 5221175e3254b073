#!/usr/bin/env bash
# SpecLab's main job on this machine: set up, verify the GPU end to end, then benchmark it.
# (Becomes `speclab train` on the embedded lab target once training lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npm run --silent selfcheck
npm run --silent bench
