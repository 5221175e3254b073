#!/usr/bin/env bash
# Starts a redis-server for manual data-plane runs, bound to 127.0.0.1 only, persistence off,
# in the foreground (Ctrl-C stops it). The tests do not need this: they start their own servers.
#
#   bash scripts/redis.sh PORT DIR     e.g. bash scripts/redis.sh 6399 /tmp/speclab-redis
#
# Then point a config at redis://127.0.0.1:PORT/0 (backend { kind: 'redis', url, keyPrefix }).
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 PORT DIR   (PORT 1024-65535; DIR is created if missing, holds nothing but redis' working files)" >&2
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
echo "redis on redis://127.0.0.1:$port/0 (dir $dir); Ctrl-C to stop" >&2
exec "$bin" --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' --appendonly no --protected-mode yes --daemonize no
