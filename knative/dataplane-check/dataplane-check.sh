#!/bin/sh
# dataplane-check.sh: does this cluster's dataplane refuse connections to a Service
# that has no endpoints? spark-exec-svc is worth having only if it does (docs/dataplanes.md).
#
#   dataplane-check.sh                 the whole check (run inside the cluster, e.g. as the
#                                      Job in this folder): creates a ClusterIP Service whose
#                                      selector matches no pod, times TCP connects to it, deletes
#                                      it, times connects to its old ClusterIP, prints verdicts
#   dataplane-check.sh probe HOST [PORT]
#                                      only the timing and the verdict, against any address
#
# Verdict lines (one per probe, machine-readable):
#   VERDICT=reject|drop|inconclusive attempts=N refused=N timeout=N other=N max_ms=X target=IP:PORT
#   DELETED_VERDICT=...                (the old ClusterIP after the Service was deleted)
# Exit status: 0 reject (fast fail works), 2 drop, 3 inconclusive, 1 error (nothing measured).
# The verdict on the deleted Service is reported but does not change the exit status.
#
# Needs: a POSIX sh, curl (the connect timer), kubectl (for the whole check; in-cluster
# credentials are enough), awk, sed, od, mktemp, sleep. alpine/k8s has all of them.
# Why curl: it connects non-blocking with a fractional --connect-timeout, tells a refused
# connect (exit 7) from a timed-out one (exit 28) and reports the time it took; busybox nc
# has no -z in every build, and bash's /dev/tcp is not POSIX.
#
# Settings (environment):
#   NAMESPACE                where to create the Service (default: the pod's own namespace)
#   PORT=7079                Service port (Spark's usual executor block-manager port)
#   ATTEMPTS=5               connects per probe, one after another
#   CONNECT_TIMEOUT_SECONDS=5  per connect (fractions allowed)
#   FAST_MS=1000             a refused connect counts as "at once" below this many ms
#                            (default 1000, or half the connect timeout if that is less)
#   PROGRAM_DELAY_SECONDS=5  wait after create and after delete, for the proxy to program it
#   CLUSTERIP_WAIT_SECONDS=10  how many times to ask for the ClusterIP, a second apart (the API
#                            server allocates it on create, so the first answer has it)
#   CHECK_DELETED=true       also probe the old ClusterIP after deleting the Service
#   INTERNAL_TRAFFIC_POLICY=Cluster  Cluster, or Local to see what Local does here
#   OWNER_POD_NAME, OWNER_POD_UID    if set (downward API), the Service is owned by this pod,
#                            so garbage collection removes it even if this script is killed
#   NODE_NAME                printed only: the node whose dataplane answered
#   KUBECTL=kubectl, CURL=curl       the commands to use
set -u

log() { printf 'dataplane-check: %s\n' "$*"; }
die() {
  printf 'dataplane-check: error: %s\n' "$*" >&2
  exit 1
}

PORT=${PORT:-7079}
ATTEMPTS=${ATTEMPTS:-5}
CONNECT_TIMEOUT_SECONDS=${CONNECT_TIMEOUT_SECONDS:-5}
FAST_MS=${FAST_MS:-}
PROGRAM_DELAY_SECONDS=${PROGRAM_DELAY_SECONDS:-5}
CLUSTERIP_WAIT_SECONDS=${CLUSTERIP_WAIT_SECONDS:-10}
CHECK_DELETED=${CHECK_DELETED:-true}
INTERNAL_TRAFFIC_POLICY=${INTERNAL_TRAFFIC_POLICY:-Cluster}
OWNER_POD_NAME=${OWNER_POD_NAME:-}
OWNER_POD_UID=${OWNER_POD_UID:-}
NODE_NAME=${NODE_NAME:-}
KUBECTL=${KUBECTL:-kubectl}
CURL=${CURL:-curl}
SA_NAMESPACE_FILE=/var/run/secrets/kubernetes.io/serviceaccount/namespace
# The label the Service selects on. No pod carries it, so the Service never gets endpoints.
SELECTOR_LABEL=spark-exec-svc/dataplane-check

