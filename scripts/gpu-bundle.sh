#!/usr/bin/env bash
# Builds dist/gpu-bundle: the CLI and the end-to-end benchmarks as single JavaScript files, with the
# two packages they load at run time (webgpu's Dawn binding, commander), so that bench/gpu.sh runs
# on a GPU server that has no npm registry and no node_modules.
#
#   bash scripts/gpu-bundle.sh               # the bundle alone (needs `npm ci` here)
#   bash scripts/gpu-bundle.sh --portable    # also a compressed node binary and the Vulkan loader
#                                            # libraries from Debian, for a server without Node
#
# Why bundle rather than copy node_modules: the tree with its test and browser tooling is hundreds
# of megabytes; the bundle is a few, plus Dawn (about 21 MB) and optionally Node (about 24 MB xz).
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist/gpu-bundle
portable=0
for arg in "$@"; do
  case "$arg" in
    --portable) portable=1 ;;
    *) echo "gpu-bundle.sh: unknown option $arg (known: --portable)" >&2; exit 2 ;;
  esac
done
[ -x node_modules/.bin/esbuild ] || { echo "gpu-bundle.sh: node_modules/.bin/esbuild is missing; run npm ci first" >&2; exit 1; }
npx tsx scripts/embed-shaders.ts
rm -rf "$out"
mkdir -p "$out/node_modules/webgpu/dist/linux-x64"
bundle() { node_modules/.bin/esbuild "$1" --bundle --platform=node --format=esm --target=node20 --external:webgpu --external:commander --log-level=error --outfile="$out/$2"; }
bundle src/platform/node-bundle-main.ts speclab.mjs
for b in target train step-roofline gpu-summary; do
  [ -f "bench/$b.ts" ] && bundle "bench/$b.ts" "bench-$b.mjs"
done
cp node_modules/webgpu/index.js node_modules/webgpu/package.json node_modules/webgpu/LICENSE.md "$out/node_modules/webgpu/"
cp node_modules/webgpu/dist/linux-x64/dawn.node "$out/node_modules/webgpu/dist/linux-x64/"
cp -r node_modules/commander "$out/node_modules/"
if [ "$portable" = 1 ]; then
  xz -6 -T0 -c "$(command -v node)" > "$out/node.xz"
  # The Vulkan loader and the GL/EGL stubs Dawn links against, from this machine's Debian archive.
  debs=$(mktemp -d)
  (cd "$debs" && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null)
  mkdir -p "$out/lib"
  for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$debs/root"; done
  cp -a "$debs"/root/usr/lib/x86_64-linux-gnu/*.so* "$out/lib/"
  rm -rf "$debs"
fi
du -sh "$out" | sed 's/^/gpu-bundle: /'
