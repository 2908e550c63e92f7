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
#      shared/model/naming.ts, and the host name <name>.<namespace>.<suffix> (suffix "svc");
#   2. waits, at most SPARK_EXEC_SVC_WAIT_SECONDS (default 30) in total, until that name resolves
#      (`getent hosts`), i.e. until the Service exists and cluster DNS serves it; every look-up is
#      cut off at the time left (coreutils' `timeout -s KILL`, else a watchdog), as a DNS server
#      that does not answer would otherwise hold one getent for 40 s and more; SIGTERM or SIGINT
#      ends the wait at once (exit 143 / 130), and Spark's entrypoint is then never started;
#   3. points JAVA_HOME at the java shim (java-shim.sh, mounted as <home>/jvm/bin/java), which
#      Spark's entrypoint then runs as ${JAVA_HOME}/bin/java: the shim restores the real
#      JAVA_HOME and rewrites the executor backend's command to
#         java ... -Dspark.port.maxRetries=0 <backend> --hostname <name>.<namespace>.svc ... --bind-address <pod IP>
#      so the block manager is *advertised* under the Service name but still *binds* to the pod
#      IP (without --bind-address Spark binds to the advertised host, i.e. the Service's
#      ClusterIP, which fails), and binds exactly spark.blockManager.port or fails (no silent
#      move to port+1, which the Service would not forward). See docs/executor-recipe.md.
#   Only when spark.blockManager.port is fixed (SPARK_JAVA_OPT_<n>=-Dspark.blockManager.port=<p>,
#   p > 0, one value), agrees with the pod annotation spark-exec-svc/block-manager-port when that is
#   set (SPARK_EXEC_SVC_PORT_ANNOTATION, downward API), is not already taken in the pod, and no
#   external shuffle service is in use: the Service forwards that one port and nothing else.
#   4. execs Spark's entrypoint (SPARK_EXEC_SVC_ENTRYPOINT, default /opt/entrypoint.sh) with the
#      original arguments.
# Anything it cannot do (missing env, missing shim, name not resolvable in time, port taken,
# shuffle service) makes it fall back to Spark's own behaviour (advertise the pod IP) and say so on
# stderr, unless SPARK_EXEC_SVC_ON_TIMEOUT asks otherwise for the DNS wait.
#
# Environment (all optional):
#   SPARK_EXEC_SVC_ENTRYPOINT   Spark's entrypoint                      (/opt/entrypoint.sh)
#   SPARK_EXEC_SVC_HOME         directory of these scripts              (directory of $0)
#   SPARK_EXEC_SVC_JAVA_SHIM_HOME  fake JAVA_HOME holding bin/java      ($SPARK_EXEC_SVC_HOME/jvm)
#   SPARK_EXECUTOR_NAMESPACE    the pod's namespace (downward API)      (service account file)
#   SPARK_EXEC_SVC_DNS_SUFFIX   appended after the namespace            (svc)
#   SPARK_EXEC_SVC_WAIT_SECONDS bound of the whole DNS wait, look-ups included, 0 = no wait (30)
#   SPARK_EXEC_SVC_WAIT_INTERVAL seconds between two look-ups, up to 2 decimals (0.5)
#   SPARK_EXEC_SVC_ON_TIMEOUT   fallback | advertise | fail             (fallback)
#   SPARK_EXEC_SVC_BIND_ADDRESS address to bind                         (value Spark passes as --hostname: the pod IP)
#   SPARK_EXEC_SVC_PORT_ANNOTATION value of the pod annotation spark-exec-svc/block-manager-port
#                               (downward API; must equal spark.blockManager.port when set)
#   SPARK_EXEC_SVC_SHUFFLE_SERVICE "true": an external shuffle service is used (keep the pod IP);
#                               "false": ignore a -Dspark.shuffle.service.port in SPARK_JAVA_OPT_<n>
#   SPARK_EXEC_SVC_DISABLE      "true": pass through unchanged

log() {
  printf 'spark-exec-svc: %s\n' "$*" >&2
}

entrypoint=${SPARK_EXEC_SVC_ENTRYPOINT:-/opt/entrypoint.sh}

pass_through() {
  exec "$entrypoint" "$@"
}