is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac }
is_seconds() {
  case $1 in
    '' | .* | *. | *[!0-9.]* | *.*.*) return 1 ;;
    *) return 0 ;;
  esac
}
is_dns_label() {
  printf '%s\n' "$1" | grep -Eq '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'
}

# in_range VALUE MIN MAX: VALUE is an integer within [MIN, MAX].
in_range() { is_uint "$1" && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
# awk_true EXPR VAR=VALUE...: EXPR (over the named numbers) holds.
awk_true() {
  a_expr=$1
  shift
  a_vars=
  for a_kv in "$@"; do a_vars="$a_vars -v $a_kv"; done
  # shellcheck disable=SC2086 # the -v pairs are split on purpose; values are checked numbers
  awk $a_vars "BEGIN { exit !($a_expr) }"
}

validate_settings() {
  if ! in_range "$PORT" 1 65535; then die "PORT must be 1..65535, got '$PORT'"; fi
  if ! in_range "$ATTEMPTS" 1 100; then die "ATTEMPTS must be 1..100, got '$ATTEMPTS'"; fi
  if ! is_seconds "$CONNECT_TIMEOUT_SECONDS" || ! awk_true 't > 0 && t <= 300' "t=$CONNECT_TIMEOUT_SECONDS"; then
    die "CONNECT_TIMEOUT_SECONDS must be a number of seconds in (0, 300], got '$CONNECT_TIMEOUT_SECONDS'"
  fi
  if [ -z "$FAST_MS" ]; then FAST_MS=$(awk -v t="$CONNECT_TIMEOUT_SECONDS" 'BEGIN { f = int(t * 500); print (f < 1 ? 1 : (f > 1000 ? 1000 : f)) }'); fi
  if ! in_range "$FAST_MS" 1 300000; then die "FAST_MS must be a positive integer, got '$FAST_MS'"; fi
  if ! awk_true 'f < t * 1000' "f=$FAST_MS" "t=$CONNECT_TIMEOUT_SECONDS"; then
    die "FAST_MS ($FAST_MS) must be below the connect timeout (${CONNECT_TIMEOUT_SECONDS}s), or a drop could not be told from a refusal"
  fi
  if ! is_seconds "$PROGRAM_DELAY_SECONDS"; then die "PROGRAM_DELAY_SECONDS must be a number of seconds, got '$PROGRAM_DELAY_SECONDS'"; fi
  if ! in_range "$CLUSTERIP_WAIT_SECONDS" 1 3600; then die "CLUSTERIP_WAIT_SECONDS must be 1..3600, got '$CLUSTERIP_WAIT_SECONDS'"; fi
  case $CHECK_DELETED in true | false) ;; *) die "CHECK_DELETED must be true or false, got '$CHECK_DELETED'" ;; esac
  case $INTERNAL_TRAFFIC_POLICY in Cluster | Local) ;; *) die "INTERNAL_TRAFFIC_POLICY must be Cluster or Local, got '$INTERNAL_TRAFFIC_POLICY'" ;; esac
}

# ---------------------------------------------------------------------------------------
# Child processes run in the background and are waited for, so that a SIGTERM (Job deadline,
# pod deletion) interrupts the wait at once and the EXIT trap can delete the Service.
TMP_DIR=
BG_PID=
BG_RC=0
# bg_run OUT ERR CMD [ARG...]: run CMD with stdout to OUT, stderr to ERR; status in BG_RC.
bg_run() {
  bg_out=$1
  bg_err=$2
  shift 2
  "$@" >"$bg_out" 2>"$bg_err" </dev/null &
  BG_PID=$!
  wait "$BG_PID"
  BG_RC=$?
  BG_PID=
}
pause() { bg_run /dev/null /dev/null sleep "$1"; }

SVC_NAME=
SVC_CREATE_TRIED=no
SVC_DELETED=no
SVC_DELETE_GAVE_UP=no

# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
  cleanup_rc=$?
  trap - EXIT HUP INT TERM
  if [ -n "$BG_PID" ]; then kill "$BG_PID" 2>/dev/null || :; fi
  if [ "$SVC_CREATE_TRIED" = yes ] && [ "$SVC_DELETED" = no ] && [ "$SVC_DELETE_GAVE_UP" = no ]; then
    delete_service || :
  fi
  if [ -n "$TMP_DIR" ]; then rm -rf "$TMP_DIR"; fi
  exit "$cleanup_rc"
}

# ---------------------------------------------------------------------------------------
# The probe: ATTEMPTS connects, one after another, each bounded by CONNECT_TIMEOUT_SECONDS.
# Each connect is classified as
#   refused    curl exit 7 ("Couldn't connect") within FAST_MS: ECONNREFUSED (ICMP port
#              unreachable or TCP RST, what kube-proxy sends) or EHOSTUNREACH (Cilium's socket
#              LB); the JVM fails just as fast on both
#   timeout    curl exit 28 without a connection: nothing answered, the packets were dropped
#   other      connected (something accepts: an endpoint, or a sidecar proxy), an error after
#              FAST_MS (e.g. ICMP host unreachable after ARP gave up), or any other curl failure
# and the probe gets the verdict reject (all refused), drop (all timed out) or inconclusive.
PROBE_VERDICT=
PROBE_MAX_MS=0
PROBE_CONNECTED=0
probe() {
  p_host=$1
  p_port=$2
  p_label=$3
  case $p_host in *:*) p_url_host="[$p_host]" ;; *) p_url_host=$p_host ;; esac
  p_max_time=$(awk -v t="$CONNECT_TIMEOUT_SECONDS" 'BEGIN { printf "%g", t + 2 }')
  p_n=0
  p_refused=0
  p_timeout=0
  p_other=0
  PROBE_MAX_MS=0
  PROBE_CONNECTED=0
  while [ "$p_n" -lt "$ATTEMPTS" ]; do
    p_n=$((p_n + 1))
    # -v: the "connect to ... failed: <reason>" line; --noproxy: never go through an HTTP proxy
    # from the environment (it would answer instead of the dataplane); -g: IPv6 literals.
    bg_run "$TMP_DIR/curl.out" "$TMP_DIR/curl.err" "$CURL" -g -sS -v --noproxy '*' \
      --connect-timeout "$CONNECT_TIMEOUT_SECONDS" --max-time "$p_max_time" -o /dev/null \
      -w '%{time_total} %{time_connect}' "http://$p_url_host:$p_port/"
    p_rc=$BG_RC
    p_total=0
    p_connect=0
    read -r p_total p_connect <"$TMP_DIR/curl.out" || :
    is_seconds "$p_total" || p_total=0
    is_seconds "$p_connect" || p_connect=0
    p_ms=$(awk -v t="$p_total" 'BEGIN { printf "%.1f", t * 1000 }')
    p_reason=$(sed -n 's/^\* .*connect to .* failed: //p' "$TMP_DIR/curl.err" | head -n 1)
    if [ "$p_rc" -eq 0 ] || awk_true 'c > 0' "c=$p_connect"; then
      p_outcome=other
      p_reason="connected: something accepts connections on this address"
      PROBE_CONNECTED=$((PROBE_CONNECTED + 1))
    elif [ "$p_rc" -eq 7 ] && awk_true 'ms < f' "ms=$p_ms" "f=$FAST_MS"; then
      p_outcome=refused
    elif [ "$p_rc" -eq 28 ]; then
      p_outcome=timeout
      p_reason="no answer within ${CONNECT_TIMEOUT_SECONDS}s"
    elif [ "$p_rc" -eq 7 ]; then
      p_outcome=other
      p_reason="refused only after ${FAST_MS} ms or more${p_reason:+: $p_reason}"
    else
      p_outcome=other
      p_reason="curl exit $p_rc: $(grep '^curl: ' "$TMP_DIR/curl.err" | head -n 1)"
    fi
    case $p_outcome in
      refused) p_refused=$((p_refused + 1)) ;;
      timeout) p_timeout=$((p_timeout + 1)) ;;
      *) p_other=$((p_other + 1)) ;;
    esac
    PROBE_MAX_MS=$(awk -v a="$PROBE_MAX_MS" -v b="$p_ms" 'BEGIN { print (b > a ? b : a) }')
    log "attempt $p_n/$ATTEMPTS to $p_host:$p_port: $p_outcome after $p_ms ms${p_reason:+ ($p_reason)}"
  done
  if [ "$p_refused" -eq "$ATTEMPTS" ]; then
    PROBE_VERDICT=reject
  elif [ "$p_timeout" -eq "$ATTEMPTS" ]; then
    PROBE_VERDICT=drop
  else
    PROBE_VERDICT=inconclusive
  fi
  printf '%s=%s attempts=%s refused=%s timeout=%s other=%s max_ms=%s target=%s:%s\n' \
    "$p_label" "$PROBE_VERDICT" "$ATTEMPTS" "$p_refused" "$p_timeout" "$p_other" "$PROBE_MAX_MS" "$p_host" "$p_port"
}

