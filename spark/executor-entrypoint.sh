#!/bin/sh
# spark-exec-svc: executor entrypoint wrapper (POSIX sh: dash, busybox ash, bash).
#
# Used as the executor container's `command` by spark/executor-pod-template.yaml; Spark appends
# its own args ("executor"), so the container runs `sh executor-entrypoint.sh executor`.
# For anything but `executor` it is a pure pass-through to Spark's entrypoint.
#
# For an executor it
#   1. computes the executor's Service name from SPARK_APPLICATION_ID and SPARK_EXECUTOR_ID
#      (env set by Spark's BasicExecutorFeatureStep) with exec-svc-name.sh, the same rule as
#      shared/naming.ts, and the host name <name>.<namespace>.<suffix> (suffix "svc");
#   2. waits, at most SPARK_EXEC_SVC_WAIT_SECONDS (default 30), until that name resolves
#      (`getent hosts`), i.e. until the Service exists and cluster DNS serves it;
#   3. points JAVA_HOME at the java shim (java-shim.sh, mounted as <home>/jvm/bin/java), which
#      Spark's entrypoint then runs as ${JAVA_HOME}/bin/java: the shim restores the real
#      JAVA_HOME and rewrites the executor backend's args to
#         --hostname <name>.<namespace>.svc ... --bind-address <pod IP>
#      so the block manager is *advertised* under the Service name but still *binds* to the pod
#      IP (without --bind-address Spark binds to the advertised host, i.e. the Service's
#      ClusterIP, which fails). See docs/executor-recipe.md.
#   Only when spark.blockManager.port is fixed (SPARK_JAVA_OPT_<n>=-Dspark.blockManager.port=<p>,
#   p > 0) and agrees with the pod annotation spark-exec-svc/block-manager-port when that is set
#   (SPARK_EXEC_SVC_PORT_ANNOTATION, downward API): the Service forwards that one port.
#   4. execs Spark's entrypoint (SPARK_EXEC_SVC_ENTRYPOINT, default /opt/entrypoint.sh) with the
#      original arguments.
# Anything it cannot do (missing env, missing shim, name not resolvable in time) makes it fall
# back to Spark's own behaviour (advertise the pod IP) and say so on stderr, unless
# SPARK_EXEC_SVC_ON_TIMEOUT asks otherwise.
#
# Environment (all optional):
#   SPARK_EXEC_SVC_ENTRYPOINT   Spark's entrypoint                      (/opt/entrypoint.sh)
#   SPARK_EXEC_SVC_HOME         directory of these scripts              (directory of $0)
#   SPARK_EXEC_SVC_JAVA_SHIM_HOME  fake JAVA_HOME holding bin/java      ($SPARK_EXEC_SVC_HOME/jvm)
#   SPARK_EXECUTOR_NAMESPACE    the pod's namespace (downward API)      (service account file)
#   SPARK_EXEC_SVC_DNS_SUFFIX   appended after the namespace            (svc)
#   SPARK_EXEC_SVC_WAIT_SECONDS upper bound of the DNS wait, 0 = no wait (30)
#   SPARK_EXEC_SVC_WAIT_INTERVAL seconds between two look-ups           (0.5)
#   SPARK_EXEC_SVC_ON_TIMEOUT   fallback | advertise | fail             (fallback)
#   SPARK_EXEC_SVC_BIND_ADDRESS address to bind                         (value Spark passes as --hostname: the pod IP)
#   SPARK_EXEC_SVC_PORT_ANNOTATION value of the pod annotation spark-exec-svc/block-manager-port
#                               (downward API; must equal spark.blockManager.port when set)
#   SPARK_EXEC_SVC_DISABLE      "true": pass through unchanged

log() {
  printf 'spark-exec-svc: %s\n' "$*" >&2
}

entrypoint=${SPARK_EXEC_SVC_ENTRYPOINT:-/opt/entrypoint.sh}

pass_through() {
  exec "$entrypoint" "$@"
}

