#!/usr/bin/env bash
# The GPU run in one script: build, selfcheck, then the end-to-end benchmarks at SpecForge's shapes,
# each printed beside its reference. Runs on any WebGPU adapter Dawn accepts (the software adapter
# too, with --small).
#
#   bash bench/gpu.sh            # full sizes, for a GPU server (about 8 minutes on one large GPU)
#   bash bench/gpu.sh --small    # the same steps at small shapes (minutes on a CPU adapter)
#
# On a machine with `npm ci` done it first builds dist/gpu-bundle (scripts/gpu-bundle.sh). On a GPU
# server without Node or registry access, copy the checkout with dist/gpu-bundle built by
# `bash scripts/gpu-bundle.sh --portable`: this script then unpacks the bundled node binary and the
# Vulkan loader libraries it carries. Set VK_DRIVER_FILES to the GPU's Vulkan ICD if the loader does
# not find it (an NVIDIA container usually has it under /usr/local/nvidia/share/vulkan/icd.d).
#
# 1. selfcheck: every kernel variant against its float64 reference on this adapter.
# 2. Target model, Llama-3.2-1B shape (random weights): prefill 1 x 512 and 64 decode steps with f32
#    and f16 weights, GPU bytes, logits f16 vs f32, and batch-1 decode against its bandwidth bound.
# 3. EAGLE3 draft training at SpecForge's two H200 reference shapes, f32 and f16 features: mid at
#    4 x 1024 (47,023 tokens/s) and Llama-3.1-8B draft dims at 1 x 2048 (17,357 tokens/s), TTT 7.
# 4. The step against its matmul roofline (bench/step-roofline.ts).
# Every benchmark prints one JSON line; the last lines are a summary table.
set -uo pipefail
cd "$(dirname "$0")/.."
small=0
for arg in "$@"; do
  case "$arg" in
    --small) small=1 ;;
    *) echo "gpu.sh: unknown option $arg (known: --small)" >&2; exit 2 ;;
  esac
done
bundle=dist/gpu-bundle
log=$(mktemp -d)/gpu-run.jsonl
failures=0

# --- build (where the toolchain is here) and runtime ---
if [ -x node_modules/.bin/tsx ] && command -v node >/dev/null; then
  bash scripts/gpu-bundle.sh || exit 1
fi
[ -f "$bundle/speclab.mjs" ] || { echo "gpu.sh: $bundle is missing; build it with bash scripts/gpu-bundle.sh --portable where npm works" >&2; exit 1; }
NODE=$(command -v node || true)
if [ -z "$NODE" ]; then
  [ -f "$bundle/node.xz" ] || { echo "gpu.sh: no node on PATH and no $bundle/node.xz (build the bundle with --portable)" >&2; exit 1; }
  NODE=$(mktemp -d)/node
  xz -dc "$bundle/node.xz" > "$NODE" && chmod +x "$NODE"
fi
if [ -d "$bundle/lib" ] && ! ldconfig -p 2>/dev/null | grep -q libvulkan.so.1; then
  export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -z "${VK_DRIVER_FILES:-}" ]; then
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$icd" ] && { export VK_DRIVER_FILES="$icd"; break; }
  done
fi

# run NAME LIMIT_S COMMAND...: one step, its stdout's JSON lines kept for the summary.
run() {
  local name=$1 limit=$2; shift 2
  echo "== $name"
  local start=$SECONDS
  timeout "$limit" "$@" | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc, $((SECONDS - start)) s"
  [ "$rc" = 0 ] || failures=$((failures + 1))
}

# The roofline's `fixture` config reads SpecForge's reference draft from the fixtures folder, which
# a copy of the checkout on a GPU server may not carry; mid and lab are built in.
fixtures=${SPECLAB_FIXTURES:-../shared/fixtures}
roofline_configs=mid,lab,fixture
if [ ! -f "$fixtures/eagle3/draft_config.json" ]; then
  roofline_configs=mid,lab
  echo "gpu.sh: no SpecForge fixtures at $fixtures/eagle3 (set SPECLAB_FIXTURES to include them); the roofline runs $roofline_configs"
fi

if [ "$small" = 1 ]; then
  # A CPU adapter compiles every kernel variant in about 3 minutes when its shader cache is cold
  # (measured on a 2-core machine: 187 s), so the small run's selfcheck gets 10 minutes.
  run selfcheck 600 "$NODE" "$bundle/speclab.mjs" selfcheck
  run target-1b 600 "$NODE" "$bundle/bench-target.mjs" --shape llama-3.2-1b --layers 2 --batch 1 --seq 16 --new 2 --reps 1 --precision both
  for p in f32 f16; do
    run "train-mid-$p" 600 "$NODE" "$bundle/bench-train.mjs" --config mid --batch 1 --seq 16 --ttt 2 --steps 1 --feature-precision "$p"
    run "train-8b-$p" 600 "$NODE" "$bundle/bench-train.mjs" --config llama-3.1-8b --shrink 16 --batch 1 --seq 16 --ttt 2 --steps 1 --feature-precision "$p"
  done
  run step-roofline 600 "$NODE" "$bundle/bench-step-roofline.mjs" --quick --configs "$roofline_configs"
else
  run selfcheck 180 "$NODE" "$bundle/speclab.mjs" selfcheck
  run target-1b 120 "$NODE" "$bundle/bench-target.mjs" --shape llama-3.2-1b --batch 1 --seq 512 --new 64 --reps 3 --precision both
  for p in f32 f16; do
    run "train-mid-$p" 75 "$NODE" "$bundle/bench-train.mjs" --config mid --batch 4 --seq 1024 --ttt 7 --steps 5 --feature-precision "$p"
    run "train-8b-$p" 90 "$NODE" "$bundle/bench-train.mjs" --config llama-3.1-8b --batch 1 --seq 2048 --ttt 7 --steps 5 --feature-precision "$p"
  done
  run step-roofline 60 "$NODE" "$bundle/bench-step-roofline.mjs" --configs "$roofline_configs"
fi

echo "== summary"
"$NODE" "$bundle/bench-gpu-summary.mjs" "$log"
echo "gpu.sh: $failures step(s) failed"
[ "$failures" = 0 ]