# Signals. In the pod the wrapper is the container's PID 1 until it execs Spark's entrypoint (which
# hands over to tini). The kubelet stops a deleted pod's container with SIGTERM to its PID 1, and
# the kernel drops a signal to a PID namespace's init that has no handler for it
# (pid_namespaces(7)): without a trap the wait went on and java started after it. So TERM and INT
# end the wrapper at once, with 143 / 130, killing what it was waiting on, and Spark's entrypoint is
# not started. A shell runs a trap only after the foreground command has ended, but a trapped
# signal ends `wait` at once (POSIX, wait): so the wait runs its look-ups and pauses in the
# background and waits for them (in_background, lookup).
waiting_on=   # pids of the wait's running children, which the handler kills
newest_child= # the newest child recorded in waiting_on
waiting_for=  # the host while the wait runs
on_signal() { # signal name, exit status
  trap '' TERM INT
  # a signal between `cmd &` and the line that records its pid: the new child is only in $!
  if [ -n "$!" ] && [ "$!" != "$newest_child" ]; then
    waiting_on="$waiting_on $!"
  fi
  for _pid in $waiting_on; do
    kill -TERM "$_pid" 2>/dev/null
  done
  if [ -n "$waiting_for" ]; then
    log "SIG$1 while waiting for $waiting_for ($tries look-up(s) in $(cs_to_s "$(($(now_cs) - start))")s): exiting $2 without starting Spark's entrypoint"
  else
    log "SIG$1 before Spark's entrypoint was started: exiting $2 without starting it"
  fi
  exit "$2"
}
trap 'on_signal TERM 143' TERM
trap 'on_signal INT 130' INT

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
# and the executor picks a random port). Spark emits it once. If the pod holds several, which one the
# JVM keeps (the last -D) depends on the image: Spark's own entrypoint.sh sorts SPARK_JAVA_OPT_* by
# number, the official apache/spark images (3.4.0 on) expand "${!SPARK_JAVA_OPT_@}", in lexical order
# (..._10 before ..._2). So several values that differ are ambiguous, and the wrapper falls back.
bm_ports=$(env | sed -n 's/^SPARK_JAVA_OPT_[0-9][0-9]*=-Dspark\.blockManager\.port=\(.*\)$/\1/p' | sort -u)
bm_port=$bm_ports
case $bm_ports in
  *"
"*)
    log "spark.blockManager.port is given several different values ($(printf '%s' "$bm_ports" | tr '\n' ' ')): the port the JVM keeps depends on the image's entrypoint; executor keeps advertising its pod IP"
    pass_through "$@"
    ;;
esac
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

# External shuffle service: with spark.shuffle.service.enabled the block manager registers with the
# shuffle service at <advertised host>:<spark.shuffle.service.port, 7337> and peers fetch shuffle
# files there (BlockManager.initialize: shuffleServerId = BlockManagerId(executorId,
# blockTransferService.hostName, externalShuffleServicePort)). The Service forwards only the block
# manager's port, so the executor keeps its pod IP. spark.shuffle.service.enabled is no executor
# start-up conf (SparkConf.isExecutorStartupConf), so Spark never puts it into the pod: the pod says
# so with SPARK_EXEC_SVC_SHUFFLE_SERVICE=true (e.g. --conf spark.executorEnv.SPARK_EXEC_SVC_SHUFFLE_SERVICE=true),
# or by a -Dspark.shuffle.service.enabled=true / -Dspark.shuffle.service.port=<p> in SPARK_JAVA_OPT_<n>
# (spark.shuffle.service.port is a port conf, which Spark does pass when it is set).
shuffle_service=
if [ "${SPARK_EXEC_SVC_SHUFFLE_SERVICE-}" = true ]; then
  shuffle_service="SPARK_EXEC_SVC_SHUFFLE_SERVICE=true"
fi
if [ -z "$shuffle_service" ]; then
  shuffle_service=$(env | sed -n 's/^SPARK_JAVA_OPT_[0-9][0-9]*=\(-Dspark\.shuffle\.service\.enabled=[Tt][Rr][Uu][Ee]\)$/\1/p' | head -n 1)
fi
if [ -z "$shuffle_service" ] && [ "${SPARK_EXEC_SVC_SHUFFLE_SERVICE-}" != false ]; then
  shuffle_service=$(env | sed -n 's/^SPARK_JAVA_OPT_[0-9][0-9]*=\(-Dspark\.shuffle\.service\.port=.*\)$/\1/p' | head -n 1)
  [ -z "$shuffle_service" ] || shuffle_service="$shuffle_service; SPARK_EXEC_SVC_SHUFFLE_SERVICE=false if none is used"
