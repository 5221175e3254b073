#!/usr/bin/env bash
# SpecLab one-shot, idempotent setup for a fresh Debian 12 (bookworm) machine, run as root.
#
# Installs:
#   - a Vulkan driver that Dawn accepts: Mesa 25 lavapipe from bookworm-backports
#     (Debian 12's own Mesa 22 lavapipe is rejected by Dawn: it lacks
#     shaderUniform*ArrayDynamicIndexing), plus the Vulkan loader;
#   - Debian's Chromium (browser tests; Playwright is pointed at /usr/bin/chromium);
#   - Redis (the cross-process data-plane backend);
#   - npm dependencies from the committed lockfile (`npm ci`), Deno included (npm package `deno`).
# Safe to run again: every step checks before it changes anything.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*"; }

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    log "adding the bookworm-backports suite"
    cat > /etc/apt/sources.list.d/speclab-backports.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    rm -f /var/lib/apt/lists/lock
    APT_UPDATED=0
  fi
  need=()
  mesa_version=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)
  case "$mesa_version" in 2[5-9].*|[3-9][0-9].*) ;; *) need+=(mesa-vulkan-drivers/bookworm-backports) ;; esac
  for pkg in libvulkan1 chromium redis-server; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    log "apt-get install ${need[*]}"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  log "mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
else
  log "not root or not Debian: skipping system packages (need Mesa >= 25 lavapipe or a GPU, chromium, redis-server)"
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
else
  log "node_modules up to date"
fi
log "done"