if [ "${1-}" != executor ]; then
  pass_through "$@"
fi
if [ "${SPARK_EXEC_SVC_DISABLE-}" = true ]; then
  log "SPARK_EXEC_SVC_DISABLE=true: executor keeps advertising its pod IP"
  pass_through "$@"
fi

case $0 in
  */*) self_dir=${0%/*} ;;
  *) self_dir=. ;;
esac
home=${SPARK_EXEC_SVC_HOME:-$self_dir}
shim_home=${SPARK_EXEC_SVC_JAVA_SHIM_HOME:-$home/jvm}

app_id=${SPARK_APPLICATION_ID-}
exec_id=${SPARK_EXECUTOR_ID-}
namespace=${SPARK_EXECUTOR_NAMESPACE-}
if [ -z "$namespace" ] && [ -r /var/run/secrets/kubernetes.io/serviceaccount/namespace ]; then
  namespace=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)
fi

if [ -z "$app_id" ] || [ -z "$exec_id" ] || [ "$exec_id" = EXECID ]; then
  log "SPARK_APPLICATION_ID='$app_id' SPARK_EXECUTOR_ID='$exec_id': cannot name the Service, executor keeps advertising its pod IP"
  pass_through "$@"
fi
if [ -z "$namespace" ]; then
  log "namespace unknown (set SPARK_EXECUTOR_NAMESPACE from metadata.namespace): executor keeps advertising its pod IP"
  pass_through "$@"
fi
if [ ! -x "$shim_home/bin/java" ]; then
  log "java shim $shim_home/bin/java missing or not executable: executor keeps advertising its pod IP"
  pass_through "$@"
fi

# the real java: what Spark's entrypoint would have run
real_java_home=${JAVA_HOME-}
if [ -n "$real_java_home" ]; then
  real_java=$real_java_home/bin/java
else
  real_java=$(command -v java 2>/dev/null || true)
fi
if [ -z "$real_java" ] || [ ! -x "$real_java" ]; then
  log "no java found (JAVA_HOME='$real_java_home'): executor keeps advertising its pod IP"
  pass_through "$@"
fi

# The Service forwards one fixed port, so the block manager must listen on a fixed port too.
# Spark passes spark.blockManager.port to the executor only as SPARK_JAVA_OPT_<n>=-Dspark.blockManager.port=<p>
# (BasicExecutorFeatureStep; the container port "blockmanager" says 7079 even when the conf is unset
# and the executor picks a random port). Highest index wins, as the JVM keeps the last -D.
bm_port=$(env | sed -n 's/^SPARK_JAVA_OPT_\([0-9][0-9]*\)=-Dspark\.blockManager\.port=\([0-9][0-9]*\)$/\1 \2/p' | sort -n | tail -n 1)
bm_port=${bm_port#* }
case $bm_port in
  '' | *[!0-9]* | 0 | 0*)
    log "spark.blockManager.port is not set to a fixed port (no SPARK_JAVA_OPT_<n>=-Dspark.blockManager.port=<port>): executor keeps advertising its pod IP"
    pass_through "$@"
    ;;
esac
if [ -n "${SPARK_EXEC_SVC_PORT_ANNOTATION-}" ] && [ "$SPARK_EXEC_SVC_PORT_ANNOTATION" != "$bm_port" ]; then
  log "annotation spark-exec-svc/block-manager-port=$SPARK_EXEC_SVC_PORT_ANNOTATION but the block manager will listen on $bm_port: executor keeps advertising its pod IP"
  pass_through "$@"
fi

if ! service_name=$(sh "$home/exec-svc-name.sh" "$app_id" "$exec_id") || [ -z "$service_name" ]; then
  log "could not compute the Service name (needs tr and sha256sum): executor keeps advertising its pod IP"
  pass_through "$@"
fi
advertise_host=$service_name.$namespace.${SPARK_EXEC_SVC_DNS_SUFFIX:-svc}

wait_seconds=${SPARK_EXEC_SVC_WAIT_SECONDS:-30}
case $wait_seconds in
  '' | *[!0-9]*)
    log "SPARK_EXEC_SVC_WAIT_SECONDS='$wait_seconds' is not a whole number of seconds, using 30"
    wait_seconds=30
    ;;
esac
while :; do # no leading zeros: $((...)) would read them as octal
  case $wait_seconds in
    0?*) wait_seconds=${wait_seconds#0} ;;
    *) break ;;
  esac
done
interval=${SPARK_EXEC_SVC_WAIT_INTERVAL:-0.5}
on_timeout=${SPARK_EXEC_SVC_ON_TIMEOUT:-fallback}

resolves() {
  getent hosts "$1" >/dev/null 2>&1
}

# elapsed time in centiseconds: /proc/uptime where there is one (Linux), else whole seconds
now_cs() {
  if [ -r /proc/uptime ] && read -r _up _rest </proc/uptime; then
    case $_up in
      *.??)
        _up=${_up%.*}${_up#*.}
        while :; do
          case $_up in
            0?*) _up=${_up#0} ;;
            *) break ;;
          esac
        done
        printf '%s\n' "$_up"
        return 0
        ;;
    esac
  fi
  printf '%s\n' "$(($(date +%s) * 100))"
}

if [ "$wait_seconds" -eq 0 ]; then
  log "not waiting for $advertise_host (SPARK_EXEC_SVC_WAIT_SECONDS=0)"
elif ! command -v getent >/dev/null 2>&1; then
  log "getent not found: cannot wait for $advertise_host, advertising it unverified"
else
  start=$(now_cs)
  deadline=$((start + wait_seconds * 100))
  tries=0
  resolved=false
  while :; do
    tries=$((tries + 1))
    if resolves "$advertise_host"; then
      resolved=true
      break
    fi
    [ "$(now_cs)" -lt "$deadline" ] || break
    sleep "$interval" 2>/dev/null || sleep 1
  done
  waited_cs=$(($(now_cs) - start))
  waited=$((waited_cs / 100)).$((waited_cs / 10 % 10))
  if $resolved; then
    log "$advertise_host resolves after ${waited}s ($tries look-ups)"
  else
    case $on_timeout in
      advertise)
        log "$advertise_host does not resolve after ${waited}s; advertising it anyway (SPARK_EXEC_SVC_ON_TIMEOUT=advertise)"
        ;;
      fail)
        log "$advertise_host does not resolve after ${waited}s; failing (SPARK_EXEC_SVC_ON_TIMEOUT=fail)"
        exit 1
        ;;
      *)
        log "$advertise_host does not resolve after ${waited}s; executor keeps advertising its pod IP (SPARK_EXEC_SVC_ON_TIMEOUT=fallback)"
        pass_through "$@"
        ;;
    esac
  fi
fi

SPARK_EXEC_SVC_NAME=$service_name
SPARK_EXEC_SVC_ADVERTISE_HOST=$advertise_host
SPARK_EXEC_SVC_REAL_JAVA=$real_java
SPARK_EXEC_SVC_REAL_JAVA_HOME=$real_java_home
JAVA_HOME=$shim_home
export SPARK_EXEC_SVC_NAME SPARK_EXEC_SVC_ADVERTISE_HOST SPARK_EXEC_SVC_REAL_JAVA SPARK_EXEC_SVC_REAL_JAVA_HOME JAVA_HOME
if [ -n "${SPARK_EXEC_SVC_BIND_ADDRESS-}" ]; then
  export SPARK_EXEC_SVC_BIND_ADDRESS
fi
log "executor $exec_id of $app_id: advertising $advertise_host:$bm_port (Service $service_name), binding ${SPARK_EXEC_SVC_BIND_ADDRESS:-${SPARK_EXECUTOR_POD_IP:-the pod IP}}; JAVA_HOME=$shim_home (real java: $real_java)"
pass_through "$@"