verdict_status() {
  case $1 in reject) echo 0 ;; drop) echo 2 ;; *) echo 3 ;; esac
}

explain_verdict() {
  case $1 in
    reject)
      log "REJECT: fast fail works. A Service without endpoints is refused at once (slowest ${PROBE_MAX_MS} ms),"
      log "  so Spark peers of a lost executor get 'connection refused' through its Service instead of a connect timeout."
      ;;
    drop)
      log "DROP: fast fail does NOT work here. Connects to a Service without endpoints hang until the timeout,"
      log "  so per-executor Services cost the full connect timeout (Spark: 120 s) just like a vanished pod IP. What to change:"
      log "  - Cilium: set service-no-backend-response=reject (Helm: serviceNoBackendResponse: reject), the default since 1.15;"
      log "    older Cilium drops. It needs kernel >= 5.2 and falls back to drop without it (cilium-agent logs say so)."
      log "  - internalTrafficPolicy: Local drops when the node has no local endpoint; spark-exec-svc's Services use Cluster."
      if [ "$INTERNAL_TRAFFIC_POLICY" = Local ]; then
        log "    (this run used INTERNAL_TRAFFIC_POLICY=Local, so a drop is what Local does: run again with Cluster)"
      fi
      log "  - a NetworkPolicy (or CiliumNetworkPolicy) on the client pods that blocks ICMP replies turns the reject into"
      log "    a timeout: allow ICMP destination-unreachable back into the Spark pods (cilium/cilium#33041)."
      log "  - older Calico eBPF or OVN-Kubernetes: upgrade (both reject in current releases), see docs/dataplanes.md."
      log "  - or the proxy had not programmed the Service yet: run again with a larger PROGRAM_DELAY_SECONDS."
      ;;
    *)
      if [ "$PROBE_CONNECTED" -gt 0 ]; then
        log "INCONCLUSIVE: $PROBE_CONNECTED connect(s) were ACCEPTED. A Service without endpoints cannot accept, so something"
        log "  in between does: a sidecar or transparent proxy in this pod's network (Istio, Linkerd, an egress proxy)."
        log "  Run the check without it (e.g. annotation sidecar.istio.io/inject: \"false\"); Spark pods behind the same proxy"
        log "  get the proxy's behaviour (it accepts, then closes), not the dataplane's."
        return 0
      fi
      log "INCONCLUSIVE: the connects did not all end the same way. Possible causes: the proxy was still programming"
      log "  the Service (raise PROGRAM_DELAY_SECONDS), an ICMP error that arrives only after ${FAST_MS} ms (the dataplane"
      log "  routes the ClusterIP somewhere and gives up late), a sidecar proxy or something else accepting connections,"
      log "  or a node that behaves differently from run to run. Read the attempt lines above."
      ;;
  esac
}

