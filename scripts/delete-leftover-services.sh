#!/bin/sh
# Deletes the executor Services spark-exec-svc left behind after an uninstall, and ONLY those no
# live executor can still be using:
#   - its driver pod (the Service's owner reference, name AND uid) is gone: Kubernetes' garbage
#     collector deletes such a Service anyway; this does it now;
#   - its driver pod has finished (phase Succeeded or Failed): Spark keeps finished driver pods, so
#     GC would never run, and the application has no executor left to serve;
#   - it is marked gone (annotation spark-exec-svc/executor-gone-at) for at least the cool-down,
#     and the executor it records (name AND uid) is gone or finished: what the function itself
#     deletes after COOLDOWN_SECONDS.
# Every other Service of ours stays: its driver runs, so executors may still advertise it, and
# deleting it would turn peers' "connection refused" into NXDOMAIN and FetchFailed. It is owned by
# its driver pod and goes with it. Each delete carries the uid and resourceVersion read for that
# decision as preconditions, so a Service that changed in between is left alone.
#
# Usage: scripts/delete-leftover-services.sh [--dry-run] [--cooldown-seconds N] NAMESPACE...
#   KUBECTL (default kubectl) and KUBECTL_ARGS (e.g. "--context prod") choose the cluster.
# Needs kubectl >= 1.27 and a POSIX sh; no jq. Run it after `kubectl delete -k <your install>`:
# while the function runs it repairs (re-creates) what this deletes.
# Exit status: 0 done (also when Services were kept), 1 a read or delete failed, 2 usage.
set -eu

KUBECTL=${KUBECTL:-kubectl}
KUBECTL_ARGS=${KUBECTL_ARGS:-}
MANAGED_BY='app.kubernetes.io/managed-by=spark-exec-svc'
dry_run=false
cooldown=300

usage() { echo "usage: $0 [--dry-run] [--cooldown-seconds N] NAMESPACE..." >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=true ;;
    --cooldown-seconds) [ $# -ge 2 ] || usage; cooldown=$2; shift ;;
    --cooldown-seconds=*) cooldown=${1#*=} ;;
    -h | --help) usage ;;
    --) shift; break ;;
    -*) echo "unknown option $1" >&2; usage ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 1 ] || usage
case "$cooldown" in '' | *[!0-9]*) echo "--cooldown-seconds must be a whole number of seconds" >&2; exit 2 ;; esac

# shellcheck disable=SC2086 # KUBECTL_ARGS is a list of words on purpose
k() { "$KUBECTL" $KUBECTL_ARGS "$@"; }

# Seconds since the epoch of an RFC 3339 UTC time (2026-12-03T18:19:02Z or .123Z), or empty.
epoch_of() {
  date -u -d "$1" +%s 2>/dev/null || date -u -j -f '%Y-%m-%dT%H:%M:%SZ' "$(printf '%s' "$1" | sed 's/\.[0-9]*Z$/Z/')" +%s 2>/dev/null || true
}

# "ended", "alive" or "error" for the pod <namespace> <name> <uid>: ended = gone (not found, or
# another pod with that name) or finished. A failed read is "error", never "ended".
pod_fate() {
  if ! state=$(k -n "$1" get pod "$2" --ignore-not-found -o go-template='{{.metadata.uid}} {{.status.phase}}'); then
    echo error; return 0
  fi
  if [ -z "$state" ] || [ "${state%% *}" != "$3" ]; then echo ended; return 0; fi
  case "${state#* }" in Succeeded | Failed) echo ended ;; *) echo alive ;; esac
}

failed=0
now=$(date -u +%s)
tab=$(printf '\t')
for ns in "$@"; do
  # One line per Service: name uid resourceVersion ownerKind ownerName ownerUid goneAt executorPod executorUid
  list=$(k -n "$ns" get services -l "$MANAGED_BY" -o go-template='{{range .items}}{{.metadata.name}}{{"\t"}}{{.metadata.uid}}{{"\t"}}{{.metadata.resourceVersion}}{{"\t"}}{{with .metadata.ownerReferences}}{{with index . 0}}{{.kind}}{{"\t"}}{{.name}}{{"\t"}}{{.uid}}{{end}}{{else}}-{{"\t"}}-{{"\t"}}-{{end}}{{"\t"}}{{with .metadata.annotations}}{{or (index . "spark-exec-svc/executor-gone-at") "-"}}{{"\t"}}{{or (index . "spark-exec-svc/executor-pod") "-"}}{{"\t"}}{{or (index . "spark-exec-svc/executor-uid") "-"}}{{else}}-{{"\t"}}-{{"\t"}}-{{end}}{{"\n"}}{{end}}') || {
    echo "error: cannot list Services in namespace $ns" >&2; failed=1; continue; }
  deleted=0 kept=0
  while IFS=$tab read -r name uid rv okind oname ouid gone epod euid; do
    [ -n "$name" ] || continue
    reason=
    if [ "$okind" != Pod ]; then
      echo "keep   $ns/$name: no driver pod owner reference (not made by spark-exec-svc as it is now); left alone"
      kept=$((kept + 1)); continue
    fi
    driver=$(pod_fate "$ns" "$oname" "$ouid")
    if [ "$driver" = error ]; then
      echo "error: cannot read driver pod $ns/$oname; $ns/$name left alone" >&2; failed=1; kept=$((kept + 1)); continue
    elif [ "$driver" = ended ]; then
      reason="its driver $oname is gone or finished"
    elif [ "$gone" != - ] && [ "$epod" != - ] && [ "$euid" != - ]; then
      marked=$(epoch_of "$gone")
      if [ -n "$marked" ] && [ $((now - marked)) -ge "$cooldown" ]; then
        executor=$(pod_fate "$ns" "$epod" "$euid")
        if [ "$executor" = error ]; then
          echo "error: cannot read executor pod $ns/$epod; $ns/$name left alone" >&2; failed=1; kept=$((kept + 1)); continue
        elif [ "$executor" = ended ]; then
          reason="its executor $epod is gone, marked $gone (cool-down ${cooldown}s over)"
        fi
      fi
    fi
    if [ -z "$reason" ]; then
      echo "keep   $ns/$name: driver $oname runs (executor live or within its cool-down); the Service goes with the driver"
      kept=$((kept + 1)); continue
    fi
    if $dry_run; then
      echo "would delete $ns/$name: $reason"; deleted=$((deleted + 1)); continue
    fi
    body=$(mktemp)
    printf '{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"%s","resourceVersion":"%s"}}\n' "$uid" "$rv" >"$body"
    if err=$(k delete --raw "/api/v1/namespaces/$ns/services/$name" -f "$body" 2>&1 >/dev/null); then
      echo "delete $ns/$name: $reason"; deleted=$((deleted + 1))
    else
      case "$err" in
        *NotFound* | *"not found"*) echo "gone   $ns/$name: already deleted" ;;
        *Conflict* | *Precondition*) echo "keep   $ns/$name: changed since it was read; left alone (run again)"; kept=$((kept + 1)) ;;
        *) echo "error: deleting $ns/$name: $err" >&2; failed=1 ;;
      esac
    fi
    rm -f "$body"
  done <<EOF
$list
EOF
  if $dry_run; then verb="would delete"; else verb="deleted"; fi
  echo "$ns: $verb $deleted, kept $kept (kept Services belong to running drivers and go with them)"
done
exit "$failed"