fi
if [ -n "$shuffle_service" ]; then
  log "external shuffle service in use ($shuffle_service): the block manager would register with it at the advertised host, port spark.shuffle.service.port (7337), which the Service does not forward; executor keeps advertising its pod IP"
  pass_through "$@"
fi

if ! service_name=$(sh "$home/exec-svc-name.sh" "$app_id" "$exec_id") || [ -z "$service_name" ]; then
  log "could not compute the Service name (needs tr and sha256sum): executor keeps advertising its pod IP"
  pass_through "$@"
fi
advertise_host=$service_name.$namespace.${SPARK_EXEC_SVC_DNS_SUFFIX:-svc}

# a whole number without leading zeros ($((...)) would read them as octal)
decimal() {
  _d=$1
  while :; do
    case $_d in
      0?*) _d=${_d#0} ;;
      *) break ;;
    esac
  done
  printf '%s\n' "$_d"
}

# seconds with up to two decimals ("0.5", "2", "1.25") -> centiseconds; fails on anything else
to_cs() {
  case $1 in
    '' | . | *[!0-9.]* | *.*.*) return 1 ;;
  esac
  _s=${1%%.*}
  _f=
  case $1 in *.*) _f=${1#*.} ;; esac
  _f=${_f}00
  _f=${_f%"${_f#??}"}
  printf '%s\n' "$(($(decimal "${_s:-0}") * 100 + $(decimal "$_f")))"
}

# centiseconds -> seconds for sleep and timeout ("2.05")
cs_to_s() {
  printf '%d.%02d\n' "$(($1 / 100))" "$(($1 % 100))"
}

wait_seconds=${SPARK_EXEC_SVC_WAIT_SECONDS:-30}
case $wait_seconds in
  '' | *[!0-9]*)
    log "SPARK_EXEC_SVC_WAIT_SECONDS='$wait_seconds' is not a whole number of seconds, using 30"
    wait_seconds=30
    ;;
esac
wait_seconds=$(decimal "$wait_seconds")
if ! interval_cs=$(to_cs "${SPARK_EXEC_SVC_WAIT_INTERVAL:-0.5}") || [ "$interval_cs" -eq 0 ]; then
  log "SPARK_EXEC_SVC_WAIT_INTERVAL='${SPARK_EXEC_SVC_WAIT_INTERVAL-}' is not a positive number of seconds, using 0.5"
  interval_cs=50
fi
on_timeout=${SPARK_EXEC_SVC_ON_TIMEOUT:-fallback}

# elapsed time in centiseconds: /proc/uptime where there is one (Linux), else whole seconds
now_cs() {
  if [ -r /proc/uptime ] && read -r _up _rest </proc/uptime; then
    case $_up in
      *.??)
        decimal "${_up%.*}${_up#*.}"
        return 0
        ;;
    esac
  fi
  printf '%s\n' "$(($(date +%s) * 100))"
}

# Runs "$@" in the background, its output discarded, and waits for it (so that a signal's trap
# runs at once); its exit status. (No redirection around the call: the trap would inherit it.)
in_background() {
  "$@" >/dev/null 2>&1 &
  waiting_on=$!
  newest_child=$!
  wait "$!"
  _bg_rc=$?
  waiting_on=
  return "$_bg_rc"
}

# Does `sleep` take fractions of a second (coreutils; busybox unless built without
# FEATURE_FLOAT_SLEEP)? Asked once, when the wait first needs a sleep (a look-up that finds the
# name at once needs none). If not, sleeps are rounded up to whole seconds.
fractional_sleep=
check_sleep() {
  [ -z "$fractional_sleep" ] || return 0
  if sleep 0.00 2>/dev/null; then
    fractional_sleep=true
  else
    fractional_sleep=false
    log "sleep takes whole seconds only: the wait for $advertise_host may overrun its bound by up to 1 s"
  fi
}
sleep_arg() { # centiseconds -> argument for sleep
  if [ "$fractional_sleep" = true ]; then
    cs_to_s "$1"
  else
    printf '%s\n' "$((($1 + 99) / 100))"
  fi
}

# Kills pid $1 after `sleep $2`, unless it is told to stop first (SIGTERM), which also ends its
# sleep. Run in the background: a subshell, where $! is still the parent's until sleep starts.
watchdog() {
  _wd_before=$!
  trap '[ "$!" = "$_wd_before" ] || kill -TERM "$!" 2>/dev/null; exit 0' TERM
  sleep "$2" &
  wait "$!"
  kill -KILL "$1"
}

