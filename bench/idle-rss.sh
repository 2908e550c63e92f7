#!/usr/bin/env bash
# Resident memory of the container's bundle (dist/start.cjs + main.cjs, what the image runs) at
# idle and after a few sweeps, against the project's API-server emulator on loopback. The number
# behind requests.memory in knative/base/service.yaml (docs/performance.md, "Memory").
#   bench/idle-rss.sh            # prints VmRSS/VmHWM every 5 s for 30 s
set -euo pipefail
cd "$(dirname "$0")/.."
NODE=node_modules/.bin/node
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

"$NODE" scripts/bundle.ts "$work/dist" >"$work/bundle.log" 2>&1
"$NODE" test/kube-emulator/main.ts --kubeconfig "$work/kubeconfig" >"$work/emulator.log" 2>&1 &
pids+=($!)
for _ in $(seq 120); do [ -s "$work/kubeconfig" ] && break; sleep 0.5; done
[ -s "$work/kubeconfig" ] || { echo "emulator did not start" >&2; exit 1; }

port=$(("$$" % 20000 + 20000))
# The env of knative/base/service.yaml.
(cd "$work/dist" && exec env KUBECONFIG="$work/kubeconfig" WATCH_NAMESPACES=spark PORT="$port" OPT_IN_MODE=label \
  COOLDOWN_SECONDS=300 LOG_LEVEL=info EVENT_DEADLINE_MS=1500 REQUEST_TIMEOUT_MS=1000 SWEEP_DEADLINE_MS=20000 \
  REPLY_MODE=none MAX_BODY_BYTES=1048576 SWEEP_PAGE_SIZE=500 MAX_SERVICES_PER_NAMESPACE=2000 \
  "$OLDPWD/$NODE" start.cjs >"$work/function.log" 2>&1) &
fn=$!
pids+=("$fn")
for _ in $(seq 120); do grep -q '"listening"' "$work/function.log" 2>/dev/null && break; sleep 0.25; done

for i in 1 2 3; do
  curl -s -o /dev/null -X POST -H 'content-type: application/json' -H 'ce-specversion: 1.0' \
    -H 'ce-type: dev.knative.sources.ping' -H 'ce-source: /apis/v1/namespaces/spark/pingsources/spark-exec-svc-sweep' \
    -H "ce-id: sweep-$i" --data '{"action":"sweep"}' "http://127.0.0.1:$port/"
done
# The node process is the subshell's exec'd child: find it by its parent.
node_pid=$(pgrep -P "$fn" || echo "$fn")
for t in 5 10 15 20 25 30; do
  sleep 5
  printf '%2ss  ' "$t"; grep -E 'VmRSS|VmHWM' "/proc/$node_pid/status" | tr -s ' \t\n' ' '; echo
done
