#!/bin/bash
# STAND-IN for Spark images' /opt/decom.sh, which is in no registry package (it lives in apache/spark
# resource-managers/kubernetes/docker/src/main/dockerfiles/spark/decom.sh; the pyspark sdist the
# e2e uses carries only jars/ and bin/). Spark runs it as the executor container's preStop exec
# hook when spark.decommission.enabled=true (BasicExecutorFeatureStep; the path is
# spark.kubernetes.decommission.script, default /opt/decom.sh). What upstream's script does: find
# the executor JVM (`ps -o pid -C java | tail -n 1`), `kill -s SIGPWR` it (the executor's
# decommission signal, spark.executor.decommission.signal, default PWR), then wait for it to exit,
# at most 60 s (`timeout 60 tail --pid=<pid> -f /dev/null`).
#
# Why this one differs: in a container the hook shares the executor's PID namespace, where the only
# java is the executor. The process kubelet gives pods no PID namespace, so every JVM on the machine
# is visible (the driver, the other executors, other pods'); `ps -C java` would signal any of them.
# This one signals its own pod's executor only: the java process whose network namespace
# (/proc/<pid>/ns/net) is the hook's own — the pod's — and whose command line names
# KubernetesExecutorBackend. It logs with millisecond times (the process kubelet writes the hook's
# output to <pod logs>/<container>.prestop.log) so the e2e can time SIGPWR and the JVM's exit.
set -u

now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
log() { echo "decom.sh $(now) $*"; }

log "asked to decommission"
own_net=$(readlink /proc/self/ns/net)
worker_pid=
for dir in /proc/[0-9]*; do
  pid=${dir#/proc/}
  [ "$(readlink "$dir/ns/net" 2>/dev/null)" = "$own_net" ] || continue
  [ "$(cat "$dir/comm" 2>/dev/null)" = java ] || continue
  tr '\0' ' ' <"$dir/cmdline" 2>/dev/null | grep -q 'KubernetesExecutorBackend' || continue
  worker_pid=$pid
done
if [ -z "$worker_pid" ]; then
  log "no executor JVM in this pod's network namespace ($own_net): nothing to decommission"
  exit 1
fi
log "using worker pid $worker_pid"
kill -s SIGPWR "$worker_pid" || { log "kill -s SIGPWR $worker_pid failed"; exit 1; }
log "sent SIGPWR to $worker_pid"
log "waiting for worker pid to exit"
if timeout 60 tail --pid="$worker_pid" -f /dev/null; then
  log "worker pid $worker_pid exited"
else
  log "worker pid $worker_pid still running after 60 s"
fi
log "done"