# One look-up, never longer than $2 centiseconds. getent alone is not bounded: glibc tries every
# search domain (ndots:5 puts <svc>.<ns>.svc through all of them) and waits `timeout` x `attempts`
# (5 s x 2) for each when the DNS server does not answer, 40 s for a cluster's 3 search domains.
# coreutils' `timeout` kills it at its budget, to the millisecond. busybox's counts whole seconds
# (busybox coreutils/timeout.c: a watcher process that sleep(1)s per second; measured with 1.35:
# `-s KILL 0.50` kills after 1.1 s, `1.50` after 1.0 s), which overran the bound by up to 1 s. So
# any `timeout` but coreutils' (GNU or uutils) is left alone, and a watchdog subshell does the job.
# Exit status: getent's (0 found, 2 not found), 124/137 when cut off.
lookup_timer=watchdog
if command -v timeout >/dev/null 2>&1; then
  case $(timeout --version 2>/dev/null) in
    *coreutils*) lookup_timer=timeout ;;
  esac
fi
lookup() {
  if [ "$lookup_timer" = timeout ]; then
    in_background timeout -s KILL "$(cs_to_s "$2")" getent hosts "$1"
    return
  fi
  _wd_sleep=$(sleep_arg "$2")
  getent hosts "$1" >/dev/null 2>&1 &
  waiting_on=$!
  newest_child=$!
  _lk_pid=$!
  watchdog "$_lk_pid" "$_wd_sleep" >/dev/null 2>&1 &
  waiting_on="$_lk_pid $!"
  newest_child=$!
  _wd_pid=$!
  wait "$_lk_pid"
  _lk_rc=$?
  kill -TERM "$_wd_pid" 2>/dev/null
  wait "$_wd_pid"
  waiting_on=
  return "$_lk_rc"
}

if [ "$wait_seconds" -eq 0 ]; then
  log "not waiting for $advertise_host (SPARK_EXEC_SVC_WAIT_SECONDS=0)"
elif ! command -v getent >/dev/null 2>&1; then
  log "getent not found: cannot wait for $advertise_host, advertising it unverified"
else
  # the watchdog needs sleep from the first look-up on; with `timeout` only a pause does
  [ "$lookup_timer" = timeout ] || check_sleep
  tries=0
  start=$(now_cs)
  waiting_for=$advertise_host
  deadline=$((start + wait_seconds * 100))
  cut_off=0
  resolved=false
  while :; do
    remaining=$((deadline - $(now_cs)))
    [ "$remaining" -gt 0 ] || break
    tries=$((tries + 1))
    lookup "$advertise_host" "$remaining"
    case $? in
      0)
        resolved=true
        break
        ;;
      124 | 137) cut_off=$((cut_off + 1)) ;;
    esac
    check_sleep
    remaining=$((deadline - $(now_cs)))
    [ "$remaining" -gt 0 ] || break
    [ "$remaining" -lt "$interval_cs" ] || remaining=$interval_cs
    in_background sleep "$(sleep_arg "$remaining")"
  done
  waiting_for=
  waited_cs=$(($(now_cs) - start))
  waited=$(cs_to_s "$waited_cs")
  how="$tries look-up(s)"
  [ "$cut_off" -eq 0 ] || how="$how, $cut_off cut off unanswered by the DNS server"
  if $resolved; then
    log "$advertise_host resolves after ${waited}s ($how)"
  else
    case $on_timeout in
      advertise)
        log "$advertise_host does not resolve after ${waited}s ($how); advertising it anyway (SPARK_EXEC_SVC_ON_TIMEOUT=advertise)"
        ;;
      fail)
        log "$advertise_host does not resolve after ${waited}s ($how); failing (SPARK_EXEC_SVC_ON_TIMEOUT=fail)"
        exit 1
        ;;
      *)
        log "$advertise_host does not resolve after ${waited}s ($how); executor keeps advertising its pod IP (SPARK_EXEC_SVC_ON_TIMEOUT=fallback)"
        pass_through "$@"
        ;;
    esac
  fi
fi

