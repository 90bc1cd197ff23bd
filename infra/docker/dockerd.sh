#!/usr/bin/env bash
# Start a Docker engine for the docker sandbox backend, unless one already answers.
#
#   infra/docker/dockerd.sh         start (idempotent), wait until it answers
#   infra/docker/dockerd.sh stop    stop the engine this script started
#
# No registry is reachable on these machines: nothing is pulled, base images are
# built offline (`trajlake sandbox build-image`). The engine runs without
# iptables or a bridge: sandboxes use `--network none`.
set -euo pipefail
log="${TRAJLAKE_DOCKERD_LOG:-/var/log/trajlake-dockerd.log}"
pidfile=/var/run/trajlake-dockerd.pid

answers() { docker info >/dev/null 2>&1; }

# A pid file left by an engine that died names a process id the kernel may since have given to
# another program; dockerd then takes that program for its containerd and waits on a socket
# nobody serves ("timeout waiting for containerd to start"). With no engine running, a pid
# file whose process is not what it names is removed before starting.
clear_stale() {
  local f want pid
  for f in "$pidfile:dockerd" /var/run/docker/containerd/containerd.pid:containerd; do
    want="${f##*:}"; f="${f%:*}"
    [ -f "$f" ] || continue
    pid="$(cat "$f" 2>/dev/null || true)"
    if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$want" ]; then
      rm -f "$f"
    fi
  done
}

case "${1:-start}" in
  start)
    answers && exit 0
    command -v dockerd >/dev/null || { echo "dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
    mkdir -p "$(dirname "$log")"
    : >"$log"
    for attempt in 1 2; do
      clear_stale
      setsid dockerd --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
        --pidfile "$pidfile" >>"$log" 2>&1 </dev/null &
      started=$!
      for _ in $(seq 1 120); do
        answers && { echo "docker engine up (log: $log)" >&2; exit 0; }
        kill -0 "$started" 2>/dev/null || break
        sleep 0.5
      done
      echo "dockerd did not come up (attempt $attempt); last lines of $log:" >&2
      tail -5 "$log" >&2
      kill "$started" 2>/dev/null || true
      sleep 1
    done
    exit 1
    ;;
  stop)
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
    ;;
  *)
    sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