explain_deleted_verdict() {
  case $1 in
    reject)
      log "After the delete the old ClusterIP is still refused at once on this node: deleting early does not bring the"
      log "  timeout back here. Keep the cool-down rule anyway (docs/dataplanes.md): other dataplanes drop."
      ;;
    drop)
      log "After the delete the old ClusterIP DROPS connects (kube-proxy nftables and Cilium do this on purpose): a peer"
      log "  that still holds the ClusterIP (JVM DNS cache 30 s, CoreDNS cache up to 30 s) waits the full connect timeout"
      log "  again. Keep COOLDOWN_SECONDS above JVM DNS cache + CoreDNS cache + proxy lag + Spark's memory of the lost"
      log "  executor (docs/dataplanes.md); the default 300 s does, 0 (keep until the driver goes) is the safest."
      ;;
    *)
      log "After the delete the old ClusterIP answered inconsistently (or something accepted the connection); treat it"
      log "  as a drop and keep the cool-down rule."
      ;;
  esac
}

# ---------------------------------------------------------------------------------------
kube() {
  bg_run "$TMP_DIR/kubectl.out" "$TMP_DIR/kubectl.err" "$KUBECTL" --request-timeout=10s "$@"
}

delete_service() {
  d_try=0
  while [ "$d_try" -lt 3 ]; do
    d_try=$((d_try + 1))
    kube delete service "$SVC_NAME" --namespace "$NAMESPACE" --ignore-not-found --wait=true
    if [ "$BG_RC" -eq 0 ]; then
      SVC_DELETED=yes
      log "deleted Service $NAMESPACE/$SVC_NAME"
      return 0
    fi
    log "delete of Service $NAMESPACE/$SVC_NAME failed (try $d_try/3): $(head -c 500 "$TMP_DIR/kubectl.err")"
    [ "$d_try" -lt 3 ] && pause 1
  done
  SVC_DELETE_GAVE_UP=yes
  log "WARNING: could not delete Service $NAMESPACE/$SVC_NAME; delete it by hand: kubectl -n $NAMESPACE delete service $SVC_NAME"
  if [ -n "$OWNER_POD_UID" ]; then
    log "  (it is owned by pod $OWNER_POD_NAME, so garbage collection removes it when that pod is deleted)"
  fi
  return 1
}

service_manifest() {
  m_owner=
  if [ -n "$OWNER_POD_NAME" ] && [ -n "$OWNER_POD_UID" ]; then
    m_owner=",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"$OWNER_POD_NAME\",\"uid\":\"$OWNER_POD_UID\"}]"
  fi
  cat <<EOF
{
  "apiVersion": "v1",
  "kind": "Service",
  "metadata": {
    "name": "$SVC_NAME",
    "namespace": "$NAMESPACE",
    "labels": {
      "app.kubernetes.io/name": "spark-exec-svc-dataplane-check",
      "app.kubernetes.io/part-of": "spark-exec-svc"
    },
    "annotations": {
      "spark-exec-svc/purpose": "dataplane check: a Service without endpoints, deleted by the check within minutes"
    }$m_owner
  },
  "spec": {
    "type": "ClusterIP",
    "selector": { "$SELECTOR_LABEL": "$SVC_ID" },
    "ports": [{ "name": "spark-block-manager", "protocol": "TCP", "port": $PORT, "targetPort": $PORT }],
    "internalTrafficPolicy": "$INTERNAL_TRAFFIC_POLICY"
  }
}
EOF
}