# The block manager must get exactly spark.blockManager.port. Spark would silently try port+1 ...
# (Utils.startServiceOnPort, spark.port.maxRetries, default 16) and register the port it got, which
# the Service does not forward. The shim therefore starts the JVM with -Dspark.port.maxRetries=0 (a
# taken port then fails the executor, loudly); and here, a port that is already taken in the pod's
# network namespace keeps the executor on its pod IP, where any port is reachable.
# A listener conflicts when it listens on that port on the wildcard address or on the bind address
# (/proc/net/tcp{,6}: state 0A = LISTEN; addresses are 32-bit words in host byte order).
hex_ipv4() { # a.b.c.d -> "<little-endian> <big-endian>" hex words
  _ip=$1
  _o1=${_ip%%.*}; _ip=${_ip#*.}
  _o2=${_ip%%.*}; _ip=${_ip#*.}
  _o3=${_ip%%.*}; _o4=${_ip#*.}
  for _o in "$_o1" "$_o2" "$_o3" "$_o4"; do
    case $_o in '' | *[!0-9]*) return 1 ;; esac
    [ "$(decimal "$_o")" -le 255 ] || return 1
  done
  printf '%02X%02X%02X%02X %02X%02X%02X%02X\n' \
    "$(decimal "$_o4")" "$(decimal "$_o3")" "$(decimal "$_o2")" "$(decimal "$_o1")" \
    "$(decimal "$_o1")" "$(decimal "$_o2")" "$(decimal "$_o3")" "$(decimal "$_o4")"
}
port_listener() { # port, bind address -> prints the first conflicting listener; fails when none
  _hexport=$(printf '%04X' "$1")
  _bind=${2#\[}
  _bind=${_bind%\]}
  _le=none
  _be=none
  case $_bind in
    '' | 0.0.0.0 | :: | 0:0:0:0:0:0:0:0) _family=any ;;
    *:*) _family=6 ;;
    *.*.*.*)
      if _words=$(hex_ipv4 "$_bind"); then
        _family=4
        _le=${_words% *}
        _be=${_words#* }
      else
        _family=any
      fi
      ;;
    *) _family=any ;;
  esac
  for _table in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$_table" ] || continue
    while read -r _sl _local _remote _state _rest; do
      [ "$_state" = 0A ] || continue
      [ "${_local##*:}" = "$_hexport" ] || continue
      _addr=${_local%:*}
      case $_family:$_addr in
        any:* | *:00000000 | *:00000000000000000000000000000000 | \
          4:"$_le" | 4:"$_be" | 4:0000000000000000FFFF0000"$_le" | 4:00000000000000000000FFFF"$_be")
          printf '%s\n' "$_local"
          return 0
          ;;
        6:00000000000000000000000001000000 | 6:00000000000000000000000000000001) ;; # ::1
        6:????????????????????????????????)
          printf '%s\n' "$_local"
          return 0
          ;;
      esac
    done <"$_table"
  done
  return 1
}
bind_address=${SPARK_EXEC_SVC_BIND_ADDRESS:-${SPARK_EXECUTOR_POD_IP-}}
if [ -r /proc/net/tcp ] && taken_by=$(port_listener "$bm_port" "$bind_address"); then
  log "port $bm_port is already taken in this pod (listener $taken_by in /proc/net/tcp*): Spark would move the block manager to another port, which the Service does not forward; executor keeps advertising its pod IP"
  pass_through "$@"
fi

SPARK_EXEC_SVC_NAME=$service_name
SPARK_EXEC_SVC_ADVERTISE_HOST=$advertise_host
SPARK_EXEC_SVC_PORT=$bm_port
SPARK_EXEC_SVC_REAL_JAVA=$real_java
SPARK_EXEC_SVC_REAL_JAVA_HOME=$real_java_home
JAVA_HOME=$shim_home
export SPARK_EXEC_SVC_NAME SPARK_EXEC_SVC_ADVERTISE_HOST SPARK_EXEC_SVC_PORT SPARK_EXEC_SVC_REAL_JAVA SPARK_EXEC_SVC_REAL_JAVA_HOME JAVA_HOME
if [ -n "${SPARK_EXEC_SVC_BIND_ADDRESS-}" ]; then
  export SPARK_EXEC_SVC_BIND_ADDRESS
fi
log "executor $exec_id of $app_id: advertising $advertise_host:$bm_port (Service $service_name), binding ${SPARK_EXEC_SVC_BIND_ADDRESS:-${SPARK_EXECUTOR_POD_IP:-the pod IP}}; JAVA_HOME=$shim_home (real java: $real_java)"
pass_through "$@"
