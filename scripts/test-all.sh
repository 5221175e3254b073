#!/usr/bin/env bash
# Every SpecLab check, in the order CI runs them: setup, static checks, the test suites in Node (Dawn),
# Deno and Chromium, the browser lab end to end (Playwright), then the Dawn lifetime stress tests and the
# Deno soak. Prints each runner's `N passed, N failed` line and a total at the end; exits non-zero if
# anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || exit 1
export PATH="$PWD/node_modules/.bin:$PATH"

total_passed=0
total_failed=0
failures=()
run() {
  local name=$1; shift
  echo "=== $name: $*"
  local log
  log=$(mktemp)
  local start=$SECONDS
  "$@" 2>&1 | grep -v '^Warning: max.*artificially reduced' | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
    total_passed=$((total_passed + BASH_REMATCH[1]))
    total_failed=$((total_failed + BASH_REMATCH[2]))
  elif [ "$rc" -eq 0 ]; then
    total_passed=$((total_passed + 1))
  fi
  if [ "$rc" -ne 0 ]; then
    failures+=("$name")
    [[ $line =~ ([0-9]+)\ failed ]] && [ "${BASH_REMATCH[1]}" != 0 ] || total_failed=$((total_failed + 1))
  fi
  echo "=== $name: exit $rc in $((SECONDS - start)) s"
  rm -f "$log"
}

run "embed shaders" npx tsx scripts/embed-shaders.ts
run "typecheck (tsc)" npx tsc --noEmit -p .
run "typecheck (deno)" deno check test/runners/deno.ts test/stress/soak-deno.ts test/platform/file-lock-race.ts test/platform/file-lock-race-worker-deno.ts
run "lint" npx eslint .
run "format (prettier --check)" npx prettier --check .
run "lint rule proof" npx tsx test/lint/boundary.ts
run "tests on Node (Dawn)" npx tsx test/runners/node.ts
run "tests on Node at WebGPU's default limits, no optional feature, compatibility mode, GPU waits spun (Dawn's own polling)" env SPECLAB_DEFAULT_LIMITS=1 SPECLAB_FEATURE_LEVEL=compatibility SPECLAB_GPU_WAIT=spin npx tsx test/runners/node.ts
run "tests on Deno" deno run --allow-read --allow-write --allow-env --allow-run test/runners/deno.ts
run "tests on Chromium" npx tsx test/runners/browser.ts
run "tests on Chromium at WebGPU's default limits, no optional feature, compatibility mode" env SPECLAB_DEFAULT_LIMITS=1 SPECLAB_FEATURE_LEVEL=compatibility npx tsx test/runners/browser.ts
run "crash test on Node (SIGKILL at three points)" npx tsx test/runtime/crash.ts
run "launcher: a signal to speclab ends the command" npx tsx test/cli/launcher-signal.ts
run "fresh clone: the CLI without generated shaders (help, version, usage errors, shaders generated on first use)" npx tsx test/cli/fresh-clone.ts
run "crash test on Node (SIGKILL of speclab train at the step-durable boundary)" npx tsx test/cli/train-kill.ts
run "full disk under speclab train (tmpfs run folders filled at the ledger, a rollout's spill and checkpoints; resumed after space returns)" npx tsx test/cli/train-full-disk.ts
run "crash matrix of a cluster run (rollout, trainer, Redis and gateway SIGKILLed)" npx tsx test/cli/cluster-crash.ts
run "crash test on Chromium (IndexedDB)" npx tsx test/runners/browser-crash.ts
run "lock race on Node: 3 processes take over one stale lock, 200 trials" npx tsx test/platform/file-lock-race.ts --trials 200
run "lock race on Deno: 3 processes take over one stale lock, 200 trials" deno run --allow-all test/platform/file-lock-race.ts --trials 200
run "data plane: multi-process proof (Redis)" npx tsx test/dataplane/multiprocess.ts
run "data plane: gateway from Chromium" npx tsx test/dataplane/browser-gateway.ts
run "data plane: gateway from Deno" npx tsx test/dataplane/browser-gateway.ts --deno
run "data plane: gateway under hostile clients" npx tsx test/dataplane/gateway-fuzz.ts
run "end-to-end on Chromium (Playwright)" npx playwright test
run "stress on Node (Dawn)" node --expose-gc --import tsx test/stress/run.ts --repeats "${SPECLAB_STRESS_REPEATS:-20}" --soak-seconds "${SPECLAB_SOAK_SECONDS:-60}"
run "soak on Deno" deno run --allow-read --allow-write --allow-env test/stress/soak-deno.ts "${SPECLAB_SOAK_SECONDS:-60}"

echo
if [ ${#failures[@]} -gt 0 ]; then
  echo "failed steps: ${failures[*]}"
fi
echo "total: $total_passed passed, $total_failed failed"
[ ${#failures[@]} -eq 0 ] && [ "$total_failed" -eq 0 ]