check() {
  command -v "$KUBECTL" >/dev/null 2>&1 || die "kubectl not found (KUBECTL=$KUBECTL)"
  command -v "$CURL" >/dev/null 2>&1 || die "curl not found (CURL=$CURL)"
  if [ -z "${NAMESPACE:-}" ] && [ -r "$SA_NAMESPACE_FILE" ]; then NAMESPACE=$(cat "$SA_NAMESPACE_FILE"); fi
  NAMESPACE=${NAMESPACE:-}
  [ -n "$NAMESPACE" ] || die "set NAMESPACE (no service-account namespace file at $SA_NAMESPACE_FILE)"
  is_dns_label "$NAMESPACE" || die "NAMESPACE '$NAMESPACE' is not a valid namespace name"
  if [ -n "$OWNER_POD_NAME$OWNER_POD_UID" ]; then
    printf '%s\n' "$OWNER_POD_NAME" | grep -Eq '^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$' || die "OWNER_POD_NAME '$OWNER_POD_NAME' is not a pod name"
    printf '%s\n' "$OWNER_POD_UID" | grep -Eq '^[0-9a-fA-F-]{1,128}$' || die "OWNER_POD_UID '$OWNER_POD_UID' is not a UID"
  fi
  SVC_ID=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
  case $SVC_ID in ????????) ;; *) die "could not read 4 random bytes from /dev/urandom" ;; esac
  SVC_NAME=spark-exec-svc-dataplane-check-$SVC_ID
  service_manifest >"$TMP_DIR/service.json"

  log "node ${NODE_NAME:-(NODE_NAME not set)}; namespace $NAMESPACE; port $PORT; $ATTEMPTS connects, ${CONNECT_TIMEOUT_SECONDS}s timeout each"
  log "creating Service $NAMESPACE/$SVC_NAME (selector $SELECTOR_LABEL=$SVC_ID matches no pod; internalTrafficPolicy $INTERNAL_TRAFFIC_POLICY)"
  SVC_CREATE_TRIED=yes
  kube create --namespace "$NAMESPACE" -f "$TMP_DIR/service.json" -o name
  [ "$BG_RC" -eq 0 ] || die "could not create the Service: $(head -c 1000 "$TMP_DIR/kubectl.err")"

  c_ip=
  c_waited=0
  while :; do
    kube get service "$SVC_NAME" --namespace "$NAMESPACE" -o 'jsonpath={.spec.clusterIP}'
    if [ "$BG_RC" -eq 0 ]; then c_ip=$(tr -d ' \n' <"$TMP_DIR/kubectl.out"); fi
    case $c_ip in '' | None) c_ip= ;; *) break ;; esac
    [ "$c_waited" -lt "$CLUSTERIP_WAIT_SECONDS" ] || die "the Service got no ClusterIP within ${CLUSTERIP_WAIT_SECONDS}s: $(head -c 500 "$TMP_DIR/kubectl.err")"
    pause 1
    c_waited=$((c_waited + 1))
  done
  printf '%s\n' "$c_ip" | grep -Eq '^[0-9a-fA-F.:]+$' || die "unexpected ClusterIP '$c_ip'"
  log "Service has ClusterIP $c_ip and no endpoints; waiting ${PROGRAM_DELAY_SECONDS}s for the proxy to program it"
  pause "$PROGRAM_DELAY_SECONDS"

  probe "$c_ip" "$PORT" VERDICT
  c_verdict=$PROBE_VERDICT
  explain_verdict "$c_verdict"

  if [ "$CHECK_DELETED" = true ]; then
    delete_service || die "could not delete the Service, so the deleted-Service probe is skipped"
    log "waiting ${PROGRAM_DELAY_SECONDS}s for the proxy to forget it, then connecting to the old ClusterIP $c_ip"
    pause "$PROGRAM_DELAY_SECONDS"
    probe "$c_ip" "$PORT" DELETED_VERDICT
    explain_deleted_verdict "$PROBE_VERDICT"
  fi
  return "$(verdict_status "$c_verdict")"
}

main() {
  validate_settings
  TMP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dataplane-check.XXXXXX") || die "mktemp failed"
  trap cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  case ${1:-check} in
    check)
      check
      exit $?
      ;;
    probe)
      [ $# -ge 2 ] || die "usage: $0 probe HOST [PORT]"
      command -v "$CURL" >/dev/null 2>&1 || die "curl not found (CURL=$CURL)"
      printf '%s\n' "$2" | grep -Eq '^[0-9a-fA-F.:]+$' || die "HOST must be an IP address, got '$2'"
      if [ $# -ge 3 ]; then
        PORT=$3
        validate_settings
      fi
      probe "$2" "$PORT" VERDICT
      explain_verdict "$PROBE_VERDICT"
      exit "$(verdict_status "$PROBE_VERDICT")"
      ;;
    *) die "usage: $0 [check | probe HOST [PORT]]" ;;
  esac
}

main "$@"
