#!/usr/bin/env bash
# Starts a redis-server for manual data-plane and control-plane runs, bound to 127.0.0.1 only, in
# the foreground (Ctrl-C stops it). The tests do not need this: they start their own servers.
#
#   bash scripts/redis.sh [--durable] PORT DIR     e.g. bash scripts/redis.sh --durable 6399 /tmp/speclab-redis
#
# Without --durable persistence is off (fine for the data plane: its rows are regenerable).
# With --durable Redis keeps an append-only file in DIR and fsyncs it before every reply
# (--appendonly yes --appendfsync always): what the control plane's stores require at startup,
# since an acknowledged train ack must survive a crash. Restarting on the same DIR replays it.
#
# Then point a config at redis://127.0.0.1:PORT/0 (backend { kind: 'redis', url, keyPrefix }).
set -euo pipefail

persistence=(--appendonly no)
durable=0
if [ "${1:-}" = "--durable" ]; then
  durable=1
  persistence=(--appendonly yes --appendfsync always)
  shift
fi
if [ $# -ne 2 ]; then
  echo "usage: $0 [--durable] PORT DIR   (PORT 1024-65535; DIR is created if missing, holds nothing but redis' working files)" >&2
  exit 2
fi
port=$1
dir=$2
if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1024 ] || [ "$port" -gt 65535 ]; then
  echo "$0: PORT must be a number in 1024-65535, got '$port'" >&2
  exit 2
fi
bin=${REDIS_SERVER:-redis-server}
if ! command -v "$bin" >/dev/null 2>&1; then
  echo "$0: $bin not found; install it with: apt-get install redis-server (scripts/setup.sh does)" >&2
  exit 1
fi
mkdir -p "$dir"
if [ "$durable" = 1 ]; then
  echo "redis on redis://127.0.0.1:$port/0 (dir $dir), durable: appendonly yes, appendfsync always; Ctrl-C to stop" >&2
else
  echo "redis on redis://127.0.0.1:$port/0 (dir $dir), persistence off; Ctrl-C to stop" >&2
fi
exec "$bin" --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' "${persistence[@]}" --protected-mode yes --daemonize no
